"""``kraftlake history LOG``: the table's commits, newest first."""

from __future__ import annotations

import json

import typer

from kraftlake.cli.console import STORAGE_OPTION, out, storage_options, write_bytes


def register(app: typer.Typer) -> None:
    @app.command("history")
    def history(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="Only the newest N commits."),
        as_json: bool = typer.Option(False, "--json", help="JSON Lines instead of a table."),
    ) -> None:
        """List commits: Delta version, time, operation, the offsets each append added, its producer."""
        import datetime as dt

        from rich.table import Table

        from kraftlake.records import Log

        commits = Log.open(log, storage_options=storage_options(storage_option)).history(limit)
        if as_json:
            write_bytes(b"".join(json.dumps(c.to_dict()).encode() + b"\n" for c in commits))
            return
        table = Table(header_style="bold")
        for name in ("version", "time (UTC)", "operation", "offsets", "records", "producer", "seq"):
            table.add_column(name)
        for c in commits:
            when = dt.datetime.fromtimestamp(c.timestamp_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            span = "" if c.first_offset is None else f"{c.first_offset}..{c.last_offset}"
            table.add_row(
                str(c.version),
                when,
                c.operation,
                span,
                "" if c.records is None else str(c.records),
                c.producer or "",
                "" if c.seq is None else str(c.seq),
            )
        out.print(table)
