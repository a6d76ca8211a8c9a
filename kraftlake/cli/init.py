"""``kraftlake init LOG``: create an empty log."""

from __future__ import annotations

import typer

from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, out, storage_options


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init(
        log: str = typer.Argument(..., help="Directory of the new log (a Delta table)."),
        storage_option: list[str] | None = STORAGE_OPTION,
    ) -> None:
        """Create an empty log: a Delta table with the record schema, append-only."""
        from kraftlake.records import Log, LogExistsError

        try:
            created = Log.create(log, storage_options=storage_options(storage_option))
        except LogExistsError as exc:
            abort(str(exc), EXIT_INPUT)
        out.print_json(data={"log": created.path, "version": created.version})
