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
