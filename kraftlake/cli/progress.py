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
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("records"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
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
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def step_progress() -> Iterator[Callable[[str], None]]:
    """Yields a callback naming the current step of a long computation: a spinner on stderr on a
    terminal, else each step logged."""
    import structlog

    if not err.is_terminal:
        logger = structlog.get_logger("kraftlake.audit")
        yield lambda name: logger.info("audit.step", step=name)
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task("starting", total=None)
        yield lambda name: bar.update(task, description=name)


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
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[tasks]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
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
