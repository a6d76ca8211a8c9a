"""The audit report as one self-contained HTML page: verdict, invariant table, and a timeline per
affected entity (broker dir, partition, replica): when it went wrong, for how long, and the
records that caused and fixed it. No scripts, no external files: it opens anywhere."""

from __future__ import annotations

import html

from .audit import AuditReport

_CSS = """
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
h1 .pass{color:#1a7f37}h1 .fail{color:#cf222e}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left}
th{background:#f6f8fa}.num{text-align:right}.bad{color:#cf222e;font-weight:600}
.lane text{font-size:11px}.axis text{font-size:10px;fill:#666}
"""


def render(report: AuditReport, *, title: str = "kraftlake audit") -> str:
    e = html.escape
    verdict = report.verdict
    rows = "".join(
        f"<tr><td>{e(i.id)}</td><td>{e(i.severity)}</td><td class=num>{i.checked:,}</td>"
        f"<td class='num{' bad' if i.violations else ''}'>{i.violations}</td><td>{e(i.definition)}</td></tr>"
        for i in report.invariants
    )
    vrows = "".join(
        f"<tr><td>{e(v.invariant)}</td><td>{e(v.severity)}</td><td>{e(v.entity)}</td><td class=num>{v.first_offset}</td>"
        f"<td class=num>{'open' if v.last_offset is None else v.last_offset}</td><td>{e(v.message)}</td>"
        f"<td>{e(', '.join(map(str, v.evidence[:8])))}</td></tr>"
        for v in report.violations[:500]
    )
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{e(title)}: <span class={verdict}>{verdict.upper()}</span></h1>"
        f"<p>{report.records:,} records, offsets {report.first_offset}..{report.last_offset}; "
        f"grace {report.grace_records} records or {report.grace_ms} ms; fail on {e(report.fail_on)}; "
        f"state hash <code>{e(report.state_hash)}</code></p>"
        f"<h2>Timeline</h2>{_timeline(report)}"
        f"<h2>Invariants</h2><table><tr><th>id</th><th>severity</th><th>checked</th><th>violations</th><th>definition</th></tr>{rows}</table>"
        f"<h2>Violations ({len(report.violations)})</h2>"
        + (
            f"<table><tr><th>inv</th><th>severity</th><th>entity</th><th>from</th><th>to</th><th>message</th><th>evidence</th></tr>{vrows}</table>"
            if report.violations
            else "<p>None.</p>"
        )
        + "</body></html>"
    )


def _timeline(report: AuditReport, lanes: int = 40) -> str:
    """One lane per entity (the first ``lanes``), x = offset: a bar from where it went wrong to
    where it was fixed (to the end while open), ticks at the evidence."""
    if not report.violations or report.first_offset is None or report.last_offset is None:
        return "<p>Nothing went wrong.</p>"
    lo, hi = report.first_offset, max(report.last_offset, report.first_offset + 1)
    entities: list[str] = []
    for v in report.violations:
        if v.entity not in entities:
            entities.append(v.entity)
    entities = entities[:lanes]
    left, width, lane_h = 330, 800, 18

    def x(offset: int) -> float:
        return left + (offset - lo) / (hi - lo) * width

    parts = []
    for i, ent in enumerate(entities):
        y = 20 + i * lane_h
        label = ent if len(ent) < 48 else ent[:22] + "…" + ent[-24:]
        parts.append(f"<g class=lane><text x=0 y={y + 12}>{html.escape(label)}</text>")
        for v in report.violations:
            if v.entity != ent:
                continue
            end = hi if v.last_offset is None else v.last_offset
            colour = "#cf222e" if v.severity == "error" else "#bf8700"
            parts.append(
                f"<rect x={x(v.first_offset):.1f} y={y + 3} width={max(2.0, x(end) - x(v.first_offset)):.1f} height=10 fill={colour}>"
                f"<title>{html.escape(v.invariant + ': ' + v.message)} ({v.first_offset}..{'open' if v.last_offset is None else v.last_offset})</title></rect>"
            )
            for o in v.evidence:
                parts.append(f"<line x1={x(o):.1f} x2={x(o):.1f} y1={y} y2={y + 16} stroke=#222 />")
        parts.append("</g>")
    height = 40 + len(entities) * lane_h
    axis = "".join(
        f"<text x={x(o):.1f} y={height - 5} text-anchor=middle>{o}</text>"
        for o in (lo + (hi - lo) * k // 4 for k in range(5))
    )
    return f"<svg width={left + width + 40} height={height}>{''.join(parts)}<g class=axis>{axis}</g></svg>"
