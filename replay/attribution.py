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
from .incidents import (
    Incident,
    IncidentsResult,
    Leaderless,
    _columns,
    buckets,
    effect_pairs,
    handling,
    partition_runs,
    percentile,
)

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
        # An array, not a list of Python ints (millions of outages in a long history), and one
        # that bisects as fast as the list did (numpy's searchsorted per call cost 0.3 CPU-s
        # more on S1 at 10^6, bench/RESULTS.md).
        self.firsts = array("q")
        """The first offsets (never null) in partition order (``rows``' order)."""
        if n:
            self.firsts.frombytes(pc.take(firsts, order).to_numpy(zero_copy_only=False).astype(np.int64).tobytes())
        self.first_offsets = pc.fill_null(firsts, -1).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
        self.ranges: dict[tuple[str, int], tuple[int, int]] = {
            (topic, p): span for topic, p, span in partition_runs(pc.take(topics, order), pc.take(parts, order))
        }

    def firsts_of(self, row: int) -> int:
        """The first offset of the outage ``row``."""
        return int(self.first_offsets[row])

    def duration(self, row: int) -> int:
        """ms the outage ``row`` lasted (to the end of the audit while open; 0 untimed)."""
        start, stop = int(self.froms[row]), int(self.tos[row])
        return 0 if start == NONE_INT or stop == NONE_INT else max(0, stop - start)

    def overlapping(self, key: tuple[str, int], lo_offset: int, hi_offset: int | None) -> list[int]:
        """The rows (report indexes) of ``key``'s outages under way at some offset of
        ``[lo_offset, hi_offset]`` (None: no end). A partition's outages are disjoint and in order."""
        got = self.ranges.get(key)
        if got is None:
            return []
        lo, hi = got
        firsts, rows = self.firsts, self.rows
        k = max(lo, bisect.bisect_right(firsts, lo_offset, lo, hi) - 1)
        out = []
        while k < hi and (hi_offset is None or firsts[k] <= hi_offset):
            row = int(rows[k])
            if self.open_end[row] or self.lasts[row] >= lo_offset:
                out.append(row)
            k += 1
        return out

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
    """(topic id, partition, caused_by, ended_by or None, leader after or None, time to move or
    None) of the incident's leadership effects, read off the columns."""
    effects = _columns(inc.effects)
    cols, table = effects._cols, effects.strings.table  # noqa: SLF001 - the list's own columns, read only
    rows = zip(
        cols["role"],
        cols["topic_id"],
        cols["partition"],
        cols["caused_by"],
        cols["ended_by"],
        cols["new_leader"],
        cols["time_to_move_ms"],
        strict=True,
    )
    out = []
    for role, topic, p, caused, ended, leader, took in rows:
        if table[role] != "leader":
            continue
        out.append(
            (
                table[topic],
                p,
                caused,
                None if ended == NONE_INT else ended,
                None if leader == NONE_INT else leader,
                None if took == NONE_INT else took,
            )
        )
    effects.drop_pages()
    return out


def attribute(found: IncidentsResult) -> None:
    """Tie ``found``'s outages to the incidents that caused them and fill what follows from it
    (``Incident.unavailable_ms``, ``unavailable_after_ms``, ``leaderless``, ``overlaps``;
    ``Availability.by_kind``, ``outside_incidents_ms``, ``outage_incidents``, ``outage_splits``;
    ``Handling.leaderless``), from scratch: attributing again gives the same.

    An incident claims, of each outage of a partition it led from what failed, the time while
    its leadership effect lasted (from its failure to the record that moved the leader); one it
    left with no leader it claims to the outage's end. Where two claim the same time, the first
    to fail has it; time no incident claims is outside any."""
    incidents = found.incidents
    avail = found.availability
    end_ms = avail.to_ms
    outages = _Outages(avail.outages, end_ms)
    claims: dict[int, list[tuple]] = {}
    waits = array("q")
    still = 0
    order = sorted(range(len(incidents)), key=lambda k: (incidents[k].failed_at, incidents[k].id))
    rank = {k: n for n, k in enumerate(order)}
    isr_of: dict[int, dict] = {}
    """Incident -> partition -> its ISR effects there (caused_by, ended_by), read when asked."""
    of_broker: dict[int, _BrokerIncidents] = {}
    for k in order:
        of_broker.setdefault(incidents[k].broker, _BrokerIncidents()).add(k, incidents[k])
    for k in order:
        inc = incidents[k]
        inc.leaderless = 0
        t0 = inc.failed_at_ms
        for topic, p, caused, ended, leader, took in _leader_rows(inc):
            key = (topic, p)
            left = ended is not None and leader == NO_LEADER
            ended_ms = None if ended is None or t0 is None or took is None else t0 + took
            for row in outages.overlapping(key, caused, ended):
                start = int(outages.froms[row])
                if start == NONE_INT:
                    continue
                # The leaderless outage that began at the record ending the effect is its own.
                whole = left and outages.firsts_of(row) == ended
                a = max(start, t0 if t0 is not None else start)
                a_off = max(caused, outages.firsts_of(row))
                if whole or ended_ms is None:
                    b, b_off = int(outages.tos[row]), None
                else:
                    b, b_off = min(int(outages.tos[row]), ended_ms), ended
                if b > a or (whole and b == a):
                    claims.setdefault(row, []).append((rank[k], k, a, a_off, b, b_off))
                if b_off is not None and leader is not None and leader >= 0 and b < int(outages.tos[row]):
                    # The leader moved onto a replica another failure holds (a controller that
                    # elects onto an offline directory): the rest is the incident whose failed
                    # directory or broker held that replica in the ISR then.
                    heirs = of_broker.get(leader)
                    heir = None if heirs is None else heirs.holding(ended, key, incidents, isr_of)
                    if heir is not None:
                        other = incidents[heir]
                        stop = int(outages.tos[row])
                        if other.ended_at is not None and other.ended_at_ms is not None:
                            stop = min(stop, other.ended_at_ms)
                        if stop > b:
                            claims.setdefault(row, []).append((rank[heir], heir, b, ended, stop, other.ended_at))
            if left:
                inc.leaderless += 1
                held = outages.holding(key, ended)
                if held is None:
                    continue  # leaderless for no time: a leader in the same record's batch
                if outages.open_end[held]:
                    still += 1
                # A "no leader" outage begins at the record that left it leaderless (a change
                # of why the partition is down begins another), and lasts until a leader.
                waits.append(outages.duration(held))
    owner = [-1] * outages.n
    splits: list[list[int]] = []
    unavailable = [0] * len(incidents)
    after = [0] * len(incidents)
    for row in sorted(claims):
        pieces = _pieces(int(outages.froms[row]), int(outages.tos[row]), outages.firsts_of(row), claims[row])
        owner[row] = pieces[0][0]
        for who, a, _a_off, b in pieces:
            if who < 0:
                continue
            unavailable[who] += b - a
            done = incidents[who].ended_at_ms if incidents[who].ended_at is not None else None
            if done is not None:
                after[who] += max(0, b - max(a, done))
        for (prev, *_), (who, a, a_off, _b) in zip(pieces, pieces[1:], strict=False):
            if who != prev:
                splits.append([row, a_off, a, who])
    by_kind: dict[str, int] = {}
    for k, inc in enumerate(incidents):
        inc.unavailable_ms, inc.unavailable_after_ms = unavailable[k], after[k]
        by_kind[inc.kind] = by_kind.get(inc.kind, 0) + unavailable[k]
    avail.by_kind = dict(sorted(by_kind.items()))
    avail.outside_incidents_ms = avail.unavailable_ms - sum(unavailable)
    avail.outage_incidents = owner
    avail.outage_splits = splits
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
            timed=len(waits),
            buckets=buckets(waits),
        ),
    )


class _BrokerIncidents:
    """A broker's incidents, first failed first: which was open at an offset, in a search."""

    __slots__ = ("ks", "failed", "reach")

    def __init__(self) -> None:
        self.ks: list[int] = []
        self.failed: list[int] = []
        self.reach: list[float] = []
        """The latest end (inf: still open) of the incidents up to each: it never decreases."""

    def add(self, k: int, inc: Incident) -> None:
        end = float("inf") if inc.ended_at is None else inc.ended_at
        self.ks.append(k)
        self.failed.append(inc.failed_at)
        self.reach.append(max(end, self.reach[-1]) if self.reach else end)

    def holding(self, offset: int, key: tuple[str, int], incidents: list[Incident], isr_of: dict) -> int | None:
        """The first-failed incident open at ``offset`` (failed at or before it, not ended before)
        whose failure held the broker's replica of ``key`` then: an ISR effect there, open."""
        i = bisect.bisect_left(self.reach, offset)
        while i < len(self.ks) and self.failed[i] <= offset:
            k = self.ks[i]
            inc = incidents[k]
            if inc.ended_at is None or inc.ended_at >= offset:
                spans = isr_of.get(k)
                if spans is None:
                    spans = isr_of[k] = _isr_spans(inc)
                if any(c <= offset and (e is None or offset <= e) for c, e in spans.get(key, ())):
                    return k
            i += 1
        return None


def _isr_spans(inc: Incident) -> dict[tuple[str, int], list[tuple[int, int | None]]]:
    """Partition -> (caused_by, ended_by or None) of the incident's ISR effects."""
    effects = _columns(inc.effects)
    cols, table = effects._cols, effects.strings.table  # noqa: SLF001 - the list's own columns, read only
    out: dict[tuple[str, int], list[tuple[int, int | None]]] = {}
    rows = zip(cols["role"], cols["topic_id"], cols["partition"], cols["caused_by"], cols["ended_by"], strict=True)
    for role, topic, p, caused, ended in rows:
        if table[role] == "isr":
            out.setdefault((table[topic], p), []).append((caused, None if ended == NONE_INT else ended))
    effects.drop_pages()
    return out


def _pieces(start: int, stop: int, first_offset: int, claims: list[tuple]) -> list[tuple[int, int, int, int]]:
    """An outage's time ``[start, stop)`` cut where who caused it changes: (incident or -1,
    from ms, from offset, to ms) in order, each instant the first-failed claim's (``claims``:
    (rank, incident, from ms, from offset, to ms, to offset))."""
    cuts = sorted({start, stop, *(c[2] for c in claims), *(c[4] for c in claims)})
    cuts = [t for t in cuts if start <= t <= stop]
    at_offset = {c[2]: c[3] for c in claims}
    at_offset.update({c[4]: c[5] for c in claims if c[5] is not None})
    at_offset[start] = first_offset
    out: list[tuple[int, int, int, int]] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        held = [c for c in claims if c[2] <= a and b <= c[4]]
        who = min(held)[1] if held else -1
        if out and out[-1][0] == who:
            out[-1] = (who, out[-1][1], out[-1][2], b)
        else:
            out.append((who, a, at_offset.get(a, first_offset), b))
    if not out:  # an outage of no time (its start and end one instant)
        held = sorted(claims)
        out.append((held[0][1] if held else -1, start, first_offset, stop))
    return out


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


def outage_pieces(availability):
    """(outage, first offset, from ms, last offset, to ms, incident index or -1) of every piece of
    ``availability``'s outages: an outage that went on under another incident is cut where it
    did (``outage_splits``), each piece its own incident's (``outage_incidents``)."""
    owners = availability.outage_incidents
    splits: dict[int, list[list[int]]] = {}
    for row, at, at_ms, who in availability.outage_splits:
        splits.setdefault(row, []).append([at, at_ms, who])
    for row, o in enumerate(availability.outages):
        cuts = [[o.first_offset, o.from_ms, owners[row] if row < len(owners) else -1], *splits.get(row, ())]
        for (at, at_ms, who), nxt in zip(cuts, [*cuts[1:], None], strict=True):
            yield (
                o,
                at,
                at_ms,
                o.last_offset if nxt is None else nxt[0] - 1,
                o.to_ms if nxt is None else nxt[1],
                who,
            )
