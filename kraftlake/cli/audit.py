"""``kraftlake audit LOG``: replay the log once and check the invariant catalogue; a verdict, an
exit code and a report."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_FAILED, EXIT_INPUT, abort, err, out, write_bytes


class Format(str, Enum):
    text = "text"
    json = "json"
    html = "html"


class FailOn(str, Enum):
    warning = "warning"
    error = "error"


GRACE_RECORDS = typer.Option(
    1000,
    "--grace-records",
    min=0,
    help="A transient wrong state (leader or ISR member on an offline dir, an unhandled dir failure) counts once it lasted more than N records...",
)
GRACE_MS = typer.Option(
    5_000,
    "--grace-ms",
    min=0,
    help="...or more than MS milliseconds of record time (a controller reacts within a heartbeat, 2 s).",
)
FAIL_ON = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a violation of this severity or above is found.")
FORMAT = typer.Option(
    Format.text,
    "--format",
    "-f",
    help="text (a summary, default), json (the full report) or html (one self-contained page with timelines).",
)
OUT = typer.Option(
    None, "--out", help="Write the report in --format to this file (text: the JSON report) instead of stdout."
)
TO_OFFSET = typer.Option(None, "--to", help="Last offset to audit.")
TO_SOURCE_OFFSET = typer.Option(
    None,
    "--to-source-offset",
    help="Audit up to the last record imported from this Kafka offset or before (logs made by import-kafka).",
)


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit(
        log: str = typer.Argument(..., help="The log."),
        from_offset: int | None = typer.Option(
            None,
            "--from",
            help="First offset to audit (the state before it is replayed, from snapshots when there are any).",
        ),
        to_offset: int | None = TO_OFFSET,
        to_source_offset: int | None = TO_SOURCE_OFFSET,
        grace_records: int = GRACE_RECORDS,
        grace_ms: int = GRACE_MS,
        fail_on: FailOn = FAIL_ON,
        fmt: Format = FORMAT,
        out_file: Path | None = OUT,
    ) -> None:
        """Audit a log: was leadership and the ISR moved correctly after log directories failed? Do AutoMQ's streams and objects hold together?

        Checks the catalogue (L1-L5 log, K1-K14 KRaft/JBOD: leader in ISR within replicas, leader and ISR on online dirs, every reported dir failure handled within the grace, KIP-858 completeness, epoch bumps, eligible leader replicas (KIP-966) apart from the ISR and leaders elected from ISR or ELR; S1-S12 AutoMQ S3Stream: ranges ordered and owned, offsets held by exactly one object, end offsets never back, referenced objects committed, ids never reused, historical WAL duties recoverable, PREPARED objects expired, commits continue the end) in one streaming pass. Violations are intervals: the offset where an entity went wrong, the last offset where it still was (null: still open), and the records that caused and fixed it. Exit 0 pass, 1 fail, 2 unusable input. `kraftlake spark-audit` gives the same report on Spark.
        """
        from kraftlake.cli.progress import replay_progress
        from kraftlake.records import Log
        from kraftlake.replay.audit import AuditConfig, audit_log
        from kraftlake.replay.state import has_streams, state_at, streams_at

        opened = Log.open(log)
        snap = opened.at()
        to_offset = resolve_to(snap, to_offset, to_source_offset)
        if from_offset is not None and from_offset > snap.last_offset + 1:
            abort(f"--from {from_offset} is past the end of the log (last offset {snap.last_offset})", EXIT_INPUT)
        start = state_at(opened, offset=from_offset - 1) if from_offset else None
        streams_start = None
        if from_offset and has_streams(opened, to_offset=from_offset - 1):
            # Snapshots hold the KRaft view: the S3Stream state before --from is replayed.
            with replay_progress(from_offset, "replaying S3Stream records before --from") as progress:
                streams_start = streams_at(opened, offset=from_offset - 1, progress=progress)
        config = AuditConfig(grace_records=grace_records, grace_ms=grace_ms, fail_on=fail_on.value)
        last = snap.last_offset if to_offset is None else min(to_offset, snap.last_offset)
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
        emit(report, fmt, out_file, title=f"kraftlake audit of {log}")


def resolve_to(snap, to_offset: int | None, to_source_offset: int | None) -> int | None:
    """The last offset to audit, from ``--to`` or ``--to-source-offset`` (at most one)."""
    if to_source_offset is None:
        return to_offset
    if to_offset is not None:
        abort("give at most one of --to, --to-source-offset", EXIT_INPUT)
    return snap.offset_of_source(to_source_offset)


def emit(report, fmt: Format, out_file: Path | None, *, title: str) -> None:
    """Print or write ``report`` in ``fmt``; exit 1 when its verdict is fail."""
    import msgspec

    doc = msgspec.json.encode(report) + b"\n"
    if fmt is Format.html:
        from kraftlake.replay.html import render

        page = render(report, title=title).encode()
        if out_file is not None:
            out_file.write_bytes(page)
            err.print(f"{report.verdict.upper()}: HTML report in {out_file}")
        else:
            write_bytes(page)
    elif fmt is Format.json:
        if out_file is not None:
            out_file.write_bytes(doc)
        write_bytes(doc)
    else:
        if out_file is not None:
            out_file.write_bytes(doc)
        _summary(report)
    if report.verdict == "fail":
        raise typer.Exit(EXIT_FAILED)


def _summary(report) -> None:
    from rich.table import Table

    if not out.is_terminal:
        out.width = max(out.width, 160)
    colour = "green" if report.verdict == "pass" else "red"
    out.print(
        f"[bold {colour}]{report.verdict.upper()}[/]: {report.records:,} records"
        f" (offsets {report.first_offset}..{report.last_offset}), {len(report.violations)} violation(s);"
        f" grace {report.grace_records} records / {report.grace_ms} ms; state {report.state_hash[:16]}"
        + (f", streams {report.streams_state_hash[:16]}" if report.streams_state_hash else "")
    )
    # A family the log has no records of (no check ran, nothing found) is left out of the table.
    active = {i.id[0] for i in report.invariants if i.checked or i.violations} | {"L"}
    table = Table(header_style="bold")
    for col in ("invariant", "severity", "checked", "violations", "definition"):
        table.add_column(col, justify="right" if col in ("checked", "violations") else "left")
    for i in report.invariants:
        if i.id[0] not in active:
            continue
        style = "red" if i.violations else ""
        table.add_row(i.id, i.severity, f"{i.checked:,}", f"[{style}]{i.violations}[/]" if style else "0", i.definition)
    out.print(table)
    if report.violations:
        v_table = Table(title="violations", header_style="bold")
        for col in ("inv", "entity", "from", "to", "message", "evidence"):
            v_table.add_column(col)
        for v in report.violations[:50]:
            v_table.add_row(
                v.invariant,
                v.entity,
                str(v.first_offset),
                "open" if v.last_offset is None else str(v.last_offset),
                v.message,
                ",".join(map(str, v.evidence[:6])),
            )
        out.print(v_table)
        if len(report.violations) > 50:
            err.print(f"{len(report.violations) - 50} more violation(s): --format json lists them all")
