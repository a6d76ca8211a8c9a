"""The report a person reads: a summary whose size does not grow with the log.

An audit's complete rows grow with the history (a passing 10^6-record audit of a dense history
had 125 MB of JSON; 10^8 records, 10.8 GB): those are the tables (``replay.tables``, written by
``--tables DIR``). What the JSON, HTML, text and metrics outputs show is ``bounded(report)``:
the same ``AuditReport`` shape, with the verdict, every invariant's counts, the availability
totals and the handling figures whole, and bounded lists beside them — the first
``SAMPLE`` violations of each invariant, the ``WORST`` incidents (worst first: violations,
unavailability, then the earliest) each with at most ``EFFECTS`` effects, the ``PARTITIONS``
partitions that were unavailable longest, the outages of the partitions shown — and ``omitted``
saying how many rows of each list were left out and where the tables are.
"""

from __future__ import annotations

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.replay.books import AuditReport, Omitted
from kraftlake.replay.columns import StructColumns, wrap
from kraftlake.replay.incidents import Incident
from kraftlake.replay.violations import ViolationList

SAMPLE = 20
"""Violations shown per invariant."""
WORST = 50
"""Incidents shown."""
EFFECTS = 100
"""Effects shown per incident shown."""
PARTITIONS = 100
"""Partitions' availability shown."""
OUTAGES = 2000
"""Outages shown (those of the partitions shown, the incidents' first)."""


def bounded(report: AuditReport, *, tables: str | None = None) -> AuditReport:
    """``report`` with its long lists cut to their bounds (``omitted`` says what is left out;
    ``tables``: where the complete rows were written). A report already bounded is returned
    with ``tables`` noted."""
    if report.omitted is not None:
        if tables is not None:
            report.omitted.tables = tables
        return report
    kept = _sample(report.violations)
    new_index = {old: new for new, old in enumerate(kept)}
    violations = ViolationList()
    if isinstance(report.violations, ViolationList):
        violations.extend_rows(report.violations, pa.array(kept, pa.int64()))
    else:
        violations.extend(report.violations[i] for i in kept)
    incidents = sorted(report.incidents or [], key=lambda i: (-len(i.violations), -i.unavailable_ms, i.failed_at))
    shown_incidents = [_incident(inc, new_index) for inc in incidents[:WORST]]
    shown_incidents.sort(key=lambda i: (i.failed_at, i.id))
    omitted = Omitted(
        violations={
            inv.id: inv.violations - n for inv, n in zip(report.invariants, _per_invariant(violations), strict=True)
        },
        incidents=max(0, len(incidents) - WORST),
        effects=sum(max(0, len(inc.effects) - EFFECTS) for inc in incidents[:WORST]),
        tables=tables,
    )
    omitted.violations = {k: n for k, n in omitted.violations.items() if n}
    availability = report.availability
    if availability is not None:
        partitions = availability.partitions[:PARTITIONS]
        wanted = {(p.topic_id, p.partition) for p in partitions}
        wanted |= {(e.topic_id, e.partition) for inc in shown_incidents for e in inc.effects}
        outages = _outages_of(availability.outages, wanted)[:OUTAGES]
        omitted.partitions = len(availability.partitions) - len(partitions)
        omitted.outages = len(availability.outages) - len(outages)
        availability = msgspec.structs.replace(availability, partitions=partitions, outages=outages)
    named = _topics_named(violations, shown_incidents, availability)
    return msgspec.structs.replace(
        report,
        violations=violations,
        incidents=None if report.incidents is None else shown_incidents,
        availability=availability,
        topics={t: n for t, n in report.topics.items() if t in named},
        dir_paths={d: p for d, p in report.dir_paths.items() if any(i.directory == d for i in shown_incidents)},
        omitted=omitted,
    )


def _sample(violations) -> list[int]:
    """The indices of the first ``SAMPLE`` violations of each invariant, in report order."""
    if isinstance(violations, ViolationList):
        codes = wrap(violations._cols["invariant"])
        picked: list[int] = []
        for code in pc.unique(codes).to_pylist():
            hits = pc.indices_nonzero(pc.equal(codes, pa.scalar(code, pa.uint32())))
            picked += hits.slice(0, SAMPLE).to_pylist()
        return sorted(picked)
    seen: dict[str, int] = {}
    picked = []
    for i, v in enumerate(violations):
        if seen.get(v.invariant, 0) < SAMPLE:
            seen[v.invariant] = seen.get(v.invariant, 0) + 1
            picked.append(i)
    return picked


def _per_invariant(violations) -> list[int]:
    from kraftlake.statemachine.invariants import CATALOGUE

    counts: dict[str, int] = {}
    for v in violations:
        counts[v.invariant] = counts.get(v.invariant, 0) + 1
    return [counts.get(i.id, 0) for i in CATALOGUE]


def _incident(inc: Incident, new_index: dict[int, int]) -> Incident:
    effects = inc.effects[:EFFECTS] if isinstance(inc.effects, StructColumns) else list(inc.effects[:EFFECTS])
    return msgspec.structs.replace(
        inc, effects=effects, violations=[new_index[i] for i in inc.violations if i in new_index]
    )


def _outages_of(outages, wanted: set[tuple[str, int]]) -> list:
    """The outages of the partitions ``wanted``, in order (a long history's are millions: in
    columns, the topics are matched with Arrow's kernels before a row is built)."""
    if not isinstance(outages, StructColumns):
        return [o for o in outages if (o.topic_id, o.partition) in wanted]
    topics = pa.array(sorted({t for t, _p in wanted}), pa.string())
    t = outages.to_arrow()
    rows = pc.indices_nonzero(pc.is_in(t.column("topic_id"), value_set=topics)).to_pylist()
    return [outages[i] for i in rows if (outages.get(i, "topic_id"), outages.get(i, "partition")) in wanted]


def _topics_named(violations, incidents: list[Incident], availability) -> set[str]:
    named = set()
    for v in violations:
        parts = v.entity.split("/")
        if parts[0] in ("partition", "replica") and len(parts) > 1:
            named.add(parts[1])
    for inc in incidents:
        named |= {e.topic_id for e in inc.effects}
    if availability is not None:
        named |= {p.topic_id for p in availability.partitions}
        named |= {o.topic_id for o in availability.outages}
    return named
