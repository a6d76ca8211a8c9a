"""``kraftlake import-kafka``, ``export-kafka`` and ``dump``: Kafka's own metadata log files."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, err, out, storage_options, write_bytes


class DumpFormat(str, Enum):
    text = "text"
    jsonl = "jsonl"


def register(app: typer.Typer) -> None:
    @app.command("import-kafka")
    def import_kafka(
        metadata_dir: Path = typer.Argument(
            ...,
            help="A Kafka metadata log dir (with __cluster_metadata-0/ and meta.properties), or the __cluster_metadata-0 dir itself.",
        ),
        log: str = typer.Argument(
            ...,
            help="The kraftlake log to write (created if missing; must be new, or an interrupted import of the same dir).",
        ),
        include_noop: bool = typer.Option(
            False,
            "--include-noop",
            help="Keep NoOp records (the active controller's heartbeats, ~99% of a real log); always counted.",
        ),
        to_offset: int | None = typer.Option(None, "--to-offset", help="Stop after this Kafka offset."),
        from_snapshot: str | None = typer.Option(
            None,
            "--from-snapshot",
            help="Start from a .checkpoint snapshot (a file, or 'latest'): its image, then the log from its end offset.",
        ),
        skip_corrupt: bool = typer.Option(
            False,
            "--skip-corrupt",
            help="Skip batches whose CRC fails or that do not parse, and report them, instead of stopping; after a damaged length field, resume at the next valid batch header. Out-of-order offsets and epochs still stop the import.",
        ),
        follow: bool = typer.Option(
            False,
            "--follow",
            help="Keep tailing the dir as Kafka writes it (new batches, segment rolls, snapshots, deleted segments) until Ctrl-C/SIGTERM or --until-idle-ms. A batch is published once it is below the newest snapshot or unchanged for --settle-ms; a Raft truncation of held batches drops them, one below published records stops with an error.",
        ),
        poll_ms: int = typer.Option(100, "--poll-ms", min=1, help="With --follow: how often to look at the dir."),
        settle_ms: int = typer.Option(
            5_000,
            "--settle-ms",
            min=0,
            help="With --follow: how long a batch stays unchanged on disk before it is published (Kafka's high watermark is not on disk; README).",
        ),
        until_idle_ms: int | None = typer.Option(
            None,
            "--until-idle-ms",
            min=1,
            help="With --follow: stop after this long with nothing new and nothing held.",
        ),
        storage_option: list[str] | None = STORAGE_OPTION,
    ) -> None:
        """Import a Kafka KRaft __cluster_metadata log into a kraftlake log.

        Reads every .log segment in offset order (RecordBatch v2, CRC-32C checked), decodes every metadata record type and version and the Raft control records, and appends them in atomic chunks. Kafka's offset is kept as source_offset (view --source-offset, audit --to-source-offset). Unknown record types or versions are kept as KafkaOpaque records with a warning; replaying or auditing the log stops at them (exit 2), naming them. A metadata.version newer than kraftlake knows (beyond 29, 4.2-IV1) is warned about: the records kraftlake knows are replayed as Kafka 4.2 replays them. A CRC failure, a truncated batch, or batch offsets and leader epochs out of order (checked as Kafka's log validation does) stop with the file and byte position; run again to resume (chunks that landed are not written twice).
        """
        from kraftlake.cli.progress import byte_progress
        from kraftlake.records import Log
        from kraftlake.records.errors import LogNotFoundError
        from kraftlake.records.kafka.importer import import_kafka as run
        from kraftlake.records.kafka.layout import open_metadata_dir

        md = open_metadata_dir(metadata_dir)
        options = storage_options(storage_option)
        try:
            opened = Log.open(log, storage_options=options)
        except LogNotFoundError:
            opened = Log.create(log, storage_options=options)
        if follow:
            _follow(md.root, opened, include_noop, poll_ms, settle_ms, until_idle_ms)
            return
        total = sum(s.path.stat().st_size for s in md.segments)
        with byte_progress(total, "importing") as progress:
            stats = run(
                md.root,
                opened,
                include_noop=include_noop,
                to_offset=to_offset,
                from_snapshot=from_snapshot,
                skip_corrupt=skip_corrupt,
                progress=progress,
            )
        _import_summary(stats, opened)

    @app.command("export-kafka")
    def export_kafka(
        log: str = typer.Argument(..., help="The kraftlake log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        out_dir: Path = typer.Argument(
            ..., help="Where to write __cluster_metadata-0/<base offset>.log (created if missing)."
        ),
        to_offset: int | None = typer.Option(None, "--to", help="Last kraftlake offset to export."),
    ) -> None:
        """Write a kraftlake log as a Kafka __cluster_metadata segment (RecordBatch v2, CRC-32C).

        Records imported from Kafka keep their offsets and batches (an import with --include-noop exported again gives the same bytes); other records are batched by append. Observations and records with no Kafka form are left out and counted. The segment reads with kafka-dump-log.sh --cluster-metadata-decoder and with import-kafka.
        """
        from kraftlake.records import Log
        from kraftlake.records.kafka.exporter import export_kafka as run

        snap = Log.open(log, storage_options=storage_options(storage_option)).at(offset=to_offset)
        stats = run((r for batch in snap.iter_records() for r in batch), out_dir)
        err.print(
            f"wrote {stats.records:,} records in {stats.batches:,} batches ({stats.bytes_written:,} bytes) to {stats.segment}"
        )
        if stats.left_out:
            err.print("left out (no Kafka form): " + ", ".join(f"{n:,} {t}" for t, n in sorted(stats.left_out.items())))

    @app.command("dump")
    def dump(
        path: Path = typer.Argument(
            ..., help="A .log segment, a .checkpoint, bootstrap.checkpoint, or a metadata log dir."
        ),
        fmt: DumpFormat = typer.Option(
            DumpFormat.text,
            "--format",
            "-f",
            help="text (like kafka-dump-log) or jsonl (one JSON object per file, batch and record).",
        ),
        batches_only: bool = typer.Option(False, "--batches-only", help="Batch headers only, no records."),
    ) -> None:
        """List Kafka metadata log files batch by batch and record by record, like kafka-dump-log.sh --cluster-metadata-decoder.

        Records print as their Kafka type name, version and fields (in kraftlake's shape: Directories as assignment pairs). CRC-32C is verified; a bad batch stops the listing with its file and byte position.
        """
        import msgspec

        from kraftlake.records.kafka.dump import dump_lines

        if not path.exists():
            abort(f"{path}: no such file or directory", EXIT_INPUT)
        for line in dump_lines(path, records=not batches_only):
            if fmt is DumpFormat.jsonl:
                write_bytes(msgspec.json.encode(line) + b"\n")
            elif line["kind"] == "file":
                out.print(f"Dumping {line['file']} ({line['bytes']:,} bytes)")
            elif line["kind"] == "batch":
                out.print(
                    f"baseOffset: {line['base_offset']} lastOffset: {line['last_offset']} count: {line['count']}"
                    f" partitionLeaderEpoch: {line['epoch']} isControl: {str(line['control']).lower()}"
                    f" isTransactional: {str(line['transactional']).lower()} position: {line['position']}"
                    f" CreateTime: {line['create_time']} size: {line['size']} compresscodec: {line['compression']}"
                    f" crc: {line['crc']} isvalid: true"
                )
            else:
                payload = msgspec.json.encode(
                    {"type": line["type"], "version": line["version"], "data": line["data"]}
                ).decode()
                out.print(
                    f"| offset: {line['offset']} CreateTime: {line['create_time']} payload: {payload}", markup=False
                )


def _follow(root, log, include_noop: bool, poll_ms: int, settle_ms: int, until_idle_ms: int | None) -> None:
    """Run a ``KafkaFollower`` until Ctrl-C, SIGTERM or idle; exit 0 on each."""
    import signal
    import threading

    from kraftlake.records.kafka.follow import KafkaFollower

    follower = KafkaFollower(root, log, include_noop=include_noop, settle_ms=settle_ms)
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        follower.run(poll_ms=poll_ms, until_idle_ms=until_idle_ms, stop=stop)
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    st = follower.stats
    err.print(
        f"followed {follower.path}: {st.records:,} records in {st.appends:,} appends from {st.batches:,} batches;"
        f" {st.truncations} truncation(s), {st.truncated_batches} truncated batch(es) never published;"
        f" {st.held} batch(es) held back unpublished"
    )
    _newer_level(st)


def _newer_level(stats) -> None:
    if stats.newer_metadata_version is not None:
        from kraftlake.records.metadata_versions import newer_level_warning

        err.print(f"[yellow]warning:[/] {newer_level_warning(stats.newer_metadata_version)}", highlight=False)


def _import_summary(stats, log) -> None:
    from rich.table import Table

    table = Table(title=f"imported into {log.path}", header_style="bold", title_justify="left")
    table.add_column("record type")
    table.add_column("count", justify="right")
    for name, n in sorted(stats.by_type.items()):
        table.add_row(name, f"{n:,}")
    table.add_row(
        "[dim]NoOp (read" + (", kept)" if stats.by_type.get("NoOp") else ", skipped)") + "[/]",
        f"[dim]{stats.noops:,}[/]",
    )
    err.print(table)
    err.print(
        f"{stats.records:,} records from {stats.batches:,} batches; Kafka offsets"
        f" {stats.first_source_offset}..{stats.last_source_offset}"
        + (f"; started from snapshot {stats.snapshot}" if stats.snapshot else "")
    )
    if stats.bootstrap is not None:
        err.print("bootstrap.checkpoint: " + ", ".join(f"{k}={v}" for k, v in sorted(stats.bootstrap.items())))
    _newer_level(stats)
    for (key, version, control), n in sorted(stats.opaque.items()):
        err.print(
            f"[yellow]warning:[/] {n:,} {'control type' if control else 'apiKey'} {key} v{version} record(s) kraftlake cannot decode, kept as KafkaOpaque (replaying or auditing the log stops at them, exit 2)"
        )
    for s in stats.skipped:
        err.print(f"[yellow]skipped:[/] {s}")
