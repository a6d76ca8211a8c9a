"""AutoMQ S3Stream metadata records (automq.version V6 semantics), one Struct per AutoMQ record.

Field names are AutoMQ's in snake_case (the record schemas,
``metadata/src/main/resources/common/metadata/*.json`` in AutoMQ/automq). Every version of a
record maps onto one Struct: ``SINCE`` names fields a later version added, ``UNTIL`` fields a later
version removed (the four ``*TimeInMs`` of ``S3ObjectRecord`` v0, the inline ``Ranges`` of
``S3StreamSetObjectRecord`` v0, ...). Older versions are upcast on read (``records.upcast``), and
the records AutoMQ renamed (``BrokerWALMetadataRecord``, ``WALObjectRecord``, ``S3SSTObjectRecord``)
decode into today's types (``RENAMED``).

AutoMQ's packed byte payloads are kept decoded, so that Spark SQL reads
``s3_stream_end_offsets.end_offsets`` directly: ``pack_*``/``unpack_*`` convert to and from AutoMQ's
wire bytes (as its ``S3StreamSetObject.encode``/``decode`` and ``S3StreamEndOffsetsCodec`` do). The
one payload kraftlake packs itself is an object's index block (``StreamRanges``, in
``ObjectWritten``): packed in the record, unpacked in the log's Arrow column.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from functools import cache, lru_cache
from typing import Annotated, Any

import msgspec.inspect as mi
from msgspec import Meta

from .base import Part, Record, struct_info
from .types import BrokerId, Int8, Int32, Int64, UInt63

__all__ = [
    "StreamState",
    "ObjectState",
    "CompactOperation",
    "ObjectType",
    "NOOP_OBJECT_ID",
    "MATCH_ALL_BUCKET",
    "StreamTag",
    "StreamRange",
    "StreamRanges",
    "check_stream_ranges",
    "packed_fields",
    "StreamEndOffset",
    "KeyValue",
    "UncommittedOffset",
    "S3StreamMetadataRecord",
    "S3Stream",
    "RemoveS3Stream",
    "Range",
    "RemoveRange",
    "S3StreamObject",
    "RemoveS3StreamObject",
    "S3StreamSetObject",
    "RemoveStreamSetObject",
    "S3Object",
    "RemoveS3Object",
    "AssignedStreamId",
    "AssignedS3ObjectId",
    "NodeWALMetadata",
    "RemoveNodeWALMetadata",
    "S3StreamEndOffsets",
    "KV",
    "RemoveKV",
    "NodeWALUncommittedOffsets",
    "UpdateNextNodeId",
    "S3STREAM_RECORDS",
    "API_KEYS",
    "RENAMED",
    "attributes",
    "attribute_bucket",
    "attribute_deep_delete",
    "pack_ranges",
    "unpack_ranges",
    "pack_end_offsets",
    "unpack_end_offsets",
    "MAX_UNCOMMITTED_ENTRIES",
]


class StreamState(IntEnum):
    """Wire value of ``S3StreamRecord.StreamState`` (by ordinal): a created stream is CLOSED."""

    CLOSED = 0
    OPENED = 1


class ObjectState(IntEnum):
    """``S3ObjectRecord.ObjectState``. UNINITIALIZED and DESTROYED are never written: physical
    deletion is ``RemoveS3Object``."""

    UNINITIALIZED = 0
    PREPARED = 1
    COMMITTED = 2
    MARK_DESTROYED = 3
    DESTROYED = 4


class CompactOperation(IntEnum):
    """What ``CommitStreamObject`` does to a source object (``CompactOperations``)."""

    DELETE = 0
    KEEP_DATA = 1
    DEEP_DELETE = 2


class ObjectType(IntEnum):
    """Bits 0-1 of an object's attributes."""

    NORMAL = 0
    COMPOSITE = 1


NOOP_OBJECT_ID = -1
"""A commit with no object of its own (expired stream-object cleanup, a compaction into SOs only)."""
MATCH_ALL_BUCKET = -1
"""Bucket index of an object whose bucket is not known yet (a PREPARED object marked destroyed)."""
MAX_UNCOMMITTED_ENTRIES = 10_000
"""At most this many entries per ``NodeWALUncommittedOffsetsRecord``; more take several records."""

StreamId = Annotated[int, Meta(ge=0, le=2**63 - 1, description="a stream id, dense from 0")]
ObjectId = Annotated[int, Meta(ge=0, le=2**63 - 1, description="an S3 object id, dense from 0")]
Offset = Annotated[int, Meta(ge=0, le=2**63 - 1)]
Epoch = Int64
"""Stream and node epochs: -1 (INIT_EPOCH) before the first open or registration."""


def attributes(*, object_type: int = ObjectType.NORMAL, bucket: int = 0, deep_delete: bool = False) -> int:
    """An ``ObjectAttributes`` bitfield: bits 0-1 type, bits 2-17 bucket (int16), bit 18 deep delete."""
    return (object_type & 0x3) | ((bucket & 0xFFFF) << 2) | (int(deep_delete) << 18)


def attribute_bucket(attrs: int) -> int:
    b = (attrs >> 2) & 0xFFFF
    return b - 0x10000 if b & 0x8000 else b


def attribute_deep_delete(attrs: int) -> bool:
    return bool(attrs >> 18 & 1)


# -- nested parts ----------------------------------------------------------------------------------


class StreamTag(Part, frozen=True, kw_only=True):
    """A stream tag: key "0" = topic id, key "1" = partition index in lower-case hex."""

    key: str
    value: str


class StreamRange(Part, frozen=True, kw_only=True):
    """One stream's offsets [start_offset, end_offset) inside a multi-stream object."""

    stream_id: StreamId
    start_offset: Offset
    end_offset: Offset


_LITTLE_ENDIAN = sys.byteorder == "little"


class StreamRanges(Part, frozen=True, kw_only=True):
    """Many ``StreamRange``, packed: (stream_id, start_offset, end_offset) as little-endian int64
    triplets end to end, in the order given, zstd-compressed above ``COMPRESS_ABOVE`` ranges (as
    AutoMQ compresses its inline ranges, ``pack_ranges``). An object's index block
    (``ObjectWritten``) lists a range per stream it holds, hundreds once compactions merged a
    node's small streams: a long history carries hundreds of millions of them. Packed, a log decodes
    one ``bytes`` value per object instead of a Struct per range (replay never opens it), and
    readers take the numbers from the buffer (``columns``); iterating gives ``StreamRange``s as a
    tuple of them would. The log's Arrow column keeps them unpacked
    (``list<struct<stream_id, start_offset, end_offset>>``) for SQL engines.

    Build one with ``StreamRanges.of(...)``; what a record holds is checked by the record
    (``check_stream_ranges``): the Struct does no work of its own when decoded."""

    packed: bytes = b""
    raw_size: UInt63 = 0
    """0: ``packed`` is the triplets themselves; else it is their zstd frame, and this their size."""

    @classmethod
    def of(cls, ranges: Iterable[StreamRange | tuple[int, int, int]]) -> StreamRanges:
        """From ``StreamRange``s or (stream_id, start_offset, end_offset) tuples."""
        flat = array("q")
        for r in ranges:
            if isinstance(r, StreamRange):
                flat.extend((r.stream_id, r.start_offset, r.end_offset))
            else:
                stream_id, start, end = r
                flat.extend((stream_id, start, end))
        if not _LITTLE_ENDIAN:
            flat.byteswap()
        raw = flat.tobytes()
        if len(flat) > 3 * COMPRESS_ABOVE:
            return cls(packed=_zstd().compress(raw, asbytes=True), raw_size=len(raw))
        return cls(packed=raw)

    def raw(self) -> bytes:
        """The triplets, decompressed if they were compressed."""
        if not self.raw_size:
            return self.packed
        return _zstd().decompress(self.packed, decompressed_size=self.raw_size, asbytes=True)

    def uncompressed(self) -> StreamRanges:
        """The same ranges, never compressed: a form that depends on them alone (state hashes)."""
        return self if not self.raw_size else StreamRanges(packed=self.raw())

    def columns(self) -> tuple[Sequence[int], Sequence[int], Sequence[int]]:
        """(stream ids, start offsets, end offsets), read from the triplets in place on a
        little-endian machine."""
        q: Sequence[int]
        if _LITTLE_ENDIAN:
            q = memoryview(self.raw()).cast("q")
        else:
            swapped = array("q", self.raw())
            swapped.byteswap()
            q = swapped
        return q[0::3], q[1::3], q[2::3]

    def __len__(self) -> int:
        return (self.raw_size or len(self.packed)) // 24

    def __iter__(self) -> Iterator[StreamRange]:
        for s, a, b in zip(*self.columns()):
            yield StreamRange(stream_id=s, start_offset=a, end_offset=b)

    def __getitem__(self, i: int) -> StreamRange:
        n = len(self)
        if not -n <= i < n:
            raise IndexError("StreamRanges index out of range")
        ids, starts, ends = self.columns()
        return StreamRange(stream_id=ids[i], start_offset=starts[i], end_offset=ends[i])

    def find(self, stream_id: int) -> StreamRange | None:
        """The range of ``stream_id`` (the first, if listed twice), or None."""
        ids, starts, ends = self.columns()
        for i, s in enumerate(ids):
            if s == stream_id:
                return StreamRange(stream_id=s, start_offset=starts[i], end_offset=ends[i])
        return None

    def __repr__(self) -> str:
        return f"StreamRanges.of({[(s, a, b) for s, a, b in zip(*self.columns())]!r})"


COMPRESS_ABOVE = 50
"""``StreamRanges`` of more ranges are zstd-compressed: a compacted object's many ranges shrink well
(bench/RESULTS.md)."""


@lru_cache(maxsize=1)
def _zstd():
    """pyarrow's zstd codec, loaded on first use: importing the record types loads no storage
    library (``tests/test_imports.py``)."""
    import pyarrow as pa

    return pa.Codec("zstd", compression_level=1)


@cache
def packed_fields(cls: type[Record]) -> frozenset[str]:
    """The fields of a record type that hold ``StreamRanges``."""
    return frozenset(
        f.name for f in struct_info(cls).fields if isinstance(f.type, mi.StructType) and f.type.cls is StreamRanges
    )


def check_stream_ranges(ranges: StreamRanges) -> None:
    """What a record's ``StreamRanges`` must be: whole triplets, each stream once, ids and
    offsets not negative, no range ending before it starts."""
    try:
        raw = ranges.raw()
    except (OSError, ValueError) as exc:  # pyarrow's words for a bad zstd frame, or a wrong size
        raise ValueError(f"`ranges`: not a zstd frame of {ranges.raw_size} bytes ({exc})") from None
    if len(raw) % 24 or (ranges.raw_size and len(raw) != ranges.raw_size):
        raise ValueError(f"`ranges`: {len(raw)} bytes is not a whole number of 24-byte ranges")
    ids, starts, ends = ranges.columns()
    if len(set(ids)) != len(ids):
        raise ValueError(f"`ranges`: lists a stream twice: {list(ids)}")
    for s, a, b in zip(ids, starts, ends):
        if s < 0 or a < 0:
            raise ValueError(f"`ranges`: stream {s} at {a}: ids and offsets are never negative")
        if b < a:
            raise ValueError(f"`ranges`: end offset {b} is below start offset {a}")


class StreamEndOffset(Part, frozen=True, kw_only=True):
    stream_id: StreamId
    end_offset: Offset


class KeyValue(Part, frozen=True, kw_only=True):
    key: str
    value: bytes
    namespace: str | None = None
    """KVRecord v1+; None is the legacy (v0) namespace."""


class UncommittedOffset(Part, frozen=True, kw_only=True):
    """A node's historical WAL duty for a stream: data in [start, end) is still in its WAL (V6).
    On replay start < end upserts, start == end deletes, start > end is ignored."""

    stream_id: StreamId
    start_offset: Offset
    end_offset: Offset


# -- records ---------------------------------------------------------------------------------------


class S3StreamMetadataRecord(Record, frozen=True, kw_only=True):
    FAMILY = "s3stream"


class S3Stream(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """S3StreamRecord, apiKey 501, versions 0-1 (v1 adds tags). Creates a stream, or rewrites its
    epoch, current range index, start offset and state."""

    version: int = 1
    KEY = "stream/{r.stream_id}"
    SINCE = {"tags": 1}

    stream_id: StreamId
    epoch: Epoch
    range_index: Int32
    """The current range; -1 before the first open (the image ignores it: last range is current)."""
    start_offset: Offset
    stream_state: Int8 = StreamState.CLOSED
    tags: tuple[StreamTag, ...] = ()

    def _validate(self) -> None:
        _enum("stream_state", self.stream_state, StreamState)
        _unique("tags", [t.key for t in self.tags])


class RemoveS3Stream(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveS3StreamRecord, apiKey 502: the stream with its ranges and stream objects."""

    version: int = 0
    KEY = "stream/{r.stream_id}"
    stream_id: StreamId


class Range(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RangeRecord, apiKey 503: the stream's offsets [start, end) node ``node_id`` owned at ``epoch``."""

    version: int = 0
    KEY = "stream/{r.stream_id}"

    stream_id: StreamId
    epoch: Epoch
    range_index: Annotated[int, Meta(ge=0, le=2**31 - 1)]
    start_offset: Offset
    end_offset: Offset
    node_id: BrokerId

    def _validate(self) -> None:
        _ordered(self.start_offset, self.end_offset)


class RemoveRange(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveRangeRecord, apiKey 504."""

    version: int = 0
    KEY = "stream/{r.stream_id}"
    stream_id: StreamId
    range_index: Annotated[int, Meta(ge=0, le=2**31 - 1)]


class S3StreamObject(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """S3StreamObjectRecord, apiKey 505, versions 0-1 (v1 drops DataTimeInMs): a single-stream object."""

    version: int = 1
    KEY = "stream/{r.stream_id}"
    UNTIL = {"data_time_in_ms": 1}

    stream_id: StreamId
    start_offset: Offset
    end_offset: Offset
    object_id: ObjectId
    data_time_in_ms: Int64 | None = None

    def _validate(self) -> None:
        _ordered(self.start_offset, self.end_offset)


class RemoveS3StreamObject(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveS3StreamObjectRecord, apiKey 506."""

    version: int = 0
    KEY = "stream/{r.stream_id}"
    stream_id: StreamId
    object_id: ObjectId


class S3StreamSetObject(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """S3StreamSetObjectRecord, apiKey 507, versions 0-1: a node's multi-stream object, ordered by
    ``order_id``. v0 lists its stream ranges inline (``Ranges``, packed bytes on the wire); v1 (V2+,
    "huge cluster") leaves them in the object's own index block."""

    version: int = 1
    KEY = "node/{r.node_id}"
    UNTIL = {"ranges": 1}

    node_id: BrokerId
    object_id: ObjectId
    order_id: Int64
    data_time_in_ms: Int64 = 0
    ranges: tuple[StreamRange, ...] = ()

    def _validate(self) -> None:
        _unique("ranges", [r.stream_id for r in self.ranges])
        for r in self.ranges:
            _ordered(r.start_offset, r.end_offset, "ranges")


class RemoveStreamSetObject(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveStreamSetObjectRecord, apiKey 508."""

    version: int = 0
    KEY = "node/{r.node_id}"
    node_id: BrokerId
    object_id: ObjectId


class S3Object(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """S3ObjectRecord, apiKey 509, versions 0-1. v1 replaces the four ``*_time_in_ms`` with one
    ``timestamp`` (the deadline if PREPARED, the commit time if COMMITTED, the mark-destroy time
    if MARK_DESTROYED) and adds ``attributes``. A v0 record is upcast: ``timestamp`` from the time
    field of its state."""

    version: int = 1
    KEY = "object/{r.object_id}"
    SINCE = {"attributes": 1, "timestamp": 1}
    UNTIL = {
        "prepared_time_in_ms": 1,
        "expired_time_in_ms": 1,
        "committed_time_in_ms": 1,
        "mark_destroyed_time_in_ms": 1,
    }

    object_id: ObjectId
    object_size: Int64 = 0
    object_state: Int8
    timestamp: Int64 = 0
    attributes: Int32 = 0
    prepared_time_in_ms: Int64 | None = None
    expired_time_in_ms: Int64 | None = None
    committed_time_in_ms: Int64 | None = None
    mark_destroyed_time_in_ms: Int64 | None = None

    def _validate(self) -> None:
        _enum("object_state", self.object_state, ObjectState)
        if self.object_state in (ObjectState.UNINITIALIZED, ObjectState.DESTROYED):
            raise ValueError(
                f"`object_state`: {ObjectState(self.object_state).name} is never written"
                " (a destroyed object is RemoveS3Object)"
            )


class RemoveS3Object(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveS3ObjectRecord, apiKey 510: the object is gone from object storage."""

    version: int = 0
    KEY = "object/{r.object_id}"
    object_id: ObjectId


class AssignedStreamId(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """AssignedStreamIdRecord, apiKey 511: the last stream id assigned (the next is one above)."""

    version: int = 0
    KEY = "ids"
    assigned_stream_id: StreamId


class AssignedS3ObjectId(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """AssignedS3ObjectIdRecord, apiKey 512: the last object id assigned (the next is one above)."""

    version: int = 0
    KEY = "ids"
    assigned_s3_object_id: ObjectId


class NodeWALMetadata(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """NodeWALMetadataRecord, apiKey 513 (``BrokerWALMetadataRecord`` before AutoMQ #246): a node
    (re)registered its WAL at ``node_epoch``; ``failover_mode`` fences its normal commits."""

    version: int = 0
    KEY = "node/{r.node_id}"
    node_id: BrokerId
    node_epoch: Epoch
    failover_mode: bool = False


class RemoveNodeWALMetadata(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveNodeWALMetadataRecord, apiKey 514 (no AutoMQ code path emits it)."""

    version: int = 0
    KEY = "node/{r.node_id}"
    node_id: BrokerId


class S3StreamEndOffsets(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """S3StreamEndOffsetsRecord, apiKey 515 since AutoMQ #1464 (the key was ``AdvanceRangeRecord``
    before): logical end offsets the current owners committed (max-merged on replay)."""

    version: int = 0
    KEY = "streams"
    end_offsets: tuple[StreamEndOffset, ...]

    def entity_key(self) -> str:
        ends = self.end_offsets
        return f"stream/{ends[0].stream_id}" if len(ends) == 1 else self.KEY


class KV(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """KVRecord, apiKey 516, versions 0-1 (v1 adds each entry's namespace)."""

    version: int = 1
    KEY = "kv"
    key_values: tuple[KeyValue, ...]

    def _validate(self) -> None:
        if self.version < 1 and any(kv.namespace is not None for kv in self.key_values):
            raise ValueError("`key_values`: KV v0 has no namespace (added in v1)")

    def entity_key(self) -> str:
        kvs = self.key_values
        return _kv_key(kvs[0].namespace, kvs[0].key) if len(kvs) == 1 else self.KEY


class RemoveKV(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """RemoveKVRecord, apiKey 517, versions 0-1 (v1 adds ``namespaces``, parallel to ``keys``)."""

    version: int = 1
    KEY = "kv"
    SINCE = {"namespaces": 1}
    keys: tuple[str, ...]
    namespaces: tuple[str | None, ...] | None = None

    def _validate(self) -> None:
        if self.namespaces is not None and len(self.namespaces) != len(self.keys):
            raise ValueError(
                f"`namespaces`: has {len(self.namespaces)} entries but `keys` has {len(self.keys)};"
                " they run in parallel"
            )

    def namespace(self, i: int) -> str | None:
        return None if self.namespaces is None else self.namespaces[i]

    def entity_key(self) -> str:
        return _kv_key(self.namespace(0), self.keys[0]) if len(self.keys) == 1 else self.KEY


class NodeWALUncommittedOffsets(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """NodeWALUncommittedOffsetsRecord, apiKey 518 (V6): a node's historical WAL duties."""

    version: int = 0
    KEY = "node/{r.node_id}"
    node_id: BrokerId
    entries: Annotated[tuple[UncommittedOffset, ...], Meta(max_length=MAX_UNCOMMITTED_ENTRIES)]


class UpdateNextNodeId(S3StreamMetadataRecord, frozen=True, kw_only=True):
    """UpdateNextNodeIdRecord, apiKey 600: the cluster's next node id."""

    version: int = 0
    KEY = "ids"
    node_id: Int32


S3STREAM_RECORDS: tuple[type[Record], ...] = (
    S3Stream,
    RemoveS3Stream,
    Range,
    RemoveRange,
    S3StreamObject,
    RemoveS3StreamObject,
    S3StreamSetObject,
    RemoveStreamSetObject,
    S3Object,
    RemoveS3Object,
    AssignedStreamId,
    AssignedS3ObjectId,
    NodeWALMetadata,
    RemoveNodeWALMetadata,
    S3StreamEndOffsets,
    KV,
    RemoveKV,
    NodeWALUncommittedOffsets,
    UpdateNextNodeId,
)
"""Every S3Stream record type, in AutoMQ apiKey order."""

API_KEYS: dict[type[Record], int] = {cls: key for cls, key in zip(S3STREAM_RECORDS, (*range(501, 519), 600))}
"""AutoMQ's apiKey of each record type (each schema's ``apiKey``)."""


# -- records AutoMQ renamed, or whose apiKey it reused (the history of its record schemas) ---------


def _broker_wal_metadata(raw: dict[str, Any]) -> dict[str, Any]:
    raw = dict(raw)
    raw["type"] = "NodeWALMetadata"
    raw["version"] = 0
    if "broker_id" in raw:
        raw["node_id"] = raw.pop("broker_id")
    if "broker_epoch" in raw:
        raw["node_epoch"] = raw.pop("broker_epoch")
    return raw


def _wal_object(raw: dict[str, Any]) -> dict[str, Any]:
    # WALObjectRecord / S3SSTObjectRecord listed StreamsIndex [{StreamId, StartOffset, EndOffset}].
    raw = dict(raw)
    raw["type"] = "S3StreamSetObject"
    raw["version"] = 0
    if "streams_index" in raw:
        raw["ranges"] = raw.pop("streams_index")
    raw.pop("object_size", None)  # some early WALObjectRecords carried it; the S3Object has it
    return raw


def _advance_range(raw: dict[str, Any]) -> dict[str, Any]:
    raise ValueError(
        "`type`: AdvanceRange (apiKey 515 before AutoMQ #661, Jan 2024) was deleted; apiKey 515 is"
        " S3StreamEndOffsets since #1464. Re-export the log with a newer AutoMQ"
    )


RENAMED: dict[str, Any] = {
    "BrokerWALMetadata": _broker_wal_metadata,
    "WALObject": _wal_object,
    "S3SSTObject": _wal_object,
    "AdvanceRange": _advance_range,
}
"""Record names AutoMQ used before a rename -> a function giving today's payload."""


# -- packed payloads (AutoMQ's S3StreamSetObject.encode/decode, S3StreamEndOffsetsCodec) ----------

_MAGIC = 0x01
_ZSTD = 2
_RANGE = struct.Struct(">qqi")
_END = struct.Struct(">qq")


def pack_ranges(ranges: tuple[StreamRange, ...] | list[StreamRange]) -> bytes:
    """``S3StreamSetObjectRecord.Ranges`` (v0): magic, flags, uncompressed length, then
    (streamId, startOffset, count) sorted by stream; zstd-compressed above 50 ranges."""
    payload = b"".join(
        _RANGE.pack(r.stream_id, r.start_offset, r.end_offset - r.start_offset)
        for r in sorted(ranges, key=lambda r: r.stream_id)
    )
    flags = 0
    body = payload
    if len(ranges) > 50:
        import pyarrow as pa

        flags = _ZSTD
        body = pa.compress(payload, codec="zstd", asbytes=True)
    return bytes([_MAGIC, flags]) + struct.pack(">i", len(payload)) + body


def unpack_ranges(data: bytes) -> tuple[StreamRange, ...]:
    """The ranges ``pack_ranges`` wrote; empty bytes mean "not in metadata" (V2+)."""
    if not data:
        return ()
    if data[0] != _MAGIC:
        raise ValueError(f"`ranges`: unknown magic {data[0]:#x}")
    flags = data[1]
    (length,) = struct.unpack_from(">i", data, 2)
    body = data[6:]
    if flags & _ZSTD:
        import pyarrow as pa

        body = pa.decompress(body, decompressed_size=length, codec="zstd", asbytes=True)
    if len(body) != length or length % _RANGE.size:
        raise ValueError(f"`ranges`: payload of {len(body)} bytes, expected {length} in 20-byte entries")
    return tuple(StreamRange(stream_id=s, start_offset=o, end_offset=o + n) for s, o, n in _RANGE.iter_unpack(body))


def pack_end_offsets(ends: tuple[StreamEndOffset, ...] | list[StreamEndOffset]) -> bytes:
    """``S3StreamEndOffsetsRecord.EndOffsets``: magic, then (streamId, endOffset) pairs."""
    return bytes([_MAGIC]) + b"".join(_END.pack(e.stream_id, e.end_offset) for e in ends)


def unpack_end_offsets(data: bytes) -> tuple[StreamEndOffset, ...]:
    if not data or data[0] != _MAGIC or (len(data) - 1) % _END.size:
        raise ValueError("`end_offsets`: not a packed end-offsets payload (magic 0x01, 16-byte pairs)")
    return tuple(StreamEndOffset(stream_id=s, end_offset=e) for s, e in _END.iter_unpack(data[1:]))


# -- checks ----------------------------------------------------------------------------------------


def _kv_key(namespace: str | None, key: str) -> str:
    return f"kv/{namespace if namespace is not None else '-'}/{key}"


def _enum(field: str, value: int, enum: type[IntEnum]) -> None:
    if value not in enum._value2member_map_:
        names = ", ".join(f"{m.value} {m.name}" for m in enum)
        raise ValueError(f"`{field}`: {value} is not a {enum.__name__} ({names})")


def _unique(field: str, keys: list) -> None:
    if len(set(keys)) != len(keys):
        raise ValueError(f"`{field}`: lists the same key twice: {keys}")


def _ordered(start: int, end: int, field: str = "end_offset") -> None:
    if end < start:
        raise ValueError(f"`{field}`: end offset {end} is below start offset {start}")
