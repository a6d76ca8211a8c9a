"""The ``kraftlake`` command: one typer app, one module per command.

Data goes to stdout, messages to stderr. Exit codes: 0 success, 1 failure, 2 unusable input
(an invalid record, a missing log, a bad option), with a message naming line, type and field.
"""

from __future__ import annotations

from kraftlake.cli.app import app, main

__all__ = ["app", "main"]
