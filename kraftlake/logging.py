"""Logging for kraftlake: structlog, readable on a terminal, JSON when asked, always on stderr.

Library modules take their logger from ``get_logger``; programs (the CLI, the HTTP service,
tests) call ``configure`` once. A program that imports kraftlake as a library and never configures
structlog gets warnings and errors on stderr, and nothing on stdout (structlog's own default
prints every event to stdout, where a tool's data goes); one that configures structlog itself
gets kraftlake's events through its configuration.
"""

from __future__ import annotations

import logging
import sys

import structlog


class _CurrentStderr:
    """A file that is whatever ``sys.stderr`` is at write time (a test runner or a notebook may
    swap it after ``configure``; a logger bound to the old one would write to a closed file)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(file=_CurrentStderr())  # type: ignore[arg-type]  # a TextIO in all PrintLogger uses: write, flush


def _processors(json: bool) -> list[structlog.typing.Processor]:
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    return processors


def configure(*, json: bool = False, level: str = "warning") -> None:
    structlog.configure(
        processors=_processors(json),
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


class _LibraryLogger:
    """A module's logger: structlog's configured one when the program configured structlog,
    else kraftlake's default (warnings and errors on stderr). Decided at each call, so a program
    may configure structlog before or after importing kraftlake."""

    __slots__ = ("_name", "_default")

    def __init__(self, name: str) -> None:
        self._name = name
        self._default = structlog.wrap_logger(
            _stderr_logger(),
            processors=_processors(json=False),
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        )

    def __getattr__(self, method: str) -> object:
        target = structlog.get_logger(self._name) if structlog.is_configured() else self._default
        return getattr(target, method)


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """The logger library modules use (``log = get_logger(__name__)``)."""
    return _LibraryLogger(name)  # type: ignore[return-value]  # a proxy forwarding every method to the bound logger
