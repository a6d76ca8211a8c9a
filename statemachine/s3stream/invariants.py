"""S3Stream invariants: what must hold in a ``StreamsView``. AutoMQ's controller keeps most of it
without checking it when it replays records (``StreamControlManager``, ``S3ObjectControlManager``)
and its read path assumes it (``S3StreamsMetadataImage.getObjects``); S11, S12, S13 and S14 are
what its object lifecycle (``S3ObjectControlManager.checkS3ObjectsLifecycle``), its commits
(``StreamControlManager.commitStreamSetObject``) and its node registration
(``NodeControlManager.register``) enforce.

The checks, S1-S14 each (their entries beside them, in ``catalogue``), are pure functions of the view (and the record about to change it) that
return a message when an entity is wrong and None when it is right. ``replay.s3stream_audit``
decides when to ask them, counts the checks, names the entities and decides for how long a wrong
state may last (the grace: AutoMQ's batches pass through wrong states, a compaction's new object
overlaps the old ones until they are removed a few records later).

``Coverage`` is the index the checks need and the view does not keep: which objects hold which
stream's offsets (stream objects, and stream-set objects' ranges, inline or from their index block).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import NamedTuple

import numpy as np

from kraftlake.records.s3stream import (
    AssignedS3ObjectId,
    AssignedStreamId,
    ObjectState,
    RemoveS3Object,
    S3Object,
    S3StreamObject,
    S3StreamSetObject,
    StreamRange,
    StreamRanges,
    StreamState,
    UncommittedOffset,
)

from ..invariant import say
from .cluster import node_metadata
from .view import RangeMeta, Stream, StreamsView, UncommittedMeta

Key = tuple  # ("SO", object id) or ("SSO", object id, node id)


def range_columns(ranges: StreamRanges | Iterable[StreamRange]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stream ids, start offsets, end offsets) of an object's ranges as int64 arrays: views of
    a packed index block's ``StreamRanges.columns`` (no copy), or built from inline ranges."""
    if isinstance(ranges, StreamRanges):
        ids, starts, ends = ranges.columns()
        return np.asarray(ids), np.asarray(starts), np.asarray(ends)
    flat = np.fromiter((x for r in ranges for x in (r.stream_id, r.start_offset, r.end_offset)), dtype=np.int64)
    t = flat.reshape(-1, 3)
    return t[:, 0], t[:, 1], t[:, 2]


class IdArray:
    """Ids (stream ids) -> int64, in a flat array that grows, so that a whole array of ids is
    looked up at once. Ids below 0 or at or above ``LIMIT`` are not held: ``take`` answers None
    for an array holding one, and the caller falls back to a loop over what it keeps itself."""

    LIMIT = 1 << 24
    __slots__ = ("default", "values")

    def __init__(self, default: int) -> None:
        self.default = default
        self.values = np.full(1024, default, dtype=np.int64)

    def _grow(self, top: int) -> None:
        n = len(self.values)
        if top >= n:
            more = np.full(max(2 * n, top + 1) - n, self.default, dtype=np.int64)
            self.values = np.concatenate((self.values, more))

    def __setitem__(self, i: int, value: int) -> None:
        if 0 <= i < self.LIMIT:
            self._grow(i)
            self.values[i] = value

    def take(self, ids: np.ndarray) -> np.ndarray | None:
        if not len(ids):
            return np.empty(0, dtype=np.int64)
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= self.LIMIT:
            return None
        self._grow(hi)
        return self.values[ids]


SMALL_SETTLE = 48
"""Up to this many ranges, ``Coverage.settle`` sums in a dict rather than with arrays: for a few
ranges the arrays' fixed cost outweighs what they save. It lies between the sizes at which the two
were measured to cost the same, for a compaction's batch and for an upload's (bench/RESULTS.md)."""


_AT_BITS = 41
"""Offsets below 2^41 and stream ids below 2^21 fit one sortable int64 with a bit to spare."""


def _sum_edges(
    ids: np.ndarray, starts: np.ndarray, ends: np.ndarray, steps: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward entries counted in (step 1) or out (-1), as (stream, offset, sum) where the sum of
    entries starting minus entries ending there is not zero. One sort of int64 keys (stream,
    offset, sign) when the numbers fit, else a sort by two keys."""
    sid = np.concatenate((ids, ids))
    at = np.concatenate((starts, ends))
    up = np.concatenate((steps > 0, steps < 0))  # +1 at a start counted in or an end counted out
    if (
        int(sid.min()) >= 0
        and int(sid.max()) < 1 << (62 - _AT_BITS)
        and int(at.min()) >= 0
        and int(at.max()) < 1 << _AT_BITS
    ):
        keys = (((sid << _AT_BITS) | at) << 1) | up
        keys.sort()
        point = keys >> 1
        first = np.empty(len(keys), dtype=bool)
        first[0] = True
        np.not_equal(point[1:], point[:-1], out=first[1:])
        heads = np.flatnonzero(first)
        ups = np.add.reduceat(keys & 1, heads)
        sums = 2 * ups - np.diff(heads, append=len(keys))
        moved = sums != 0
        point = point[heads][moved]
        return point >> _AT_BITS, point & ((1 << _AT_BITS) - 1), sums[moved]
    by = np.where(up, 1, -1)
    order = np.lexsort((at, sid))
    sid, at, by = sid[order], at[order], by[order]
    first = np.empty(len(sid), dtype=bool)
    first[0] = True
    np.not_equal(sid[1:], sid[:-1], out=first[1:])
    first[1:] |= at[1:] != at[:-1]
    heads = np.flatnonzero(first)
    sums = np.add.reduceat(by, heads)
    moved = sums != 0
    return sid[heads][moved], at[heads][moved], sums[moved]


class _Indexed(NamedTuple):
    """A stream-set object's ranges as the index counted them in (ranges of known streams)."""

    node_id: int
    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    seq: int
    """When it was counted in, against ``Coverage.removed``: a stream dropped later is no longer
    counted here (its entries went with it)."""


class Coverage:
    """Stream id -> the objects holding its offsets, kept as objects come and go, with what
    ``exact`` needs to say in a few steps whether they tile a stream's offsets exactly.

    Whether a stream's entries tile [start, end) exactly depends only on ``net`` and ``odd``
    (below): so a stream needs judging again only where those change (``changed``), or where its
    start, end or duties move (the audit knows those). A compaction replaces a node's stream-set
    objects by one holding the same offsets: hundreds of ranges in, the same hundreds out, and for
    most streams no change at all. Stream-set objects' ranges are therefore counted in and out as
    arrays (``settle`` sums a batch's in one sort, and touches the dicts only where the sum is
    not zero): per range, a few array operations instead of a dozen dict steps, which were most of
    the S3Stream audit's time (bench/RESULTS.md has the runs before and after)."""

    __slots__ = (
        "so",
        "net",
        "odd",
        "ssos",
        "unindexed",
        "changed",
        "streams",
        "removed",
        "small",
        "_alive",
        "_dropped",
        "_parts",
        "_seq",
        "_last_removal",
    )

    def __init__(self, small: int = SMALL_SETTLE) -> None:
        self.small = small
        """Up to this many ranges, ``settle`` sums in a dict (``SMALL_SETTLE``)."""
        self.so: dict[int, dict[int, tuple[int, int]]] = {}
        """Stream -> stream object id -> (start, end)."""
        self.ssos: dict[int, _Indexed] = {}
        """Stream-set object id -> its ranges as counted in."""
        self.net: dict[int, dict[int, int]] = {}
        """Stream -> offset -> (entries starting there) - (entries ending there), zeros left out:
        the entries as edges start -> end of a graph on offsets (see ``exact``)."""
        self.odd: dict[int, int] = {}
        """Stream -> how many of its entries are empty or reversed (start >= end): ``exact``
        does not answer for those streams (they are not edges that go forward)."""
        self.unindexed: dict[int, int] = {}
        """Stream-set objects (id -> node) whose ranges nobody recorded (V2+ without
        ``ObjectWritten``): while there is one, coverage (S5, S6) cannot be judged and is not checked."""
        self.changed: set[int] = set()
        """Streams whose ``net`` or ``odd`` changed since the owner last cleared it."""
        self.streams: set[int] = set()
        """The streams that exist (``add_stream``, ``drop_stream``): a stream-set object's ranges
        of other streams are not counted in."""
        self.removed: dict[int, int] = {}
        """Stream -> when it was last dropped (``_seq``)."""
        self._alive = IdArray(0)  # ``streams`` and ``removed`` again, to look up arrays of ids
        self._dropped = IdArray(-1)
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        """Stream-set objects' ranges counted in (+1) or out (-1) and not yet summed."""
        self._seq = 0
        self._last_removal = -1

    # -- stream objects: one entry each, counted at once ------------------------------------------

    def add(self, sid: int, object_id: int, start: int, end: int) -> None:
        """A stream object of ``sid`` holds [start, end) (replacing what it held before)."""
        entries = self.so.get(sid)
        if entries is None:
            entries = self.so[sid] = {}
        old = entries.get(object_id)
        if old is not None:
            self._count(sid, old[0], old[1], -1)
        entries[object_id] = (start, end)
        self._count(sid, start, end, 1)

    def remove(self, sid: int, object_id: int) -> bool:
        """Forget a stream object; whether it was there."""
        entries = self.so.get(sid)
        old = None if entries is None else entries.pop(object_id, None)
        if old is None:
            return False
        if not entries:
            del self.so[sid]
        self._count(sid, old[0], old[1], -1)
        return True

    def _count(self, sid: int, start: int, end: int, step: int) -> None:
        """Count an entry in (``step`` 1) or out (-1) of ``net`` or ``odd``."""
        self.changed.add(sid)
        if start >= end:
            self._bump(self.odd, sid, step)
            return
        net = self.net.get(sid)
        if net is None:
            net = self.net[sid] = {}
        self._bump(net, start, step)
        self._bump(net, end, -step)
        if not net:
            del self.net[sid]

    @staticmethod
    def _bump(d: dict[int, int], key: int, by: int) -> None:
        n = d.get(key, 0) + by
        if n:
            d[key] = n
        else:
            del d[key]

    # -- stream-set objects: many ranges each, counted a batch at a time --------------------------

    def add_sso(
        self,
        view: StreamsView,
        node_id: int,
        object_id: int,
        columns: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Count in a stream-set object of the view (its ranges of streams that exist).
        ``columns``: its ranges as ``range_columns`` gives them, when the caller has them."""
        sso = view.nodes[node_id].stream_set_objects[object_id]
        if not sso.ranges and object_id not in view.object_index:
            self.unindexed[object_id] = node_id
            return
        self.unindexed.pop(object_id, None)
        ids, starts, ends = columns or range_columns(view.sso_ranges(node_id, sso))
        alive = self._alive.take(ids)
        if alive is None:
            known = self.streams
            alive = np.fromiter((sid in known for sid in ids.tolist()), dtype=bool, count=len(ids))
        if not alive.all():
            keep = alive.astype(bool)
            ids, starts, ends = ids[keep], starts[keep], ends[keep]
        self._seq += 1
        self.ssos[object_id] = _Indexed(node_id, ids, starts, ends, self._seq)
        if len(ids):
            self._parts.append((ids, starts, ends, 1))

    def drop_sso(self, object_id: int) -> None:
        """Count out a stream-set object (nothing if it was never counted in)."""
        self.unindexed.pop(object_id, None)
        x = self.ssos.pop(object_id, None)
        if x is None:
            return
        ids, starts, ends = x.ids, x.starts, x.ends
        if self._last_removal > x.seq:  # streams dropped since took their entries with them
            dropped = self._dropped.take(ids)
            if dropped is None:
                removed = self.removed
                dropped = np.fromiter((removed.get(sid, -1) for sid in ids.tolist()), dtype=np.int64, count=len(ids))
            keep = dropped < x.seq
            if not keep.all():
                ids, starts, ends = ids[keep], starts[keep], ends[keep]
        if len(ids):
            self._parts.append((ids, starts, ends, -1))

    def index(self, view: StreamsView, object_id: int) -> None:
        """An index block arrived for a stream-set object recorded without one."""
        node_id = self.unindexed.get(object_id)
        if node_id is not None:
            self.add_sso(view, node_id, object_id)

    def settle(self) -> None:
        """Sum the stream-set objects' ranges counted in and out since the last call, and apply
        the sums that are not zero to ``net`` and ``odd`` (and ``changed``)."""
        parts = self._parts
        if not parts:
            return
        if sum(len(p[0]) for p in parts) <= self.small:
            self._settle_small()
            return
        ids = np.concatenate([p[0] for p in parts])
        starts = np.concatenate([p[1] for p in parts])
        ends = np.concatenate([p[2] for p in parts])
        steps = np.concatenate([np.full(len(p[0]), p[3], dtype=np.int64) for p in parts])
        parts.clear()
        forward = starts < ends
        if not forward.all():  # empty or reversed ranges: rare, counted one by one
            for sid, step in zip(ids[~forward].tolist(), steps[~forward].tolist()):
                self._bump(self.odd, sid, step)
                self.changed.add(sid)
            ids, starts, ends, steps = ids[forward], starts[forward], ends[forward], steps[forward]
        if not len(ids):
            return
        sid, at, sums = _sum_edges(ids, starts, ends, steps)
        self._add_net(zip(sid.tolist(), at.tolist(), sums.tolist()))

    def _settle_small(self) -> None:
        """``settle`` for a few ranges, where summing in a dict beats the arrays' fixed cost."""
        sums: dict[tuple[int, int], int] = {}
        get = sums.get
        for ids, starts, ends, step in self._parts:
            for sid, a, b in zip(ids.tolist(), starts.tolist(), ends.tolist()):
                if a >= b:
                    self._bump(self.odd, sid, step)
                    self.changed.add(sid)
                    continue
                sums[sid, a] = get((sid, a), 0) + step
                sums[sid, b] = get((sid, b), 0) - step
        self._parts.clear()
        self._add_net((s, a, n) for (s, a), n in sums.items() if n)

    def _add_net(self, sums: Iterable[tuple[int, int, int]]) -> None:
        """Add each (stream, offset, n), n not 0, to ``net``; the streams are ``changed``."""
        nets, bump, changed = self.net, self._bump, self.changed
        for s, a, n in sums:
            net = nets.get(s)
            if net is None:
                net = nets[s] = {}
            bump(net, a, n)
            if not net:
                del nets[s]
            changed.add(s)

    # -- streams ----------------------------------------------------------------------------------

    def add_stream(self, sid: int) -> None:
        """A stream came to exist: stream-set objects counted in from now on count its ranges."""
        self.streams.add(sid)
        self._alive[sid] = 1

    def drop_stream(self, sid: int) -> list[int]:
        """Forget a removed stream (its entries go with it); the ids of its stream objects."""
        self.settle()
        self._seq += 1
        self.removed[sid] = self._last_removal = self._seq
        self._dropped[sid] = self._seq
        self.streams.discard(sid)
        self._alive[sid] = 0
        self.net.pop(sid, None)
        self.odd.pop(sid, None)
        self.changed.discard(sid)
        return sorted(self.so.pop(sid, {}))

    def of(self, sid: int) -> list[tuple[int, int, Key]]:
        """The stream's entries: (start, end, key) of every object holding some of it."""
        out: list[tuple[int, int, Key]] = [(a, b, ("SO", o)) for o, (a, b) in self.so.get(sid, {}).items()]
        dropped = self.removed.get(sid, -1)
        for object_id, x in self.ssos.items():
            if x.seq < dropped:
                continue
            for i in np.flatnonzero(x.ids == sid).tolist():
                out.append((int(x.starts[i]), int(x.ends[i]), ("SSO", object_id, x.node_id)))
        return out

    def exact(self, sid: int, lo: int, hi: int) -> bool | None:
        """Whether the stream's entries, clipped to [lo, hi), hold every offset there exactly
        once (S5 and S6 both right, no historical duty counted); None when the stream has an
        empty or reversed entry (ask ``coverage``).

        The non-empty clipped entries are edges that go forward; they tile [lo, hi) exactly iff
        they form one path from lo to hi, iff every offset strictly inside has as many entries
        starting as ending there (an entry with an end strictly inside is never clipped there)
        and exactly one entry holds lo (starts at or before it, ends after it)."""
        self.settle()
        if hi <= lo:
            return True
        if sid in self.odd:
            return None
        net = self.net.get(sid)
        if net is None:
            return False
        at_lo = 0
        for at, n in net.items():
            if at <= lo:
                at_lo += n
            elif at < hi:
                return False
        return at_lo == 1


def _covered(lo: int, hi: int, intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi) no interval covers."""
    holes = []
    at = lo
    for a, b in sorted(intervals):
        if a > at:
            holes.append((at, min(a, hi)))
        at = max(at, b)
        if at >= hi:
            break
    if at < hi:
        holes.append((at, hi))
    return [(a, b) for a, b in holes if a < b]


def _name(key: Key) -> str:
    if key[0] == "SO":
        return say("S5", "stream_object", object=key[1])
    return say("S5", "stream_set_object", object=key[1], node=key[2])


def _pair(a: RangeMeta, b: RangeMeta) -> dict[str, int]:
    """The fields of S1's and S2's messages that name range ``b`` and the range ``a`` before it."""
    return {"range": b.range_index, "previous": a.range_index}


def ranges_ordered(s: Stream) -> str | None:
    """S1: range starts do not decrease with the range index; a gap between two remaining ranges
    (left by the ranges AutoMQ's ``openStream`` removes:
    ``StreamRuntimeMetadata.checkRemovableRanges``) is held by stream objects."""
    ranges = [r for _, r in sorted(s.ranges.items())]
    sos = [(o.start_offset, o.end_offset) for o in s.objects.values()]
    for a, b in zip(ranges, ranges[1:]):
        if b.start_offset < a.start_offset:
            return say("S1", "out_of_order", start=b.start_offset, previous_start=a.start_offset, **_pair(a, b))
        lo = max(a.end_offset, s.start_offset)
        if lo < b.start_offset:
            holes = _covered(lo, b.start_offset, sos)
            if holes:
                return say("S1", "gap", start=holes[0][0], end=holes[0][1], **_pair(a, b))
    return None


def current_range_is_last(s: Stream) -> str | None:
    """S2: the current range is the last one, and range epochs increase with the index."""
    if not s.ranges:
        return None
    last = max(s.ranges)
    if s.range_index != last:
        return say("S2", "not_last", index=s.range_index, last=last)
    ranges = [r for _, r in sorted(s.ranges.items())]
    for a, b in zip(ranges, ranges[1:]):
        if b.epoch <= a.epoch:
            return say("S2", "epoch_not_above", epoch=b.epoch, previous_epoch=a.epoch, **_pair(a, b))
    return None


def start_within_end(s: Stream) -> str | None:
    """S3: start <= logical end, and no range but the current one lies wholly below the start
    (an empty sealed range at the start is AutoMQ's own doing and allowed)."""
    if s.start_offset > s.end_offset:
        return say("S3", "start_above_end", start=s.start_offset, end=s.end_offset)
    for i, r in sorted(s.ranges.items()):
        if i != s.range_index and r.end_offset < s.start_offset:
            return say("S3", "range_below_start", range=i, end=r.end_offset, start=s.start_offset)
    return None


def end_never_back(s: Stream, end: int) -> str | None:
    """S4: an end offset committed for the stream (``S3StreamEndOffsets``) that lies above its
    start is not below its logical end: the end never moves back (AutoMQ's
    ``StreamRuntimeMetadata.endOffset`` only moves it forward). A commit wholly below the start
    (trimmed away) states an end there: AutoMQ's own doing, allowed."""
    if s.start_offset < end < s.end_offset:
        return say("S4", "end_moves_back", end=end, logical_end=s.end_offset)
    return None


def epoch_and_state_agree(s: Stream) -> str | None:
    """S10: a stream never opened (epoch -1) has no range and is CLOSED; an OPENED stream
    has its current range."""
    if s.epoch == -1:
        if s.ranges:
            return say("S10", "ranges_unopened", count=len(s.ranges))
        if s.state == StreamState.OPENED:
            return say("S10", "opened_unopened")
    elif s.state == StreamState.OPENED and s.range_index not in s.ranges:
        return say("S10", "no_current_range", index=s.range_index)
    return None


def coverage(
    view: StreamsView, s: Stream, entries: list[tuple[int, int, Key]], duty_nodes: Iterable[int] | None = None
) -> tuple[str | None, str | None]:
    """S5 and S6 for one stream: (overlap, gap) over [start, logical end). Offsets a
    node's active historical duty holds (V6: still in its WAL) need no object. ``duty_nodes``:
    the nodes that may hold a duty for the stream (default: all)."""
    lo, hi = s.start_offset, s.end_offset
    if hi <= lo:
        return None, None
    objs = sorted((max(a, lo), min(b, hi), k) for a, b, k in entries if b > lo and a < hi)
    overlap = None
    reach, holder = lo, None
    for a, b, k in objs:
        if a < reach and holder is not None:
            overlap = say("S5", "overlap", start=a, end=min(b, reach), first=_name(holder), second=_name(k))
            break
        if b > reach:
            reach, holder = b, k
    spans = [(a, b) for a, b, _ in objs]
    nodes = view.nodes
    for node in nodes.values() if duty_nodes is None else [nodes[n] for n in duty_nodes if n in nodes]:
        e = node.uncommitted.get(s.stream_id)
        if e is not None and max(lo, e.start_offset) < e.end_offset:
            spans.append((max(lo, e.start_offset), min(e.end_offset, hi)))
    holes = _covered(lo, hi, spans)
    gap = say("S6", "gap", start=holes[0][0], end=holes[0][1]) if holes else None
    return overlap, gap


def object_committed(view: StreamsView, object_id: int) -> str | None:
    """S7: an object a stream or node references is COMMITTED."""
    o = view.objects.get(object_id)
    if o is None:
        return say("S7", "gone", object=object_id)
    if o.state != ObjectState.COMMITTED:
        return say("S7", "not_committed", object=object_id, state=ObjectState(o.state).name)
    return None


def duty_matches_range(view: StreamsView, node_id: int, e: UncommittedMeta) -> str | None:
    """S9: an active historical duty matches exactly one range of its node that ends where the
    duty ends (else the node cannot recover it: AutoMQ's ``StreamControlManager.getOpeningStreams``
    fails)."""
    s = view.streams.get(e.stream_id)
    if s is None:
        return None
    at = max(s.start_offset, e.start_offset)
    if at >= e.end_offset:
        return None
    n = sum(
        1
        for r in s.ranges.values()
        if r.node_id == node_id and r.start_offset <= at < r.end_offset and r.end_offset == e.end_offset
    )
    if n != 1:
        return say("S9", "unmatched", start=at, end=e.end_offset, count=n, node=node_id)
    return None


def advances_end(s: Stream, by: tuple[StreamsView, int] | None, start: int, end: int) -> str | None:
    """S12: data that moves a stream's logical end is committed by the current owner of an OPENED
    stream and continues the end exactly (no gap, no overlap). ``by`` is (view, node) for a
    stream-set object (stream objects do not name their node)."""
    e, st = s.end_offset, s.start_offset
    if end <= e:
        return None
    if by is not None:
        view, node = by
        owner = s.owner()
        if owner != node:
            return say("S12", "not_owner", node=node, logical_end=e, end=end, owner=owner)
        if s.state != StreamState.OPENED:
            return say("S12", "closed", logical_end=e, end=end)
    if e > st:
        if start != e:
            return say("S12", "gap" if start > e else "overlap", start=start, end=end, logical_end=e)
    elif start > st:
        return say("S12", "gap_at_start", start=start, end=end, stream_start=st)
    return None


def stream_object_advances_end(s: Stream, r: S3StreamObject) -> str | None:
    """S12 for a stream object of ``s`` (AutoMQ's ``StreamControlManager.commitStreamObject``):
    the data it holds continues the stream's logical end exactly where it moves it
    (``advances_end``; a stream object names no node, so whose data it is goes unchecked)."""
    bad = advances_end(s, None, r.start_offset, r.end_offset)
    return None if bad is None else say("S12", "stream_object", object=r.object_id, problem=bad)


def stream_set_range_advances_end(
    view: StreamsView, s: Stream, r: S3StreamSetObject, start: int, end: int
) -> str | None:
    """S12 for the range [start, end) of ``s`` in a stream-set object (AutoMQ's
    ``StreamControlManager.commitStreamSetObject``): where it moves the stream's logical end, it
    comes from the stream's current owner, the stream is OPENED and the data continues the end
    exactly (``advances_end``)."""
    bad = advances_end(s, (view, r.node_id), start, end)
    if bad is None:
        return None
    return say("S12", "stream_set_object", object=r.object_id, node=r.node_id, problem=bad)


def id_assigned(kind: str, ident: int, next_id: int, used: Collection[int] | None = None) -> str | None:
    """S8: a stream or object id (``kind``) a record uses is below its high-water mark
    (``next_id``: AutoMQ's ``nextAssignedStreamId`` or ``nextAssignedObjectId``, which
    ``StreamControlManager.createStream`` and ``S3ObjectControlManager.prepareObject`` take ids
    from) and, where ``used`` is given (the ids of the streams made before), not used again."""
    if ident >= next_id:
        return say("S8", "unassigned", id_kind=kind, id=ident, next=next_id)
    if used is not None and ident in used:
        return say("S8", "reused", id_kind=kind, id=ident)
    return None


def prepared_once(view: StreamsView, r: S3Object, used: Collection[int]) -> str | None:
    """S8: an object is PREPARED once (``S3ObjectControlManager.prepareObject`` gives each
    preparation a new id): not again after it was removed (``used``: the object ids seen
    before), nor back from COMMITTED or MARK_DESTROYED. A record of another state is not judged."""
    if r.object_state != ObjectState.PREPARED:
        return None
    before = view.objects.get(r.object_id)
    if before is None:
        return say("S8", "prepared_again", object=r.object_id) if r.object_id in used else None
    if before.state != ObjectState.PREPARED:
        return say("S8", "back_to_prepared", object=r.object_id, state=ObjectState(before.state).name)
    return None


def mark_never_back(view: StreamsView, r: AssignedStreamId | AssignedS3ObjectId) -> str | None:
    """S8: an id's high-water mark never moves back. AutoMQ's ``StreamControlManager.replay
    (AssignedStreamIdRecord)`` and ``S3ObjectControlManager.replay(AssignedS3ObjectIdRecord)``
    set it to the id assigned + 1, and the controller assigns only from the mark up."""
    if isinstance(r, AssignedStreamId):
        kind, old, new = "stream", view.next_stream_id, r.assigned_stream_id + 1
    else:
        kind, old, new = "object", view.next_object_id, r.assigned_s3_object_id + 1
    if new < old:
        return say("S8", "mark_moves_back", id_kind=kind, old=old, new=new)
    return None


def duty_entry_forward(e: UncommittedOffset) -> str | None:
    """S9: an entry of a ``NodeWALUncommittedOffsets`` record does not start above its end.
    AutoMQ's ``StreamControlManager.replay(NodeWALUncommittedOffsetsRecord)`` upserts a duty
    whose start is below its end, removes it at start == end, and silently ignores the rest."""
    if e.start_offset > e.end_offset:
        return say("S9", "reversed", start=e.start_offset, end=e.end_offset)
    return None


def prepared_in_time(view: StreamsView, object_id: int, deadline: int, now: int, interval: int) -> str | None:
    """S11: an object PREPARED with ``deadline`` (its ``timestamp``, the expiry
    ``S3ObjectControlManager.prepareObject`` sets) is committed or gone by ``interval`` (the
    controller's check interval) after it: ``checkS3ObjectsLifecycle`` marks an expired one
    destroyed at its next round. Judged at ``now``; an object prepared again since has another
    deadline, judged on its own."""
    o = view.objects.get(object_id)
    if o is None or o.state != ObjectState.PREPARED or o.timestamp != deadline or now - interval <= deadline:
        return None
    return say("S11", "overdue", deadline=deadline, interval=interval)


def deleted_after_retention(view: StreamsView, r: RemoveS3Object, retention: int) -> str | None:
    """S13: a MARK_DESTROYED object is deleted no sooner than ``retention`` ms (AutoMQ's
    ``s3.object.delete.retention.minutes``) after it was marked (``StreamsView.marked_at``):
    ``S3ObjectControlManager.checkS3ObjectsLifecycle`` deletes it one to two retention periods
    later. An object never marked (KEEP_DATA drops the metadata at once) or a record without a
    time is not judged."""
    marked = view.marked_at.get(r.object_id)
    if marked is None or r.ts_ms is None:
        return None
    age = r.ts_ms - marked
    if age < retention:
        return say("S13", "early", age=age, retention=retention)
    return None


def epoch_never_back(view: StreamsView, node_id: int, epoch: int) -> str | None:
    """S14: a node registers (KV ``__automq_node/<id>``, ``nodes.registration_epoch``) at an
    epoch not below the one it is registered at: AutoMQ's ``NodeControlManager.register`` answers
    NODE_EPOCH_EXPIRED to a lower one (``cluster.register``, the decider's side)."""
    old = node_metadata(view, node_id)
    if old is not None and int(old.get("e", -1)) > epoch:
        return say("S14", "epoch_back", old=old.get("e"), new=epoch)
    return None


def check_view(view: StreamsView) -> list[tuple[str, str, str]]:
    """Every state invariant over the whole view, as (invariant, entity, message): what holds
    between two controller results (the audit checks the same incrementally, with a grace)."""
    out: list[tuple[str, str, str]] = []
    cover = Coverage()
    for sid in view.streams:
        cover.add_stream(sid)
    for node_id, node in sorted(view.nodes.items()):
        for object_id in sorted(node.stream_set_objects):
            cover.add_sso(view, node_id, object_id)
    for sid, s in sorted(view.streams.items()):
        entity = f"stream/{sid}"
        for inv, check in (
            ("S1", ranges_ordered),
            ("S2", current_range_is_last),
            ("S3", start_within_end),
            ("S10", epoch_and_state_agree),
        ):
            msg = check(s)
            if msg:
                out.append((inv, entity, msg))
        for o in sorted(s.objects):
            cover.add(sid, o, s.objects[o].start_offset, s.objects[o].end_offset)
            msg = object_committed(view, o)
            if msg:
                out.append(("S7", f"{entity}/object/{o}", msg))
        if not cover.unindexed:
            overlap, gap = coverage(view, s, cover.of(sid))
            out += [(inv, entity, m) for inv, m in (("S5", overlap), ("S6", gap)) if m]
    for node_id, node in sorted(view.nodes.items()):
        for o in sorted(node.stream_set_objects):
            msg = object_committed(view, o)
            if msg:
                out.append(("S7", f"node/{node_id}/object/{o}", msg))
        for sid, e in sorted(node.uncommitted.items()):
            msg = duty_matches_range(view, node_id, e)
            if msg:
                out.append(("S9", f"duty/{node_id}/{sid}", msg))
    return out
