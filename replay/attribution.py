"""What each incident caused: its outages, its unavailability, the leaderships it left with no
leader and how long they waited, and which incidents overlapped.

Incidents overlap: a broker crashes while another's disk is still failed, both holding replicas
of one partition. Summing each incident's partitions' outages over its own window counts an
outage once per incident it falls in (a history's per-kind sums then exceed its total), and
draws one incident's outage in another's card. Here every outage is tied to at most one
incident, the one that caused it: the earliest (by ``failed_at``) whose broker still led the
partition from what failed when the outage began, or had just left it with no leader (an effect
of role ``leader`` whose ``[caused_by, ended_by]`` holds the outage's first offset). An outage no
incident caused (a partition created without a live leader, a directory the log never says
failed) is counted apart, so that the kinds' sums and the rest add up to the availability's
total (``Availability.by_kind``, ``outside_incidents_ms``).

It runs over a report's incidents and outages once the engine found them (``attribute``, from
``books.attach_incidents`` and ``incidents.find_incidents``): both engines hand the same rows, so
both reports say the same. The offsets are the log's; times are ``ts_ms``.
"""

from __future__ import annotations

import bisect
import heapq
from array import array

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.records.kraft import NO_LEADER

from .columns import NONE_INT, StructColumns
from .incidents import Incident, IncidentsResult, Leaderless, _columns, effect_pairs, handling, percentile

OVERLAPS_KEPT = 20
"""Ids of overlapping incidents kept per incident (the count of more is not kept)."""


class _Outages:
    """The outages as columns, grouped by partition in time order: ``ranges`` maps (topic id,
    partition) to its rows ``lo..hi - 1`` of ``firsts`` (first offsets, ascending) and ``rows``
    (the outage's index in the report's list)."""

    def __init__(self, outages, end_ms: int | None) -> None:
        n = len(outages)
        if isinstance(outages, StructColumns):
            t = outages.to_arrow()
            topics, parts = t.column("topic_id"), t.column("partition")
            firsts, lasts = t.column("first_offset"), t.column("last_offset")
            froms, tos = t.column("from_ms"), t.column("to_ms")
        else:
            topics = pa.array([o.topic_id for o in outages], pa.string())
            parts = pa.array([o.partition for o in outages], pa.int64())
            firsts = pa.array([o.first_offset for o in outages], pa.int64())
            lasts = pa.array([o.last_offset for o in outages], pa.int64())
            froms = pa.array([o.from_ms for o in outages], pa.int64())
            tos = pa.array([o.to_ms for o in outages], pa.int64())
        self.n = n
        self.open_end = lasts.is_null().to_numpy(zero_copy_only=False) if n else np.zeros(0, bool)
        self.froms = pc.fill_null(froms, NONE_INT).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
        end = NONE_INT if end_ms is None else end_ms
        self.tos = pc.fill_null(tos, end).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
        self.lasts = pc.fill_null(lasts, -1).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
        order = (
            pc.sort_indices(
                pa.table({"t": topics, "p": parts, "f": firsts}),
                sort_keys=[("t", "ascending"), ("p", "ascending"), ("f", "ascending")],
            )
            if n
            else pa.array([], pa.uint64())
        )
        self.rows = order.to_numpy(zero_copy_only=False).astype(np.int64)
        sorted_firsts = pc.take(firsts, order).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
        self.firsts = sorted_firsts.tolist()
        self.ranges: dict[tuple[str, int], tuple[int, int]] = {}
        if n:
            t, p = pc.take(topics, order), pc.take(parts, order)
            changed = pc.or_(pc.not_equal(t[1:], t[:-1]), pc.not_equal(p[1:], p[:-1]))
            starts = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist()), n]
            names, numbers = t.to_pylist(), p.to_pylist()
            for lo, hi in zip(starts, starts[1:], strict=False):
                self.ranges[(names[lo], numbers[lo])] = (lo, hi)

    def duration(self, row: int) -> int:
        """ms the outage ``row`` lasted (to the end of the audit while open; 0 untimed)."""
        start, stop = int(self.froms[row]), int(self.tos[row])
        return 0 if start == NONE_INT or stop == NONE_INT else max(0, stop - start)

    def beginning_in(self, key: tuple[str, int], lo_offset: int, hi_offset: int | None) -> list[int]:
        """The rows (report indexes) of ``key``'s outages whose first offset is in
        ``[lo_offset, hi_offset]`` (None: no end)."""
        got = self.ranges.get(key)
        if got is None:
            return []
        lo, hi = got
        firsts = self.firsts
        i = bisect.bisect_left(firsts, lo_offset, lo, hi)
        j = hi if hi_offset is None else bisect.bisect_right(firsts, hi_offset, lo, hi)
        return [int(self.rows[k]) for k in range(i, j)]

    def holding(self, key: tuple[str, int], offset: int) -> int | None:
        """The row of ``key``'s outage under way at ``offset`` (begun at or before it, not over)."""
        got = self.ranges.get(key)
        if got is None:
            return None
        lo, hi = got
        k = bisect.bisect_right(self.firsts, offset, lo, hi) - 1
        if k < lo:
            return None
        row = int(self.rows[k])
        return row if self.open_end[row] or self.lasts[row] >= offset else None


def _leader_rows(inc: Incident):
    """(topic id, partition, caused_by, ended_by or None, leader after or None) of the
    incident's leadership effects, read off the columns."""
    effects = _columns(inc.effects)
    cols, table = effects._cols, effects.strings.table  # noqa: SLF001 - the list's own columns, read only
    rows = zip(
        cols["role"], cols["topic_id"], cols["partition"], cols["caused_by"], cols["ended_by"], cols["new_leader"]
    )
    out = []
    for role, topic, p, caused, ended, leader in rows:
        if table[role] != "leader":
            continue
        out.append(
            (
                table[topic],
                p,
                caused,
                None if ended == NONE_INT else ended,
                None if leader == NONE_INT else leader,
            )
        )
    effects.drop_pages()
    return out


def attribute(found: IncidentsResult) -> None:
    """Tie ``found``'s outages to the incidents that caused them and fill what follows from it
    (``Incident.unavailable_ms``, ``unavailable_after_ms``, ``leaderless``, ``overlaps``;
    ``Availability.by_kind``, ``outside_incidents_ms``, ``outage_incidents``;
    ``Handling.leaderless``), from scratch: attributing again gives the same."""
    incidents = found.incidents
    avail = found.availability
    end_ms = avail.to_ms
    outages = _Outages(avail.outages, end_ms)
    owner = array("q", [-1]) * outages.n
    waits = array("q")
    still = 0
    order = sorted(range(len(incidents)), key=lambda k: (incidents[k].failed_at, incidents[k].id))
    for k in order:
        inc = incidents[k]
        inc.leaderless = 0
        for topic, p, caused, ended, leader in _leader_rows(inc):
            key = (topic, p)
            for row in outages.beginning_in(key, caused, ended):
                if owner[row] < 0:
                    owner[row] = k
            if ended is not None and leader == NO_LEADER:
                inc.leaderless += 1
                row = outages.holding(key, ended)
                if row is None:
                    continue  # leaderless for no time: a leader in the same record's batch
                if owner[row] < 0:
                    owner[row] = k
                if outages.open_end[row]:
                    still += 1
                # A "no leader" outage begins at the record that left it leaderless (a change
                # of why the partition is down begins another), and lasts until a leader.
                waits.append(outages.duration(row))
    unavailable = [0] * len(incidents)
    after = [0] * len(incidents)
    for row, k in enumerate(owner):
        if k < 0:
            continue
        took = outages.duration(row)
        unavailable[k] += took
        done = incidents[k].ended_at_ms if incidents[k].ended_at is not None else None
        if done is not None and took:
            start, stop = int(outages.froms[row]), int(outages.tos[row])
            after[k] += max(0, stop - max(start, done))
    by_kind: dict[str, int] = {}
    for k, inc in enumerate(incidents):
        inc.unavailable_ms, inc.unavailable_after_ms = unavailable[k], after[k]
        by_kind[inc.kind] = by_kind.get(inc.kind, 0) + unavailable[k]
    avail.by_kind = dict(sorted(by_kind.items()))
    avail.outside_incidents_ms = avail.unavailable_ms - sum(unavailable)
    avail.outage_incidents = owner.tolist()
    _overlaps(incidents, order)
    np.frombuffer(waits, dtype=np.int64).sort()
    found.handling = handling(
        incidents,
        Leaderless(
            partitions=sum(inc.leaderless for inc in incidents),
            still=still,
            total_ms=sum(waits),
            p50_ms=percentile(waits, 0.5),
            p99_ms=percentile(waits, 0.99),
            max_ms=waits[-1] if waits else None,
        ),
    )


def _overlaps(incidents: list[Incident], order: list[int]) -> None:
    """``Incident.overlaps``: the incidents that hit a partition of it while both were open, by
    a sweep over the incidents in the order they failed (only the open ones' partitions held)."""
    for inc in incidents:
        inc.overlaps = []
    by_part: dict[tuple[str, int], list[int]] = {}
    parts_of: dict[int, set] = {}
    ending: list[tuple[float, int]] = []
    for k in order:
        inc = incidents[k]
        while ending and ending[0][0] < inc.failed_at:
            _, gone = heapq.heappop(ending)
            for key in parts_of.pop(gone):
                held = by_part[key]
                held.remove(gone)
                if not held:
                    del by_part[key]
        mine = effect_pairs(inc.effects)
        _columns(inc.effects).drop_pages()
        met: set[int] = set()
        for key in mine:
            held = by_part.setdefault(key, [])
            met.update(held)
            held.append(k)
        parts_of[k] = mine
        heapq.heappush(ending, (inc.ended_at if inc.ended_at is not None else float("inf"), k))
        for j in sorted(met, key=lambda j: (incidents[j].failed_at, incidents[j].id)):
            other = incidents[j]
            if len(inc.overlaps) < OVERLAPS_KEPT:
                inc.overlaps.append(other.id)
            if len(other.overlaps) < OVERLAPS_KEPT:
                other.overlaps.append(inc.id)
