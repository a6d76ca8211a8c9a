"""The S3Stream reducer: ``apply(view, record)`` folds one record into a ``StreamsView`` exactly as
AutoMQ's controller replays it (``StreamControlManager.replay``, ``S3ObjectControlManager.replay``),
in the shape every family's reducer
has (``statemachine.reducer``).

By the strictness rule every family shares, it refuses what AutoMQ refuses, which is nothing but
out-of-order offsets: AutoMQ ignores a record whose parent is missing (a range of a removed stream,
a stream-set object of an unknown node), moves start and logical end offsets only up (``max``)
and overwrites a node's epoch blindly. The reducer does the same, so that a replayed log has the
state AutoMQ had; the audits (S1-S12) say what was wrong with it. Records of other families leave
the view unchanged, except ``FeatureLevel automq.version``.
"""

from __future__ import annotations

from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    KV,
    AssignedS3ObjectId,
    AssignedStreamId,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveKV,
    RemoveNodeWALMetadata,
    RemoveRange,
    RemoveS3Object,
    RemoveS3Stream,
    RemoveS3StreamObject,
    RemoveStreamSetObject,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    UpdateNextNodeId,
)
from kraftlake.statemachine.reducer import Handler, Reducer

from .view import (
    AUTOMQ_VERSION,
    Node,
    ObjectMeta,
    RangeMeta,
    Stream,
    StreamObjectMeta,
    StreamSetObjectMeta,
    StreamsView,
    UncommittedMeta,
)


def _stream(v: StreamsView, r: S3Stream, offset: int) -> None:
    s = v.streams.get(r.stream_id)
    if s is None:
        v.streams[r.stream_id] = Stream(
            stream_id=r.stream_id,
            epoch=r.epoch,
            range_index=r.range_index,
            start_offset=r.start_offset,
            end_offset=r.start_offset,
            state=r.stream_state,
            tags={t.key: t.value for t in r.tags},
        )
        return
    s.start_offset = max(s.start_offset, r.start_offset)
    s.end_offset = max(s.end_offset, r.start_offset)
    s.epoch = r.epoch
    s.range_index = r.range_index
    s.state = r.stream_state
    if not s.tags and r.tags:
        s.tags = {t.key: t.value for t in r.tags}


def _remove_stream(v: StreamsView, r: RemoveS3Stream, offset: int) -> None:
    v.streams.pop(r.stream_id, None)


def _range(v: StreamsView, r: Range, offset: int) -> None:
    s = v.streams.get(r.stream_id)
    if s is None:
        return
    s.ranges[r.range_index] = RangeMeta(r.range_index, r.epoch, r.start_offset, r.end_offset, r.node_id)
    if r.end_offset > s.end_offset:
        s.end_offset = r.end_offset


def _remove_range(v: StreamsView, r: RemoveRange, offset: int) -> None:
    s = v.streams.get(r.stream_id)
    if s is not None:
        s.ranges.pop(r.range_index, None)


def _stream_object(v: StreamsView, r: S3StreamObject, offset: int) -> None:
    s = v.streams.get(r.stream_id)
    if s is None:
        return
    s.objects[r.object_id] = StreamObjectMeta(r.object_id, r.start_offset, r.end_offset)
    if r.end_offset > s.end_offset:
        s.end_offset = r.end_offset


def _remove_stream_object(v: StreamsView, r: RemoveS3StreamObject, offset: int) -> None:
    s = v.streams.get(r.stream_id)
    if s is not None:
        s.objects.pop(r.object_id, None)


def _stream_set_object(v: StreamsView, r: S3StreamSetObject, offset: int) -> None:
    n = v.nodes.get(r.node_id)
    if n is None:
        return
    n.stream_set_objects[r.object_id] = StreamSetObjectMeta(r.object_id, r.order_id, r.data_time_in_ms, r.ranges)
    for rng in r.ranges:
        s = v.streams.get(rng.stream_id)
        if s is not None and rng.end_offset > s.end_offset:
            s.end_offset = rng.end_offset


def _remove_stream_set_object(v: StreamsView, r: RemoveStreamSetObject, offset: int) -> None:
    n = v.nodes.get(r.node_id)
    if n is not None:
        n.stream_set_objects.pop(r.object_id, None)


def _end_offsets(v: StreamsView, r: S3StreamEndOffsets, offset: int) -> None:
    streams = v.streams
    for e in r.end_offsets:
        s = streams.get(e.stream_id)
        if s is not None and e.end_offset > s.end_offset:
            s.end_offset = e.end_offset


def _node(v: StreamsView, r: NodeWALMetadata, offset: int) -> None:
    n = v.nodes.get(r.node_id)
    if n is None:
        v.nodes[r.node_id] = Node(node_id=r.node_id, node_epoch=r.node_epoch, failover_mode=r.failover_mode)
    else:
        n.node_epoch = r.node_epoch
        n.failover_mode = r.failover_mode


def _remove_node(v: StreamsView, r: RemoveNodeWALMetadata, offset: int) -> None:
    v.nodes.pop(r.node_id, None)


def _uncommitted(v: StreamsView, r: NodeWALUncommittedOffsets, offset: int) -> None:
    n = v.nodes.get(r.node_id)
    if n is None:
        return
    for e in r.entries:
        if e.start_offset < e.end_offset:
            n.uncommitted[e.stream_id] = UncommittedMeta(e.stream_id, e.start_offset, e.end_offset)
        elif e.start_offset == e.end_offset:
            n.uncommitted.pop(e.stream_id, None)


def _object(v: StreamsView, r: S3Object, offset: int) -> None:
    v.objects[r.object_id] = ObjectMeta(r.object_id, r.object_size, r.object_state, r.timestamp, r.attributes)
    for state, ids in ((ObjectState.PREPARED, v.prepared_ids), (ObjectState.MARK_DESTROYED, v.marked_ids)):
        if r.object_state == state:
            ids.add(r.object_id)
        else:
            ids.discard(r.object_id)
    if r.object_state == ObjectState.MARK_DESTROYED:
        v.marked_at.setdefault(r.object_id, r.timestamp if r.ts_ms is None else r.ts_ms)
    else:
        v.marked_at.pop(r.object_id, None)


def _remove_object(v: StreamsView, r: RemoveS3Object, offset: int) -> None:
    v.objects.pop(r.object_id, None)
    v.object_index.pop(r.object_id, None)  # gone from object storage, its index block with it
    v.prepared_ids.discard(r.object_id)
    v.marked_ids.discard(r.object_id)
    v.marked_at.pop(r.object_id, None)


def _assigned_stream_id(v: StreamsView, r: AssignedStreamId, offset: int) -> None:
    v.next_stream_id = r.assigned_stream_id + 1


def _assigned_object_id(v: StreamsView, r: AssignedS3ObjectId, offset: int) -> None:
    v.next_object_id = r.assigned_s3_object_id + 1


def _kv(v: StreamsView, r: KV, offset: int) -> None:
    for e in r.key_values:
        v.kv.setdefault(e.namespace, {})[e.key] = e.value


def _remove_kv(v: StreamsView, r: RemoveKV, offset: int) -> None:
    for i, key in enumerate(r.keys):
        ns = r.namespace(i)
        entries = v.kv.get(ns)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del v.kv[ns]


def _next_node_id(v: StreamsView, r: UpdateNextNodeId, offset: int) -> None:
    v.next_node_id = r.node_id


def _feature(v: StreamsView, r: FeatureLevel, offset: int) -> None:
    if r.name == AUTOMQ_VERSION:
        v.automq_version = r.feature_level


def _object_written(v: StreamsView, r: ObjectWritten, offset: int) -> None:
    v.object_index[r.object_id] = r.ranges


_APPLY: dict[type, Handler] = {
    S3Stream: _stream,
    RemoveS3Stream: _remove_stream,
    Range: _range,
    RemoveRange: _remove_range,
    S3StreamObject: _stream_object,
    RemoveS3StreamObject: _remove_stream_object,
    S3StreamSetObject: _stream_set_object,
    RemoveStreamSetObject: _remove_stream_set_object,
    S3Object: _object,
    RemoveS3Object: _remove_object,
    AssignedStreamId: _assigned_stream_id,
    AssignedS3ObjectId: _assigned_object_id,
    NodeWALMetadata: _node,
    RemoveNodeWALMetadata: _remove_node,
    S3StreamEndOffsets: _end_offsets,
    KV: _kv,
    RemoveKV: _remove_kv,
    NodeWALUncommittedOffsets: _uncommitted,
    UpdateNextNodeId: _next_node_id,
    FeatureLevel: _feature,
    ObjectWritten: _object_written,
}
"""Record class -> its handler; every other record leaves the streams view alone."""

_REDUCER = Reducer(_APPLY, StreamsView)
apply = _REDUCER.apply
replay = _REDUCER.replay
