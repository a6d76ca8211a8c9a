"""The audit report as one self-contained HTML page, organised the way an SRE asks: the verdict
and what it judges, then the incidents (a filter by broker, directory, topic and time; an
overview of record time whose every mark links to its incident; a card each for the worst:
what failed, when it failed, was reported and removed, which partitions it hit, what it cost
them, what moved them, which invariants broke; an index of the rest), availability per
partition, the violations outside any incident, and the invariants of the families the log has.

It reads the summary (``replay.summary.bounded``, with an ``index`` of incidents): the page stays
under 10 MB whatever the log, and says where the rest are (the tables). No external files: it
opens anywhere; a few lines of script filter it (everything is in the page, visible, so a
browser's find works). Times are record times (``ts_ms``) in UTC, ISO 8601, beside offsets;
partitions are ``orders/11``; directories carry their paths where the log gives them. Red is
for what is wrong (violations); what is normal during a failure is drawn calm.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from kraftlake.records.times import format_ms
from kraftlake.replay.grace import grace_words
from kraftlake.statemachine.invariants import CHECKED, FINDS

from .attribution import OVERLAPS_KEPT
from .books import AuditReport
from .incidents import Incident, IncidentBrief
from .names import entity_name, incident_where, partition_name

e = html.escape

INDEX = 5000
"""Incidents the page's index lists (the worst), beyond the cards of the summary's worst."""
OVERLAPS_SHOWN = 6
"""Overlapping incidents a card links to (the tables' ``overlaps`` list more)."""

WRONG = "#cf222e"
"""Red: only for what is wrong (a violation, a failed verdict)."""
COLOURS = {
    "failed": "#bc4c00",
    "reported": "#bf8700",
    "removed": "#8250df",
    "ended": "#57606a",
    "outage": "#fb8f44",
    "after": "#fdd3b0",
    "other": "#c7ccd1",
    "leader": "#0969da",
    "leaderless": "#6e7781",
    "isr": "#1a7f37",
    "unmoved": "#8c959f",
    "wrong": WRONG,
}
KIND_COLOURS = {"dir-failure": "#bc4c00", "controlled-shutdown": "#0969da", "broker-fenced": "#8250df"}

_CSS = """
body{font:14px system-ui,sans-serif;margin:2em;color:#1f2328;max-width:1300px}
h1 .pass{color:#1a7f37}h1 .fail{color:#cf222e}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.num{text-align:right;font-variant-numeric:tabular-nums}.bad{color:#cf222e;font-weight:600}
.note{color:#9a6700}.muted{color:#57606a}.time{white-space:nowrap;font-variant-numeric:tabular-nums}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.6em 1em;margin:1em 0}
.card h3{margin:.2em 0 .4em}.card.wrong{border-left:6px solid #cf222e}.card.notable{border-left:6px solid #d4a72c}
.card.calm{border-left:6px solid #8c959f}.card:target{box-shadow:0 0 0 3px #0969da55}
.badge{display:inline-block;border-radius:10px;padding:0 8px;margin-right:4px;background:#ffebe9;color:#cf222e;font-size:12px}
.facts td:first-child{color:#57606a}
svg text{font-size:11px;font-family:system-ui,sans-serif}svg .axis text{fill:#57606a}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}
#filter{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #d0d7de;z-index:1}
#filter label{margin-right:.8em}#filter input{font:inherit}
tr:target{background:#ddf4ff}
"""

_SCRIPT = """
(function(){
const f=document.getElementById('filter');if(!f)return;
const keys=['broker','dir','topic','from','to'];
const items=[...document.querySelectorAll('.inc')];
function ms(v){v=v.trim();if(!v)return null;if(!/([zZ]|[+-]\\d\\d:?\\d\\d)$/.test(v))v+='Z';const t=Date.parse(v);return isNaN(t)?null:t;}
function run(){
 const b=f.broker.value.trim(),d=f.dir.value.trim().toLowerCase(),t=f.topic.value.trim().toLowerCase();
 const lo=ms(f.from.value),hi=ms(f.to.value);let cards=0,rows=0;
 for(const el of items){const s=el.dataset;
  let ok=(!b||s.broker===b)&&(!d||s.dir.toLowerCase().includes(d)||s.path.toLowerCase().includes(d))
   &&(!t||s.topics.toLowerCase().split(' ').some(x=>x.includes(t)));
  if(ok&&(lo!==null||hi!==null)){const a=s.from===''?-Infinity:+s.from,z=s.to===''?Infinity:+s.to;ok=(lo===null||z>=lo)&&(hi===null||a<=hi);}
  el.hidden=!ok;if(ok){if(el.tagName==='TR')rows++;else cards++;}}
 document.getElementById('shown').textContent=cards+' card(s) and '+rows+' row(s) of the index match';
 const q=new URLSearchParams();for(const k of keys)if(f[k].value)q.set(k,f[k].value);
 if(q.toString())history.replaceState(null,'','#f:'+q);
}
if(location.hash.startsWith('#f:')){const q=new URLSearchParams(location.hash.slice(3));for(const k of keys)if(q.has(k))f[k].value=q.get(k);}
f.addEventListener('input',run);f.addEventListener('reset',()=>setTimeout(run,0));run();
})();
"""


def render(report: AuditReport, *, title: str = "kraftlake audit") -> str:
    """The page for ``report`` (a summary: one not bounded yet is, with an index of ``INDEX``)."""
    from .summary import bounded

    report = bounded(report, index=INDEX)
    verdict = report.verdict
    body = [
        f"<h1>{e(title)}: <span class={verdict}>{verdict.upper()}</span></h1>",
        _headline(report),
    ]
    incidents = report.incidents
    if incidents is None:
        body.append("<h2>Incidents</h2><p class=muted>This engine's report carries no incidents.</p>")
    elif not incidents:
        body.append("<h2>Incidents</h2><p>No directory failed and no broker went away in these records.</p>")
    else:
        body.append(_filter(report))
        body.append("<h2>Incidents over time</h2>" + _overview(report))
        body.append(_incidents(report, incidents))
        body.append(_index(report))
    if report.availability is not None:
        body.append(_availability(report))
    linked = {i for inc in incidents or () for i in inc.violations}
    loose = [v for i, v in enumerate(report.violations) if i not in linked]
    body.append(f"<h2>Violations outside any incident ({len(loose):,} shown)</h2>")
    body.append(_violation_table(report, loose) if loose else "<p>None.</p>")
    body.append("<h2>Invariants</h2>" + _invariants(report))
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{e(title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}<script>{_SCRIPT}</script></body></html>"
    )


# -- words ----------------------------------------------------------------------------------------


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:,.1f} s"


def _time(ms: int | None) -> str:
    return f"<span class=time>{e(format_ms(ms))}</span>"


def _plus(ms: int | None, t0: int | None) -> str:
    """``+1.2 s`` after ``t0`` (empty when either is unknown)."""
    if ms is None or t0 is None:
        return ""
    return f" <span class=muted>(+{(ms - t0) / 1000:,.1f} s)</span>"


def _at(offset: int | None, ms: int | None, t0: int | None = None) -> str:
    if offset is None:
        return "<span class=muted>never</span>"
    return f"{_time(ms)} · offset {offset:,}" + _plus(ms, t0)


def anchor(incident_id: str) -> str:
    """The element id of an incident's card (``inc-…``) or index row (``row-…``) without the prefix."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", incident_id)


def _where(report: AuditReport, inc: Incident | IncidentBrief) -> str:
    path = inc.path or (report.dir_paths.get(inc.directory) if inc.directory else None)
    return incident_where(inc.kind, inc.broker, inc.directory, path)


def _headline(report: AuditReport) -> str:
    lines = [f"{report.records:,} records, offsets {report.first_offset}..{report.last_offset}"]
    a = report.availability
    if a is not None and a.from_ms is not None:
        lines[0] += f", record time {_time(a.from_ms)} to {_time(a.to_ms)} (UTC)"
    n = report.violation_count
    verdict = (
        f"<b>The verdict judges the controller</b>: {n:,} violation(s) of its invariants"
        f" (it fails on {e(report.fail_on)} or worse"
    )
    if report.fail_on_unavailable_ms is not None:
        verdict += f", or on more than {report.fail_on_unavailable_ms / 1000:,.1f} partition-seconds unavailable"
    verdict += ")."
    if a is not None:
        parts = [f"{e(k)} {_seconds(ms)}" for k, ms in a.by_kind.items() if ms]
        if a.outside_incidents_ms:
            parts.append(f"outside any incident {_seconds(a.outside_incidents_ms)}")
        verdict += (
            f" <b>Availability judges the cluster</b>: {a.unavailable_ms / 1000:,.1f} partition-seconds without a"
            f" usable leader (no leader {_seconds(a.no_leader_ms)}, leader on an offline directory"
            f" {_seconds(a.leader_offline_ms)})" + (f", caused by {', '.join(parts)}" if parts else "") + "."
        )
        if report.fail_on_unavailable_ms is None and a.unavailable_ms:
            verdict += (
                " A failure costs availability however well the controller handles it; it is not a violation"
                " unless an invariant says so (<code>--fail-on-unavailable-seconds</code> makes it one)."
            )
        verdict += (
            f" Under min.insync.replicas {_seconds(a.under_min_isr_ms)}; an ISR member on an offline directory"
            f" {_seconds(a.isr_offline_ms)}."
        )
    lines.append(verdict)
    h = report.handling
    if h is not None:
        kinds = ", ".join(f"{n:,} {e(k)}" for k, n in h.by_kind.items()) or "none"
        lead, gone = h.leadership, h.leaderless
        text = (
            f"<b>{h.incidents:,} incident(s)</b> ({kinds}). Leadership moved to a live leader {lead.moved:,} times"
            f" (p50 {_seconds(lead.p50_ms)}, p99 {_seconds(lead.p99_ms)}, max {_seconds(lead.max_ms)})"
        )
        if gone.partitions:
            text += (
                f"; left with no leader {gone.partitions:,} times, which waited for one p50 {_seconds(gone.p50_ms)},"
                f" p99 {_seconds(gone.p99_ms)}, max {_seconds(gone.max_ms)}"
                + (f" ({gone.still:,} still without one at the end)" if gone.still else "")
            )
        if lead.open:
            text += f"; {lead.open:,} not moved by the end of the log"
        text += (
            f". ISR let go {h.isr.moved:,} times (p50 {_seconds(h.isr.p50_ms)}, p99 {_seconds(h.isr.p99_ms)},"
            f" max {_seconds(h.isr.max_ms)}" + (f"; {h.isr.open:,} not by the end" if h.isr.open else "") + ")."
        )
        lines.append(text)
    lines.append(
        f"grace {grace_words(report.grace_ms, report.grace_records)}; state hash <code>{e(report.state_hash[:16])}…</code>"
    )
    return "<p id=headline>" + "<br>".join(lines) + "</p>"


def _filter(report: AuditReport) -> str:
    return (
        "<form id=filter onsubmit='return false'><b>Find incidents</b>: "
        "<label>broker <input name=broker size=5></label>"
        "<label>directory (id or path) <input name=dir size=22></label>"
        "<label>topic <input name=topic size=14></label>"
        "<label>from <input name=from size=22 placeholder='2023-11-14T22:15:00Z'></label>"
        "<label>to <input name=to size=22 placeholder='UTC, ISO 8601'></label>"
        "<button type=reset>clear</button> <span id=shown class=muted></span></form>"
    )


def _data(report: AuditReport, inc: Incident | IncidentBrief, topics: Sequence[str]) -> str:
    """The attributes the filter reads."""
    path = inc.path or (report.dir_paths.get(inc.directory) if inc.directory else None)
    return (
        f" data-broker='{inc.broker}' data-dir='{e(inc.directory or '')}' data-path='{e(path or '')}'"
        f" data-topics='{e(' '.join(topics))}' data-from='{'' if inc.failed_at_ms is None else inc.failed_at_ms}'"
        f" data-to='{'' if inc.ended_at_ms is None or inc.ended_at is None else inc.ended_at_ms}'"
    )


def _caused(inc: Incident | IncidentBrief) -> int:
    """Violations it caused (all of them: a summary's incident lists only the first)."""
    return sum(inc.invariants.values())


def _wrong(inc: Incident | IncidentBrief) -> bool:
    return _caused(inc) > 0


def _notable(inc: Incident) -> bool:
    return inc.unavailable_ms > 0 or inc.ended_at is None or inc.leaderless > 0


def _order(incidents: Sequence) -> list:
    """Worst first: violations, unavailability caused, still open at the end; then by time."""
    return sorted(incidents, key=lambda i: (-_caused(i), -i.unavailable_ms, i.ended_at is not None, i.failed_at, i.id))


def _incidents(report: AuditReport, incidents: list[Incident]) -> str:
    total = _total(report)
    wrong = sum(_wrong(i) for i in incidents)
    head = (
        f"<h2>Incidents: the {len(incidents):,} worst of {total:,}</h2><p class=muted>Most violations first, then most"
        f" unavailability caused, then the earliest; {wrong:,} with violations (red). The index below lists more;"
        f" {_where_rest(report)}.</p>{_legend()}"
    )
    briefs = {b.id: b for b in report.incident_index or ()}
    return head + "".join(_card(report, inc, brief=briefs.get(inc.id)) for inc in _order(incidents))


def _total(report: AuditReport) -> int:
    """Every incident of the audit, also those the summary leaves out."""
    return len(report.incidents or ()) + (report.omitted.incidents if report.omitted is not None else 0)


def _where_rest(report: AuditReport) -> str:
    tables = report.omitted.tables if report.omitted is not None else None
    if tables:
        return f"every incident is in <code>{e(tables)}/incidents.parquet</code> (effects, outages and violations beside it)"
    return "<code>kraftlake audit --tables DIR</code> writes every incident, effect, outage and violation"


def _legend() -> str:
    items = [
        ("failed", "failed (first record saying so)"),
        ("reported", "reported to the controller"),
        ("removed", "removed from the registration / fenced"),
        ("ended", "incident ended"),
        ("outage", "unavailable: caused by this incident"),
        ("after", "…still, after it ended"),
        ("other", "unavailable: another incident's or none"),
        ("leader", "leadership moved to a live leader"),
        ("leaderless", "left with no leader"),
        ("isr", "left the ISR"),
    ]
    return (
        "<p class=legend>"
        + "".join(f"<span><i style=background:{COLOURS[k]}></i>{e(t)}</span>" for k, t in items)
        + "</p>"
    )


def _link(report: AuditReport, incident_id: str) -> str:
    """A link to an incident's card, else its index row, else its id alone."""
    shown = {i.id for i in report.incidents or ()}
    if incident_id in shown:
        return f"<a href='#inc-{anchor(incident_id)}'>{e(incident_id)}</a>"
    if any(b.id == incident_id for b in report.incident_index or ()):
        return f"<a href='#row-{anchor(incident_id)}'>{e(incident_id)}</a>"
    return e(incident_id)


def _card(report: AuditReport, inc: Incident, outages=None, *, brief: IncidentBrief | None = None) -> str:
    """One incident's card (``outages``: the report's, when not a summary's own)."""
    t0 = inc.failed_at_ms
    leaders = [x for x in inc.effects if x.role == "leader"]
    isr = [x for x in inc.effects if x.role == "isr"]
    unmoved = [x for x in inc.effects if x.ended_by is None]
    wrong = _wrong(inc)
    badges = "".join(f"<span class=badge>{e(k)} × {n}</span>" for k, n in inc.invariants.items())
    end_text = (
        _at(inc.ended_at, inc.ended_at_ms, t0)
        if inc.ended_at is not None
        else (
            "<b class=bad>still open at the end of the log</b>"
            if wrong
            else "<span class=note>open at the end of the log</span>"
            + _plus(report.availability.to_ms if report.availability else None, t0)
        )
    )
    moved = sum(1 for x in leaders if x.ended_by is not None and x.new_leader not in (-1, None))
    hit = f"{len(leaders)} led from it ({moved} moved to a live leader"
    if inc.leaderless:
        hit += f", {inc.leaderless} left with no leader"
    led_open = sum(1 for x in leaders if x.ended_by is None)
    if led_open:
        hit += f", <span class={'bad' if wrong else 'note'}>{led_open} not moved by the end of the log</span>"
    hit += f"), {len(isr)} with it in the ISR"
    if len(unmoved) - led_open:
        hit += f" ({len(unmoved) - led_open} still in it at the end)"
    if brief is not None and len(inc.effects) < brief.effects:
        hit += f"; {brief.effects - len(inc.effects):,} more effects in the tables"
    cost = f"{inc.unavailable_ms / 1000:,.1f} partition-seconds caused by it"
    if inc.unavailable_after_ms:
        cost += f", {inc.unavailable_after_ms / 1000:,.1f} of them after it ended"
    facts = [
        ("failed", _at(inc.failed_at, inc.failed_at_ms)),
        ("reported", _at(inc.reported_at, inc.reported_at_ms, t0)),
        (
            "removed from the registration" if inc.kind == "dir-failure" else "fenced",
            _at(inc.removed_at, inc.removed_at_ms, t0),
        ),
        ("ended", end_text),
        ("partitions hit", hit),
        ("unavailable", cost),
    ]
    if inc.overlaps:
        facts.append(
            (
                "overlapped",
                f"{len(inc.overlaps)}{'+' if len(inc.overlaps) >= OVERLAPS_KEPT else ''} other incident(s) hit its"
                " partitions while it was open: "
                + ", ".join(_link(report, x) for x in inc.overlaps[:OVERLAPS_SHOWN])
                + (" …" if len(inc.overlaps) > OVERLAPS_SHOWN else ""),
            )
        )
    table = "<table class=facts>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in facts) + "</table>"
    topics = report.topics

    def outcome(x) -> str:
        if x.ended_by is None:
            return "<span class=muted>not ended by the end of the log</span>"
        if x.role == "leader" and x.new_leader == -1:
            return "left with no leader"
        return e(x.outcome) + ("" if x.new_leader is None or x.new_leader < 0 else f" (to broker {x.new_leader})")

    effects_rows = "".join(
        f"<tr><td>{e(partition_name(topics, x.topic_id, x.partition, x.topic))}</td><td>{x.role}</td>"
        f"<td>{outcome(x)}</td><td class=num>{'-' if x.ended_by is None else f'{x.ended_by:,}'}</td>"
        f"<td>{'' if x.ended_by is None or t0 is None or x.time_to_move_ms is None else _time(t0 + x.time_to_move_ms)}</td>"
        f"<td class=num>{'' if x.time_to_move_ms is None else f'+{x.time_to_move_ms / 1000:,.1f} s'}</td></tr>"
        for x in inc.effects
    )
    effects = (
        f"<details><summary>{len(inc.effects)} effect(s): what moved, and when</summary><table>"
        "<tr><th>partition</th><th>role</th><th>outcome</th><th>ended by offset</th><th>at (UTC)</th>"
        f"<th>after the failure</th></tr>{effects_rows}</table></details>"
        if inc.effects
        else ""
    )
    violations = ""
    if inc.violations:
        vs = [report.violations[i] for i in inc.violations if i < len(report.violations)]
        violations = (
            f"<details open><summary class=bad>{_caused(inc):,} violation(s) it caused"
            + (f" (the first {len(vs)}; the tables hold them all)" if len(vs) < _caused(inc) else "")
            + "</summary>"
            + _violation_table(report, vs, t0=t0, with_incident=False)
            + "</details>"
        )
    cls = "wrong" if wrong else "notable" if _notable(inc) else "calm"
    names = (
        brief.topics
        if brief is not None
        else sorted({x.topic or topics.get(x.topic_id, x.topic_id) for x in inc.effects})
    )
    return (
        f"<div class='card {cls} inc' id='inc-{anchor(inc.id)}'{_data(report, inc, names)}>"
        f"<h3>{e(inc.kind)}: {e(_where(report, inc))} {badges}</h3>"
        f"<div class=muted>{e(inc.id)}</div>{table}{_incident_svg(report, inc, outages)}{effects}{violations}</div>"
    )


def _incident_svg(report: AuditReport, inc: Incident, outages=None, lanes: int = 12) -> str:
    """One lane per partition hit (most unavailability caused first, the first ``lanes``; the
    rest are counted under it), x = record time from just before the failure to just after its
    end (or after the last outage it caused): markers for the failure, the report, the removal and
    the end; its own outages shaded (lighter past its end), other incidents' in grey; a dot where
    leadership moved (hollow: left with no leader) and a square where the ISR let go."""
    t0 = inc.failed_at_ms
    a = report.availability
    log_end = a.to_ms if a is not None else None
    end = inc.ended_at_ms if inc.ended_at is not None else log_end
    if t0 is None or end is None:
        return "<p class=muted>No record times: no timeline.</p>"
    rows = list(outages if outages is not None else (a.outages if a is not None else ()))
    by_key: dict[tuple[str, int], list] = {}
    for o in rows:
        by_key.setdefault((o.topic_id, o.partition), []).append(o)
    keys: list[tuple[str, int]] = []
    for eff in inc.effects:
        if (eff.topic_id, eff.partition) not in keys:
            keys.append((eff.topic_id, eff.partition))

    def own(o) -> bool:
        return getattr(o, "incident", None) == inc.id

    open_to = log_end if log_end is not None else end  # an outage still open lasts to the log's end

    def until(o) -> int:
        return open_to if o.to_ms is None else o.to_ms

    caused_end = max(
        (until(o) for k in keys for o in by_key.get(k, ()) if own(o) and o.from_ms is not None), default=end
    )
    stop = max(end, caused_end)
    span = max(stop - t0, 1000)
    lo, hi = t0 - span * 0.08, t0 + span * 1.08

    def down_ms(k) -> int:
        return sum(until(o) - o.from_ms for o in by_key.get(k, ()) if own(o) and o.from_ms is not None)

    keys.sort(key=lambda k: -down_ms(k))
    shown, hidden = keys[:lanes], len(keys) - lanes
    left, width, lane_h, top = 170, 760, 20, 58
    height = top + max(1, len(shown)) * lane_h + 44

    def x(ms: float) -> float:
        return left + (min(max(ms, lo), hi) - lo) / (hi - lo) * width

    out = [
        f"<svg class=timeline width={left + width + 20} height={height} role=img aria-label='{e(inc.id)} timeline'>"
        "<defs><pattern id=hatch width=6 height=6 patternUnits=userSpaceOnUse patternTransform='rotate(45)'>"
        f"<rect width=3 height=6 fill={COLOURS['other']} /></pattern></defs>"
    ]
    topics = report.topics
    done = inc.ended_at_ms if inc.ended_at is not None else None
    for i, k in enumerate(shown):
        y = top + i * lane_h
        name = partition_name(topics, *k)
        out.append(
            f"<g class=lane data-partition='{e(name)}'><text x={left - 6} y={y + 11} text-anchor=end>{e(name)}</text>"
            f"<line x1={left} x2={left + width} y1={y + 8} y2={y + 8} stroke=#d0d7de />"
        )
        for o in by_key.get(k, ()):
            if o.from_ms is None:
                continue
            o_end = until(o)
            if o_end < lo or o.from_ms > hi:
                continue
            cause = getattr(o, "incident", None)
            tip = (
                f"<title>{e(o.why)}: offsets {o.first_offset:,}..{'end' if o.last_offset is None else f'{o.last_offset:,}'},"
                f" {_seconds(o_end - o.from_ms)}; "
                + ("caused by this incident" if own(o) else f"caused by {cause}" if cause else "no incident caused it")
                + "</title>"
            )
            if not own(o):
                w = max(2.0, x(o_end) - x(o.from_ms))
                out.append(
                    f"<rect class=other-outage x={x(o.from_ms):.1f} y={y + 4} width={w:.1f} height=8 fill=url(#hatch)>{tip}</rect>"
                )
                continue
            cut = o_end if done is None else min(o_end, max(done, o.from_ms))
            w = max(2.0, x(cut) - x(o.from_ms))
            out.append(
                f"<rect class=outage x={x(o.from_ms):.1f} y={y + 2} width={w:.1f} height=12 fill={COLOURS['outage']}>{tip}</rect>"
            )
            if done is not None and o_end > cut:
                out.append(
                    f"<rect class=after x={x(cut):.1f} y={y + 2} width={max(2.0, x(o_end) - x(cut)):.1f} height=12"
                    f" fill={COLOURS['after']}>{tip}</rect>"
                )
        for fx in inc.effects:
            if (fx.topic_id, fx.partition) != k:
                continue
            if fx.ended_by is None:
                colour = COLOURS["wrong"] if inc.violations else COLOURS["unmoved"]
                out.append(
                    f"<line class=unmoved x1={x(t0):.1f} x2={x(end):.1f} y1={y + 8} y2={y + 8} stroke={colour}"
                    f" stroke-width=2 stroke-dasharray=5,3><title>{fx.role}: not moved by the end of the log</title></line>"
                )
                continue
            at = t0 + (fx.time_to_move_ms or 0)
            tip = f"<title>{e(fx.outcome)} at offset {fx.ended_by:,} (+{_seconds(fx.time_to_move_ms)})</title>"
            # The dot in the lane's upper half, the square in its lower: they often share an instant.
            if fx.role == "leader" and fx.new_leader == -1:
                out.append(
                    f"<circle class=leaderless cx={x(at):.1f} cy={y + 4} r=3.5 fill=#fff stroke={COLOURS['leaderless']}"
                    f" stroke-width=2>{tip}</circle>"
                )
            elif fx.role == "leader":
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
        ("ended", inc.ended_at_ms if inc.ended_at is not None else None),
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
        out.append(f"<p class=muted>{hidden} more partition(s) hit: the effects table lists them.</p>")
    return "".join(out)


_LABEL_Y = {"failed": 12, "reported": 24, "removed": 36, "ended": 48}
"""Marker labels on their own rows: failure, report, removal and end often share an instant."""


def _overview(report: AuditReport) -> str:
    """One lane per broker, x = record time of the whole audit: a mark per incident (of the
    index, else those shown), coloured by kind, thick when it caused unavailability or
    violations (outlined red); each links to its card, or to its row of the index."""
    a = report.availability
    items: Sequence = report.incident_index if report.incident_index is not None else (report.incidents or [])
    times = [i.failed_at_ms for i in items if i.failed_at_ms is not None]
    if not times:
        return "<p class=muted>No record times.</p>"
    lo = a.from_ms if a is not None and a.from_ms is not None else min(times)
    hi = a.to_ms if a is not None and a.to_ms is not None else max(times)
    hi = max(hi, lo + 1000)
    brokers = sorted({i.broker for i in items})
    left, width, lane_h, top = 90, 820, 16, 8
    cards = {i.id for i in report.incidents or ()}

    def x(ms: float) -> float:
        return left + (ms - lo) / (hi - lo) * width

    lane_of = {b: n for n, b in enumerate(brokers)}
    out = [f"<svg class=overview width={left + width + 50} height={top + len(brokers) * lane_h + 44}>"]
    for b, n in lane_of.items():
        out.append(f"<text x={left - 6} y={top + n * lane_h + 11} text-anchor=end>broker {b}</text>")
    # The worst last: drawn on top.
    for inc in reversed(_order(list(items))):
        if inc.failed_at_ms is None:
            continue
        y = top + lane_of[inc.broker] * lane_h
        until = inc.ended_at_ms if inc.ended_at is not None and inc.ended_at_ms is not None else hi
        w = max(2.0, x(until) - x(inc.failed_at_ms))
        violations = _caused(inc)
        h = 12 if violations or inc.unavailable_ms else 6
        ring = f" stroke={WRONG} stroke-width=1.5" if violations else ""
        target = f"inc-{anchor(inc.id)}" if inc.id in cards else f"row-{anchor(inc.id)}"
        out.append(
            f"<a href='#{target}'><rect x={x(inc.failed_at_ms):.1f} y={y + 8 - h / 2:.0f} width={w:.1f} height={h}"
            f" fill={KIND_COLOURS.get(inc.kind, '#57606a')}{ring}><title>{e(inc.id)}: {e(_where(report, inc))},"
            f" {e(format_ms(inc.failed_at_ms))}</title></rect></a>"
        )
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
    return (
        "".join(out) + f"<p class=legend>{legend}<span>thick: it caused unavailability; outlined red: violations;"
        " each mark links to its incident</span></p>"
    )


def _index(report: AuditReport) -> str:
    briefs = report.incident_index
    if not briefs:
        return ""
    total = _total(report)
    cards = {i.id for i in report.incidents or ()}
    rows = []
    for b in briefs:
        path = b.path or (report.dir_paths.get(b.directory) if b.directory else None)
        where = e(_where(report, b))
        card = f"<a href='#inc-{anchor(b.id)}'>card</a>" if b.id in cards else ""
        topics = " ".join(b.topics) + (f" +{b.more_topics}" if b.more_topics else "")
        inv = " ".join(f"{k}×{n}" for k, n in b.invariants.items())
        rows.append(
            f"<tr class=inc id='row-{anchor(b.id)}'{_data(report, b, b.topics)}><td>{e(b.kind)}</td><td>{where}</td>"
            f"<td>{_time(b.failed_at_ms)}</td><td class=num>{b.failed_at:,}</td>"
            f"<td class=num>{'open' if b.ended_at is None else _plus(b.ended_at_ms, b.failed_at_ms).strip()}</td>"
            f"<td class=num>{b.unavailable_ms / 1000:,.1f}</td><td class=num>{b.leaderless or ''}</td>"
            f"<td class={'bad' if b.violations else 'num'}>{inv}</td><td>{e(topics)}</td><td>{card}</td></tr>"
        )
        del path
    rest = report.omitted.index if report.omitted is not None else 0
    more = f" The other {rest:,}: {_where_rest(report)}." if rest else ""
    return (
        f"<h2>Index of incidents: the {len(briefs):,} worst of {total:,}</h2><p class=muted>Worst first;"
        f" the filter above applies.{more}</p><table><tr><th>kind</th><th>what failed</th><th>failed (UTC)</th>"
        "<th>offset</th><th>ended</th><th>unavailable (s)</th><th>leaderless</th><th>violations</th><th>topics</th>"
        "<th></th></tr>" + "".join(rows) + "</table>"
    )


def _availability(report: AuditReport) -> str:
    a = report.availability
    assert a is not None
    if not a.partitions:
        return "<h2>Availability</h2><p>Every partition had a leader on an online directory throughout.</p>"
    topics = report.topics
    rows = "".join(
        f"<tr><td>{e(partition_name(topics, p.topic_id, p.partition, p.topic))}</td>"
        f"<td class=muted>{e(p.topic_id)}</td><td class=num>{_seconds(p.unavailable_ms)}</td>"
        f"<td class=num>{_seconds(p.no_leader_ms)}</td><td class=num>{_seconds(p.leader_offline_ms)}</td>"
        f"<td class=num>{_seconds(p.under_min_isr_ms)}</td><td class=num>{_seconds(p.isr_offline_ms)}</td></tr>"
        for p in a.partitions
    )
    more = report.omitted.partitions if report.omitted is not None else 0
    return (
        f"<h2>Availability: the {len(a.partitions):,} partitions unavailable longest"
        + (f" ({more:,} more in the tables)" if more else "")
        + "</h2><table><tr><th>partition</th><th>topic id</th><th>unavailable</th><th>no leader</th>"
        "<th>leader offline</th><th>under min ISR</th><th>ISR member offline</th></tr>" + rows + "</table>"
    )


def _violation_table(report: AuditReport, vs: Sequence, *, t0: int | None = None, with_incident: bool = True) -> str:
    topics, paths = report.topics, report.dir_paths

    def row(v) -> str:
        name = getattr(v, "name", "") or entity_name(v.entity, topics, paths)
        first_ms, last_ms = getattr(v, "first_ms", None), getattr(v, "last_ms", None)
        cause = getattr(v, "incident", None)
        return (
            f"<tr><td class=bad>{e(v.invariant)}</td><td>{e(v.severity)}</td><td>{e(name)}"
            f"<div class=muted>{e(v.entity)}</div></td><td>{_time(first_ms)}{_plus(first_ms, t0)}"
            f"<div class=muted>offset {v.first_offset:,}</div></td><td>"
            + (
                "<span class=bad>still wrong at the end</span>"
                if v.last_offset is None
                else f"{_time(last_ms)}<div class=muted>offset {v.last_offset:,}</div>"
            )
            + f"</td><td>{e(v.message)}</td><td>{e(', '.join(f'{o:,}' for o in v.evidence))}</td>"
            + (f"<td>{_link(report, cause) if cause else ''}</td>" if with_incident else "")
            + "</tr>"
        )

    return (
        "<table><tr><th>inv</th><th>severity</th><th>entity</th><th>from (UTC)</th><th>to (UTC)</th>"
        "<th>message</th><th>evidence (offsets)</th>"
        + ("<th>incident</th>" if with_incident else "")
        + "</tr>"
        + "".join(row(v) for v in vs)
        + "</table>"
    )


def _invariants(report: AuditReport) -> str:
    """Only the families the log has (checked or violated), the log's own (L) always; what a
    check is, and what a violation is where one check can find several."""
    active = {i.id[0] for i in report.invariants if i.checked or i.violations} | {"L"}
    rows = "".join(
        f"<tr><td>{e(i.id)}</td><td>{e(i.severity)}</td><td class=num>{i.checked:,}</td><td>{e(CHECKED.get(i.id, 'checks'))}</td>"
        f"<td class='num{' bad' if i.violations else ''}'>{i.violations:,}</td>"
        f"<td>{e(i.definition)}{f'<div class=muted>a violation: {e(FINDS[i.id])}</div>' if i.id in FINDS else ''}</td></tr>"
        for i in report.invariants
        if i.id[0] in active
    )
    return (
        "<table><tr><th>id</th><th>severity</th><th>checked</th><th>of</th><th>violations</th><th>definition</th></tr>"
        f"{rows}</table>"
    )
