"""All terminal output of the CLI: data to stdout, messages to stderr, one place for styles."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2


def abort(message: str, code: int = EXIT_INPUT) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(code)


def write_bytes(data: bytes) -> None:
    """Raw data to stdout (JSON Lines), bypassing rich's rendering."""
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


STORAGE_OPTION = typer.Option(
    None,
    "--storage-option",
    metavar="KEY=VALUE",
    help=(
        "A storage option for a log on an object store (s3://, gs://, az://…), delta-rs's names"
        " (AWS_ENDPOINT_URL, AWS_REGION, AWS_ALLOW_HTTP…); repeatable. Without it the standard"
        " environment variables apply."
    ),
)


def storage_options(pairs: list[str] | None) -> dict[str, str] | None:
    """``--storage-option`` values as delta-rs storage options (None: none given)."""
    from kraftlake.records.store.location import parse_storage_options

    try:
        return parse_storage_options(pairs) or None
    except ValueError as exc:
        abort(str(exc), EXIT_INPUT)


def end_on_ctrl_c() -> None:
    """End a ``--follow`` command at Ctrl-C: flush what it printed, then leave without the
    interpreter's finalization, where native runtimes' worker threads (delta-rs's tokio, Arrow's
    pools) can hold the exit back (delta-kernel-rs#1050, lancedb#4175 describe such stalls).
    Exit status 0, as a follow ended by its user."""
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
