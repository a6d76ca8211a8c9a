"""``kraftlake spark-audit LOG``: ``kraftlake audit LOG --master local[*]``, the audit plan on Spark
(``kraftlake.audit(..., engine="spark")``), with the same report and exit codes as ``kraftlake audit``."""

from __future__ import annotations

from pathlib import Path

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
)
from kraftlake.cli.console import STORAGE_OPTION


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
        from kraftlake.cli.audit import record_times, run

        report = run(
            log,
            storage_option,
            engine="spark",
            master=master,
            cores=cores,
            scratch=scratch,
            version=version,
            timestamp=timestamp,
            to_offset=to_offset,
            to_source_offset=to_source_offset,
            grace_ms=grace_ms,
            grace_records=grace_records,
            fail_on=fail_on.value,
            fail_on_unavailable_seconds=fail_on_unavailable,
        )
        times = record_times(log, storage_option)
        emit(report, fmt, out_file, title=f"kraftlake spark-audit of {log}", tables=tables, times=times)
