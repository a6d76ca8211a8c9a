"""``StreamsView``: AutoMQ's S3Stream controller state (what its ``StreamControlManager``,
``S3ObjectControlManager``, ``NodeControlManager`` and ``KVControlManager`` hold), mutated only by
``reducer.apply``, with a canonical image and a state hash.

Streams (epoch, current range index, start, logical end, state, tags, ranges, stream objects),
nodes (WAL epoch, failover mode, stream-set objects, historical WAL duties), S3 objects with their
lifecycle, KV, the id high-water marks, and the index blocks of uploaded objects (``ObjectWritten``,
which V2+ metadata no longer carries). Derived indexes (the current owner of each stream) are
computed from the data, never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kraftlake.records.s3stream import ObjectState, StreamRange, StreamRanges, StreamState

from ..state_hash import state_hash_of

INIT_EPOCH = -1
INIT_RANGE_INDEX = -1

AUTOMQ_VERSION = "automq.version"
"""The feature gate (a KRaft FeatureLevel record); level 0 (unset) is V0, as AutoMQ's
``AutoMQVersion.from`` reads it."""
V0, V1, V2, V3, V4, V5, V6 = range(1, 8)
LATEST = V6


class RangeMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """[start_offset, end_offset) of a stream owned by ``node_id`` at ``epoch``."""

    range_index: int
    epoch: int
    start_offset: int
    end_offset: int
    node_id: int


class StreamObjectMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    object_id: int
    start_offset: int
    end_offset: int


class StreamSetObjectMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    object_id: int
    order_id: int
    data_time_in_ms: int
    ranges: tuple[StreamRange, ...] = ()
    """Inline ranges (records before V2); empty when the object's index block holds them."""


class UncommittedMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A historical WAL duty: the node's data for [start, end) is not committed yet (V6)."""

    stream_id: int
    start_offset: int
    end_offset: int


class ObjectMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    object_id: int
    size: int
    state: int
    timestamp: int
    attributes: int


class Stream(msgspec.Struct, kw_only=True, gc=False):
    stream_id: int
    epoch: int = INIT_EPOCH
    range_index: int = INIT_RANGE_INDEX
    start_offset: int = 0
    end_offset: int = 0
    """The logical end: the end of the data the owners committed. Only ever increases."""
    state: int = StreamState.CLOSED
    tags: dict[str, str] = {}
    ranges: dict[int, RangeMeta] = {}
    objects: dict[int, StreamObjectMeta] = {}

    def current_range(self) -> RangeMeta | None:
        return self.ranges.get(self.range_index)

    def owner(self) -> int | None:
        r = self.ranges.get(self.range_index)
        return None if r is None else r.node_id


class Node(msgspec.Struct, kw_only=True, gc=False):
    node_id: int
    node_epoch: int = INIT_EPOCH
    failover_mode: bool = False
    stream_set_objects: dict[int, StreamSetObjectMeta] = {}
    uncommitted: dict[int, UncommittedMeta] = {}
    """Stream id -> historical WAL duty (raw: trim makes its effective start max(stream start, start))."""


# -- canonical image -------------------------------------------------------------------------------


class StreamImage(msgspec.Struct, frozen=True, kw_only=True):
    stream_id: int
    epoch: int
    range_index: int
    start_offset: int
    end_offset: int
    state: str
    tags: dict[str, str]
    ranges: tuple[RangeMeta, ...]
    objects: tuple[StreamObjectMeta, ...]


class NodeImage(msgspec.Struct, frozen=True, kw_only=True):
    node_id: int
    node_epoch: int
    failover_mode: bool
    stream_set_objects: tuple[StreamSetObjectMeta, ...]
    uncommitted: tuple[UncommittedMeta, ...]


class KVEntry(msgspec.Struct, frozen=True, array_like=True):
    namespace: str | None
    key: str
    value: bytes


class ObjectIndexEntry(msgspec.Struct, frozen=True, array_like=True):
    object_id: int
    ranges: StreamRanges


class StreamsImage(msgspec.Struct, frozen=True, kw_only=True):
    """The whole view, canonical: lists sorted by id."""

    offset: int
    state_hash: str
    automq_version: int
    next_stream_id: int
    next_object_id: int
    next_node_id: int | None
    streams: tuple[StreamImage, ...]
    nodes: tuple[NodeImage, ...]
    objects: tuple[ObjectMeta, ...]
    kv: tuple[KVEntry, ...]
    object_index: tuple[ObjectIndexEntry, ...]
    marked_at: tuple[tuple[int, int], ...] = ()


def stream_image(s: Stream) -> StreamImage:
    return StreamImage(
        stream_id=s.stream_id,
        epoch=s.epoch,
        range_index=s.range_index,
        start_offset=s.start_offset,
        end_offset=s.end_offset,
        state=StreamState(s.state).name,
        tags=dict(sorted(s.tags.items())),
        ranges=tuple(r for _, r in sorted(s.ranges.items())),
        objects=tuple(o for _, o in sorted(s.objects.items())),
    )


def node_image(n: Node) -> NodeImage:
    return NodeImage(
        node_id=n.node_id,
        node_epoch=n.node_epoch,
        failover_mode=n.failover_mode,
        stream_set_objects=tuple(o for _, o in sorted(n.stream_set_objects.items())),
        uncommitted=tuple(u for _, u in sorted(n.uncommitted.items())),
    )


class StreamsView:
    """AutoMQ's S3Stream controller state at ``offset``. Mutated only by ``reducer.apply``."""

    __slots__ = (
        "offset",
        "automq_version",
        "next_stream_id",
        "next_object_id",
        "next_node_id",
        "streams",
        "nodes",
        "objects",
        "kv",
        "object_index",
        "prepared_ids",
        "marked_ids",
        "marked_at",
    )

    def __init__(self) -> None:
        self.offset = -1
        self.automq_version = 0
        self.next_stream_id = 0
        self.next_object_id = 0
        self.next_node_id: int | None = None
        self.streams: dict[int, Stream] = {}
        self.nodes: dict[int, Node] = {}
        self.objects: dict[int, ObjectMeta] = {}
        self.kv: dict[str | None, dict[str, bytes]] = {}
        self.object_index: dict[int, StreamRanges] = {}
        """Object id -> the stream ranges its index block lists (``ObjectWritten``)."""
        self.prepared_ids: set[int] = set()
        """Ids of the PREPARED objects (derived: what the lifecycle check scans)."""
        self.marked_ids: set[int] = set()
        """Ids of the MARK_DESTROYED objects (derived: what physical deletion scans)."""
        self.marked_at: dict[int, int] = {}
        """MARK_DESTROYED object -> when it was marked: the record's time in the log (``ts_ms``),
        else its ``timestamp``. AutoMQ deletes an object one to two retention periods after it was
        marked (``checkS3ObjectsLifecycle``'s generations), whatever the record's timestamp says:
        an expired PREPARED object is written with timestamp 0 from V2."""

    @property
    def version(self) -> int:
        """The automq.version in force (level 0, unset, reads as V0)."""
        return max(self.automq_version, V0)

    # -- queries the deciders, the read path and the audits share --------------------------------

    def sso_ranges(self, node_id: int, sso: StreamSetObjectMeta) -> StreamRanges | Sequence[StreamRange]:
        """A stream-set object's ranges: inline (before V2) or from its index block."""
        return sso.ranges or self.object_index.get(sso.object_id, ())

    def sso_range(self, sso: StreamSetObjectMeta, stream_id: int) -> StreamRange | None:
        if sso.ranges:
            for r in sso.ranges:
                if r.stream_id == stream_id:
                    return r
            return None
        index = self.object_index.get(sso.object_id)
        return None if index is None else index.find(stream_id)

    def opening_streams(self, node_id: int) -> list[int]:
        """Streams OPENED with ``node_id`` owning the current range, by id."""
        return sorted(
            s.stream_id for s in self.streams.values() if s.state == StreamState.OPENED and s.owner() == node_id
        )

    def active_duty(self, node_id: int, stream_id: int) -> UncommittedMeta | None:
        """The node's historical WAL duty for the stream, if still active: max(start, entry start) < end."""
        node = self.nodes.get(node_id)
        if node is None:
            return None
        e = node.uncommitted.get(stream_id)
        s = self.streams.get(stream_id)
        if e is None or s is None or max(s.start_offset, e.start_offset) >= e.end_offset:
            return None
        return e

    def prepared(self) -> list[ObjectMeta]:
        """The PREPARED objects, by id."""
        return [self.objects[i] for i in sorted(self.prepared_ids)]

    # -- image and hash ----------------------------------------------------------------------------

    def _image_fields(self) -> dict[str, Any]:
        return {
            "automq_version": self.automq_version,
            "next_stream_id": self.next_stream_id,
            "next_object_id": self.next_object_id,
            "next_node_id": self.next_node_id,
            "streams": tuple(stream_image(s) for _, s in sorted(self.streams.items())),
            "nodes": tuple(node_image(n) for _, n in sorted(self.nodes.items())),
            "objects": tuple(o for _, o in sorted(self.objects.items())),
            "kv": tuple(
                KVEntry(ns, k, v)
                for ns, entries in sorted(self.kv.items(), key=lambda kv: (kv[0] is not None, kv[0] or ""))
                for k, v in sorted(entries.items())
            ),
            # uncompressed: the hash is of the ranges, not of how a writer's zstd compressed them
            "object_index": tuple(ObjectIndexEntry(i, r.uncompressed()) for i, r in sorted(self.object_index.items())),
            "marked_at": tuple(sorted(self.marked_at.items())),
        }

    def image(self) -> StreamsImage:
        fields = self._image_fields()
        return StreamsImage(offset=self.offset, state_hash=state_hash_of(fields), **fields)

    def state_hash(self) -> str:
        return state_hash_of(self._image_fields())

    def copy(self) -> StreamsView:
        """A deep copy (the reducer mutates streams and nodes in place)."""
        other = StreamsView.from_image(self.image())
        return other

    @classmethod
    def from_image(cls, image: StreamsImage) -> StreamsView:
        """The view an image (a snapshot) holds."""
        v = cls()
        v.offset = image.offset
        v.automq_version = image.automq_version
        v.next_stream_id, v.next_object_id, v.next_node_id = (
            image.next_stream_id,
            image.next_object_id,
            image.next_node_id,
        )
        for s in image.streams:
            v.streams[s.stream_id] = Stream(
                stream_id=s.stream_id,
                epoch=s.epoch,
                range_index=s.range_index,
                start_offset=s.start_offset,
                end_offset=s.end_offset,
                state=StreamState[s.state],
                tags=dict(s.tags),
                ranges={r.range_index: r for r in s.ranges},
                objects={o.object_id: o for o in s.objects},
            )
        for n in image.nodes:
            v.nodes[n.node_id] = Node(
                node_id=n.node_id,
                node_epoch=n.node_epoch,
                failover_mode=n.failover_mode,
                stream_set_objects={o.object_id: o for o in n.stream_set_objects},
                uncommitted={u.stream_id: u for u in n.uncommitted},
            )
        v.objects = {o.object_id: o for o in image.objects}
        v.prepared_ids = {o.object_id for o in image.objects if o.state == ObjectState.PREPARED}
        v.marked_ids = {o.object_id for o in image.objects if o.state == ObjectState.MARK_DESTROYED}
        v.marked_at = dict(image.marked_at)
        for e in image.kv:
            v.kv.setdefault(e.namespace, {})[e.key] = e.value
        v.object_index = {e.object_id: e.ranges for e in image.object_index}
        return v
