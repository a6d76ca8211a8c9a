"""The audit's text report (``kraftlake audit``'s default): the verdict and what it judges, the
incidents and availability, then what broke; laid out for the terminal's width.

It reads the summary (``replay.summary``). From ``WIDE`` columns on, incidents and violations
are tables with a column per fact; narrower, each is a block of short lines (a table squeezed
into 80 columns cuts ids and times to a few characters). Times are record times, UTC, ISO 8601,
beside offsets; partitions ``orders/11``; directories by path with their id. Red is for what is
wrong (a violation), yellow for what is notable but normal (an outage, an incident still open
at the end of the log), never the other way round.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kraftlake.records.times import format_ms
from kraftlake.replay.grace import grace_words
from kraftlake.replay.names import incident_where
from kraftlake.statemachine.invariants import CHECKED, FINDS

WIDE = 120
"""From this many columns on, tables; below, blocks of lines."""
INCIDENTS = 10
"""Incidents listed."""
VIOLATIONS = 50
"""Violations listed (a table of a line each, on a wide terminal)."""
VIOLATIONS_NARROW = 15
"""Violations listed on a narrow terminal (a block of four lines each)."""


def _s(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:,.1f} s"


def _plus(ms: int | None, t0: int | None) -> str:
    return "" if ms is None or t0 is None else f"+{(ms - t0) / 1000:,.1f} s"


def render(report, out: Console, err: Console) -> None:
    """Print ``report`` (a summary) to ``out``; what it leaves out is said on ``err``."""
    wide = out.width >= WIDE
    _head(report, out)
    incidents = [
        i for i in report.incidents or () if i.violations or i.invariants or i.unavailable_ms or i.ended_at is None
    ]
    incidents.sort(key=lambda i: (-sum(i.invariants.values()), -i.unavailable_ms, i.failed_at))
    if incidents:
        out.print()
        out.print(
            Text("incidents that caused violations, unavailability or were open at the end (worst first)", "bold")
        )
        (_incident_table if wide else _incident_blocks)(report, incidents[:INCIDENTS], out)
        total = report.handling.incidents if report.handling is not None else len(report.incidents or ())
        if total > INCIDENTS:
            err.print(
                f"{total - min(INCIDENTS, len(incidents)):,} more incident(s): --format html finds any of them; {_where_all(report)}"
            )
    broken = [i for i in report.invariants if i.violations]
    if broken:
        out.print()
        _invariants(broken, out, wide)
    if report.violations:
        out.print()
        out.print(Text("violations (the first of each invariant)", "bold"))
        shown = list(report.violations[: VIOLATIONS if wide else VIOLATIONS_NARROW])
        (_violation_table if wide else _violation_blocks)(report, shown, out)
        if report.violation_count > len(shown):
            err.print(f"{report.violation_count - len(shown):,} more violation(s): {_where_all(report)}")
    else:
        checked = sum(i.checked for i in report.invariants)
        out.print(f"no invariant violated ({checked:,} checks)")


def _where_all(report) -> str:
    tables = report.omitted.tables if report.omitted is not None else None
    return f"every one is in the tables in {tables}" if tables else "--tables DIR writes every one"


def _head(report, out: Console) -> None:
    colour = "green" if report.verdict == "pass" else "red"
    a, h = report.availability, report.handling
    lines = [
        Text.assemble(
            (report.verdict.upper(), f"bold {colour}"),
            f": {report.violation_count:,} violation(s) of the controller's invariants;"
            f" {report.records:,} records, offsets {report.first_offset}..{report.last_offset}",
        )
    ]
    if a is not None and a.from_ms is not None:
        lines.append(Text(f"record time {format_ms(a.from_ms)} to {format_ms(a.to_ms)} (UTC)"))
    lines.append(
        Text(
            f"grace {grace_words(report.grace_ms, report.grace_records)}; state {report.state_hash[:16]}"
            + (f", streams {report.streams_state_hash[:16]}" if report.streams_state_hash else "")
        )
    )
    if not report.topics and (h is None or not h.incidents):
        h = a = None  # no KRaft topics (an S3Stream or BookKeeper log): no incidents to tell
    if a is not None:
        over = report.fail_on_unavailable_ms is not None and a.unavailable_ms > report.fail_on_unavailable_ms
        causes = [f"{k} {_s(ms)}" for k, ms in a.by_kind.items() if ms]
        if a.outside_incidents_ms:
            causes.append(f"outside any incident {_s(a.outside_incidents_ms)}")
        text = Text.assemble(
            "The verdict judges the controller; availability judges the cluster: ",
            (f"{a.unavailable_ms / 1000:,.1f} partition-seconds unavailable", "bold red" if over else "bold"),
            f" (no leader {_s(a.no_leader_ms)}, leader on an offline dir {_s(a.leader_offline_ms)})",
            f", caused by {', '.join(causes)}" if causes else "",
            f"; over the limit of {report.fail_on_unavailable_ms / 1000:,.1f}" if over else "",
            f". Under min ISR {_s(a.under_min_isr_ms)}; an ISR member on an offline dir {_s(a.isr_offline_ms)}.",
        )
        lines.append(text)
    if h is not None:
        kinds = ", ".join(f"{n:,} {k}" for k, n in h.by_kind.items()) or "none"
        lead, gone = h.leadership, h.leaderless
        text = Text.assemble(
            (f"{h.incidents:,} incident(s)", "bold"),
            f" ({kinds}). Leadership moved to a live leader {lead.moved:,}x (p50 {_s(lead.p50_ms)},"
            f" p99 {_s(lead.p99_ms)}, max {_s(lead.max_ms)})",
        )
        if gone.partitions:
            text.append(
                f"; left with no leader {gone.partitions:,}x, waiting p50 {_s(gone.p50_ms)}, p99 {_s(gone.p99_ms)},"
                f" max {_s(gone.max_ms)}" + (f" ({gone.still:,} still at the end)" if gone.still else "")
            )
        if lead.open:
            text.append(f"; {lead.open:,} not moved by the end", "yellow")
        text.append(
            f". ISR let go {h.isr.moved:,}x (p50 {_s(h.isr.p50_ms)}, p99 {_s(h.isr.p99_ms)}, max {_s(h.isr.max_ms)})."
        )
        lines.append(text)
    if report.engine:
        lines.append(Text(f"engine: {report.engine}", "dim"))
    for line in lines:
        out.print(line, soft_wrap=False)


def _where(report, inc) -> str:
    path = inc.path or (report.dir_paths.get(inc.directory) if inc.directory else None)
    return f"{inc.kind} {incident_where(inc.kind, inc.broker, inc.directory, path)}"


def _cost(inc) -> tuple[str, str]:
    leaders = sum(x.role == "leader" for x in inc.effects)
    isr = sum(x.role == "isr" for x in inc.effects)
    unmoved = sum(x.ended_by is None for x in inc.effects)
    hit = f"led {leaders}, ISR {isr}" + (f", {inc.leaderless} left leaderless" if inc.leaderless else "")
    if unmoved:
        hit += f", {unmoved} not moved by the end"
    return hit, f"{inc.unavailable_ms / 1000:,.1f} s unavailable" + (
        f" ({inc.unavailable_after_ms / 1000:,.1f} after it ended)" if inc.unavailable_after_ms else ""
    )


def _style(inc) -> str:
    return "red" if inc.invariants else "yellow"


def _incident_table(report, incidents, out: Console) -> None:
    table = Table(header_style="bold", expand=False)
    table.add_column("incident", overflow="fold", ratio=3)
    table.add_column("failed (UTC)", no_wrap=True)
    table.add_column("offset", justify="right", no_wrap=True)
    table.add_column("reported", justify="right", no_wrap=True)
    table.add_column("removed", justify="right", no_wrap=True)
    table.add_column("ended", justify="right", no_wrap=True)
    table.add_column("partitions hit", overflow="fold", ratio=2)
    table.add_column("unavailable (caused)", overflow="fold", ratio=2)
    table.add_column("violations", overflow="fold", ratio=1)
    for inc in incidents:
        t0 = inc.failed_at_ms
        hit, cost = _cost(inc)
        table.add_row(
            Text(_where(report, inc), _style(inc)),
            format_ms(t0),
            f"{inc.failed_at:,}",
            _plus(inc.reported_at_ms, t0) or "-",
            _plus(inc.removed_at_ms, t0) or "-",
            (_plus(inc.ended_at_ms, t0) or "-") if inc.ended_at is not None else Text("open", "yellow"),
            hit,
            cost,
            Text(" ".join(f"{k}x{n}" for k, n in inc.invariants.items()), "red"),
        )
    out.print(table)


def _incident_blocks(report, incidents, out: Console) -> None:
    for inc in incidents:
        t0 = inc.failed_at_ms
        hit, cost = _cost(inc)
        then = [
            f"{name} {_plus(ms, t0)}"
            for name, at, ms in (
                ("reported", inc.reported_at, inc.reported_at_ms),
                ("removed" if inc.kind == "dir-failure" else "fenced", inc.removed_at, inc.removed_at_ms),
                ("ended", inc.ended_at, inc.ended_at_ms),
            )
            if at is not None and ms is not None
        ]
        if inc.ended_at is None:
            then.append("open at the end of the log")
        title = Text(_where(report, inc), f"bold {_style(inc)}")
        if inc.invariants:
            title.append("  " + " ".join(f"{k}x{n}" for k, n in inc.invariants.items()), "red")
        details = Text(
            f"failed {format_ms(t0)} (offset {inc.failed_at:,})\n{', '.join(then)}\n{hit}; {cost}",
        )
        out.print(Group(title, Padding(details, (0, 0, 0, 2))), soft_wrap=False)


def _invariants(broken, out: Console, wide: bool) -> None:
    table = Table(title="invariants violated", header_style="bold", expand=False, title_justify="left")
    table.add_column("inv", no_wrap=True)
    table.add_column("checked", justify="right", overflow="fold")
    table.add_column("violations", justify="right", no_wrap=True)
    if wide:
        table.add_column("severity", no_wrap=True)
    table.add_column("definition", overflow="fold", ratio=1)
    for i in broken:
        definition = i.definition + (f" (a violation: {FINDS[i.id]})" if i.id in FINDS else "")
        cells = [i.id, f"{i.checked:,} {CHECKED.get(i.id, 'checks')}", Text(f"{i.violations:,}", "red")]
        if wide:
            cells.append(i.severity)
        table.add_row(*cells, definition)
    out.print(table)


def _name(v, report) -> str:
    from kraftlake.replay.names import entity_name

    return getattr(v, "name", "") or entity_name(v.entity, report.topics, report.dir_paths)


def _violation_table(report, vs, out: Console) -> None:
    table = Table(header_style="bold", expand=False)
    table.add_column("inv", no_wrap=True, style="red")
    table.add_column("entity", overflow="fold", ratio=2)
    table.add_column("from (UTC)", no_wrap=True)
    table.add_column("offset", justify="right", no_wrap=True)
    table.add_column("to (UTC)", no_wrap=True)
    table.add_column("offset", justify="right", no_wrap=True)
    table.add_column("message", overflow="fold", ratio=4)
    table.add_column("incident", overflow="fold", ratio=2)
    for v in vs:
        table.add_row(
            v.invariant,
            _name(v, report),
            format_ms(getattr(v, "first_ms", None)),
            f"{v.first_offset:,}",
            "still wrong" if v.last_offset is None else format_ms(getattr(v, "last_ms", None)),
            "" if v.last_offset is None else f"{v.last_offset:,}",
            v.message,
            getattr(v, "incident", None) or "",
        )
    out.print(table)


def _violation_blocks(report, vs, out: Console) -> None:
    for v in vs:
        title = Text.assemble((v.invariant, "bold red"), " ", (_name(v, report), "bold"))
        until = (
            "still wrong at the end"
            if v.last_offset is None
            else f"to {format_ms(getattr(v, 'last_ms', None))} (offset {v.last_offset:,})"
        )
        details = Text(
            f"from {format_ms(getattr(v, 'first_ms', None))} (offset {v.first_offset:,})\n{until}\n{v.message}"
            + (f"\nduring {v.incident}" if getattr(v, "incident", None) else "")
        )
        out.print(Group(title, Padding(details, (0, 0, 0, 2))), soft_wrap=False)
