"""Testing helpers that ship with kraftlake: hypothesis strategies for every record type.

Strategies are derived from the record Structs themselves (field types, bounds, optionality), so
a new record type is covered as soon as it is in the catalogue. They favour Kafka's sentinels
(-1, -2, null = unchanged) and the reserved directory ids, where bugs live. Needs ``hypothesis``
(the ``dev`` extra).
"""

from __future__ import annotations

from typing import Any

import msgspec.inspect as mi
from hypothesis import strategies as st

from kraftlake.records import (
    RECORD_TYPES,
    Record,
    current_version,
    from_builtins,
    payload_fields,
)
from kraftlake.records.bookkeeper import BookieInfo, LedgerCreated, LedgerEnsembleChange
from kraftlake.records.kraft import (
    LOST,
    MIGRATING,
    UNASSIGNED,
    Partition,
    PartitionChange,
    ReplicaDirectory,
)
from kraftlake.records.observations import DirectoryReplicas, LogDirsLoaded, ObjectWritten
from kraftlake.records.s3stream import (
    KV,
    ObjectState,
    RemoveKV,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamSetObject,
    StreamRange,
    StreamRanges,
    StreamState,
)
from kraftlake.records.types import is_reserved, uuid_from_bytes

RESERVED_DIRS = (MIGRATING, UNASSIGNED, LOST)
ANY_UUID_FIELDS = {(ReplicaDirectory, "directory"), (DirectoryReplicas, "id")}
"""Uuid fields where a reserved id is legal (a replica's directory, a directory in a request)."""

real_uuids = st.binary(min_size=16, max_size=16).map(uuid_from_bytes).filter(lambda u: not is_reserved(u))
directories = st.one_of(st.sampled_from(RESERVED_DIRS), real_uuids)
broker_ids = st.one_of(st.integers(0, 5), st.integers(0, 2**31 - 1))


def _ints(info: mi.IntType) -> st.SearchStrategy[int]:
    lo = info.ge if info.ge is not None else -(2**63)
    hi = info.le if info.le is not None else 2**63 - 1
    edges = sorted({v for v in (lo, lo + 1, -2, -1, 0, 1, hi) if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def _strategy(info: mi.Type, name: str, owner: type | None = None) -> st.SearchStrategy[Any]:
    if isinstance(info, mi.Metadata):
        return _strategy(info.type, name, owner)
    if isinstance(info, mi.IntType):
        return broker_ids if info.ge == 0 and info.le == 2**31 - 1 else _ints(info)
    if isinstance(info, mi.BoolType):
        return st.booleans()
    if isinstance(info, mi.EnumType):
        return st.sampled_from([m.value for m in info.cls])
    if isinstance(info, mi.BytesType):
        return st.binary(max_size=24)
    if isinstance(info, mi.FloatType):
        return st.floats(allow_nan=False, allow_infinity=False)  # what ClientQuota accepts
    if isinstance(info, mi.StrType):
        if info.min_length == info.max_length == 22:  # a Kafka uuid (records.types.Uuid)
            return directories if (owner, name) in ANY_UUID_FIELDS else real_uuids
        return st.text(min_size=info.min_length or 0, max_size=min(info.max_length or 24, 24))
    if isinstance(info, (mi.VarTupleType, mi.ListType)):
        item = info.item_type
        inner = item.type if isinstance(item, mi.Metadata) else item
        unique = isinstance(inner, (mi.IntType, mi.StrType))
        return st.lists(_strategy(item, name, owner), max_size=5, unique=unique)
    if isinstance(info, mi.StructType):
        if info.cls is StreamRanges:  # listed here; ``_fix_object_written`` may pack them
            return st.lists(_strategy(mi.type_info(StreamRange), name, owner), max_size=5)
        return st.fixed_dictionaries({f.name: _strategy(f.type, f.name, info.cls) for f in info.fields})
    if isinstance(info, mi.UnionType):
        return st.one_of(*[st.none() if isinstance(t, mi.NoneType) else _strategy(t, name, owner) for t in info.types])
    raise TypeError(f"no strategy for {info!r}")


def _aligned_assignment(draw: st.DrawFn, replicas: list[int]) -> list[dict[str, Any]]:
    return [{"broker": b, "directory": draw(directories)} for b in replicas]


def _fix_partition(draw: st.DrawFn, d: dict[str, Any]) -> None:
    d["assignment"] = _aligned_assignment(draw, d["replicas"])


def _fix_partition_change(draw: st.DrawFn, d: dict[str, Any]) -> None:
    if d.get("assignment") is None:
        return
    if d.get("replicas") is not None:
        d["assignment"] = _aligned_assignment(draw, d["replicas"])
    else:
        brokers = draw(st.lists(broker_ids, max_size=5, unique=True))
        d["assignment"] = _aligned_assignment(draw, brokers)


def _fix_dirs_loaded(draw: st.DrawFn, d: dict[str, Any]) -> None:
    """A directory is online or offline, never both, and listed once."""
    d["online_dirs"] = list(dict.fromkeys(d["online_dirs"]))
    if "offline_dirs" in d:
        d["offline_dirs"] = [x for x in d["offline_dirs"] if x not in d["online_dirs"]]
    if d.get("paths"):  # one path per directory, online then offline
        d["paths"] = [f"/data/d{i}" for i in range(len(d["online_dirs"]) + len(d.get("offline_dirs", ())))]


def _ordered_offsets(value: Any) -> None:
    """Every (start_offset, end_offset) pair, nested ones too, in order."""
    if isinstance(value, dict):
        if "start_offset" in value and "end_offset" in value and value["start_offset"] > value["end_offset"]:
            value["start_offset"], value["end_offset"] = value["end_offset"], value["start_offset"]
        for v in value.values():
            _ordered_offsets(v)
    elif isinstance(value, list):
        for v in value:
            _ordered_offsets(v)


def _unique_by(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return list({item[key]: item for item in items}.values())


def _fix_stream(draw: st.DrawFn, d: dict[str, Any]) -> None:
    d["stream_state"] = draw(st.sampled_from(list(StreamState)))
    if "tags" in d:
        d["tags"] = _unique_by(d["tags"], "key")


def _fix_stream_set_object(draw: st.DrawFn, d: dict[str, Any]) -> None:
    if "ranges" in d:
        d["ranges"] = _unique_by(d["ranges"], "stream_id")


def _fix_object_written(draw: st.DrawFn, d: dict[str, Any]) -> None:
    """Ranges listed (the JSON shape a client writes) or packed (the record's own)."""
    if "ranges" in d:
        d["ranges"] = _unique_by(d["ranges"], "stream_id")
        if draw(st.booleans()):
            listed = [(r["stream_id"], r["start_offset"], r["end_offset"]) for r in d["ranges"]]
            packed = StreamRanges.of(listed)
            d["ranges"] = {"packed": packed.packed, "raw_size": packed.raw_size}


def _fix_object(draw: st.DrawFn, d: dict[str, Any]) -> None:
    d["object_state"] = draw(st.sampled_from([ObjectState.PREPARED, ObjectState.COMMITTED, ObjectState.MARK_DESTROYED]))


def _fix_kv(draw: st.DrawFn, d: dict[str, Any]) -> None:
    if not d["key_values"]:
        d["key_values"] = [{"key": "k", "value": b""}]


def _fix_remove_kv(draw: st.DrawFn, d: dict[str, Any]) -> None:
    if not d["keys"]:
        d["keys"] = ["k"]
    if d.get("namespaces") is not None:
        d["namespaces"] = draw(
            st.lists(st.none() | st.text(max_size=8), min_size=len(d["keys"]), max_size=len(d["keys"]))
        )


def _fix_end_offsets(draw: st.DrawFn, d: dict[str, Any]) -> None:
    if not d["end_offsets"]:
        d["end_offsets"] = [{"stream_id": 0, "end_offset": 0}]


bookie_ids = st.sampled_from([f"bk{i}:3181" for i in range(8)])


def _fix_ledger_created(draw: st.DrawFn, d: dict[str, Any]) -> None:
    e = draw(st.integers(1, 6))
    w = draw(st.integers(1, e))
    d["ensemble_size"], d["write_quorum"], d["ack_quorum"] = e, w, draw(st.integers(1, w))
    d["ensemble"] = draw(st.lists(bookie_ids, min_size=e, max_size=e, unique=True))


def _fix_ensemble_change(draw: st.DrawFn, d: dict[str, Any]) -> None:
    d["ensemble"] = draw(st.lists(bookie_ids, min_size=1, max_size=6, unique=True))


def _fix_bookie_info(draw: st.DrawFn, d: dict[str, Any]) -> None:
    d["total_bytes"] = draw(st.integers(0, 2**50))
    d["free_bytes"] = draw(st.integers(0, d["total_bytes"]))


_FIXUPS = {
    LedgerCreated: _fix_ledger_created,
    LedgerEnsembleChange: _fix_ensemble_change,
    BookieInfo: _fix_bookie_info,
    Partition: _fix_partition,
    PartitionChange: _fix_partition_change,
    LogDirsLoaded: _fix_dirs_loaded,
    S3Stream: _fix_stream,
    S3StreamSetObject: _fix_stream_set_object,
    ObjectWritten: _fix_object_written,
    S3Object: _fix_object,
    KV: _fix_kv,
    RemoveKV: _fix_remove_kv,
    S3StreamEndOffsets: _fix_end_offsets,
}


@st.composite
def records_of(draw: st.DrawFn, cls: type[Record], *, envelope: bool = True, version: int | None = None) -> Record:
    """A valid record of type ``cls``, at any of its versions (or at ``version``), with or without
    envelope values."""
    info = mi.type_info(cls)
    fields = {f.name: f for f in info.fields}
    d: dict[str, Any] = {"type": cls.__struct_config__.tag}
    for name in payload_fields(cls):
        f = fields[name]
        if f.required or draw(st.booleans()):
            d[name] = draw(_strategy(f.type, name, cls))
    _ordered_offsets(d)
    fix = _FIXUPS.get(cls)
    if fix is not None:
        fix(draw, d)
    if version is None:
        version = draw(st.integers(cls.MIN_VERSION, current_version(cls)))
    d["version"] = version
    for name, since in cls.SINCE.items():
        if since > version:
            d.pop(name, None)  # a producer of this version cannot set it
    for name, until in cls.UNTIL.items():
        if version >= until:
            d.pop(name, None)  # nor one its version removed
    if cls is KV and version < 1:
        for kv in d["key_values"]:
            kv.pop("namespace", None)
    if envelope:
        d["ts_ms"] = draw(st.none() | st.integers(0, 2**53))
        d["source"] = draw(st.none() | st.text(max_size=12))
        d["source_offset"] = draw(st.none() | st.integers(0, 2**40))
    return from_builtins(d)


def any_record(*, envelope: bool = True) -> st.SearchStrategy[Record]:
    """A record of any type in the catalogue."""
    return st.one_of(*[records_of(cls, envelope=envelope) for cls in RECORD_TYPES])


def batches(*, max_size: int = 20) -> st.SearchStrategy[list[Record]]:
    return st.lists(any_record(), min_size=1, max_size=max_size)
