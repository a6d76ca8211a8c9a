"""The root ``kraftlake`` app, its global options and error handling."""

from __future__ import annotations

import os
from typing import Any

import typer
from typer.core import TyperGroup

from kraftlake.cli import (
    append,
    audit,
    broker,
    history,
    init,
    kafka,
    log,
    maintain,
    serve,
    shell,
    simulate,
    snapshot,
    spark_audit,
    storage,
    view,
)
from kraftlake.cli.console import EXIT_FAILED, EXIT_INPUT, err


class _Group(TyperGroup):
    """Turns kraftlake's errors into a message on stderr and an exit code, for every command."""

    def invoke(self, ctx: typer.Context) -> Any:
        from kraftlake.records.errors import (
            CorruptStoreError,
            KraftlakeError,
            LogNotFoundError,
            RecordError,
            ReplayError,
            TimeTravelError,
            UnsupportedLocationError,
        )

        try:
            return super().invoke(ctx)
        except KraftlakeError as exc:
            unusable_input = isinstance(
                exc,
                (
                    RecordError,
                    ReplayError,
                    LogNotFoundError,
                    TimeTravelError,
                    UnsupportedLocationError,
                    CorruptStoreError,
                ),
            )
            err.print(f"[bold red]error:[/] {exc}", highlight=False)
            ctx.exit(EXIT_INPUT if unusable_input else EXIT_FAILED)


app = typer.Typer(
    name="kraftlake",
    cls=_Group,
    help=(
        "kraftlake: an event-sourced metadata log for streaming-storage clusters (KRaft with JBOD,"
        " S3Stream, BookKeeper) on Delta Lake. Append typed records with gapless offsets, read"
        " them back as of any version, timestamp or offset, replay them into the controller's and"
        " each broker's view, and keep the table healthy."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from kraftlake import __version__

        typer.echo(f"kraftlake {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    _version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print kraftlake's version and exit."
    ),
    log_json: bool = typer.Option(
        False, "--log-json", envvar="KRAFTLAKE_LOG_JSON", help="Logs as JSON lines on stderr."
    ),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More logs on stderr: -v info, -vv debug."),
) -> None:
    from kraftlake.logging import configure

    level = os.environ.get("KRAFTLAKE_LOG_LEVEL") or ("debug" if verbose >= 2 else "info" if verbose else "warning")
    configure(json=log_json, level=level)


for module in (
    init,
    append,
    log,
    view,
    broker,
    snapshot,
    audit,
    spark_audit,
    simulate,
    history,
    maintain,
    kafka,
    storage,
    serve,
    shell,
):
    module.register(app)


def main() -> None:
    """Entry point of the ``kraftlake`` script."""
    app()
