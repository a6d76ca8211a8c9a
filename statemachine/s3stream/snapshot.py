"""The S3Stream view written back as records, and loaded from them: AutoMQ's image snapshot
(``S3StreamsMetadataImage.write`` with ``S3ObjectsImage``, ``KVImage``: each entity as the record
that creates it, parents first, a node's WAL duties chunked as ``NodeWALUncommittedOffsets``
holds them), and ``finishSnapshot``: a view loaded from a snapshot holds what the snapshot holds
and nothing else (entries the snapshot lacks are gone). ``replay(image_records(view))`` has
``view``'s state hash."""

from __future__ import annotations

from typing import Any

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    KV,
    MAX_UNCOMMITTED_ENTRIES,
    AssignedS3ObjectId,
    AssignedStreamId,
    KeyValue,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamEndOffset,
    StreamTag,
    UncommittedOffset,
    UpdateNextNodeId,
)

from .reducer import replay
from .view import AUTOMQ_VERSION, StreamsView


def image_records(view: StreamsView) -> list[Record]:
    """Records that rebuild ``view`` from nothing (without offsets: the writer gives them)."""
    out: list[Record] = []
    if view.automq_version:
        out.append(FeatureLevel(name=AUTOMQ_VERSION, feature_level=view.automq_version))
    if view.next_stream_id:
        out.append(AssignedStreamId(assigned_stream_id=view.next_stream_id - 1))
    if view.next_object_id:
        out.append(AssignedS3ObjectId(assigned_s3_object_id=view.next_object_id - 1))
    if view.next_node_id is not None:
        out.append(UpdateNextNodeId(node_id=view.next_node_id))
    for i, o in sorted(view.objects.items()):
        rec = S3Object(
            object_id=i, object_size=o.size, object_state=o.state, timestamp=o.timestamp, attributes=o.attributes
        )
        if o.state == ObjectState.MARK_DESTROYED and i in view.marked_at:
            rec = msgspec.structs.replace(rec, ts_ms=view.marked_at[i])  # when it was marked
        out.append(rec)
    for i, ranges in sorted(view.object_index.items()):
        out.append(ObjectWritten(node_id=_writer(view, i), object_id=i, ranges=ranges))
    for sid, s in sorted(view.streams.items()):
        tags = tuple(StreamTag(key=k, value=v) for k, v in sorted(s.tags.items()))
        head = S3Stream(
            stream_id=sid,
            epoch=s.epoch,
            range_index=s.range_index,
            start_offset=min(s.start_offset, s.end_offset),
            stream_state=s.state,
            tags=tags,
        )
        out.append(head)
        for _, r in sorted(s.ranges.items()):
            out.append(
                Range(
                    stream_id=sid,
                    epoch=r.epoch,
                    range_index=r.range_index,
                    start_offset=r.start_offset,
                    end_offset=r.end_offset,
                    node_id=r.node_id,
                )
            )
        for _, so in sorted(s.objects.items()):
            out.append(
                S3StreamObject(
                    stream_id=sid, start_offset=so.start_offset, end_offset=so.end_offset, object_id=so.object_id
                )
            )
        out.append(S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=sid, end_offset=s.end_offset),)))
        if s.start_offset > s.end_offset:  # a trim beyond the end: the start is written after the end
            out.append(msgspec.structs.replace(head, start_offset=s.start_offset))
    for nid, n in sorted(view.nodes.items()):
        out.append(NodeWALMetadata(node_id=nid, node_epoch=n.node_epoch, failover_mode=n.failover_mode))
        for _, sso in sorted(n.stream_set_objects.items()):
            # Inline ranges are the v0 record's (before V2); from v1 they live in the index block.
            extra: dict[str, Any] = {"version": 0, "ranges": sso.ranges} if sso.ranges else {}
            out.append(
                S3StreamSetObject(
                    node_id=nid,
                    object_id=sso.object_id,
                    order_id=sso.order_id,
                    data_time_in_ms=sso.data_time_in_ms,
                    **extra,
                )
            )
        uncommitted = [
            UncommittedOffset(stream_id=u.stream_id, start_offset=u.start_offset, end_offset=u.end_offset)
            for _, u in sorted(n.uncommitted.items())
        ]
        for at in range(0, len(uncommitted), MAX_UNCOMMITTED_ENTRIES):
            out.append(
                NodeWALUncommittedOffsets(node_id=nid, entries=tuple(uncommitted[at : at + MAX_UNCOMMITTED_ENTRIES]))
            )
    for ns, entries in sorted(view.kv.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")):
        values = tuple(KeyValue(key=k, value=v, namespace=ns) for k, v in sorted(entries.items()))
        out.append(KV(version=0 if ns is None else 1, key_values=values))
    return out


def load(records: list[Record]) -> StreamsView:
    """``finishSnapshot``: the view a snapshot holds, whatever was there before."""
    view = replay(records)
    return view


def _writer(view: StreamsView, object_id: int) -> int:
    """The node whose stream-set object it is (0 when none says: the index block does not care)."""
    for nid, n in view.nodes.items():
        if object_id in n.stream_set_objects:
            return nid
    return 0
