"""``kraftlake log LOG``: print records, as JSON Lines (appendable elsewhere as is) or a table."""

from __future__ import annotations

from enum import Enum

import typer

from kraftlake.cli.console import (
    EXIT_INPUT,
    STORAGE_OPTION,
    abort,
    end_on_ctrl_c,
    out,
    storage_options,
    write_bytes,
)


class Format(str, Enum):
    jsonl = "jsonl"
    table = "table"


def register(app: typer.Typer) -> None:
    @app.command("log")
    def show(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        from_offset: int | None = typer.Option(None, "--from", help="First offset (inclusive)."),
        to_offset: int | None = typer.Option(None, "--to", help="Last offset (inclusive)."),
        types: list[str] = typer.Option([], "--type", "-t", help="Only this record type (repeatable)."),
        version: int | None = typer.Option(None, "--version", help="As of this Delta version."),
        timestamp: str | None = typer.Option(
            None, "--timestamp", help="As of this time (ISO 8601, UTC unless it says otherwise)."
        ),
        fmt: Format = typer.Option(Format.jsonl, "--format", "-f", help="jsonl (default) or table."),
        from_time: str | None = typer.Option(
            None,
            "--from-time",
            help="From the first record at or after this record time (ts_ms: Kafka's batch time after import-kafka; --timestamp is the Delta commit time): ISO 8601, UTC unless it has an offset, or ms since the epoch.",
        ),
        to_time: str | None = typer.Option(
            None, "--to-time", help="Up to the last record at or before this record time (as --from-time)."
        ),
        follow: bool = typer.Option(
            False, "--follow", help="Then keep printing new records as they land (JSON Lines; Ctrl-C stops)."
        ),
        poll: float = typer.Option(0.1, "--poll", help="With --follow: seconds between looks for new commits."),
    ) -> None:
        """Print the log's records in offset order, as of now or of a version or time.

        JSON Lines output can be appended to another log as is: offsets are reassigned there and the old ones kept as source_offset.
        """
        from kraftlake.records import Log, encode_line

        if version is not None and timestamp is not None:
            abort("give --version or --timestamp, not both", EXIT_INPUT)
        if follow:
            if version is not None or timestamp is not None or to_offset is not None or fmt is not Format.jsonl:
                abort(
                    "--follow prints JSON Lines from --from on: not with --version, --timestamp, --to or --format table",
                    EXIT_INPUT,
                )
            _follow(Log.open(log, storage_options=storage_options(storage_option)), from_offset or 0, set(types), poll)
            return
        snap = Log.open(log, storage_options=storage_options(storage_option)).at(version=version, timestamp=timestamp)
        if from_time is not None or to_time is not None:
            from kraftlake.auditing import AuditUsageError, window
            from kraftlake.cli.audit import in_options

            try:
                from_offset, to_offset = window(snap, from_offset, to_offset, from_time=from_time, to_time=to_time)
            except AuditUsageError as exc:
                abort(in_options(exc), EXIT_INPUT)
        records = snap.records(from_offset, to_offset, types or None)
        if fmt is Format.jsonl:
            write_bytes(b"".join(encode_line(r) + b"\n" for r in records))
            return
        if not out.is_terminal:
            out.width = max(out.width, 220)  # piped: don't squeeze the table into 80 columns
        # Partitions by name beside their keys: the topics' names, from the whole snapshot.
        topics = {r.topic_id: r.name for r in snap.records(types=["Topic"])}
        print_table(records, out, topics)


def _follow(log, from_offset: int, types: set[str], poll: float) -> None:
    """Print each commit's records as it lands, flushed per commit; Ctrl-C ends it (exit 0)."""
    from kraftlake.records import encode_line, type_name

    try:
        for batch in log.follow_batches(from_offset, poll=poll):
            if types:
                batch = [r for r in batch if type_name(type(r)) in types]
            if batch:
                write_bytes(b"".join(encode_line(r) + b"\n" for r in batch))
    except KeyboardInterrupt:
        end_on_ctrl_c()


WIDE = 120
"""From this many columns on, a column per field; narrower, time over type and key over fields."""


def print_table(records: list, console, topics: dict[str, str] | None = None) -> None:
    """One row per record, laid out for ``console``'s width; only fields that differ from their
    default (Kafka's tagged-field view: a PartitionChange shows what it changes). Times are
    record times, UTC, ISO 8601; a partition's key has its name beside (``orders/11``)."""
    from rich.table import Table
    from rich.text import Text

    from kraftlake.records import payload_fields
    from kraftlake.records.base import field_defaults
    from kraftlake.records.times import format_ms
    from kraftlake.replay.names import entity_name

    wide = console.width >= WIDE
    table = Table(header_style="bold", expand=False)
    table.add_column("offset", justify="right", no_wrap=True)
    if wide:
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("type", no_wrap=True)
        table.add_column("key", overflow="fold")
        table.add_column("fields", overflow="fold", ratio=1)
    else:
        table.add_column("time (UTC) / type", no_wrap=True)
        table.add_column("key / fields", overflow="fold", ratio=1)
    for r in records:
        defaults = field_defaults(type(r))
        key = r.entity_key()
        shown = []
        for name in payload_fields(type(r)):
            value = getattr(r, name)
            if name in defaults and value == defaults[name]:
                continue
            if name in _IN_KEY and str(value) in key.split("/"):
                continue
            shown.append(f"{name}={_render(value)}")
        named = entity_name(key, topics or {})
        key_text = key if named == key else f"{named}  {key}"
        kind = type(r).__name__ + ("" if r.version == _current(type(r)) else f" v{r.version}")
        when = format_ms(r.ts_ms)
        if wide:
            table.add_row(str(r.offset), when, kind, key_text, " ".join(shown))
        else:
            table.add_row(
                str(r.offset),
                Text.assemble(when, "\n", (kind, "bold")),
                Text.assemble((key_text, "dim"), "\n", " ".join(shown)),
            )
    console.print(table)


_IN_KEY = {"topic_id", "partition_id", "broker_id", "controller_id"}


def _render(value: object) -> str:
    """Compact display: a replica's directory as ``broker:DIR``, reserved ids by name."""
    import msgspec

    from kraftlake.records import RESERVED_DIRECTORIES, ReplicaDirectory

    if isinstance(value, tuple) and value and isinstance(value[0], ReplicaDirectory):
        return (
            "[" + ", ".join(f"{rd.broker}:{RESERVED_DIRECTORIES.get(rd.directory, rd.directory)}" for rd in value) + "]"
        )
    return msgspec.json.encode(value).decode()


def _current(cls: type) -> int:
    from kraftlake.records import current_version

    return current_version(cls)
