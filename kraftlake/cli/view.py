"""``kraftlake view LOG``: the controller's view (or one broker's) at an offset, version or time."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, err, out, storage_options, write_bytes


class Format(str, Enum):
    json = "json"
    table = "table"


def register(app: typer.Typer) -> None:
    @app.command("view")
    def view(
        log: str | None = typer.Argument(None, help="The log (not needed with --kafka-checkpoint)."),
        storage_option: list[str] | None = STORAGE_OPTION,
        kafka_checkpoint: Path | None = typer.Option(
            None,
            "--kafka-checkpoint",
            help="Print the view a Kafka .checkpoint snapshot (or bootstrap.checkpoint) holds, instead of replaying a log.",
        ),
        offset: int | None = typer.Option(None, "--offset", "-o", help="After the record at this offset."),
        version: int | None = typer.Option(None, "--version", help="At the end of this Delta version."),
        timestamp: str | None = typer.Option(
            None,
            "--timestamp",
            help="At the newest version committed by this time (ISO 8601, UTC unless it says otherwise).",
        ),
        source_offset: int | None = typer.Option(
            None,
            "--source-offset",
            help="After every record imported from this Kafka offset or before (logs made by import-kafka).",
        ),
        broker: int | None = typer.Option(None, "--broker", "-b", help="What this broker serves (its BrokerView)."),
        fmt: Format = typer.Option(Format.json, "--format", "-f", help="json (canonical, default) or table."),
        no_snapshots: bool = typer.Option(
            False, "--no-snapshots", help="Replay from offset 0, ignoring stored snapshots."
        ),
        streams: bool = typer.Option(
            False,
            "--streams",
            help="The S3Stream view instead (AutoMQ: streams, ranges, nodes' stream-set objects and WAL duties, objects, KV).",
        ),
        stream: int | None = typer.Option(
            None,
            "--stream",
            help="One S3Stream stream: its ranges and the objects that hold its offsets, in read order (implies --streams).",
        ),
        bookies: bool = typer.Option(
            False,
            "--bookies",
            help="The BookKeeper view instead: bookies (state, availability, free disk), ledgers, under-replicated ledgers, locks, the auditor.",
        ),
        at_time: str | None = typer.Option(
            None,
            "--at-time",
            help="After the last record at or before this record time (ts_ms: Kafka's batch time after import-kafka; --timestamp is the Delta commit time): ISO 8601, UTC unless it has an offset, or ms since the epoch.",
        ),
    ) -> None:
        """Replay the log into the KRaft controller's view and print it.

        The JSON is canonical (sorted by id, Kafka's base64 ids) with a state_hash: the sha256 of the state, equal for equal states whatever the offset. With --broker, what that broker serves: its replicas, their directories, which are online, its offline directories. Stored snapshots (kraftlake snapshot) make this fast on long logs.
        """
        from kraftlake.cli.progress import replay_progress
        from kraftlake.records import Log
        from kraftlake.replay.state import state_at

        if kafka_checkpoint is not None:
            from kraftlake.replay.kafka_snapshots import checkpoint_view

            if log is not None:
                abort("give a log or --kafka-checkpoint, not both", EXIT_INPUT)
            if not kafka_checkpoint.is_file():
                abort(f"{kafka_checkpoint}: no such file", EXIT_INPUT)
            _print(checkpoint_view(kafka_checkpoint), broker, fmt)
            return
        if log is None:
            abort("give a log (or --kafka-checkpoint FILE)", EXIT_INPUT)
        if sum(x is not None for x in (offset, version, timestamp, source_offset)) > 1:
            abort("give at most one of --offset, --version, --timestamp, --source-offset", EXIT_INPUT)
        opened = Log.open(log, storage_options=storage_options(storage_option))
        if source_offset is not None:
            offset = opened.at().offset_of_source(source_offset)
        if at_time is not None:
            offset = offset_at_time(opened, at_time, given=(offset, version, timestamp, source_offset))
        total = opened.at(offset=offset, version=version, timestamp=timestamp).last_offset + 1
        if bookies:
            from kraftlake.replay.state import bookies_at

            with replay_progress(total) as progress:
                bview = bookies_at(opened, offset=offset, version=version, timestamp=timestamp, progress=progress)
            _print_bookies(bview, fmt)
            return
        if streams or stream is not None:
            from kraftlake.replay.state import streams_at

            if broker is not None:
                abort("--broker shows the KRaft side; leave it out with --streams/--stream", EXIT_INPUT)
            with replay_progress(total) as progress:
                sview = streams_at(opened, offset=offset, version=version, timestamp=timestamp, progress=progress)
            _print_streams(sview, stream, fmt)
            return
        with replay_progress(total) as progress:
            state = state_at(
                opened,
                offset=offset,
                version=version,
                timestamp=timestamp,
                use_snapshots=not no_snapshots,
                progress=progress,
            )
        if state.transaction is not None:
            # Brokers never see an open transaction's records: show what Kafka publishes.
            err.print(
                f"offset {state.offset} is inside the metadata transaction opened at offset"
                f" {state.transaction.begin_offset}: showing the state before it"
            )
            state = state.published()
        failed = set()
        if fmt is Format.table:
            from kraftlake.replay.state import failed_dirs

            failed = failed_dirs(opened, to_offset=state.offset)
        _print(state, broker, fmt, failed)


def offset_at_time(opened, at_time: str, *, given: tuple) -> int:
    """The offset ``--at-time`` names (record time), alone among the point-in-time options."""
    from kraftlake.records.times import time_ms

    if any(x is not None for x in given):
        abort("give at most one of --offset, --version, --timestamp, --source-offset, --at-time", EXIT_INPUT)
    try:
        return opened.at().offset_at_time(time_ms(at_time))
    except ValueError as exc:
        abort(str(exc), EXIT_INPUT)


def _print(state, broker: int | None, fmt: Format, failed: set[tuple[int, str]] | None = None) -> None:
    """``failed``: (broker, directory) its broker said failed (``replay.state.failed_dirs``): a
    table marks the replicas there, whatever the controller's registration says."""
    import msgspec

    from kraftlake.statemachine.kraft.broker_view import broker_view

    if broker is not None:
        bv = broker_view(state, broker)
        if fmt is Format.json:
            write_bytes(msgspec.json.encode(bv) + b"\n")
        else:
            _broker_table(bv, failed or set())
        return
    image = state.image()
    if fmt is Format.json:
        write_bytes(msgspec.json.encode(image) + b"\n")
    else:
        _controller_tables(image, failed or set())


def _print_streams(view, stream: int | None, fmt: Format) -> None:
    import msgspec

    from kraftlake.statemachine.s3stream.read import objects_for
    from kraftlake.statemachine.s3stream.view import stream_image

    if stream is None:
        image = view.image()
        if fmt is Format.json:
            write_bytes(msgspec.json.encode(image) + b"\n")
        else:
            _streams_tables(image)
        return
    s = view.streams.get(stream)
    if s is None:
        abort(f"no stream {stream} at offset {view.offset} (streams: {len(view.streams)})", EXIT_INPUT)
    read = objects_for(view, stream, s.start_offset, s.end_offset) if s.end_offset > s.start_offset else None
    doc = {"offset": view.offset, "stream": stream_image(s), "owner": s.owner(), "read": read}
    if fmt is Format.json:
        write_bytes(msgspec.json.encode(doc) + b"\n")
        return
    from rich.table import Table

    _wide()
    img = doc["stream"]
    out.print(
        f"[bold]stream {stream}[/] at offset {view.offset}: {img.state} epoch {img.epoch}, owner {doc['owner']},"
        f" offsets [{img.start_offset}, {img.end_offset}), tags {img.tags or '-'}"
    )
    ranges = Table(title="ranges", header_style="bold")
    for col in ("index", "epoch", "node", "start", "end"):
        ranges.add_column(col, justify="right")
    for r in img.ranges:
        current = " (current)" if r.range_index == img.range_index else ""
        ranges.add_row(
            f"{r.range_index}{current}", str(r.epoch), str(r.node_id), str(r.start_offset), str(r.end_offset)
        )
    out.print(ranges)
    objects = Table(title="objects in read order (getObjects)", header_style="bold")
    for col in ("object", "kind", "node", "start", "end"):
        objects.add_column(col, justify="right")
    for o in read.objects if read is not None else ():
        objects.add_row(
            str(o.object_id),
            o.object_type,
            "" if o.node_id is None else str(o.node_id),
            str(o.start_offset),
            str(o.end_offset),
        )
    out.print(objects)
    if read is not None and read.end_offset < img.end_offset:
        out.print(
            f"[red]the objects stop at {read.end_offset}: a read of [{read.end_offset}, {img.end_offset}) would stall[/]"
        )


def _print_bookies(view, fmt: Format) -> None:
    import msgspec

    image = view.image()
    if fmt is Format.json:
        write_bytes(msgspec.json.encode(image) + b"\n")
        return
    from rich.table import Table

    _wide()
    out.print(
        f"[bold]offset[/] {image.offset}   [bold]state_hash[/] {image.state_hash}   auditor {image.auditor or '-'},"
        f" lostBookieRecoveryDelay {image.recovery_delay_ms} ms"
    )
    t = Table(title=f"bookies ({len(image.bookies)})", header_style="bold")
    for col in ("bookie", "rack", "state", "availability", "free", "total", "ledgers"):
        t.add_column(col, justify="right" if col in ("free", "total", "ledgers") else "left")
    colour = {"WRITABLE": "green", "READ_ONLY": "yellow", "LOST": "red"}
    for b in image.bookies:
        t.add_row(
            b.bookie_id,
            b.rack or "",
            b.state + (f" ({b.state_reason})" if b.state_reason else ""),
            f"[{colour[b.availability]}]{b.availability}[/]",
            f"{b.free_bytes / 2**30:.1f} GiB",
            f"{b.total_bytes / 2**30:.1f} GiB",
            str(len(view.refs.get(b.bookie_id, ()))),
        )
    out.print(t)
    u = Table(title=f"under-replicated ledgers ({len(image.under_replicated)})", header_style="bold")
    for col in ("ledger", "missing", "marked at", "lock", "lost entries"):
        u.add_column(col)
    locks = dict(image.locks)
    for lid, mark in image.under_replicated[:50]:
        lost = view.lost_entries(view.ledgers[lid]) if lid in view.ledgers else []
        u.add_row(
            str(lid),
            " ".join(mark.missing),
            str(mark.since_ms),
            locks.get(lid, ""),
            ", ".join(f"{a}-{b}" for a, b in lost[:5]),
        )
    out.print(u)
    states = {}
    for x in image.ledgers:
        states[x.state] = states.get(x.state, 0) + 1
    out.print("ledgers: " + (", ".join(f"{k} {v}" for k, v in sorted(states.items())) or "none"))


def _streams_tables(image) -> None:
    from collections import Counter

    from rich.table import Table

    from kraftlake.records.s3stream import ObjectState

    _wide()
    out.print(
        f"[bold]offset[/] {image.offset}   [bold]state_hash[/] {image.state_hash}   automq.version level"
        f" {image.automq_version}   next stream id {image.next_stream_id}, next object id {image.next_object_id}"
    )
    streams = Table(title=f"streams ({len(image.streams)})", header_style="bold")
    for col in ("id", "state", "epoch", "owner", "start", "end", "ranges", "stream objects", "tags"):
        streams.add_column(col, justify="left" if col in ("state", "tags") else "right")
    for s in image.streams:
        owner = next((str(r.node_id) for r in s.ranges if r.range_index == s.range_index), "-")
        style = "green" if s.state == "OPENED" else "dim"
        streams.add_row(
            str(s.stream_id),
            f"[{style}]{s.state}[/]",
            str(s.epoch),
            owner,
            str(s.start_offset),
            str(s.end_offset),
            str(len(s.ranges)),
            str(len(s.objects)),
            " ".join(f"{k}={v}" for k, v in s.tags.items()),
        )
    out.print(streams)
    nodes = Table(title="nodes", header_style="bold")
    for col in ("id", "epoch", "failover", "stream-set objects", "historical WAL duties"):
        nodes.add_column(col)
    for n in image.nodes:
        duties = " ".join(f"{u.stream_id}:[{u.start_offset},{u.end_offset})" for u in n.uncommitted)
        nodes.add_row(
            str(n.node_id),
            str(n.node_epoch),
            "[red]yes[/]" if n.failover_mode else "no",
            str(len(n.stream_set_objects)),
            duties,
        )
    out.print(nodes)
    counts = Counter(ObjectState(o.state).name for o in image.objects)
    size = sum(o.size for o in image.objects if o.state == ObjectState.COMMITTED)
    out.print(
        "objects: "
        + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")
        + f"; committed bytes {size:,}; KV entries {len(image.kv)}"
    )


def _dir(d: str) -> str:
    from kraftlake.records import RESERVED_DIRECTORIES

    return RESERVED_DIRECTORIES.get(d, d)


def _wide() -> None:
    if not out.is_terminal:
        out.width = max(out.width, 200)


OFFLINE = "!"
"""After a broker id or a replica: it is on an offline directory (or a fenced or unregistered broker)."""
LEGEND = (
    f"{OFFLINE} on an offline directory: its broker said it failed (heartbeat, LogDirFailed) or the"
    " controller's registration does not list it; or on a fenced or unregistered broker"
)


def _controller_tables(image, failed: set[tuple[int, str]] = frozenset()) -> None:
    from rich.table import Table

    from kraftlake.statemachine.kraft.directory_ids import is_online

    _wide()
    out.print(f"[bold]offset[/] {image.offset}   [bold]state_hash[/] {image.state_hash}")
    out.print("features: " + (", ".join(f"{k}={v}" for k, v in image.features.items()) or "none"))
    brokers = Table(title="brokers", header_style="bold")
    for col in ("id", "epoch", "state", "rack", "online dirs", "removed dirs"):
        brokers.add_column(col)
    dirs_of = {}
    for b in image.brokers:
        dirs_of[b.id] = (b.log_dirs, b.fenced)
        state = "fenced" if b.fenced else "controlled shutdown" if b.in_controlled_shutdown else "active"
        style = "red" if b.fenced else "yellow" if b.in_controlled_shutdown else "green"
        brokers.add_row(
            str(b.id),
            str(b.epoch),
            f"[{style}]{state}[/]",
            b.rack or "",
            " ".join(b.log_dirs),
            " ".join(b.removed_dirs),
        )
    out.print(brokers)
    names = {t.id: t.name for t in image.topics}
    parts = Table(title="partitions", header_style="bold")
    for col in ("topic", "p", "leader", "isr", "replicas (broker:dir)", "LE", "PE", "LRS"):
        parts.add_column(col)
    marked = 0
    for p in image.partitions:
        cells = []
        offline = set()
        for a in p.assignment:
            dirs, fenced = dirs_of.get(a.broker, ((), True))
            ok = (
                a.broker in dirs_of
                and not fenced
                and is_online(a.directory, dirs)
                and (a.broker, a.directory) not in failed
            )
            if not ok:
                offline.add(a.broker)
            cells.append(
                f"[green]{a.broker}:{_dir(a.directory)}[/]"
                if ok
                else f"[red]{a.broker}:{_dir(a.directory)}{OFFLINE}[/]"
            )

        def broker(b: int, offline: set[int] = offline) -> str:
            return f"[red]{b}{OFFLINE}[/]" if b in offline else str(b)

        leader = "[red]none[/]" if p.leader == -1 else broker(p.leader)
        marked += bool(offline & ({p.leader} | set(p.isr)))
        parts.add_row(
            names.get(p.topic_id, p.topic_id),
            str(p.partition),
            leader,
            ",".join(broker(b) for b in p.isr),
            " ".join(cells),
            str(p.leader_epoch),
            str(p.partition_epoch),
            "RECOVERING" if p.leader_recovery_state else "",
        )
    out.print(parts)
    out.print(
        f"[dim]{LEGEND}[/]"
        + (f"; [red]{marked} partition(s) led from or with an ISR member there[/]" if marked else "")
    )


def _broker_table(bv, failed: set[tuple[int, str]] = frozenset()) -> None:
    from rich.table import Table

    _wide()
    state = (
        "unregistered"
        if not bv.registered
        else "fenced"
        if bv.fenced
        else "controlled shutdown"
        if bv.in_controlled_shutdown
        else "active"
    )
    out.print(
        f"[bold]broker[/] {bv.broker_id} ({state}, epoch {bv.epoch})   [bold]offset[/] {bv.offset}   [bold]state_hash[/] {bv.state_hash}"
    )
    out.print(f"online dirs: {' '.join(bv.log_dirs) or '-'}   offline dirs: {' '.join(bv.offline_dirs) or '-'}")
    if bv.should_stay_fenced:
        out.print("[yellow]KIP-858 policy: should stay fenced (UNASSIGNED replicas on a multi-dir broker)[/]")
    table = Table(header_style="bold")
    for col in ("topic", "p", "role", "dir", "online", "in isr", "LE", "PE"):
        table.add_column(col)
    said = 0
    for r in bv.replicas:
        reported = (bv.broker_id, r.directory) in failed
        if r.online and not reported:
            online = "[green]yes[/]"
        elif r.online:
            said += 1
            online = f"[red]no{OFFLINE} (the broker said its directory failed; the controller still lists it)[/]"
        else:
            online = f"[red]no{OFFLINE}[/]"
        table.add_row(
            r.topic,
            str(r.partition),
            r.role,
            _dir(r.directory),
            online,
            f"[red]yes{OFFLINE}[/]" if r.in_isr and (reported or not r.online) else "yes" if r.in_isr else "no",
            str(r.leader_epoch),
            str(r.partition_epoch),
        )
    out.print(table)
    out.print(f"[dim]{LEGEND}[/]")
    if said:
        out.print(
            f"[red]{said} replica(s) on a directory the broker said failed, still online in the controller's view[/]"
        )
    if bv.mismatched:
        out.print(f"[red]{len(bv.mismatched)} replica(s) assigned to a directory the broker does not have online[/]")
    if bv.unassigned:
        out.print(f"[yellow]{len(bv.unassigned)} replica(s) UNASSIGNED[/]")
