"""Progress lines on stderr (only when stderr is a terminal), laid out for its width.

Whatever the width, the line keeps what says the work is moving — the spinner, the count of
records done or the step's number, the time taken — and it is the description that gives way
(cut with an ellipsis): a 10-minute step at 80 columns must not look frozen. Each line is built
by a ``*_bar(console)`` function, so that a test draws it on a console of a chosen width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Column

from kraftlake.cli.console import err


def _description(ratio: int = 1) -> TextColumn:
    """The part that gives way: one line, cut with an ellipsis."""
    return TextColumn(
        "{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=ratio, min_width=8)
    )


def _fixed(column):
    """A column that keeps its whole text (no wrap, no cut)."""
    column.table_column = Column(no_wrap=True)
    return column


def record_bar(console: Console) -> Progress:
    """``description ━━━━ 12,345/100,000 records 0:00:12 ETA 0:01:40``: the bar takes what the
    width leaves."""
    return Progress(
        _description(),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=6)),
        _fixed(MofNCompleteColumn()),
        _fixed(TextColumn("records")),
        _fixed(TimeElapsedColumn()),
        _fixed(TimeRemainingColumn()),
        console=console,
        transient=True,
        expand=True,
    )


def step_bar(console: Console) -> Progress:
    """``⠋ step 3: K1: leader in ISR in replicas… 0:02:41``: the spinner and the time stay."""
    return Progress(
        _fixed(SpinnerColumn()),
        _fixed(TextColumn("step {task.fields[n]}:")),
        _description(),
        _fixed(TimeElapsedColumn()),
        console=console,
        transient=True,
        expand=True,
    )


@contextmanager
def replay_progress(total: int, description: str = "replaying") -> Iterator[Callable[[int], None] | None]:
    """Yields a callback taking the number of records just replayed, or None when not a TTY."""
    if not err.is_terminal or total <= 0:
        yield None
        return
    with record_bar(err) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def byte_progress(total: int, description: str) -> Iterator[Callable[[int], None] | None]:
    """Like ``replay_progress``, counting bytes read (an import's files)."""
    if not err.is_terminal or total <= 0:
        yield None
        return
    with Progress(
        _description(),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=6)),
        _fixed(DownloadColumn()),
        _fixed(TransferSpeedColumn()),
        _fixed(TimeRemainingColumn()),
        console=err,
        transient=True,
        expand=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def step_progress() -> Iterator[Callable[[str], None]]:
    """Yields a callback naming the current step of a long computation: a spinner on stderr on a
    terminal (the step's number and the time kept in view), else each step logged."""
    import structlog

    if not err.is_terminal:
        logger = structlog.get_logger("kraftlake.audit")
        yield lambda name: logger.info("audit.step", step=name)
        return
    with step_bar(err) as bar:
        task = bar.add_task("starting", total=None, n=0)
        count = [0]

        def step(name: str) -> None:
            count[0] += 1
            bar.update(task, description=name, n=count[0])

        yield step


@contextmanager
def spark_progress(spark) -> Iterator[Callable[[str], None]]:
    """Yields a callback naming the audit's current step; on a terminal, a line on stderr shows
    it with the tasks of Spark's active stages (polled from its status tracker), else each step
    is logged."""
    import threading

    import structlog

    try:
        tracker = spark.sparkContext.statusTracker()
    except Exception:  # Spark Connect: no SparkContext here, no stages to show
        tracker = None
    if not err.is_terminal or tracker is None:
        logger = structlog.get_logger("kraftlake.spark")
        yield lambda name: logger.info("spark.step", step=name)
        return
    with Progress(
        _fixed(SpinnerColumn()),
        _description(),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=6)),
        _fixed(TextColumn("{task.fields[tasks]}")),
        _fixed(TimeElapsedColumn()),
        console=err,
        transient=True,
        expand=True,
    ) as bar:
        task = bar.add_task("starting", total=None, tasks="")
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(0.5):
                stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
                stages = [s for s in stages if s is not None]
                done, total = sum(s.numCompletedTasks for s in stages), sum(s.numTasks for s in stages)
                text = f"{done}/{total} tasks, {len(stages)} stage(s)" if stages else ""
                bar.update(task, completed=done, total=total or None, tasks=text)

        thread = threading.Thread(target=poll, name="spark-progress", daemon=True)
        thread.start()
        try:
            yield lambda name: bar.update(task, description=name)
        finally:
            stop.set()
            thread.join()


def audit_progress():
    """``kraftlake.audit``'s progress hooks drawn as the bars and lines above."""
    from kraftlake.auditing import Progress

    class Drawn(Progress):
        def records(self, total, description):
            return replay_progress(total, description)

        def steps(self):
            return step_progress()

        def spark(self, spark):
            return spark_progress(spark)

    return Drawn()
