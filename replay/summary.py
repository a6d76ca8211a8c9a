"""The report a person reads: a summary whose size does not grow with the log.

An audit's complete rows grow with the history (a passing 10^6-record audit of a dense history
had 125 MB of JSON; 10^8 records, 10.8 GB): those are the tables (``replay.tables``, written by
``--tables DIR``). What the JSON, HTML, text and metrics outputs show is ``bounded(report)``:
the same ``AuditReport`` shape, with the verdict, every invariant's counts, the availability
totals and the handling figures whole, and bounded lists beside them — the first
``SAMPLE`` violations of each invariant and of each incident shown, the ``WORST`` incidents (worst first: violations,
unavailability, then the earliest) each with at most ``EFFECTS`` effects, the ``PARTITIONS``
partitions that were unavailable longest, the outages the incidents shown caused or overlapped —
and ``omitted`` saying how many rows of each list were left out and where the tables are.

Every row shown carries what a person reads beside the offsets and ids: a violation its names
(``replay.names``: ``orders/11``), its record times (``first_ms``, ``last_ms``, read from the log:
``times``) and the incident that caused it; an effect its partition's name and when it ended;
an outage its name and its incident. ``index`` adds an ``IncidentBrief`` of the worst incidents
beyond those shown whole, for a page that finds one among tens of thousands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.replay.books import AuditReport, Omitted
from kraftlake.replay.columns import StructColumns, wrap
from kraftlake.replay.incidents import Effect, Incident, IncidentBrief, _columns
from kraftlake.replay.names import entity_name, partition_name
from kraftlake.replay.violations import Violation, ViolationList

SAMPLE = 20
"""Violations shown per invariant."""
WORST = 50
"""Incidents shown."""
EFFECTS = 100
"""Effects shown per incident shown."""
PARTITIONS = 100
"""Partitions' availability shown."""
OUTAGES = 2000
"""Outages shown: those of the partitions the incidents shown hit, while they lasted (the first)."""
TOPICS = 10
"""Topic names an ``IncidentBrief`` keeps."""

Times = Callable[[Iterable[int]], dict[int, int | None]]
"""Offsets -> their record times (``LogSnapshot.record_times``)."""


class ShownViolation(Violation, kw_only=True):
    """A violation as a summary shows it: with its entity's name, its record times and the
    incident that caused it (its ``id``; None: none)."""

    name: str = ""
    first_ms: int | None = None
    last_ms: int | None = None
    incident: str | None = None


class ShownEffect(Effect, kw_only=True):
    """An effect as a summary shows it: its partition's name, the record time it ended."""

    name: str = ""
    ended_ms: int | None = None


class ShownOutage(msgspec.Struct, kw_only=True, array_like=True):
    """An outage as a summary shows it (``incidents.Outage`` named, and tied to the incident that
    caused it; one that went on under another incident is shown as its pieces, each its own). An
    array of its fields in this order, as ``Outage`` is: a summary holds thousands."""

    topic_id: str
    topic: str | None
    partition: int
    name: str
    why: str
    first_offset: int
    last_offset: int | None
    from_ms: int | None
    to_ms: int | None
    incident: str | None = None
    """The incident that caused it (``replay.attribution``); None: none."""


def bounded(
    report: AuditReport, *, tables: str | None = None, times: Times | None = None, index: int = 0
) -> AuditReport:
    """``report`` with its long lists cut to their bounds (``omitted`` says what is left out;
    ``tables``: where the complete rows were written), its rows named and timed (``times``: the
    record times of offsets, from the log; without it violations carry no times), and with
    ``index`` > 0 an index of that many worst incidents. A report already bounded is returned
    with ``tables`` noted."""
    if report.omitted is not None:
        if tables is not None:
            report.omitted.tables = tables
        return report
    all_incidents = report.incidents or []
    incidents = sorted(all_incidents, key=lambda i: (-len(i.violations), -i.unavailable_ms, i.failed_at))
    # The first of each invariant, and the first each incident shown caused (its card lists them).
    kept = sorted(set(_sample(report.violations)) | {i for inc in incidents[:WORST] for i in inc.violations[:SAMPLE]})
    new_index = {old: new for new, old in enumerate(kept)}
    picked = ViolationList()
    if isinstance(report.violations, ViolationList):
        picked.extend_rows(report.violations, pa.array(kept, pa.int64()))
    else:
        picked.extend(report.violations[i] for i in kept)
    owner = {i: inc.id for inc in all_incidents for i in inc.violations}
    topics = report.topics
    shown_incidents = [_incident(inc, new_index, topics) for inc in incidents[:WORST]]
    shown_incidents.sort(key=lambda i: (i.failed_at, i.id))
    wanted_times = {o for v in picked for o in (v.first_offset, v.last_offset) if o is not None}
    got = times(wanted_times) if times is not None and wanted_times else {}
    violations = [
        ShownViolation(
            **msgspec.structs.asdict(v),
            name=entity_name(v.entity, topics, report.dir_paths),
            first_ms=got.get(v.first_offset),
            last_ms=None if v.last_offset is None else got.get(v.last_offset),
            incident=owner.get(old),
        )
        for v, old in zip(picked, kept, strict=True)
    ]
    omitted = Omitted(
        violations={
            inv.id: inv.violations - n for inv, n in zip(report.invariants, _per_invariant(violations), strict=True)
        },
        incidents=max(0, len(incidents) - WORST),
        effects=sum(max(0, len(inc.effects) - EFFECTS) for inc in incidents[:WORST]),
        tables=tables,
    )
    omitted.violations = {k: n for k, n in omitted.violations.items() if n}
    brief = None
    if index > 0:
        brief = [_brief(inc, topics) for inc in incidents[:index]]
        omitted.index = max(0, len(incidents) - index)
    availability = report.availability
    if availability is not None:
        partitions = availability.partitions[:PARTITIONS]
        # The outages the cards draw: of the partitions each shown incident hit, while it lasted.
        windows: dict[tuple[str, int], list[tuple[int, float]]] = {}
        for inc in shown_incidents:
            until = inc.ended_at if inc.ended_at is not None else float("inf")
            for e in inc.effects:
                windows.setdefault((e.topic_id, e.partition), []).append((inc.failed_at, until))
        ids = [inc.id for inc in all_incidents]
        owners = availability.outage_incidents
        splits: dict[int, list[list[int]]] = {}
        for row, at, at_ms, who in availability.outage_splits:
            splits.setdefault(row, []).append([at, at_ms, who])
        outages: list[ShownOutage] = []
        for row, o in _outages_of(availability.outages, set(windows)):
            if not any(
                o.first_offset <= hi and (o.last_offset is None or o.last_offset >= lo)
                for lo, hi in windows[(o.topic_id, o.partition)]
            ):
                continue
            if len(outages) >= OUTAGES:
                break
            # An outage that went on under another incident is shown as its pieces, each its own.
            cuts = [[o.first_offset, o.from_ms, owners[row] if row < len(owners) else -1], *splits.get(row, ())]
            for (at, at_ms, who), nxt in zip(cuts, [*cuts[1:], None], strict=True):
                outages.append(
                    ShownOutage(
                        topic_id=o.topic_id,
                        topic=topics.get(o.topic_id),
                        partition=o.partition,
                        name=partition_name(topics, o.topic_id, o.partition),
                        why=o.why,
                        first_offset=at,
                        last_offset=o.last_offset if nxt is None else nxt[0] - 1,
                        from_ms=at_ms,
                        to_ms=o.to_ms if nxt is None else nxt[1],
                        incident=ids[who] if who >= 0 else None,
                    )
                )
        omitted.partitions = len(availability.partitions) - len(partitions)
        omitted.outages = len(availability.outages) - len(outages)
        availability = msgspec.structs.replace(
            availability, partitions=partitions, outages=outages, outage_incidents=[], outage_splits=[]
        )
    named = _topics_named(violations, shown_incidents, availability)
    return msgspec.structs.replace(
        report,
        violations=violations,
        incidents=None if report.incidents is None else shown_incidents,
        availability=availability,
        topics={t: n for t, n in report.topics.items() if t in named},
        dir_paths={
            d: p
            for d, p in report.dir_paths.items()
            if any(i.directory == d for i in shown_incidents)
            or any(b.directory == d for b in brief or ())
            or any(v.entity.endswith("/" + d) for v in violations)
        },
        omitted=omitted,
        incident_index=brief,
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


def _incident(inc: Incident, new_index: dict[int, int], topics: dict[str, str]) -> Incident:
    rows = inc.effects[:EFFECTS] if isinstance(inc.effects, StructColumns) else list(inc.effects[:EFFECTS])
    t0 = inc.failed_at_ms
    effects = [
        ShownEffect(
            **msgspec.structs.asdict(e),
            name=partition_name(topics, e.topic_id, e.partition, e.topic),
            ended_ms=None if t0 is None or e.time_to_move_ms is None else t0 + e.time_to_move_ms,
        )
        for e in rows
    ]
    return msgspec.structs.replace(
        inc, effects=effects, violations=[new_index[i] for i in inc.violations if i in new_index]
    )


def _brief(inc: Incident, topics: dict[str, str]) -> IncidentBrief:
    effects = _columns(inc.effects)
    named = dict(effects.topic_names())
    names = sorted({named.get(t) or topics.get(t) or t for t, _p in effects.pairs()})
    effects.drop_pages()
    return IncidentBrief(
        id=inc.id,
        kind=inc.kind,
        broker=inc.broker,
        directory=inc.directory,
        path=inc.path,
        failed_at=inc.failed_at,
        failed_at_ms=inc.failed_at_ms,
        ended_at=inc.ended_at,
        ended_at_ms=inc.ended_at_ms,
        unavailable_ms=inc.unavailable_ms,
        leaderless=inc.leaderless,
        effects=len(inc.effects),
        violations=len(inc.violations),
        invariants=inc.invariants,
        overlaps=len(inc.overlaps),
        topics=names[:TOPICS],
        more_topics=max(0, len(names) - TOPICS),
    )


def _outages_of(outages, wanted: set[tuple[str, int]]) -> list:
    """(row, outage) of the outages of the partitions ``wanted``, in order (a long history's are
    millions: in columns, the topics are matched with Arrow's kernels before a row is built)."""
    if not isinstance(outages, StructColumns):
        return [(i, o) for i, o in enumerate(outages) if (o.topic_id, o.partition) in wanted]
    topics = pa.array(sorted({t for t, _p in wanted}), pa.string())
    t = outages.to_arrow()
    rows = pc.indices_nonzero(pc.is_in(t.column("topic_id"), value_set=topics)).to_pylist()
    return [(i, outages[i]) for i in rows if (outages.get(i, "topic_id"), outages.get(i, "partition")) in wanted]


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
