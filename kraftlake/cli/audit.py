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
        from kraftlake.cli.progress import replay_progress
        from kraftlake.records import Log
        from kraftlake.replay.audit import AuditConfig, audit_log
        from kraftlake.replay.state import has_streams, state_at, streams_at

        opened = Log.open(log, storage_options=storage_options(storage_option))
        snap = opened.at()
        if fmt is Format.jsonl and not follow:
            abort("--format jsonl is for --follow (a report is text, json, html or prometheus)", EXIT_INPUT)
        if follow and (engine is Engine.duckdb or master is not None or remote is not None):
            abort("--follow runs the per-record engine: not with --engine duckdb, --master or --remote", EXIT_INPUT)
        if follow and fmt not in (Format.text, Format.jsonl):
            abort("--follow prints text or --format jsonl", EXIT_INPUT)
        if follow and (to_offset, to_source_offset, to_time, out_file, tables) != (None, None, None, None, None):
            abort(
                "--follow runs from --from (or --from-time) on: not with --to, --to-time, --to-source-offset, --out or --tables",
                EXIT_INPUT,
            )
        to_offset = resolve_to(snap, to_offset, to_source_offset)
        from_offset, to_offset = resolve_times(snap, from_offset, to_offset, from_time, to_time)
        if from_offset is not None and from_offset > snap.last_offset + 1:
            abort(f"--from {from_offset} is past the end of the log (last offset {snap.last_offset})", EXIT_INPUT)
        start = state_at(opened, offset=from_offset - 1) if from_offset else None
        streams_start = None
        if from_offset and has_streams(opened, to_offset=from_offset - 1):
            # Snapshots hold the KRaft view: the S3Stream state before --from is replayed.
            with replay_progress(from_offset, "replaying S3Stream records before --from") as progress:
                streams_start = streams_at(opened, offset=from_offset - 1, progress=progress)
        config = AuditConfig(
            grace_records=grace_records,
            grace_ms=grace_ms,
            fail_on=fail_on.value,
            fail_on_unavailable_ms=unavailable_ms(fail_on_unavailable),
        )
        if follow:
            from kraftlake.cli.audit_follow import follow_audit

            follow_audit(
                opened, from_offset or 0, config, jsonl=fmt is Format.jsonl, start=start, streams_start=streams_start
            )
            return
        last = snap.last_offset if to_offset is None else min(to_offset, snap.last_offset)
        if master is not None or remote is not None:
            if engine is not Engine.auto or from_offset is not None:
                abort("--master/--remote run the plan on Spark: without --engine or --from", EXIT_INPUT)
            from kraftlake.cli.spark_audit import on_spark

            report = on_spark(opened, config, master=master, remote=remote, to_offset=to_offset)
            emit(
                report,
                fmt,
                out_file,
                title=f"kraftlake audit of {log}",
                source=(snap, None, to_offset, None),
                tables=tables,
            )
            return
        if engine is not Engine.python:
            report = plan_audit(
                opened, to_offset, config, engine, from_offset, memory_limit=memory_limit, temp_directory=temp_directory
            )
            if report is not None:
                # The plan attached its incidents (replay.plan.incidents): emit() has none to add.
                emit(
                    report,
                    fmt,
                    out_file,
                    title=f"kraftlake audit of {log}",
                    source=(snap, None, to_offset, None),
                    tables=tables,
                )
                return
        with replay_progress(last + 1 - (from_offset or 0), "auditing") as progress:
            report = audit_log(
                snap,
                config=config,
                from_offset=from_offset,
                to_offset=to_offset,
                start=start,
                progress=progress,
                streams_start=streams_start,
            )
        report.engine = "python"
        emit(
            report,
            fmt,
            out_file,
            title=f"kraftlake audit of {log}",
            source=(snap, from_offset, to_offset, start),
            tables=tables,
        )


def unavailable_ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def resolve_times(
    snap, from_offset: int | None, to_offset: int | None, from_time: str | None, to_time: str | None
) -> tuple[int | None, int | None]:
    """``--from``/``--to`` from ``--from-time``/``--to-time`` (record time), at most one of each pair."""
    from kraftlake.records.store.time_travel import time_ms

    try:
        if from_time is not None:
            if from_offset is not None:
                abort("give at most one of --from, --from-time", EXIT_INPUT)
            first = snap.offset_at_time(time_ms(from_time), first=True)
            from_offset = snap.last_offset + 1 if first is None else first
        if to_time is not None:
            if to_offset is not None:
                abort("give at most one of --to, --to-source-offset, --to-time", EXIT_INPUT)
            to_offset = snap.offset_at_time(time_ms(to_time))
    except ValueError as exc:
        abort(str(exc), EXIT_INPUT)
    return from_offset, to_offset


def plan_audit(
    opened,
    to_offset: int | None,
    config,
    engine: Engine,
    from_offset: int | None,
    *,
    memory_limit: str | None = None,
    temp_directory: Path | None = None,
):
    """The report of the audit plan on DuckDB, or None when ``--engine auto`` leaves the log to
    the Python engine (``--from``: the plan audits from the start; S3Stream or BookKeeper
    records: their checks run per record either way, on the driver). ``memory_limit``: DuckDB's
    (default ``duck.MEMORY_LIMIT``); ``temp_directory``: where it spills (default its own)."""
    import duckdb

    from kraftlake.cli.progress import step_progress
    from kraftlake.replay.plan import audit, families
    from kraftlake.replay.plan.duck import DuckEngine

    if from_offset is not None:
        if engine is Engine.duckdb:
            abort("--from needs --engine python: the plan audits a log from its start", EXIT_INPUT)
        return None
    snap = opened.at(offset=to_offset)
    try:
        duck = DuckEngine(memory_limit=memory_limit, temp_directory=temp_directory)
    except duckdb.Error as exc:  # a limit DuckDB cannot read
        abort(f"--memory-limit {memory_limit}: {exc}", EXIT_INPUT)
    steps = ["reading the log"]
    with duck:
        try:
            duck.read_snapshot(snap)
            if engine is Engine.auto and {"s3stream", "bookkeeper"} & families(duck):
                return None
            with step_progress() as step:

                def tell(name: str) -> None:
                    steps.append(name)
                    step(name)

                return audit(duck, config, step=tell)
        except duckdb.OutOfMemoryException as exc:
            # Not every operator can spill (DuckDB's own list): say which limit held, in which
            # step, and how to raise it, rather than a traceback.
            limit = duck.rows("SELECT current_setting('memory_limit')")[0][0]
            abort(
                f"the plan needed more than DuckDB's memory limit ({limit}) in the step {steps[-1]!r};"
                f" raise it with --memory-limit: {exc}"
            )
        except duckdb.IOException as exc:
            # Spilling beyond the limit writes to the temporary directory: a full or unusable
            # disk there ends the plan (a 10^8-record log can spill tens of GB).
            abort(
                f"the plan could not spill to {duck.spill} in the step {steps[-1]!r}; give it another"
                f" place with --temp-directory, or more memory with --memory-limit: {exc}"
            )


def resolve_to(snap, to_offset: int | None, to_source_offset: int | None) -> int | None:
    """The last offset to audit, from ``--to`` or ``--to-source-offset`` (at most one)."""
    if to_source_offset is None:
        return to_offset
    if to_offset is not None:
        abort("give at most one of --to, --to-source-offset", EXIT_INPUT)
    return snap.offset_of_source(to_source_offset)


def emit(report, fmt: Format, out_file: Path | None, *, title: str, source=None, tables: Path | None = None) -> None:
    """Print or write ``report`` in ``fmt``, a summary of bounded size (``replay.summary``);
    with ``tables``, its complete rows there first (``replay.tables``); exit 1 when its verdict
    is fail. ``source`` (snapshot, from, to, start view): where an engine that left out the
    incidents gets them."""

    if report.incidents is None and source is not None:
        from kraftlake.replay.books import attach_incidents
        from kraftlake.replay.incidents import find_incidents

        snap, lo, hi, start = source
        attach_incidents(report, find_incidents(snap.iter_records(lo, hi), start))
    from kraftlake.replay.summary import bounded

    # Rows carry the record times of the offsets they name, read from the log audited.
    times = source[0].record_times if source is not None else None
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
