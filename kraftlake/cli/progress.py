"""A replay progress bar on stderr (only when stderr is a terminal)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kraftlake.cli.console import err


@contextmanager
def replay_progress(total: int, description: str = "replaying") -> Iterator[Callable[[int], None] | None]:
    """Yields a callback taking the number of records just replayed, or None when not a TTY."""
    if not err.is_terminal or total <= 0:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("records"), TimeRemainingColumn(), console=err, transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def byte_progress(total: int, description: str) -> Iterator[Callable[[int], None] | None]:
    """Like ``replay_progress``, counting bytes read (an import's files)."""
    if not err.is_terminal or total <= 0:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(), console=err, transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
