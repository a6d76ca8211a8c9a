"""structlog configuration for kraftlake's programs: readable on a terminal, JSON when asked.

Library code only calls ``structlog.get_logger``; programs (the CLI, the HTTP service, tests)
call ``configure`` once. Logs go to stderr, so stdout stays data.
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
    return structlog.PrintLogger(file=_CurrentStderr())  # type: ignore[arg-type]


def configure(*, json: bool = False, level: str = "warning") -> None:
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
