"""One audit behind every door: ``kraftlake.audit(log, ...)``.

The CLI (``kraftlake audit``, ``kraftlake spark-audit``), the HTTP service (``POST /v1/audits``)
and the notebook facade (``Lake.audit``) all call this function with the same defaults and get
the same report: it opens the log, resolves the window (offsets, record times, a Kafka source
offset, a Delta version or timestamp), replays the state before a window that does not start at
the log's start, picks the engine, runs it, and attaches the incidents and availability:

- ``duckdb``: the audit plan's SQL in this process (``replay.plan``), the default for a KRaft log
  audited from its start;
- ``python``: the per-record engine (``replay.audit``), the reference, and the default for a
  window that starts later and for logs with S3Stream or BookKeeper records (their checks run per
  record on either engine);
- ``spark``: the same plan on Spark (``master``: a cluster's URL, default a local session;
  ``remote``: a Spark Connect server).

It returns the complete ``AuditReport``; what a door shows of it is the door's (a bounded
summary, ``replay.summary``; the tables, ``replay.tables``). Input that cannot be audited (options
that do not go together, a window outside the log) raises ``AuditUsageError``; work that needs
more than the limits given (DuckDB's memory, its spill directory) raises ``AuditCapacityError``:
both are exit 2 at the CLI, never a traceback or the OOM killer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kraftlake.replay.grace import GRACE_MS

if TYPE_CHECKING:
    from kraftlake.records import Log
    from kraftlake.replay.books import AuditConfig, AuditReport

ENGINES = ("auto", "duckdb", "python", "spark")


class AuditUsageError(ValueError):
    """The audit cannot run as asked: options that do not go together, a window outside the log.
    ``parameter``: the argument at fault, where one is (a door names it in its own words)."""

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class AuditCapacityError(RuntimeError):
    """The work needs more than the limits it was given (DuckDB's memory limit, room to spill)."""


class Progress:
    """What an audit tells as it goes; the CLI's draws it (``cli.progress``). A door that shows
    nothing passes none: every hook does nothing."""

    def records(self, total: int, description: str) -> AbstractContextManager[Callable[[int], None] | None]:
        """A span over ``total`` records: the context gives a function told each batch's size."""
        return nullcontext(None)

    def steps(self) -> AbstractContextManager[Callable[[str], None]]:
        """The plan's stages: the context gives a function told each stage's name."""
        return nullcontext(_nothing)

    def spark(self, spark: Any) -> AbstractContextManager[Callable[[str], None]]:
        """The plan's stages on Spark (a progress that can also read Spark's jobs)."""
        return self.steps()


def _nothing(_name: str) -> None:
    pass


def audit(
    log: Log | str | os.PathLike[str],
    *,
    engine: str = "auto",
    master: str | None = None,
    remote: str | None = None,
    cores: int | None = None,
    scratch: str | None = None,
    from_offset: int | None = None,
    to_offset: int | None = None,
    to_source_offset: int | None = None,
    from_time: datetime | str | int | None = None,
    to_time: datetime | str | int | None = None,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    grace_ms: int = GRACE_MS,
    grace_records: int | None = None,
    fail_on: str = "error",
    fail_on_unavailable_seconds: float | None = None,
    memory_limit: str | None = None,
    temp_directory: str | os.PathLike[str] | None = None,
    storage_options: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit ``log`` (a ``Log``, a path or a URI): the complete report, incidents attached.

    The window: ``from_offset``/``to_offset`` (or ``from_time``/``to_time``, record time: ISO text
    is UTC unless it says otherwise; or ``to_source_offset``, an imported log's Kafka offset), in
    the log as of Delta ``version`` or ``timestamp`` (default: now). The grace: ``grace_ms`` of
    record time (``grace_records`` besides, where asked; see ``replay.grace``). The verdict fails
    on a violation at least ``fail_on`` severe, or on more than ``fail_on_unavailable_seconds``
    partition-seconds without a usable leader. ``engine``: see the module's docstring."""
    from kraftlake.records import Log

    if engine not in ENGINES:
        raise AuditUsageError(f"engine {engine!r}: one of {', '.join(ENGINES)}", "engine")
    config = audit_config(grace_ms, grace_records, fail_on, fail_on_unavailable_seconds)
    if version is not None and timestamp is not None:
        raise AuditUsageError("give at most one of version, timestamp", "timestamp")
    if (master is not None or remote is not None) and engine not in ("auto", "spark"):
        raise AuditUsageError(f"master/remote run the plan on Spark: not with engine {engine!r}", "engine")
    if master is not None and remote is not None:
        raise AuditUsageError("give at most one of master, remote", "remote")
    on_spark = engine == "spark" or master is not None or remote is not None
    progress = progress or Progress()
    opened = log if isinstance(log, Log) else Log.open(log, storage_options=storage_options)
    snap = opened.at(version=version, timestamp=timestamp)
    first, last = window(snap, from_offset, to_offset, to_source_offset, from_time, to_time)
    if first is not None and on_spark:
        raise AuditUsageError(
            "the plan on Spark audits a log from its start: no from_offset or from_time", "from_offset"
        )
    if first is not None and engine == "duckdb":
        raise AuditUsageError("the plan audits a log from its start: engine python for a later start", "from_offset")
    if on_spark:
        report = _on_spark(opened, config, master, remote, cores, scratch, version, timestamp, last, progress)
    else:
        report = None
        if engine != "python" and first is None:
            report = _on_duckdb(snap, last, config, engine, memory_limit, temp_directory, progress)
        if report is None:
            report = _per_record(opened, snap, first, last, config, progress)
    if report.incidents is None:  # an engine that leaves them out: one more pass over the records
        from kraftlake.replay.books import attach_incidents
        from kraftlake.replay.incidents import find_incidents

        attach_incidents(report, find_incidents(snap.iter_records(None, last), None))
    return report


def audit_config(
    grace_ms: int = GRACE_MS,
    grace_records: int | None = None,
    fail_on: str = "error",
    fail_on_unavailable_seconds: float | None = None,
) -> AuditConfig:
    """The ``AuditConfig`` of ``audit``'s arguments (also what ``audit --follow`` runs with)."""
    from kraftlake.replay.books import AuditConfig
    from kraftlake.statemachine.invariants import SEVERITIES

    if fail_on not in SEVERITIES:
        raise AuditUsageError(f"fail_on {fail_on!r}: one of {', '.join(SEVERITIES)}", "fail_on")
    for name, value in (("grace_ms", grace_ms), ("grace_records", grace_records)):
        if value is not None and value < 0:
            raise AuditUsageError(f"{name} {value} is below 0", name)
    if fail_on_unavailable_seconds is not None and fail_on_unavailable_seconds < 0:
        raise AuditUsageError(
            f"fail_on_unavailable_seconds {fail_on_unavailable_seconds} is below 0", "fail_on_unavailable_seconds"
        )
    return AuditConfig(
        grace_records=grace_records,
        grace_ms=grace_ms,
        fail_on=fail_on,
        fail_on_unavailable_ms=None
        if fail_on_unavailable_seconds is None
        else round(fail_on_unavailable_seconds * 1000),
    )


def window(
    snap,
    from_offset: int | None = None,
    to_offset: int | None = None,
    to_source_offset: int | None = None,
    from_time: datetime | str | int | None = None,
    to_time: datetime | str | int | None = None,
) -> tuple[int | None, int | None]:
    """The first and last offsets of ``snap`` (a ``LogSnapshot``) to audit (None: the log's
    start, its end), from offsets, record times or a Kafka source offset."""
    from kraftlake.records.times import time_ms

    if to_source_offset is not None:
        if to_offset is not None:
            raise AuditUsageError("give at most one of to_offset, to_source_offset", "to_source_offset")
        to_offset = snap.offset_of_source(to_source_offset)
    try:
        if from_time is not None:
            if from_offset is not None:
                raise AuditUsageError("give at most one of from_offset, from_time", "from_time")
            found = snap.offset_at_time(time_ms(from_time), first=True)
            from_offset = snap.last_offset + 1 if found is None else found
        if to_time is not None:
            if to_offset is not None:
                raise AuditUsageError("give at most one of to_offset, to_source_offset, to_time", "to_time")
            to_offset = snap.offset_at_time(time_ms(to_time))
    except ValueError as exc:
        if isinstance(exc, AuditUsageError):
            raise
        raise AuditUsageError(str(exc)) from None
    if from_offset is not None and from_offset < 0:
        raise AuditUsageError(f"from_offset {from_offset} is below 0", "from_offset")
    if from_offset is not None and from_offset > snap.last_offset + 1:
        raise AuditUsageError(
            f"from_offset {from_offset} is past the end of the log (last offset {snap.last_offset})", "from_offset"
        )
    if to_offset is not None and from_offset is not None and to_offset < from_offset - 1:
        raise AuditUsageError(f"to_offset {to_offset} is below from_offset {from_offset}", "to_offset")
    return (from_offset or None), to_offset


def _on_duckdb(snap, last, config: AuditConfig, engine: str, memory_limit, temp_directory, progress: Progress):
    """The plan's report on DuckDB, or None where ``engine`` auto leaves the log to the
    per-record engine (S3Stream or BookKeeper records: their checks run per record either way)."""
    import duckdb

    from kraftlake.replay.plan import audit as plan_audit
    from kraftlake.replay.plan import families
    from kraftlake.replay.plan.duck import DuckEngine

    try:
        duck = DuckEngine(memory_limit=memory_limit, temp_directory=temp_directory)
    except duckdb.Error as exc:  # a limit DuckDB cannot read
        raise AuditUsageError(f"memory limit {memory_limit!r}: {exc}", "memory_limit") from None
    stages = ["reading the log"]
    with duck:
        try:
            duck.read_snapshot(snap.cut(last))
            if engine == "auto" and {"s3stream", "bookkeeper"} & families(duck):
                return None
            with progress.steps() as step:

                def tell(name: str) -> None:
                    stages.append(name)
                    step(name)

                return plan_audit(duck, config, step=tell)
        except duckdb.OutOfMemoryException as exc:
            # Not every operator can spill (DuckDB's own list): which limit held, in which stage,
            # and how to raise it, rather than a traceback.
            limit = duck.rows("SELECT current_setting('memory_limit')")[0][0]
            raise AuditCapacityError(
                f"the plan needed more than DuckDB's memory limit ({limit}) in the stage {stages[-1]!r};"
                f" raise it with --memory-limit: {exc}"
            ) from None
        except duckdb.IOException as exc:
            # Spilling beyond the limit writes to the temporary directory: a full or unusable disk
            # there ends the plan (a 10^8-record log can spill tens of GB).
            raise AuditCapacityError(
                f"the plan could not spill to {duck.spill} in the stage {stages[-1]!r}; give it another"
                f" place with --temp-directory, or more memory with --memory-limit: {exc}"
            ) from None


def _per_record(opened, snap, first, last, config: AuditConfig, progress: Progress):
    """The per-record engine's report over the window, with its incidents (a second pass)."""
    from kraftlake.replay.audit import audit_log
    from kraftlake.replay.books import attach_incidents
    from kraftlake.replay.incidents import find_incidents

    start, streams_start = start_states(opened, first, progress)
    end = snap.last_offset if last is None else min(last, snap.last_offset)
    with progress.records(end + 1 - (first or 0), "auditing") as told:
        report = audit_log(
            snap,
            config=config,
            from_offset=first,
            to_offset=last,
            start=start,
            progress=told,
            streams_start=streams_start,
        )
    report.engine = "python"
    attach_incidents(report, find_incidents(snap.iter_records(first, last), start))
    return report


def start_states(opened: Log, first: int | None, progress: Progress | None = None) -> tuple[Any, Any]:
    """The KRaft view and the S3Stream state just before offset ``first`` (None, None: the
    log's start), where a window that starts later picks up (also ``audit --follow``'s)."""
    from kraftlake.replay.state import has_streams, state_at, streams_at

    if not first:
        return None, None
    streams = None
    if has_streams(opened, to_offset=first - 1):
        # Snapshots hold the KRaft view: the S3Stream state before the window is replayed.
        with (progress or Progress()).records(first, "replaying S3Stream records before the window") as told:
            streams = streams_at(opened, offset=first - 1, progress=told)
    return state_at(opened, offset=first - 1), streams


def _on_spark(
    opened, config: AuditConfig, master, remote, cores, scratch, version, timestamp, last, progress: Progress
):
    """The plan's report on Spark: a session on ``master`` (default local, on ``cores`` cores) or
    a Spark Connect server at ``remote``; a session already active (a notebook's, a test's) is
    used and left running. The plan attaches its own incidents."""
    from pyspark.sql import SparkSession

    from kraftlake.spark import read_log, session
    from kraftlake.spark.audit import audit as spark_audit
    from kraftlake.spark.read import damaged_read
    from kraftlake.spark.session import remote_session

    ours = SparkSession.getActiveSession() is None
    if remote is not None:
        try:
            spark = remote_session(remote)
        except ImportError as exc:
            raise AuditUsageError(str(exc)) from None
    else:
        spark = session(master=master, cores=cores)
    try:
        with progress.spark(spark) as step:
            df = read_log(spark, opened, version=version, timestamp=timestamp, to_offset=last)
            try:
                return spark_audit(spark, df, config, step=step, scratch=scratch)
            except Exception as exc:  # an executor's read of a damaged file: the error naming it
                damaged = damaged_read(exc)
                if damaged is None:
                    raise
                raise damaged from None
    finally:
        if ours:
            spark.stop()
