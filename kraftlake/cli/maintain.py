"""``kraftlake maintain LOG``: compact, checkpoint, vacuum."""

from __future__ import annotations

import typer

from kraftlake.cli.console import STORAGE_OPTION, err, out, storage_options


def register(app: typer.Typer) -> None:
    @app.command("maintain")
    def maintain(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        retention_hours: int | None = typer.Option(
            None,
            "--retention-hours",
            min=0,
            help=(
                "Keep files that versions of the last H hours need (default: the table's"
                " delta.deletedFileRetentionDuration, 7 days). Older versions stay readable by offset."
            ),
        ),
    ) -> None:
        """Compact, checkpoint and vacuum, so a long log stays fast to open and read.

        Compacts small files into few, writes a checkpoint, and vacuums files that no version inside the retention window needs (including files of appends that never committed). Safe while appenders run: they see one conflict and retry.
        """
        from kraftlake.records import Log

        with err.status("compacting, checkpointing, vacuuming…"):
            report = Log.open(log, storage_options=storage_options(storage_option)).maintain(
                retention_hours=retention_hours
            )
        out.print_json(data=report.to_dict())
