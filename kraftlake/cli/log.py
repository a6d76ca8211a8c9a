"""``kraftlake log LOG``: print records, as JSON Lines (appendable elsewhere as is) or a table."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_INPUT, abort, out, write_bytes


class Format(str, Enum):
    jsonl = "jsonl"
    table = "table"


def register(app: typer.Typer) -> None:
    @app.command("log")
    def show(
        log: Path = typer.Argument(..., help="The log."),
        from_offset: int | None = typer.Option(None, "--from", help="First offset (inclusive)."),
        to_offset: int | None = typer.Option(None, "--to", help="Last offset (inclusive)."),
        types: list[str] = typer.Option([], "--type", "-t", help="Only this record type (repeatable)."),
        version: int | None = typer.Option(None, "--version", help="As of this Delta version."),
        timestamp: str | None = typer.Option(
            None, "--timestamp", help="As of this time (ISO 8601, UTC unless it says otherwise)."
        ),
        fmt: Format = typer.Option(Format.jsonl, "--format", "-f", help="jsonl (default) or table."),
    ) -> None:
        """Print the log's records in offset order, as of now or of a version or time.

        JSON Lines output can be appended to another log as is: offsets are reassigned there and the old ones kept as source_offset.
        """
        from kraftlake.records import Log, encode_line

        if version is not None and timestamp is not None:
            abort("give --version or --timestamp, not both", EXIT_INPUT)
        snap = Log.open(log).at(version=version, timestamp=timestamp)
        records = snap.records(from_offset, to_offset, types or None)
        if fmt is Format.jsonl:
            write_bytes(b"".join(encode_line(r) + b"\n" for r in records))
            return
        _print_table(records)


def _print_table(records: list) -> None:
    import datetime as dt

    import msgspec
    from rich.table import Table

    from kraftlake.records import ENVELOPE_FIELDS

    table = Table(show_lines=False, header_style="bold")
    for name in ("offset", "time (UTC)", "type", "v", "key", "fields"):
        table.add_column(name, no_wrap=name != "fields")
    for r in records:
        fields = {
            k: v for k, v in msgspec.to_builtins(r).items() if k not in ENVELOPE_FIELDS and k != "type"
        }
        when = dt.datetime.fromtimestamp(r.ts_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        body = " ".join(f"{k}={msgspec.json.encode(v).decode()}" for k, v in fields.items())
        table.add_row(str(r.offset), when, type(r).__name__, str(r.version), r.entity_key(), body)
    out.print(table)
