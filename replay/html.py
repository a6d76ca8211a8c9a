"""The audit report as one self-contained HTML page, organised the way an SRE asks: the verdict,
then the incidents (a card each: what failed, when it failed, was reported and removed, which
partitions it hit, how long they were unavailable, what moved them, which invariants broke), an
overview of incidents over record time, availability per partition, the violations outside any
incident, and the invariants of the families the log has.

No scripts and no external files: it opens anywhere. Long lists are paged with CSS alone (radio
buttons), never cut silently. Times are record times (``ts_ms``) in UTC beside offsets; topics
are named beside their ids; directories carry their paths where the log gives them.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from kraftlake.records.store.time_travel import format_ms
from kraftlake.replay.grace import grace_words

from .books import AuditReport, Violation
from .incidents import Incident, Outage

e = html.escape

COLOURS = {
    "failed": "#cf222e",
    "reported": "#bf8700",
    "removed": "#8250df",
    "ended": "#57606a",
    "outage": "#ff8182",
    "leader": "#0969da",
    "isr": "#1a7f37",
    "open": "#cf222e",
}
KIND_COLOURS = {"dir-failure": "#cf222e", "controlled-shutdown": "#0969da", "broker-fenced": "#bf8700"}

_CSS = """
body{font:14px system-ui,sans-serif;margin:2em;color:#1f2328;max-width:1300px}
h1 .pass{color:#1a7f37}h1 .fail{color:#cf222e}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.num{text-align:right;font-variant-numeric:tabular-nums}.bad{color:#cf222e;font-weight:600}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.6em 1em;margin:1em 0}
.card h3{margin:.2em 0 .4em}.card.trouble{border-left:6px solid #cf222e}.card.clean{border-left:6px solid #1a7f37}
.badge{display:inline-block;border-radius:10px;padding:0 8px;margin-right:4px;background:#ffebe9;color:#cf222e;font-size:12px}
.facts td:first-child{color:#57606a}.muted{color:#57606a}
svg text{font-size:11px;font-family:system-ui,sans-serif}svg .axis text{fill:#57606a}
.pager input{display:none}.pager label{display:inline-block;border:1px solid #d0d7de;padding:1px 7px;margin:2px;cursor:pointer;border-radius:4px}
.pager .pg{display:none}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}
"""


def render(report: AuditReport, *, title: str = "kraftlake audit", page_size: int = 20) -> str:
    """The page for ``report``; ``page_size`` incident cards (and 5x as many table rows) a page."""
    verdict = report.verdict
    topics = report.topics
    body = [
        f"<h1>{e(title)}: <span class={verdict}>{verdict.upper()}</span></h1>",
        _headline(report),
    ]
    incidents = report.incidents
    if incidents is None:
        body.append("<h2>Incidents</h2><p class=muted>This engine's report carries no incidents.</p>")
    else:
        body.append(_incidents(report, incidents, page_size))
        if incidents:
            body.append("<h2>Incidents over time</h2>" + _overview(report, incidents))
    if report.availability is not None:
        body.append(_availability(report, page_size * 5))
    linked = {i for inc in incidents or () for i in inc.violations}
    loose = [v for i, v in enumerate(report.violations) if i not in linked]
    body.append(f"<h2>Violations outside any incident ({len(loose):,})</h2>")
    body.append(_violation_table(loose, topics, "loose", page_size * 5) if loose else "<p>None.</p>")
    body.append("<h2>Invariants</h2>" + _invariants(report))
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{e(title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>"
    )


# -- pieces ----------------------------------------------------------------------------------------


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:,.1f} s"


def _at(offset: int | None, ms: int | None) -> str:
    if offset is None:
        return "<span class=muted>never</span>"
    return f"offset {offset:,} · {e(format_ms(ms))}"


def topic_label(topics: dict[str, str], topic_id: str, partition: int) -> str:
    name = topics.get(topic_id)
    return f"{name}-{partition}" if name else f"{topic_id}-{partition}"


def entity_label(entity: str, topics: dict[str, str]) -> str:
    """``partition/<id>/<p>`` as ``name-p``, keeping the entity for reference."""
    parts = entity.split("/")
    if parts[0] in ("partition", "replica") and len(parts) >= 3 and parts[1] in topics:
        extra = f" broker {parts[3]}" if parts[0] == "replica" and len(parts) > 3 else ""
        return f"{topics[parts[1]]}-{parts[2]}{extra}"
    return entity


def _headline(report: AuditReport) -> str:
    lines = [
        f"{report.records:,} records, offsets {report.first_offset}..{report.last_offset}",
    ]
    a = report.availability
    if a is not None and a.from_ms is not None:
        lines[0] += f", record time {e(format_ms(a.from_ms))} to {e(format_ms(a.to_ms))} (UTC)"
    lines.append(
        f"grace {grace_words(report.grace_ms, report.grace_records)}; fail on {e(report.fail_on)}"
        + (
            f" or more than {report.fail_on_unavailable_ms / 1000:,.1f} partition-seconds unavailable"
            if report.fail_on_unavailable_ms is not None
            else ""
        )
        + f"; state hash <code>{e(report.state_hash[:16])}…</code>"
    )
    h = report.handling
    if h is not None:
        kinds = ", ".join(f"{n:,} {e(k)}" for k, n in h.by_kind.items()) or "none"
        lines.append(
            f"<b>{h.incidents:,} incident(s)</b> ({kinds}); leadership moved {h.leadership.moved:,} times"
            f" (p50 {_seconds(h.leadership.p50_ms)}, p99 {_seconds(h.leadership.p99_ms)}, max {_seconds(h.leadership.max_ms)};"
            f" {h.leadership.open} never moved), ISR {h.isr.moved:,}"
            f" (p50 {_seconds(h.isr.p50_ms)}, p99 {_seconds(h.isr.p99_ms)}, max {_seconds(h.isr.max_ms)}; {h.isr.open} never moved)"
        )
    if a is not None:
        lines.append(
            f"<b>{a.unavailable_ms / 1000:,.1f} partition-seconds unavailable</b> (no leader {_seconds(a.no_leader_ms)},"
            f" leader on an offline directory {_seconds(a.leader_offline_ms)}); under min.insync.replicas"
            f" {_seconds(a.under_min_isr_ms)}; an ISR member on an offline directory {_seconds(a.isr_offline_ms)}"
        )
    lines.append(f"{report.violation_count:,} violation(s)")
    return "<p id=headline>" + "<br>".join(lines) + "</p>"


def _pager(name: str, items: Sequence, per_page: int, render_item: Callable[[int, Any], str], wrap=None) -> str:
    """Items in pages of ``per_page`` switched by CSS radio buttons; every item is in the page."""
    pages = [items[i : i + per_page] for i in range(0, len(items), per_page)] or [[]]
    wrap = wrap or (lambda inner: inner)
    if len(pages) == 1:
        return wrap("".join(render_item(i, x) for i, x in enumerate(pages[0])))
    radios, labels, divs, rules = [], [], [], []
    for n, page in enumerate(pages, 1):
        pid = f"{name}-p{n}"
        radios.append(f"<input type=radio name={name} id={pid}{' checked' if n == 1 else ''}>")
        first = (n - 1) * per_page
        labels.append(f"<label for={pid} title='{first + 1}-{first + len(page)}'>{n}</label>")
        divs.append(
            f"<div class='pg {pid}'>" + wrap("".join(render_item(first + i, x) for i, x in enumerate(page))) + "</div>"
        )
        rules.append(f"#{pid}:checked~.pages>.{pid}{{display:block}}")
    return (
        f"<style>{''.join(rules)}</style><div class=pager>{''.join(radios)}"
        f"<div class=muted>{len(items):,} in {len(pages)} pages of {per_page}: {''.join(labels)}</div>"
        f"<div class=pages>{''.join(divs)}</div></div>"
    )


def _trouble(inc: Incident) -> bool:
    return bool(inc.violations) or inc.unavailable_ms > 0 or any(x.ended_by is None for x in inc.effects)


def _incidents(report: AuditReport, incidents: list[Incident], page_size: int) -> str:
    if not incidents:
        return "<h2>Incidents</h2><p>No directory failed and no broker went away in these records.</p>"
    # Worst first: violations, unavailability, effects never ended; then the rest by time.
    order = sorted(
        incidents,
        key=lambda i: (not _trouble(i), -len(i.violations), -i.unavailable_ms, i.failed_at),
    )
    troubled = sum(_trouble(i) for i in incidents)
    outages: dict[tuple[str, int], list[Outage]] = {}
    if report.availability is not None:
        for o in report.availability.outages:
            outages.setdefault((o.topic_id, o.partition), []).append(o)
    head = (
        f"<h2>Incidents ({len(incidents):,})</h2><p class=muted>{troubled:,} with violations, unavailability or"
        f" effects never ended, first; then the rest by time.</p>{_legend()}"
    )
    return head + _pager("inc", order, page_size, lambda _i, inc: _card(report, inc, outages))


def _legend() -> str:
    items = [
        ("failed", "failed (first record saying so)"),
        ("reported", "reported to the controller"),
        ("removed", "removed from the registration / fenced"),
        ("ended", "incident ended"),
        ("outage", "partition unavailable (no leader or leader offline)"),
        ("leader", "leadership moved"),
        ("isr", "left the ISR"),
    ]
    return (
        "<p class=legend>"
        + "".join(f"<span><i style=background:{COLOURS[k]}></i>{e(t)}</span>" for k, t in items)
        + "</p>"
    )


def _card(report: AuditReport, inc: Incident, outages: dict) -> str:
    topics = report.topics
    where = f"broker {inc.broker}"
    if inc.directory is not None:
        path = inc.path or report.dir_paths.get(inc.directory)
        where += f", directory {e(inc.directory)}" + (f" ({e(path)})" if path else "")
    leaders = [x for x in inc.effects if x.role == "leader"]
    isr = [x for x in inc.effects if x.role == "isr"]
    unmoved = [x for x in inc.effects if x.ended_by is None]
    badges = "".join(f"<span class=badge>{e(k)} × {n}</span>" for k, n in inc.invariants.items())
    facts = [
        ("failed at", _at(inc.failed_at, inc.failed_at_ms)),
        ("reported at", _at(inc.reported_at, inc.reported_at_ms)),
        (
            "removed from the registration" if inc.kind == "dir-failure" else "fenced at",
            _at(inc.removed_at, inc.removed_at_ms),
        ),
        ("ended at", _at(inc.ended_at, inc.ended_at_ms) if inc.ended_at is not None else "<b class=bad>still open</b>"),
        (
            "partitions hit",
            f"{len(leaders)} led from it, {len(isr)} with it in the ISR"
            + (f"; <b class=bad>{len(unmoved)} never moved</b>" if unmoved else ""),
        ),
        ("unavailable", f"{inc.unavailable_ms / 1000:,.1f} partition-seconds"),
    ]
    table = "<table class=facts>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in facts) + "</table>"
    effects_rows = "".join(
        f"<tr><td>{e(topic_label(topics, x.topic_id, x.partition))}</td><td>{x.role}</td>"
        f"<td>{e(x.outcome)}{'' if x.new_leader is None else f' (to {x.new_leader})'}</td>"
        f"<td class=num>{'-' if x.ended_by is None else f'{x.ended_by:,}'}</td>"
        f"<td class=num>{_seconds(x.time_to_move_ms)}</td></tr>"
        for x in inc.effects
    )
    effects = (
        f"<details><summary>{len(inc.effects)} effect(s): what moved, and when</summary><table>"
        "<tr><th>partition</th><th>role</th><th>outcome</th><th>ended by offset</th><th>time to move</th></tr>"
        f"{effects_rows}</table></details>"
        if inc.effects
        else ""
    )
    violations = ""
    if inc.violations:
        vs = [report.violations[i] for i in inc.violations]
        violations = (
            f"<details><summary class=bad>{len(vs)} violation(s) during it</summary>"
            + _violation_table(vs, topics, f"v{abs(hash(inc.id)) % 10**8}", 100)
            + "</details>"
        )
    cls = "trouble" if _trouble(inc) else "clean"
    return (
        f"<div class='card {cls}' data-incident='{e(inc.id)}'><h3>{e(inc.kind)}: {where} {badges}</h3>"
        f"{table}{_incident_svg(report, inc, outages)}{effects}{violations}</div>"
    )


def _incident_svg(report: AuditReport, inc: Incident, outages: dict, lanes: int = 12) -> str:
    """One lane per partition hit (worst first, the first ``lanes``; the rest are counted under
    it), x = record time from just before the failure to just after the end: markers for the
    failure, the report, the removal and the end, shaded outages, a dot where leadership moved
    and a square where the ISR let go."""
    t0 = inc.failed_at_ms
    end = inc.ended_at_ms if inc.ended_at is not None else (report.availability.to_ms if report.availability else None)
    if t0 is None or end is None:
        return "<p class=muted>No record times: no timeline.</p>"
    span = max(end - t0, 1000)
    lo, hi = t0 - span * 0.08, t0 + span * 1.08
    keys: list[tuple[str, int]] = []
    for eff in inc.effects:
        if (eff.topic_id, eff.partition) not in keys:
            keys.append((eff.topic_id, eff.partition))

    def down_ms(k) -> int:
        return sum(
            ((o.to_ms or end) - o.from_ms) for o in outages.get(k, ()) if o.from_ms is not None and o.from_ms <= end
        )

    keys.sort(key=lambda k: -down_ms(k))
    shown, hidden = keys[:lanes], len(keys) - lanes
    left, width, lane_h, top = 150, 760, 20, 46
    height = top + max(1, len(shown)) * lane_h + 44

    def x(ms: float) -> float:
        return left + (min(max(ms, lo), hi) - lo) / (hi - lo) * width

    out = [f"<svg class=timeline width={left + width + 20} height={height} role=img aria-label='{e(inc.id)} timeline'>"]
    topics = report.topics
    for i, k in enumerate(shown):
        y = top + i * lane_h
        out.append(
            f"<g class=lane data-partition='{e(topic_label(topics, *k))}'><text x={left - 6} y={y + 11} text-anchor=end>"
            f"{e(topic_label(topics, *k))}</text><line x1={left} x2={left + width} y1={y + 8} y2={y + 8} stroke=#d0d7de />"
        )
        for o in outages.get(k, ()):
            if o.from_ms is None:
                continue
            o_end = end if o.to_ms is None else o.to_ms
            if o_end < lo or o.from_ms > hi:
                continue
            w = max(2.0, x(o_end) - x(o.from_ms))
            out.append(
                f"<rect class=outage x={x(o.from_ms):.1f} y={y + 2} width={w:.1f} height=12 fill={COLOURS['outage']}>"
                f"<title>{e(o.why)}: offsets {o.first_offset}..{'end' if o.last_offset is None else o.last_offset},"
                f" {_seconds(o_end - o.from_ms)}</title></rect>"
            )
        for fx in inc.effects:
            if (fx.topic_id, fx.partition) != k:
                continue
            if fx.ended_by is None:
                out.append(
                    f"<line class=unmoved x1={x(t0):.1f} x2={x(end):.1f} y1={y + 8} y2={y + 8} stroke={COLOURS['open']}"
                    f" stroke-width=3><title>{fx.role} never moved</title></line>"
                )
                continue
            at = t0 + (fx.time_to_move_ms or 0)
            tip = f"<title>{e(fx.outcome)} at offset {fx.ended_by} (+{_seconds(fx.time_to_move_ms)})</title>"
            # The dot in the lane's upper half, the square in its lower: they often share an instant.
            if fx.role == "leader":
                out.append(
                    f"<circle class=moved-leader cx={x(at):.1f} cy={y + 4} r=4 fill={COLOURS['leader']}>{tip}</circle>"
                )
            else:
                out.append(
                    f"<rect class=left-isr x={x(at) - 3:.1f} y={y + 9} width=7 height=7 fill={COLOURS['isr']}>{tip}</rect>"
                )
        out.append("</g>")
    bottom = top + max(1, len(shown)) * lane_h
    # The end first: a removal that ends the incident stays visible on top of it.
    for name, ms in (
        ("ended", inc.ended_at_ms),
        ("failed", inc.failed_at_ms),
        ("reported", inc.reported_at_ms),
        ("removed", inc.removed_at_ms),
    ):
        if ms is None:
            continue
        out.append(
            f"<g class='marker {name}'><line x1={x(ms):.1f} x2={x(ms):.1f} y1={_LABEL_Y[name] - 8} y2={bottom}"
            f" stroke={COLOURS[name]} stroke-width=2 stroke-dasharray=4,2 />"
            f"<text x={x(ms) + 3:.1f} y={_LABEL_Y[name]} fill={COLOURS[name]}>{name}</text></g>"
        )
    ticks = [t0 + span * k / 4 for k in range(5)]
    axis = "".join(
        f"<line x1={x(t):.1f} x2={x(t):.1f} y1={bottom} y2={bottom + 4} stroke=#57606a />"
        f"<text x={x(t):.1f} y={bottom + 15} text-anchor=middle>+{(t - t0) / 1000:,.1f}</text>"
        for t in ticks
    )
    out.append(
        f"<g class=axis><line x1={left} x2={left + width} y1={bottom} y2={bottom} stroke=#57606a />{axis}"
        f"<text class=axis-title x={left + width / 2:.0f} y={bottom + 32} text-anchor=middle>record time: seconds after"
        f" the failure at {e(format_ms(t0))}</text></g></svg>"
    )
    if hidden > 0:
        out.append(f"<p class=muted>{hidden} more partition(s) hit: the effects table lists them all.</p>")
    return "".join(out)


_LABEL_Y = {"failed": 12, "reported": 24, "removed": 36, "ended": 12}
"""Marker labels on their own rows: failure, report and removal often share an instant."""


def _overview(report: AuditReport, incidents: list[Incident]) -> str:
    """One lane per broker, x = record time of the whole audit: a mark per incident, coloured by
    kind, a thick one when partitions were unavailable during it."""
    a = report.availability
    times = [i.failed_at_ms for i in incidents if i.failed_at_ms is not None]
    if not times:
        return "<p class=muted>No record times.</p>"
    lo = a.from_ms if a is not None and a.from_ms is not None else min(times)
    hi = a.to_ms if a is not None and a.to_ms is not None else max(times)
    hi = max(hi, lo + 1000)
    brokers = sorted({i.broker for i in incidents})
    left, width, lane_h, top = 90, 820, 16, 8

    def x(ms: float) -> float:
        return left + (ms - lo) / (hi - lo) * width

    out = [f"<svg class=overview width={left + width + 50} height={top + len(brokers) * lane_h + 44}>"]
    for n, b in enumerate(brokers):
        y = top + n * lane_h
        out.append(f"<g class=lane><text x={left - 6} y={y + 11} text-anchor=end>broker {b}</text>")
        for inc in incidents:
            if inc.broker != b or inc.failed_at_ms is None:
                continue
            until = inc.ended_at_ms if inc.ended_at_ms is not None else hi
            w = max(2.0, x(until) - x(inc.failed_at_ms))
            h = 12 if _trouble(inc) else 6
            out.append(
                f"<rect x={x(inc.failed_at_ms):.1f} y={y + 8 - h / 2:.0f} width={w:.1f} height={h}"
                f" fill={KIND_COLOURS.get(inc.kind, '#57606a')}><title>{e(inc.id)}</title></rect>"
            )
        out.append("</g>")
    bottom = top + len(brokers) * lane_h
    axis = "".join(
        f"<text x={x(lo + (hi - lo) * k / 4):.1f} y={bottom + 14} text-anchor=middle>"
        f"{e(format_ms(int(lo + (hi - lo) * k / 4))[11:19])}</text>"
        for k in range(5)
    )
    out.append(
        f"<g class=axis><line x1={left} x2={left + width} y1={bottom} y2={bottom} stroke=#57606a />{axis}"
        f"<text class=axis-title x={left + width / 2:.0f} y={bottom + 32} text-anchor=middle>record time (UTC),"
        f" {e(format_ms(lo)[:10])}</text></g></svg>"
    )
    legend = "".join(f"<span><i style=background:{c}></i>{e(k)}</span>" for k, c in KIND_COLOURS.items())
    return "".join(out) + f"<p class=legend>{legend}<span>thick: with violations or unavailability</span></p>"


def _availability(report: AuditReport, per_page: int) -> str:
    a = report.availability
    assert a is not None
    if not a.partitions:
        return "<h2>Availability</h2><p>Every partition had a leader on an online directory throughout.</p>"
    topics = report.topics

    def row(_i, p) -> str:
        return (
            f"<tr><td>{e(p.topic or topics.get(p.topic_id, ''))}</td><td class=num>{p.partition}</td>"
            f"<td class=muted>{e(p.topic_id)}</td><td class='num{' bad' if p.unavailable_ms else ''}'>{_seconds(p.unavailable_ms)}</td>"
            f"<td class=num>{_seconds(p.no_leader_ms)}</td><td class=num>{_seconds(p.leader_offline_ms)}</td>"
            f"<td class=num>{_seconds(p.under_min_isr_ms)}</td><td class=num>{_seconds(p.isr_offline_ms)}</td></tr>"
        )

    def wrap(rows: str) -> str:
        return (
            "<table><tr><th>topic</th><th>partition</th><th>topic id</th><th>unavailable</th><th>no leader</th>"
            "<th>leader offline</th><th>under min ISR</th><th>ISR member offline</th></tr>" + rows + "</table>"
        )

    return f"<h2>Availability ({len(a.partitions):,} partitions with time in a bad state)</h2>" + _pager(
        "avail", a.partitions, per_page, row, wrap
    )


def _violation_table(vs: Sequence[Violation], topics: dict[str, str], name: str, per_page: int) -> str:
    def row(_i, v: Violation) -> str:
        return (
            f"<tr><td>{e(v.invariant)}</td><td>{e(v.severity)}</td><td>{e(entity_label(v.entity, topics))}</td>"
            f"<td class=num>{v.first_offset:,}</td><td class=num>{'open' if v.last_offset is None else f'{v.last_offset:,}'}</td>"
            f"<td>{e(v.message)}</td><td>{e(', '.join(map(str, v.evidence)))}</td></tr>"
        )

    def wrap(rows: str) -> str:
        return (
            "<table><tr><th>inv</th><th>severity</th><th>entity</th><th>from</th><th>to</th><th>message</th>"
            "<th>evidence (offsets)</th></tr>" + rows + "</table>"
        )

    return _pager(name, list(vs), per_page, row, wrap)


def _invariants(report: AuditReport) -> str:
    """Only the families the log has (checked or violated), the log's own (L) always."""
    active = {i.id[0] for i in report.invariants if i.checked or i.violations} | {"L"}
    rows = "".join(
        f"<tr><td>{e(i.id)}</td><td>{e(i.severity)}</td><td class=num>{i.checked:,}</td>"
        f"<td class='num{' bad' if i.violations else ''}'>{i.violations:,}</td><td>{e(i.definition)}</td></tr>"
        for i in report.invariants
        if i.id[0] in active
    )
    return (
        "<table><tr><th>id</th><th>severity</th><th>checked</th><th>violations</th><th>definition</th></tr>"
        f"{rows}</table>"
    )
