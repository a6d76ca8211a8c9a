"""``kraftlake init LOG``: create an empty log."""

from __future__ import annotations

import typer

from kraftlake.cli.console import EXIT_INPUT, abort, out


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init(log: str = typer.Argument(..., help="Directory of the new log (a Delta table).")) -> None:
        """Create an empty log: a Delta table with the record schema, append-only."""
        from kraftlake.records import Log, LogExistsError

        try:
            created = Log.create(log)
        except LogExistsError as exc:
            abort(str(exc), EXIT_INPUT)
        out.print_json(data={"log": created.path, "version": created.version})
