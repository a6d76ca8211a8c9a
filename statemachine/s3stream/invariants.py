"""S3Stream invariants (automq-s3stream.md 5.5 I1-I10 and section 7): what must hold in a
``StreamsView``, as pure functions of the view that return a message when an entity is wrong and
None when it is right. ``replay.s3stream_audit`` decides when to ask them and for how long a wrong
state may last (the grace: AutoMQ's batches pass through wrong states, a compaction's new object
overlaps the old ones until they are removed a few records later).

``Coverage`` is the index the checks need and the view does not keep: which objects hold which
stream's offsets (stream objects, and stream-set objects' ranges, inline or from their index block).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftlake.records.s3stream import ObjectState, StreamRange, StreamRanges, StreamState

from .view import Stream, StreamsView, UncommittedMeta

Key = tuple  # ("SO", object id) or ("SSO", object id, node id)


def triplets(ranges: StreamRanges | Iterable[StreamRange]) -> Iterable[tuple[int, int, int]]:
    """(stream id, start, end) of an object's ranges: read from the buffer of a packed index
    block (``StreamRanges``), without building a ``StreamRange`` each; or from inline ranges."""
    if isinstance(ranges, StreamRanges):
        return zip(*ranges.columns())
    return ((r.stream_id, r.start_offset, r.end_offset) for r in ranges)


class Coverage:
    """Stream id -> the objects holding its offsets, kept as objects come and go, with what
    ``exact`` needs to say in a few steps whether they tile a stream's offsets exactly."""

    __slots__ = ("by_stream", "net", "odd", "sso_streams", "sso_node", "unindexed")

    def __init__(self) -> None:
        self.by_stream: dict[int, dict[Key, tuple[int, int]]] = {}
        self.net: dict[int, dict[int, int]] = {}
        """Stream -> offset -> (entries starting there) - (entries ending there), zeros left out:
        the entries as edges start -> end of a graph on offsets (see ``exact``)."""
        self.odd: dict[int, int] = {}
        """Stream -> how many of its entries are empty or reversed (start >= end): ``exact``
        does not answer for those streams (they are not edges that go forward)."""
        self.sso_streams: dict[int, list[int]] = {}
        self.sso_node: dict[int, int] = {}
        self.unindexed: set[int] = set()
        """Stream-set objects whose ranges nobody recorded (V2+ without ``ObjectWritten``):
        while there is one, coverage (S5, S6) cannot be judged and is not checked."""

    def of(self, sid: int) -> list[tuple[int, int, Key]]:
        return [(a, b, k) for k, (a, b) in self.by_stream.get(sid, {}).items()]

    def _count(self, sid: int, start: int, end: int, step: int) -> None:
        """Count an entry in (``step`` 1) or out (-1) of ``net`` or ``odd``. The hot path (an
        object's ranges, ``add``/``remove``) does the same inline."""
        if start >= end:
            n = self.odd.get(sid, 0) + step
            if n:
                self.odd[sid] = n
            else:
                del self.odd[sid]
            return
        net = self.net.get(sid)
        if net is None:
            net = self.net[sid] = {}
        for at, d in ((start, step), (end, -step)):
            n = net.get(at, 0) + d
            if n:
                net[at] = n
            else:
                del net[at]
        if not net:
            del self.net[sid]

    def add(self, sid: int, key: Key, start: int, end: int) -> None:
        entries = self.by_stream.get(sid)
        if entries is None:
            entries = self.by_stream[sid] = {}
        else:
            old = entries.get(key)
            if old is not None:
                self._count(sid, old[0], old[1], -1)
        entries[key] = (start, end)
        if start >= end:
            self._count(sid, start, end, 1)
            return
        net = self.net.get(sid)
        if net is None:
            self.net[sid] = {start: 1, end: -1}
            return
        n = net.get(start, 0) + 1
        if n:
            net[start] = n
        else:
            del net[start]
        n = net.get(end, 0) - 1
        if n:
            net[end] = n
        else:
            del net[end]  # a forward edge never leaves ``net`` empty: its lowest offset only starts

    def exact(self, sid: int, lo: int, hi: int) -> bool | None:
        """Whether the stream's entries, clipped to [lo, hi), hold every offset there exactly
        once (S5 and S6 both right, no historical duty counted); None when the stream has an
        empty or reversed entry (ask ``coverage``).

        The non-empty clipped entries are edges that go forward; they tile [lo, hi) exactly iff
        they form one path from lo to hi, iff every offset strictly inside has as many entries
        starting as ending there (an entry with an end strictly inside is never clipped there)
        and exactly one entry holds lo (starts at or before it, ends after it)."""
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

    def remove(self, sid: int, key: Key) -> bool:
        entries = self.by_stream.get(sid)
        if entries is None:
            return False
        old = entries.pop(key, None)
        if old is None:
            return False
        if not entries:
            del self.by_stream[sid]
        start, end = old
        if start >= end:
            self._count(sid, start, end, -1)
            return True
        net = self.net[sid]
        n = net.get(start, 0) - 1
        if n:
            net[start] = n
        else:
            del net[start]
        n = net.get(end, 0) + 1
        if n:
            net[end] = n
        else:
            del net[end]
        if not net:
            del self.net[sid]
        return True

    def drop_stream(self, sid: int) -> list[int]:
        """Forget a removed stream; the ids of its stream objects (SSOs stay with their node)."""
        entries = self.by_stream.pop(sid, {})
        self.net.pop(sid, None)
        self.odd.pop(sid, None)
        for k in entries:
            if k[0] == "SSO":
                streams = self.sso_streams.get(k[1])
                if streams and sid in streams:
                    streams.remove(sid)
        return sorted(k[1] for k in entries if k[0] == "SO")

    def add_sso(self, view: StreamsView, node_id: int, object_id: int) -> list[int]:
        sso = view.nodes[node_id].stream_set_objects[object_id]
        self.sso_node[object_id] = node_id
        if not sso.ranges and object_id not in view.object_index:
            self.unindexed.add(object_id)
            return []
        self.unindexed.discard(object_id)
        key = ("SSO", object_id, node_id)
        known, add = view.streams, self.add
        streams = []
        for sid, start, end in triplets(view.sso_ranges(node_id, sso)):
            if sid in known:
                add(sid, key, start, end)
                streams.append(sid)
        self.sso_streams[object_id] = streams
        return streams

    def drop_sso(self, object_id: int) -> list[int]:
        node_id = self.sso_node.pop(object_id, None)
        self.unindexed.discard(object_id)
        streams = self.sso_streams.pop(object_id, [])
        key, remove = ("SSO", object_id, node_id), self.remove
        for sid in streams:
            remove(sid, key)
        return streams

    def index(self, view: StreamsView, object_id: int) -> None:
        """An index block arrived for a stream-set object recorded without one."""
        node_id = self.sso_node.get(object_id)
        if object_id in self.unindexed and node_id is not None:
            self.add_sso(view, node_id, object_id)


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
    return f"stream object {key[1]}" if key[0] == "SO" else f"stream-set object {key[1]} of node {key[2]}"


def ranges_ordered(s: Stream) -> str | None:
    """S1 (I1): range starts do not decrease with the range index; a gap between two remaining
    ranges (left by ranges removed on open) is held by stream objects."""
    ranges = [r for _, r in sorted(s.ranges.items())]
    sos = [(o.start_offset, o.end_offset) for o in s.objects.values()]
    for a, b in zip(ranges, ranges[1:]):
        if b.start_offset < a.start_offset:
            return f"range {b.range_index} starts at {b.start_offset}, before range {a.range_index} ({a.start_offset})"
        lo = max(a.end_offset, s.start_offset)
        if lo < b.start_offset:
            holes = _covered(lo, b.start_offset, sos)
            if holes:
                return (f"offsets [{holes[0][0]}, {holes[0][1]}) between ranges {a.range_index} and {b.range_index}"
                        " are in no stream object")  # fmt: skip
    return None


def current_range_is_last(s: Stream) -> str | None:
    """S2 (I2): the current range is the last one, and range epochs increase with the index."""
    if not s.ranges:
        return None
    last = max(s.ranges)
    if s.range_index != last:
        return f"current range index {s.range_index} is not the last range {last}"
    ranges = [r for _, r in sorted(s.ranges.items())]
    for a, b in zip(ranges, ranges[1:]):
        if b.epoch <= a.epoch:
            return f"range {b.range_index} has epoch {b.epoch}, not above range {a.range_index}'s {a.epoch}"
    return None


def start_within_end(s: Stream) -> str | None:
    """S3 (I3): start <= logical end, and no range but the current one lies wholly below the start
    (an empty sealed range at the start is AutoMQ's own doing and allowed)."""
    if s.start_offset > s.end_offset:
        return f"start offset {s.start_offset} is above the logical end {s.end_offset}"
    for i, r in sorted(s.ranges.items()):
        if i != s.range_index and r.end_offset < s.start_offset:
            return f"range {i} ends at {r.end_offset}, below the start offset {s.start_offset}"
    return None


def epoch_and_state_agree(s: Stream) -> str | None:
    """S10 (I10): a stream never opened (epoch -1) has no range and is CLOSED; an OPENED stream
    has its current range."""
    if s.epoch == -1:
        if s.ranges:
            return f"epoch -1 but {len(s.ranges)} range(s)"
        if s.state == StreamState.OPENED:
            return "OPENED at epoch -1"
    elif s.state == StreamState.OPENED and s.range_index not in s.ranges:
        return f"OPENED without its current range {s.range_index}"
    return None


def coverage(view: StreamsView, s: Stream, entries: list[tuple[int, int, Key]],
             duty_nodes: Iterable[int] | None = None) -> tuple[str | None, str | None]:  # fmt: skip
    """S5 (I5) and S6 (I6) for one stream: (overlap, gap) over [start, logical end). Offsets a
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
            overlap = f"offsets [{a}, {min(b, reach)}) are held by {_name(holder)} and {_name(k)}"
            break
        if b > reach:
            reach, holder = b, k
    spans = [(a, b) for a, b, _ in objs]
    nodes = view.nodes
    for node in (nodes.values() if duty_nodes is None else [nodes[n] for n in duty_nodes if n in nodes]):
        e = node.uncommitted.get(s.stream_id)
        if e is not None and max(lo, e.start_offset) < e.end_offset:
            spans.append((max(lo, e.start_offset), min(e.end_offset, hi)))
    holes = _covered(lo, hi, spans)
    gap = f"offsets [{holes[0][0]}, {holes[0][1]}) are in no object" if holes else None
    return overlap, gap


def object_committed(view: StreamsView, object_id: int) -> str | None:
    """S7 (I7): an object a stream or node references is COMMITTED."""
    o = view.objects.get(object_id)
    if o is None:
        return f"object {object_id} is gone"
    if o.state != ObjectState.COMMITTED:
        return f"object {object_id} is {ObjectState(o.state).name}"
    return None


def duty_matches_range(view: StreamsView, node_id: int, e: UncommittedMeta) -> str | None:
    """S9 (I9): an active historical duty matches exactly one range of its node that ends where
    the duty ends (else the node cannot recover it: getOpeningStreams fails)."""
    s = view.streams.get(e.stream_id)
    if s is None:
        return None
    at = max(s.start_offset, e.start_offset)
    if at >= e.end_offset:
        return None
    n = sum(1 for r in s.ranges.values()
            if r.node_id == node_id and r.start_offset <= at < r.end_offset and r.end_offset == e.end_offset)  # fmt: skip
    if n != 1:
        return f"duty [{at}, {e.end_offset}) matches {n} sealed range(s) of node {node_id}"
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
            return f"node {node} moves the logical end {e} -> {end} but node {owner} owns the stream"
        if s.state != StreamState.OPENED:
            return f"moves the logical end {e} -> {end} of a CLOSED stream"
    if e > st:
        if start != e:
            kind = "a gap" if start > e else "an overlap"
            return f"[{start}, {end}) leaves {kind} at the logical end {e}"
    elif start > st:
        return f"[{start}, {end}) leaves a gap at the start {st} (the stream is trimmed to its end)"
    return None


def check_view(view: StreamsView) -> list[tuple[str, str, str]]:
    """Every state invariant over the whole view, as (invariant, entity, message): what holds
    between two controller results (the audit checks the same incrementally, with a grace)."""
    out: list[tuple[str, str, str]] = []
    cover = Coverage()
    for node_id, node in sorted(view.nodes.items()):
        for object_id in sorted(node.stream_set_objects):
            cover.add_sso(view, node_id, object_id)
    for sid, s in sorted(view.streams.items()):
        entity = f"stream/{sid}"
        for inv, check in (("S1", ranges_ordered), ("S2", current_range_is_last), ("S3", start_within_end),
                           ("S10", epoch_and_state_agree)):  # fmt: skip
            msg = check(s)
            if msg:
                out.append((inv, entity, msg))
        for o in sorted(s.objects):
            cover.add(sid, ("SO", o), s.objects[o].start_offset, s.objects[o].end_offset)
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
