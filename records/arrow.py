"""The log's Arrow schema, derived from the record Structs, and records <-> Arrow tables.

Columns: the envelope (``offset``, ``ts_ms``, ``type``, ``version``, ``key``, ``source``,
``source_offset``, ``producer``, ``producer_seq``), then one nullable struct column per record type
that has payload fields (``PartitionChange`` -> ``partition_change``), so Spark SQL reads
``partition_change.leader`` with no Python decoding. Integer widths come from the fields' msgspec
bounds (``records.types``); there is no hand-kept second schema.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from functools import cache
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec
import msgspec.inspect as mi
import pyarrow as pa
import pyarrow.compute as pc
from msgspec.structs import astuple, force_setattr

from .base import ENVELOPE_FIELDS, Record, gc_paused, payload_fields, struct_info, trusted, type_name
from .catalog import BY_NAME, RECORD_TYPES, AnyRecord
from .codec import from_builtins, record_error
from .errors import CorruptStoreError
from .s3stream import StreamRange, StreamRanges, packed_fields
from .upcast import SHAPES

ENVELOPE_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("source_offset", pa.int64()),
        pa.field("producer", pa.string()),
        pa.field("producer_seq", pa.int64()),
    ]
)
"""``producer``/``producer_seq`` name the exactly-once batch a row was appended in (null without)."""

_INT_WIDTHS = ((8, pa.int8()), (16, pa.int16()), (32, pa.int32()))


@cache
def column_name(cls: type[Record]) -> str:
    """``PartitionChange`` -> ``partition_change``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type_name(cls)).lower()


def _int_type(info: mi.IntType) -> pa.DataType:
    lo = info.ge if info.ge is not None else (info.gt + 1 if info.gt is not None else None)
    hi = info.le if info.le is not None else (info.lt - 1 if info.lt is not None else None)
    if lo is not None and hi is not None:
        for bits, arrow in _INT_WIDTHS:
            if -(2 ** (bits - 1)) <= lo and hi <= 2 ** (bits - 1) - 1:
                return arrow
    return pa.int64()


def _arrow_type(info: mi.Type) -> pa.DataType:
    if isinstance(info, mi.Metadata):
        return _arrow_type(info.type)
    if isinstance(info, mi.IntType):
        return _int_type(info)
    if isinstance(info, mi.StrType):
        return pa.string()
    if isinstance(info, mi.BoolType):
        return pa.bool_()
    if isinstance(info, mi.EnumType) and all(isinstance(m.value, str) for m in info.cls):
        return pa.string()
    if isinstance(info, mi.BytesType):
        return pa.binary()
    if isinstance(info, mi.FloatType):
        return pa.float64()
    if isinstance(info, (mi.VarTupleType, mi.ListType)):
        return pa.list_(_arrow_type(info.item_type))
    if isinstance(info, mi.StructType):
        if info.cls is StreamRanges:  # packed in the record, a list of structs for SQL engines
            return pa.list_(_arrow_type(mi.type_info(StreamRange)))
        return pa.struct([pa.field(f.name, _arrow_type(f.type)) for f in info.fields])
    if isinstance(info, mi.UnionType):
        inner = [t for t in info.types if not isinstance(t, mi.NoneType)]
        if len(inner) == 1:
            return _arrow_type(inner[0])
    raise TypeError(f"no Arrow type for {info!r}")


@cache
def payload_type(cls: type[Record]) -> pa.StructType | None:
    """The struct type of a record type's column, or None when it has no payload fields."""
    info = struct_info(cls)
    fields = [pa.field(f.name, _arrow_type(f.type)) for f in info.fields if f.name not in ENVELOPE_FIELDS]
    return pa.struct(fields) if fields else None


RECORD_COLUMN = "record"
"""The whole record (envelope included) as msgpack: what local replay decodes, in one msgspec
call per file, instead of converting the struct columns cell by cell, which is far slower
(bench/RESULTS.md). The struct columns stay the queryable truth for Spark SQL; both are written
from the same Struct."""


def log_schema(record_types: Sequence[type[Record]] = RECORD_TYPES) -> pa.Schema:
    """The full table schema for a set of record types."""
    fields = list(ENVELOPE_SCHEMA)
    for cls in record_types:
        t = payload_type(cls)
        if t is not None:
            fields.append(pa.field(column_name(cls), t))
    fields.append(pa.field(RECORD_COLUMN, pa.binary()))
    return pa.schema(fields)


LOG_SCHEMA = log_schema()


def _field_array(values: list[Any], ftype: pa.DataType) -> pa.Array:
    """One struct field's values as an Arrow array; nested Structs go through builtins first."""
    if _is_nested(ftype):
        values = msgspec.to_builtins(values, builtin_types=(bytes,))
    return pa.array(values, ftype)


def _stream_ranges_array(values: list[StreamRanges | None], ftype: pa.ListType) -> pa.Array:
    """``StreamRanges`` values as a list<struct> column, unpacked by Arrow from their buffers."""
    import numpy as np

    lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, len(values))
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))), pa.int32())
    flat = np.frombuffer(b"".join(v.raw() for v in values if v is not None), "<i8").reshape(-1, 3)
    item = ftype.value_type
    child = pa.StructArray.from_arrays([pa.array(flat[:, k], item.field(k).type) for k in range(3)], fields=list(item))
    mask = pa.array([v is None for v in values]) if any(v is None for v in values) else None
    return pa.ListArray.from_arrays(offsets, child, type=ftype, mask=mask)


def null_columns(n: int, types: Sequence[pa.DataType]) -> list[pa.Array]:
    """``[pa.nulls(n, t) for t in types]`` (equal arrays), every buffer one shared zero buffer.

    ``pa.nulls`` allocates a validity bitmap and a data buffer for every (nested) field: the
    log's schema over 10 000 rows is 11 MB and 10 ms, paid by every append for the columns of
    the record types its batch does not hold (which the data file then leaves out)."""
    if len(_NULLS) > 1024:  # batches of many sizes: keep the cache small
        _NULLS.clear()
    out = []
    zeros = None
    for t in types:
        array = _NULLS.get((t, n))
        if array is None:
            if zeros is None:
                zeros = pa.py_buffer(bytes((n + 1) * 8))  # enough for any validity, offsets or 8-byte values
            array = _NULLS[(t, n)] = _null_array(t, n, zeros)
        out.append(array)
    return out


_NULLS: dict[tuple[pa.DataType, int], pa.Array] = {}
"""Null columns made before, by type and length (immutable: every table may share them)."""


def _null_array(ftype: pa.DataType, n: int, zeros: pa.Buffer) -> pa.Array:
    if pa.types.is_struct(ftype):
        children = [_null_array(f.type, n, zeros) for f in ftype]
        return pa.Array.from_buffers(ftype, n, [zeros], null_count=n, children=children)
    if pa.types.is_list(ftype):  # every list empty: no child values
        child = _null_array(ftype.value_type, 0, zeros)
        return pa.Array.from_buffers(ftype, n, [zeros, zeros], null_count=n, children=[child])
    if pa.types.is_string(ftype) or pa.types.is_binary(ftype):
        return pa.Array.from_buffers(ftype, n, [zeros, zeros, zeros], null_count=n)
    if pa.types.is_primitive(ftype) and ftype.bit_width <= 64:
        return pa.Array.from_buffers(ftype, n, [zeros, zeros], null_count=n)
    return pa.nulls(n, ftype)


@cache
def _is_nested(ftype: pa.DataType) -> bool:
    """Whether values of this type hold Structs (directly or in lists)."""
    if pa.types.is_struct(ftype):
        return True
    if pa.types.is_list(ftype) or pa.types.is_large_list(ftype):
        return _is_nested(ftype.value_type)
    return False


@cache
def _positions(cls: type[Record]) -> dict[str, int]:
    return {name: i for i, name in enumerate(cls.__struct_fields__)}


def to_table(
    records: Sequence[Record],
    *,
    first_offset: int,
    ts_ms: int,
    producer: str | None = None,
    producer_seq: int | None = None,
    schema: pa.Schema = LOG_SCHEMA,
) -> pa.Table:
    """Records as log rows with offsets ``first_offset ..``; a record's own ``ts_ms`` wins.

    A record that already has an ``offset`` (copied from another log) keeps it as
    ``source_offset``, unless it already carries one from further upstream. Columns are built
    field by field (one Arrow conversion per struct field of each type present), not row by row.
    """
    n = len(records)
    names = [type_name(type(r)) for r in records]
    ts = [ts_ms if r.ts_ms is None else r.ts_ms for r in records]
    source_offsets = [r.offset if r.source_offset is None else r.source_offset for r in records]
    columns: dict[str, Any] = {
        "offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
        "ts_ms": pa.array(ts, pa.int64()),
        "type": pa.array(names, pa.string()),
        "version": pa.array([r.version for r in records], pa.int32()),
        "key": pa.array([r.entity_key() for r in records], pa.string()),
        "source": pa.array([r.source for r in records], pa.string()),
        "source_offset": pa.array(source_offsets, pa.int64()),
        "producer": pa.array([producer] * n, pa.string()),
        "producer_seq": pa.array([producer_seq] * n, pa.int64()),
        RECORD_COLUMN: record_column(records, first_offset=first_offset, ts_ms=ts_ms),
    }
    by_type: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        by_type.setdefault(name, []).append(i)
    for name, idx in by_type.items():
        col = column_name(BY_NAME[name])
        if col not in schema.names:
            continue  # a type with no payload fields has no column
        ftype = schema.field(col).type
        # astuple + zip transpose rows to columns in C; the struct field order is the table's
        values = list(zip(*[astuple(records[i]) for i in idx]))
        position = _positions(BY_NAME[name])
        packed = packed_fields(BY_NAME[name])
        arrays = [
            (_stream_ranges_array if f.name in packed else _field_array)(list(values[position[f.name]]), f.type)
            if f.name in position
            else pa.nulls(len(idx), f.type)
            for f in ftype
        ]
        compact = pa.StructArray.from_arrays(arrays, fields=list(ftype))
        if len(idx) == n:
            columns[col] = compact
        else:
            positions: list[int | None] = [None] * n
            for j, i in enumerate(idx):
                positions[i] = j
            columns[col] = compact.take(pa.array(positions, pa.int32()))
    return pa.table(
        [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema],
        schema=schema,
    )


@cache
def _droppable_nulls(cls: type[Record]) -> frozenset[str]:
    """Fields that cannot be None in the Struct but have a default: a null there (a column added
    to the table after the row was written) means 'take the default'."""
    info = struct_info(cls)
    out = set()
    for f in info.fields:
        nullable = isinstance(f.type, mi.NoneType) or (
            isinstance(f.type, mi.UnionType) and any(isinstance(t, mi.NoneType) for t in f.type.types)
        )
        if not nullable and not f.required:
            out.add(f.name)
    return frozenset(out)


def values_end_to_end(arr: pa.Array) -> pa.Buffer:
    """The values of a binary or string array (none null) end to end, as its values buffer holds
    them: no copy, no Python object per value."""
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    offsets = arr.buffers()[1]
    bounds = pa.Array.from_buffers(
        pa.int64() if large else pa.int32(), len(arr) + 1, [None, offsets], offset=arr.offset
    )
    start, end = bounds[0].as_py(), bounds[len(arr)].as_py()
    values = arr.buffers()[2]
    return pa.py_buffer(b"") if values is None else values.slice(start, end - start)


_ENCODER = msgspec.msgpack.Encoder()
_LIST_DECODER = msgspec.msgpack.Decoder(list[AnyRecord])


def _decode_blobs(column: pa.ChunkedArray) -> list[Record] | None:
    """The records of a ``record`` column, or None when some rows lack one (written before the
    column existed). The values buffer of a binary array is the blobs end to end, so one msgpack
    array header in front makes the whole column a single ``list[AnyRecord]`` to decode."""
    if column.null_count:
        return None
    n = len(column)
    if n == 0:
        return []
    # One copy of the blobs, behind the header, chunk by chunk (a fat history holds hundreds of
    # megabytes of them: combining chunks, then bytes, then header + bytes copied them thrice).
    spans = [values_end_to_end(arr) for arr in column.chunks if len(arr)]
    message = b"".join([b"\xdd" + n.to_bytes(4, "big"), *(memoryview(s) for s in spans)])
    with trusted(), gc_paused():
        try:
            return _LIST_DECODER.decode(message)
        except msgspec.ValidationError:
            # Written before a record changed shape (``ObjectWritten`` v0 listed its ranges):
            # record by record through the upcasters.
            return [from_builtins(raw) for raw in msgspec.msgpack.decode(message)]


_RAW_ITEMS = msgspec.msgpack.Decoder(list[msgspec.Raw])
_copy = msgspec.Struct.__copy__  # type: ignore[attr-defined]  # at run time, not in msgspec's stubs
_TS_MS, _OFFSET, _SOURCE_OFFSET = attrgetter("ts_ms"), attrgetter("offset"), attrgetter("source_offset")


def record_column(records: Sequence[Record], *, first_offset: int, ts_ms: int) -> pa.Array:
    """The ``record`` column of rows ``first_offset ..``: each record as stored (its offset, its
    time or ``ts_ms``, the old offset as ``source_offset``), msgpack-encoded. An append that
    loses a commit race to another writer rebuilds it for its new offsets.

    One encoding of the whole batch: a msgpack array's items lie end to end behind its header,
    so that encoding is the column's data and the items' lengths give its offsets (no bytes
    object per record, no conversion of them)."""
    n = len(records)
    # Copies stamped in place, by C calls mapped over the batch: no Python per record (and no
    # ``__post_init__``, which ``structs.replace`` calls for every copy). The records were
    # validated on their way in.
    stamped = list(map(_copy, records))
    deque(map(force_setattr, stamped, repeat("offset"), range(first_offset, first_offset + n)), 0)
    times = list(map(_TS_MS, records))
    if times.count(None) == n:
        deque(map(force_setattr, stamped, repeat("ts_ms"), repeat(ts_ms, n)), 0)
    else:
        deque(map(force_setattr, stamped, repeat("ts_ms"), [ts_ms if t is None else t for t in times]), 0)
    offsets = list(map(_OFFSET, records))
    if offsets.count(None) != n:  # copied from another log: the old offset is the source_offset
        sources = [o if s is None else s for o, s in zip(offsets, map(_SOURCE_OFFSET, records))]
        deque(map(force_setattr, stamped, repeat("source_offset"), sources), 0)
    return encoded_column(stamped)


def encoded_column(records: Sequence[Record]) -> pa.Array:
    """The ``record`` column of ``records`` as they are (offsets, times and source offsets
    already stamped): one encoding of the whole batch, whose items are the column's data."""
    import numpy as np

    message = _ENCODER.encode(records)
    lengths = np.fromiter(map(len, _RAW_ITEMS.decode(message)), np.int64, len(records))
    offsets = np.zeros(len(records) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    header = len(message) - int(offsets[-1])
    data = pa.py_buffer(message).slice(header)
    column = pa.Array.from_buffers(pa.large_binary(), len(records), [None, pa.py_buffer(offsets), data])
    return column.cast(pa.binary())  # 32-bit offsets, as the schema says (a batch under 2 GiB)


def from_table(table: pa.Table) -> list[Record]:
    """Log rows back into records, in the table's row order. Kraftlake wrote and validated
    them: msgspec checks types and bounds, the records' own Python checks are skipped."""
    if RECORD_COLUMN in table.column_names:
        records = _decode_blobs(table.column(RECORD_COLUMN))
        if records is not None:
            _check_envelope(table, records)
            return records
    with trusted():
        return _from_struct_columns(table)


def _check_envelope(table: pa.Table, records: list[Record]) -> None:
    """Each row's ``offset`` and ``type`` columns, where read, agree with its ``record`` blob:
    a file whose columns were damaged or mixed up separately is refused, not half believed."""
    for name, got in (
        ("offset", lambda: [r.offset for r in records]),
        ("type", lambda: [type_name(type(r)) for r in records]),
    ):
        if name in table.column_names:
            want = table.column(name).to_pylist()
            have = got()
            if want != have:
                i = next(i for i, (a, b) in enumerate(zip(want, have)) if a != b)
                raise CorruptStoreError(
                    f"row {i} of a data file: its {name} column says {want[i]!r}, its record {have[i]!r}"
                    f" (offset {want[i] if name == 'offset' else table.column('offset')[i].as_py()})"
                )


def _from_struct_columns(table: pa.Table) -> list[Record]:
    n = table.num_rows
    out: list[Record | None] = [None] * n
    if n == 0:
        return []
    types = table.column("type")
    envelope = {name: table.column(name) for name in ENVELOPE_FIELDS}
    for name in pc.unique(types).to_pylist():
        cls = BY_NAME.get(name)
        if cls is None:
            raise record_error(ValueError(f"unknown record type {name!r}"), line=None, record_type=name)
        idx = pc.indices_nonzero(pc.equal(types, name))
        env = {k: col.take(idx).to_pylist() for k, col in envelope.items()}
        col = column_name(cls)
        if col in table.column_names and payload_fields(cls):
            payloads = table.column(col).take(idx).to_pylist()
        else:
            payloads = [{} for _ in range(len(idx))]
        drop = _droppable_nulls(cls)
        shape = SHAPES.get(name)  # the struct columns hold a record's unpacked form
        dicts = []
        for j, payload in enumerate(payloads):
            d = {k: v for k, v in (payload or {}).items() if not (v is None and k in drop)}
            for k in ENVELOPE_FIELDS:
                d[k] = env[k][j]
            dicts.append(d if shape is None else shape(d))
        try:
            converted = msgspec.convert(dicts, list[cls])  # type: ignore[valid-type]  # a type chosen at run time
        except msgspec.ValidationError as exc:
            raise record_error(exc, line=None, record_type=name) from None
        for pos, rec in zip(idx.to_pylist(), converted):
            out[pos] = rec
    return out  # type: ignore[return-value]  # every slot filled
