"""Commits of uploaded objects: stream-set objects (WAL upload, compaction, replace) and stream
objects (compaction, expired-object cleanup), with the continuity check and V6's historical WAL
duties (AutoMQ's ``StreamControlManager.commitStreamSetObject`` and ``commitStreamObject``).

Order matters and is AutoMQ's: the idempotency check (an object already COMMITTED answers NONE with
no records) runs before continuity (AutoMQ #1055), and a compaction never moves logical state.
"""

from __future__ import annotations

from kraftlake.records.s3stream import (
    CompactOperation,
    NodeWALUncommittedOffsets,
    ObjectState,
    RemoveS3StreamObject,
    RemoveStreamSetObject,
    S3Object,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamEndOffset,
    StreamRange,
    StreamState,
    UncommittedOffset,
)

from . import commands as c
from .objects import commit, mark_destroy
from .streams import node_epoch_check, ownership_check
from .view import V2, V6, ObjectMeta, StreamsView


def replace(view: StreamsView, object_id: int, attrs: int) -> c.Decision:
    """A COMMITTED object gets new attributes, nothing else (``replaceCommittedObject``)."""
    obj = view.objects.get(object_id)
    if obj is None:
        return c.fail(c.OBJECT_NOT_EXIST)
    if obj.state != ObjectState.COMMITTED:
        return c.fail(c.OBJECT_NOT_COMMITED)
    # AutoMQ's ``S3ObjectControlManager.replaceCommittedObject`` writes Timestamp = objectSize; kept, to
    # write its records.
    record = S3Object(
        object_id=object_id,
        object_size=obj.size,
        object_state=ObjectState.COMMITTED,
        timestamp=obj.size,
        attributes=attrs,
    )
    return c.Decision(records=(record,))


def _continuity(
    view: StreamsView, node_id: int, items: list[tuple[int, int, int]], *, owners: bool = True, offsets: bool = True
) -> tuple[int, str | None]:
    """4.11 for (stream, start, end) items, by stream then start: each continues where the stream
    (or the node's historical duty) ends, or lies wholly below the stream's start. ``owners`` /
    ``offsets`` False skip the ownership / offset checks (faulty controllers, ``bugs``)."""
    ends: dict[int, int] = {}
    for sid, start, end in sorted(items):
        s = view.streams.get(sid)
        if s is None or end <= s.start_offset:
            continue
        duty = view.active_duty(node_id, sid) if view.version >= V6 else None
        if duty is not None:
            expected = ends.get(sid, max(s.start_offset, duty.start_offset))
            if end > duty.end_offset:
                return c.OFFSET_NOT_MATCHED, f"stream {sid}: [{start}, {end}) passes the sealed end {duty.end_offset}"
            if start == expected or (
                sid not in ends and duty.start_offset <= s.start_offset and start < s.start_offset
            ):
                ends[sid] = end
                continue
            return c.OFFSET_NOT_MATCHED, f"stream {sid}: [{start}, {end}) does not continue the duty at {expected}"
        if owners:
            if s.state != StreamState.OPENED:
                return c.STREAM_NOT_OPENED, f"stream {sid} is not opened"
            cur = s.current_range()
            if cur is None:
                return c.STREAM_INNER_ERROR, f"stream {sid} has no current range"
            if cur.node_id != node_id:
                return c.STREAM_FENCED, f"stream {sid} is owned by node {cur.node_id}"
        if not offsets:
            ends[sid] = end
            continue
        if sid in ends:
            ok = start == ends[sid]
        elif s.end_offset > s.start_offset:
            ok = start == s.end_offset
        else:
            ok = start <= s.start_offset
        if not ok:
            at = ends.get(sid, s.end_offset)
            return c.OFFSET_NOT_MATCHED, f"stream {sid}: [{start}, {end}) does not continue the logical end {at}"
        ends[sid] = end
    return c.NONE, None


def _current_owner(view: StreamsView, node_id: int, sid: int) -> bool:
    s = view.streams.get(sid)
    return s is not None and s.owner() == node_id and (view.version < V6 or view.active_duty(node_id, sid) is None)


def _duties(view: StreamsView, node_id: int, items: list[tuple[int, int, int]]) -> list:
    """4.12: after a WAL upload, the node's duties shrink to what it has still not committed."""
    node = view.nodes.get(node_id)
    if node is None or not node.uncommitted:
        return []
    committed: dict[int, int] = {}
    for sid, _, end in items:
        committed[sid] = max(committed.get(sid, end), end)
    entries = []
    for sid, e in sorted(node.uncommitted.items()):
        s = view.streams.get(sid)
        if s is None or max(s.start_offset, e.start_offset) >= e.end_offset:
            entries.append(UncommittedOffset(stream_id=sid, start_offset=e.end_offset, end_offset=e.end_offset))
            continue
        top = committed.get(sid)
        if top is None:
            continue
        if top == e.end_offset:
            entries.append(UncommittedOffset(stream_id=sid, start_offset=e.end_offset, end_offset=e.end_offset))
        elif top > s.start_offset:
            entries.append(UncommittedOffset(stream_id=sid, start_offset=top, end_offset=e.end_offset))
    return [NodeWALUncommittedOffsets(node_id=node_id, entries=tuple(entries))] if entries else []


def commit_stream_set_object(
    view: StreamsView, cmd: c.CommitStreamSetObject, *, owners: bool = True, offsets: bool = True
) -> c.Decision:
    """4.10. ``owners`` False skips the node epoch and stream ownership checks, ``offsets`` False
    the offset continuity check: faulty controllers (``bugs``), never AutoMQ's."""
    err = node_epoch_check(view, cmd.node_id, cmd.node_epoch, not cmd.failover_mode) if owners else c.NONE
    if err:
        return c.fail(err)
    if cmd.compacted_object_ids == (cmd.object_id,):
        return replace(view, cmd.object_id, cmd.attributes)
    pending: dict[int, ObjectMeta] = {}
    err, records = commit(view, cmd.object_id, cmd.object_size, cmd.now_ms, cmd.attributes, pending)
    if err == c.REDUNDANT_OPERATION:
        return c.Decision()
    if err:
        return c.fail(err, f"object {cmd.object_id}")
    compaction = bool(cmd.compacted_object_ids)
    data_ts, order_id = cmd.now_ms, cmd.order_id
    if compaction:
        node = view.nodes[cmd.node_id]
        found = [node.stream_set_objects.get(i) for i in cmd.compacted_object_ids]
        compacted = [o for o in found if o is not None]
        marks = mark_destroy(view, cmd.compacted_object_ids, (), cmd.now_ms, pending)
        if marks is None or len(compacted) != len(found):
            return c.fail(c.COMPACTED_OBJECTS_NOT_FOUND, f"compacted objects {list(cmd.compacted_object_ids)}")
        records += marks
        data_ts = min(o.data_time_in_ms for o in compacted)
        if order_id == -1:
            order_id = min(o.order_id for o in compacted)
    if cmd.object_id != -1:
        inline = tuple(
            StreamRange(stream_id=r.stream_id, start_offset=r.start_offset, end_offset=r.end_offset)
            for r in sorted(cmd.ranges, key=lambda r: r.stream_id)
        )
        if view.version >= V2:
            records.append(
                S3StreamSetObject(
                    node_id=cmd.node_id, object_id=cmd.object_id, order_id=order_id, data_time_in_ms=data_ts
                )
            )
        else:
            records.append(
                S3StreamSetObject(
                    version=0,
                    node_id=cmd.node_id,
                    object_id=cmd.object_id,
                    order_id=order_id,
                    data_time_in_ms=data_ts,
                    ranges=inline,
                )
            )
    items = [(r.stream_id, r.start_offset, r.end_offset) for r in cmd.ranges]
    items += [(o.stream_id, o.start_offset, o.end_offset) for o in cmd.stream_objects]
    if not compaction and view.version >= V2:
        ends: dict[int, int] = {}
        for sid, _, end in items:
            if _current_owner(view, cmd.node_id, sid):
                ends[sid] = max(ends.get(sid, end), end)
        if ends:
            records.append(
                S3StreamEndOffsets(
                    end_offsets=tuple(StreamEndOffset(stream_id=sid, end_offset=e) for sid, e in ends.items())
                )
            )
    for so in cmd.stream_objects:
        if so.stream_id in view.streams:
            err, recs = commit(view, so.object_id, so.object_size, cmd.now_ms, so.attributes, pending)
            if err == c.REDUNDANT_OPERATION:
                return c.Decision()
            if err:
                return c.fail(err, f"stream object {so.object_id}")
            records += recs
            records.append(_stream_object(view, so.stream_id, so.start_offset, so.end_offset, so.object_id, cmd.now_ms))
        else:
            # The stream was deleted meanwhile: the new object goes at once (AutoMQ #806).
            marks = mark_destroy(view, (so.object_id,), (CompactOperation.DEEP_DELETE,), cmd.now_ms, pending)
            if marks is None:
                return c.fail(c.OBJECT_NOT_EXIST, f"stream object {so.object_id}")
            records += marks
    if compaction:
        records += [RemoveStreamSetObject(node_id=cmd.node_id, object_id=i) for i in cmd.compacted_object_ids]
        return c.Decision(records=tuple(records))
    err, why = _continuity(view, cmd.node_id, items, owners=owners, offsets=offsets)
    if err:
        return c.fail(err, why)
    if view.version >= V6:
        records += _duties(view, cmd.node_id, items)
    return c.Decision(records=tuple(records))


def _stream_object(view: StreamsView, sid: int, start: int, end: int, object_id: int, now_ms: int) -> S3StreamObject:
    if view.version >= V2:
        return S3StreamObject(stream_id=sid, start_offset=start, end_offset=end, object_id=object_id)
    return S3StreamObject(
        version=0, stream_id=sid, start_offset=start, end_offset=end, object_id=object_id, data_time_in_ms=now_ms
    )


def commit_stream_object(view: StreamsView, cmd: c.CommitStreamObject) -> c.Decision:
    """4.13: a compaction of stream objects into one (no offset validation: that the new object
    is the union of its sources is the broker's duty), or the cleanup of expired ones (id -1)."""
    if cmd.source_object_ids == (cmd.object_id,):
        return replace(view, cmd.object_id, cmd.attributes)
    err = node_epoch_check(view, cmd.node_id, cmd.node_epoch, True)
    if not err and cmd.stream_epoch != c.NO_EPOCH:
        err = ownership_check(view, cmd.stream_id, cmd.node_id, cmd.stream_epoch)
    if err:
        return c.fail(err)
    pending: dict[int, ObjectMeta] = {}
    err, records = commit(view, cmd.object_id, cmd.object_size, cmd.now_ms, cmd.attributes, pending)
    if err == c.REDUNDANT_OPERATION:
        return c.Decision()
    if err:
        return c.fail(err, f"object {cmd.object_id}")
    if cmd.source_object_ids:
        marks = mark_destroy(view, cmd.source_object_ids, cmd.operations, cmd.now_ms, pending)
        if marks is None:
            return c.fail(c.COMPACTED_OBJECTS_NOT_FOUND, f"source objects {list(cmd.source_object_ids)}")
        records += marks
    if cmd.object_id != -1:
        records.append(_stream_object(view, cmd.stream_id, cmd.start_offset, cmd.end_offset, cmd.object_id, cmd.now_ms))
    records += [RemoveS3StreamObject(stream_id=cmd.stream_id, object_id=i) for i in cmd.source_object_ids]
    return c.Decision(records=tuple(records))
