"""``kraftlake spark-audit LOG``: ``kraftlake audit LOG --master local[*]``, the audit plan on Spark,
with the same report and exit codes as ``kraftlake audit``; and ``on_spark``, which runs the
plan on Spark for both commands (``--master``, ``--remote``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kraftlake.cli.audit import (
    FAIL_ON,
    FAIL_ON_UNAVAILABLE,
    FORMAT,
    GRACE_MS,
    GRACE_RECORDS,
    OUT,
    TABLES,
    TO_OFFSET,
    TO_SOURCE_OFFSET,
    FailOn,
    Format,
    emit,
    resolve_to,
    unavailable_ms,
)
from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, storage_options

if TYPE_CHECKING:
    from kraftlake.records import Log


def register(app: typer.Typer) -> None:
    @app.command("spark-audit")
    def spark_audit(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        master: str | None = typer.Option(
            None,
            "--master",
            help="Spark master URL (spark://host:7077, yarn, k8s://...). Default: local, on --cores cores.",
        ),
        cores: int | None = typer.Option(None, "--cores", min=1, help="Cores of the local session (default: all)."),
        scratch: str | None = typer.Option(
            None,
            "--scratch",
            help="Directory every executor sees, for the partition timeline the audit writes once and reads per invariant (Parquet, removed afterwards). Default: a local temporary directory; on a cluster, the checkpoint directory, else Spark's cache.",
        ),
        version: int | None = typer.Option(None, "--version", help="Audit the log as of this Delta version."),
        timestamp: str | None = typer.Option(None, "--timestamp", help="Audit the log as of this time (ISO 8601)."),
        to_offset: int | None = TO_OFFSET,
        to_source_offset: int | None = TO_SOURCE_OFFSET,
        grace_records: int | None = GRACE_RECORDS,
        grace_ms: int = GRACE_MS,
        fail_on: FailOn = FAIL_ON,
        fmt: Format = FORMAT,
        out_file: Path | None = OUT,
        tables: Path | None = TABLES,
        fail_on_unavailable: float | None = FAIL_ON_UNAVAILABLE,
    ) -> None:
        """Audit a KRaft log on Spark: `kraftlake audit LOG --master local[*]`, for histories one machine cannot audit fast enough.

        Partition records are audited by the audit plan's SQL (forward-filled states, interval joins with the brokers' and directories' online intervals) through spark.sql; the rest (brokers, topics, observations: a few percent) is replayed on the driver by the local audit. Same violations, verdict, state hash and exit codes (0 pass, 1 fail, 2 unusable input) as `kraftlake audit`. The whole log from its start is audited (no --from). Reads the Delta table with the Delta Spark connector when the session has it, else the exact Parquet files of the snapshot delta-rs resolves.
        """
        if version is not None and timestamp is not None:
            abort("give at most one of --version, --timestamp", EXIT_INPUT)
        from kraftlake.records import Log
        from kraftlake.replay.audit import AuditConfig

        opened = Log.open(log, storage_options=storage_options(storage_option))
        snap = opened.at(version=version, timestamp=timestamp)
        to_offset = resolve_to(snap, to_offset, to_source_offset)
        config = AuditConfig(
            grace_records=grace_records,
            grace_ms=grace_ms,
            fail_on=fail_on.value,
            fail_on_unavailable_ms=unavailable_ms(fail_on_unavailable),
        )
        report = on_spark(
            opened,
            config,
            master=master,
            cores=cores,
            scratch=scratch,
            version=version,
            timestamp=timestamp,
            to_offset=to_offset,
        )
        # The incidents come from one pass over the records on the driver (replay.incidents).
        emit(
            report,
            fmt,
            out_file,
            title=f"kraftlake spark-audit of {log}",
            source=(snap, None, to_offset, None),
            tables=tables,
        )


def on_spark(
    log: Log | str,
    config,
    *,
    master: str | None = None,
    remote: str | None = None,
    cores: int | None = None,
    scratch: str | None = None,
    version: int | None = None,
    timestamp: str | None = None,
    to_offset: int | None = None,
):
    """The report of the audit plan on Spark: a session on ``master`` (default local, on
    ``cores`` cores) or a Spark Connect server at ``remote``; a session already active (a
    notebook's, a test's) is used and left running."""
    from pyspark.sql import SparkSession

    from kraftlake.cli.progress import spark_progress
    from kraftlake.spark import read_log, session
    from kraftlake.spark.audit import audit
    from kraftlake.spark.read import damaged_read
    from kraftlake.spark.session import remote_session

    ours = SparkSession.getActiveSession() is None
    if remote is not None:
        try:
            spark = remote_session(remote)
        except ImportError as exc:
            abort(str(exc), EXIT_INPUT)
    else:
        spark = session(master=master, cores=cores)
    try:
        with spark_progress(spark) as step:
            df = read_log(spark, log, version=version, timestamp=timestamp, to_offset=to_offset)
            try:
                return audit(spark, df, config, step=step, scratch=scratch)
            except Exception as exc:  # an executor's read of a damaged file: exit 2 naming it
                damaged = damaged_read(exc)
                if damaged is None:
                    raise
                raise damaged from None
    finally:
        if ours:
            spark.stop()
