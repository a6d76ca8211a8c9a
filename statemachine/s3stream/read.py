"""The read path: which objects hold a stream's offsets, in read order, as AutoMQ's
``S3StreamsMetadataImage.getObjects`` answers.

Stream objects are scanned by start offset; between them, the range containing the next offset
names the node whose stream-set objects (by order id) hold the data. The last range is open-ended
and empty ranges contain nothing. The scan keeps a node's object list across rounds while it
still yields, exactly like AutoMQ's, so that a gap filled by stream objects resumes in the same
list. Results are checked before they are returned (AutoMQ's sanity check).
"""

from __future__ import annotations

import bisect

import msgspec

from .view import RangeMeta, StreamsView

STREAM, STREAM_SET = "STREAM", "STREAM_SET"
MAX_ROUNDS = 100_000
"""AutoMQ halts its JVM after 20 rounds without progress (#1744); here a loop that outruns any
real history is reported as an error instead."""


class ReadPathError(ValueError):
    """The metadata cannot answer a read consistently (AutoMQ completes the read exceptionally)."""


class ObjectRef(msgspec.Struct, frozen=True, kw_only=True):
    object_id: int
    object_type: str
    """``STREAM`` (a stream object) or ``STREAM_SET`` (a node's stream-set object)."""
    start_offset: int
    end_offset: int
    """This stream's offsets in the object."""
    node_id: int | None = None


class InRangeObjects(msgspec.Struct, frozen=True, kw_only=True):
    stream_id: int
    start_offset: int
    """The first object's start (may be below the requested start)."""
    end_offset: int
    """The last object's end."""
    objects: tuple[ObjectRef, ...]


def range_position(ranges: list[RangeMeta], offset: int) -> int | None:
    """The list position (not range index) of the range containing ``offset``: the last range is
    [start, +inf), empty ranges contain nothing."""
    last = len(ranges) - 1
    for i, r in enumerate(ranges):
        if i == last:
            return i if r.start_offset <= offset else None
        if r.start_offset <= offset < r.end_offset:
            return i
    return None


def objects_for(
    view: StreamsView, stream_id: int, start: int, end: int = -1, limit: int = 2**31 - 1
) -> InRangeObjects | None:
    """The objects holding stream ``stream_id`` from ``start`` up to ``end`` (-1: no end), at most
    ``limit``, in read order; None where AutoMQ answers INVALID (unknown stream, start below the
    stream's start, end below start, negative limit)."""
    s = view.streams.get(stream_id)
    if stream_id < 0 or limit < 0 or (end != -1 and start > end) or s is None or start < s.start_offset:
        return None
    sos = sorted(s.objects.values(), key=lambda o: (o.start_offset, o.object_id))
    ranges = [r for _, r in sorted(s.ranges.items())]
    out: list[ObjectRef] = []
    nxt = start
    cursor = max(bisect.bisect_right([o.start_offset for o in sos], start) - 1, 0)
    ssos: list | None = None
    sso_node = -1
    sso_at = 0
    last_pos: int | None = None

    def done() -> bool:
        return len(out) >= limit or (end != -1 and nxt >= end)

    for _ in range(MAX_ROUNDS):
        if done():
            break
        while cursor < len(sos):
            o = sos[cursor]
            if o.end_offset <= nxt:
                cursor += 1
            elif o.start_offset == nxt or (not out and o.start_offset <= nxt):
                out.append(
                    ObjectRef(
                        object_id=o.object_id, object_type=STREAM, start_offset=o.start_offset, end_offset=o.end_offset
                    )
                )
                nxt = o.end_offset
                cursor += 1
                if done():
                    break
            else:
                break
        if done():
            break
        if ssos is None:
            pos = range_position(ranges, nxt)
            if pos is None or pos == last_pos:
                break
            last_pos = pos
            sso_node = ranges[pos].node_id
            node = view.nodes.get(sso_node)
            ssos = (
                []
                if node is None
                else sorted(node.stream_set_objects.values(), key=lambda o: (o.order_id, o.object_id))
            )
            sso_at = 0
        taken = False
        while sso_at < len(ssos):
            rng = view.sso_range(ssos[sso_at], stream_id)
            if rng is None or rng.end_offset <= nxt:
                sso_at += 1
            elif rng.start_offset == nxt or (not out and rng.start_offset < nxt):
                out.append(
                    ObjectRef(
                        object_id=ssos[sso_at].object_id,
                        object_type=STREAM_SET,
                        start_offset=rng.start_offset,
                        end_offset=rng.end_offset,
                        node_id=sso_node,
                    )
                )
                nxt = rng.end_offset
                sso_at += 1
                taken = True
                if done():
                    break
            else:
                break
        if sso_at >= len(ssos) or not taken:
            ssos = None
    else:
        raise ReadPathError(f"stream {stream_id}: the read path did not finish in {MAX_ROUNDS} rounds")
    _sanity_check(stream_id, start, limit, out)
    if not out:
        return InRangeObjects(stream_id=stream_id, start_offset=start, end_offset=start, objects=())
    return InRangeObjects(
        stream_id=stream_id, start_offset=out[0].start_offset, end_offset=out[-1].end_offset, objects=tuple(out)
    )


def _sanity_check(stream_id: int, start: int, limit: int, out: list[ObjectRef]) -> None:
    if len(out) > limit:
        raise ReadPathError(f"stream {stream_id}: {len(out)} objects above the limit {limit}")
    if out and out[0].start_offset > start:
        raise ReadPathError(f"stream {stream_id}: the first object starts at {out[0].start_offset}, after {start}")
    for a, b in zip(out, out[1:]):
        if a.end_offset != b.start_offset:
            raise ReadPathError(
                f"stream {stream_id}: object {a.object_id} ends at {a.end_offset} but object {b.object_id}"
                f" starts at {b.start_offset}"
            )
