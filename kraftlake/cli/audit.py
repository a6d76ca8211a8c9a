"""``kraftlake audit LOG``: replay the log once and check the invariant catalogue; a verdict, an
exit code and a report."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_FAILED, EXIT_INPUT, STORAGE_OPTION, abort, err, out, storage_options, write_bytes
from kraftlake.replay.grace import GRACE_MS, UNTIMED_GRACE_RECORDS


class Format(str, Enum):
    text = "text"
    json = "json"
    html = "html"
    prometheus = "prometheus"
    jsonl = "jsonl"


class Engine(str, Enum):
    auto = "auto"
    duckdb = "duckdb"
    python = "python"


class FailOn(str, Enum):
    warning = "warning"
    error = "error"


GRACE_MS = typer.Option(
    GRACE_MS,
    "--grace-ms",
    min=0,
    help="A transient wrong state (leader or ISR member on an offline dir, an unhandled dir failure) counts once it lasted more than MS milliseconds of record time (a controller reacts within a heartbeat, 2 s, however many records it writes meanwhile).",
)
GRACE_RECORDS = typer.Option(
    None,
    "--grace-records",
    min=0,
    help=f"Also count it once it lasted more than N records. Where a record has no time (a table another writer made), N records alone (default {UNTIMED_GRACE_RECORDS}).",
)
TABLES = typer.Option(
    None,
    "--tables",
    help="Also write the audit's complete rows to this directory as Parquet tables (violations, incidents, effects, outages, availability; docs/report-tables.md), for DuckDB, pandas or Spark. The report itself is a summary of bounded size that says where they are.",
)
FAIL_ON = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a violation of this severity or above is found.")
FORMAT = typer.Option(
    Format.text,
    "--format",
    "-f",
    help="text (a summary, default), json (the full report), html (one self-contained page with timelines) or prometheus (availability, incidents and violations as metrics).",
)
OUT = typer.Option(
    None, "--out", help="Write the report in --format to this file (text: the JSON report) instead of stdout."
)
TO_OFFSET = typer.Option(None, "--to", help="Last offset to audit.")
FAIL_ON_UNAVAILABLE = typer.Option(
    None,
    "--fail-on-unavailable-seconds",
    min=0,
    help="Also exit 1 when partitions were unavailable (no leader, or the leader on an offline directory) for more than N partition-seconds in total, by record time.",
)
FROM_TIME = typer.Option(
    None,
    "--from-time",
    help="Audit from the first record at or after this record time (ts_ms: Kafka's batch time after import-kafka; not the Delta commit time): ISO 8601, UTC unless it has an offset, or ms since the epoch.",
)
TO_TIME = typer.Option(
    None, "--to-time", help="Audit up to the last record at or before this record time (as --from-time)."
)
TO_SOURCE_OFFSET = typer.Option(
    None,
    "--to-source-offset",
    help="Audit up to the last record imported from this Kafka offset or before (logs made by import-kafka).",
)


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        from_offset: int | None = typer.Option(
            None,
            "--from",
            help="First offset to audit (the state before it is replayed, from snapshots when there are any).",
        ),
        to_offset: int | None = TO_OFFSET,
        to_source_offset: int | None = TO_SOURCE_OFFSET,
        grace_records: int | None = GRACE_RECORDS,
        grace_ms: int = GRACE_MS,
        fail_on: FailOn = FAIL_ON,
        fmt: Format = FORMAT,
        out_file: Path | None = OUT,
        tables: Path | None = TABLES,
        fail_on_unavailable: float | None = FAIL_ON_UNAVAILABLE,
        from_time: str | None = FROM_TIME,
        to_time: str | None = TO_TIME,
        engine: Engine = typer.Option(
            Engine.auto,
            "--engine",
            help="duckdb: the audit plan's SQL in this process (every core, spilling to a temporary directory), the default on KRaft logs; python: the per-record reference engine, the default with --from and on logs with S3Stream or BookKeeper records. --master or --remote: the plan on Spark.",
        ),
        master: str | None = typer.Option(
            None, "--master", help="Run the plan on Spark: local[N], spark://host:7077, yarn, k8s://..."
        ),
        remote: str | None = typer.Option(
            None, "--remote", help="Run the plan on a Spark Connect server: sc://host:15002."
        ),
        memory_limit: str | None = typer.Option(
            None,
            "--memory-limit",
            help="The memory DuckDB may hold for the plan (e.g. 2GB, 512MB; default 1GB): beyond it the plan spills to a temporary directory.",
        ),
        temp_directory: Path | None = typer.Option(
            None,
            "--temp-directory",
            help="Where the plan spills beyond --memory-limit (default: a new directory under the system's temporary one, removed after). At 10^8 records it can take tens of GB.",
        ),
        follow: bool = typer.Option(
            False,
            "--follow",
            help="Keep auditing records as they land (the per-record engine), printing each violation when it opens and when it closes (text, or --format jsonl); Ctrl-C stops.",
        ),
    ) -> None:
        """Audit a log: was leadership and the ISR moved correctly after log directories failed? Do AutoMQ's streams and objects hold together?

        Checks the catalogue (L1-L5 log, K1-K15 KRaft/JBOD: leader in ISR within replicas, leader and ISR on online dirs, every reported dir failure handled within the grace, KIP-858 completeness, epoch bumps, eligible leader replicas (KIP-966) apart from the ISR, on online dirs, and leaders elected from ISR or ELR; S1-S12 AutoMQ S3Stream: ranges ordered and owned, offsets held by exactly one object, end offsets never back, referenced objects committed, ids never reused, historical WAL duties recoverable, PREPARED objects expired, commits continue the end) in one streaming pass. Violations are intervals: the offset where an entity went wrong, the last offset where it still was (null: still open), and the records that caused and fixed it. Exit 0 pass, 1 fail, 2 unusable input. `--engine python`, `--master` and `kraftlake spark-audit` give the same report (logs with S3Stream or BookKeeper records: by the Python engine).
        """
        if fmt is Format.jsonl and not follow:
            abort("--format jsonl is for --follow (a report is text, json, html or prometheus)", EXIT_INPUT)
        if follow:
            _refuse_with_follow(to_offset, to_source_offset, to_time, out_file, tables)
            _follow(log, storage_option, engine, master, remote, fmt, from_offset, from_time, grace_ms, grace_records)
            return
        report = run(
            log,
            storage_option,
            engine=engine.value,
            master=master,
            remote=remote,
            from_offset=from_offset,
            to_offset=to_offset,
            to_source_offset=to_source_offset,
            from_time=from_time,
            to_time=to_time,
            grace_ms=grace_ms,
            grace_records=grace_records,
            fail_on=fail_on.value,
            fail_on_unavailable_seconds=fail_on_unavailable,
            memory_limit=memory_limit,
            temp_directory=temp_directory,
        )
        times = record_times(log, storage_option)
        emit(report, fmt, out_file, title=f"kraftlake audit of {log}", tables=tables, times=times)


OPTION_NAMES = {
    "from_offset": "--from",
    "to_offset": "--to",
    "to_source_offset": "--to-source-offset",
    "from_time": "--from-time",
    "to_time": "--to-time",
    "engine": "--engine",
    "remote": "--remote",
    "timestamp": "--timestamp",
    "version": "--version",
    "master": "--master",
    "memory_limit": "--memory-limit",
    "fail_on": "--fail-on",
    "grace_ms": "--grace-ms",
    "grace_records": "--grace-records",
}


def in_options(exc) -> str:
    """An ``AuditUsageError``'s words with the library's argument names as the CLI's options."""
    import re

    said = re.sub(r"\b(%s)\b" % "|".join(OPTION_NAMES), lambda m: OPTION_NAMES[m.group(1)], str(exc))
    option = OPTION_NAMES.get(exc.parameter or "")
    return said if option is None or option in said else f"{option}: {said}"


def run(log: str, storage_option: list[str] | None, **arguments):
    """``kraftlake.audit`` with the CLI's progress; what it refuses is exit 2 in words naming
    the option at fault."""
    from kraftlake.auditing import AuditCapacityError, AuditUsageError, audit
    from kraftlake.cli.progress import audit_progress

    try:
        return audit(log, storage_options=storage_options(storage_option), progress=audit_progress(), **arguments)
    except AuditUsageError as exc:
        abort(in_options(exc), EXIT_INPUT)
    except AuditCapacityError as exc:
        abort(str(exc), EXIT_INPUT)


def _refuse_with_follow(*options) -> None:
    if options != (None,) * len(options):
        abort(
            "--follow runs from --from (or --from-time) on: not with --to, --to-time, --to-source-offset, --out or --tables",
            EXIT_INPUT,
        )


def _follow(log, storage_option, engine, master, remote, fmt, from_offset, from_time, grace_ms, grace_records) -> None:
    """``audit --follow``: the per-record engine from the window's start on, as records land."""
    from kraftlake.auditing import AuditUsageError, audit_config, start_states, window
    from kraftlake.cli.audit_follow import follow_audit
    from kraftlake.cli.progress import audit_progress
    from kraftlake.records import Log

    if engine is Engine.duckdb or master is not None or remote is not None:
        abort("--follow runs the per-record engine: not with --engine duckdb, --master or --remote", EXIT_INPUT)
    if fmt not in (Format.text, Format.jsonl):
        abort("--follow prints text or --format jsonl", EXIT_INPUT)
    opened = Log.open(log, storage_options=storage_options(storage_option))
    try:
        first, _ = window(opened.at(), from_offset=from_offset, from_time=from_time)
        config = audit_config(grace_ms, grace_records)
    except AuditUsageError as exc:
        abort(in_options(exc), EXIT_INPUT)
    start, streams_start = start_states(opened, first, audit_progress())
    follow_audit(opened, first or 0, config, jsonl=fmt is Format.jsonl, start=start, streams_start=streams_start)


def record_times(log: str, storage_option: list[str] | None):
    """The record times of the log's offsets (``LogSnapshot.record_times``), for ``emit``."""
    from kraftlake.records import Log

    return Log.open(log, storage_options=storage_options(storage_option)).at().record_times


def emit(report, fmt: Format, out_file: Path | None, *, title: str, tables: Path | None = None, times=None) -> None:
    """Print or write ``report`` in ``fmt``, a summary of bounded size (``replay.summary``);
    with ``tables``, its complete rows there first (``replay.tables``); exit 1 when its verdict
    is fail. ``times`` (``record_times``): rows carry the record times of the offsets they name."""
    from kraftlake.replay.summary import bounded

    if tables is not None:
        from kraftlake.replay import tables as report_tables

        try:
            rows = report_tables.write(report, tables, times)
        except OSError as exc:
            abort(f"--tables {tables}: {exc.strerror or exc}", EXIT_INPUT)
        err.print(f"tables in {tables}: " + ", ".join(f"{name} {n:,}" for name, n in rows.items()))
    from kraftlake.replay.html import INDEX

    report = bounded(
        report,
        tables=None if tables is None else str(tables),
        times=times,
        index=INDEX if fmt is Format.html else 0,
    )
    if fmt is Format.prometheus:
        from kraftlake.replay.prometheus import render as metrics

        _page(metrics(report).encode(), out_file, f"{report.verdict.upper()}: metrics in {out_file}")
    elif fmt is Format.html:
        from kraftlake.replay.html import render

        _page(render(report, title=title).encode(), out_file, f"{report.verdict.upper()}: HTML report in {out_file}")
    else:
        from kraftlake.replay.report_json import write_json

        if out_file is not None:
            with out_file.open("wb") as f:
                write_json(report, f.write)
                f.write(b"\n")
        if fmt is Format.json and out_file is None:
            write_json(report, sys.stdout.buffer.write)
            write_bytes(b"\n")
        elif fmt is Format.json:
            err.print(f"{report.verdict.upper()}: JSON report in {out_file}")
        else:
            _summary(report)
    if report.verdict == "fail":
        raise typer.Exit(EXIT_FAILED)


def _page(data: bytes, out_file: Path | None, told: str) -> None:
    """``data`` to ``out_file`` (saying ``told`` on stderr), or to stdout."""
    if out_file is not None:
        out_file.write_bytes(data)
        err.print(told)
    else:
        write_bytes(data)


def _summary(report) -> None:
    """The text report (``report_text``), laid out for the terminal's width (piped: wide)."""
    from kraftlake.cli.report_text import render

    if not out.is_terminal:
        out.width = max(out.width, 160)
    render(report, out, err)
