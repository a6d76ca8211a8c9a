"""Arrow tables and record batches as an append's input (``Log.append(table)``).

A batch arrives as rows shaped like the log's own (what ``LogSnapshot.table()`` gives): a
``type`` column; the envelope columns ``version``, ``offset``, ``ts_ms``, ``source`` and
``source_offset``, each optional (a null is an absent value); and one struct column per record
type (``partition_change``...) holding that type's own fields. The log's derived columns
(``key``, ``producer``, ``producer_seq``, ``record``) may be there and are not read: the rows
appended get their own. So a table read from one log appends to another as its records would
(a row with an offset keeps it as ``source_offset``).

A row is its type's struct plus the envelope, as a record's JSON object is. The reference,
row by row: ``rows`` turns the table into those objects and ``codec.from_builtins`` checks each
(through ``columnar.from_builtins_batch``), naming the first bad row, its type and its field.
The fast path (``_by_type``) makes no Python object per row until the checks have passed:
the rows of each record type keep their envelope and struct columns (cast to the log's types),
which ``msgpack_columns`` encodes column by column into each record's msgpack. What msgspec's
decode of those bytes would check (types, bounds, required fields) is checked over the columns
(``column_checks``), and the records' own checks run as Arrow compute too (``columnar``): no
Struct is made unless a type's checks need one or a caller asks for the records. The same
encoding, stamped with the append's offsets and times, is the rows' ``record`` column, and the
columns are the table's. A batch it cannot vouch for (an old version to upcast, a renamed or packed
type, a null, a failed check) goes to the reference, which raises its error or returns its own
result. A null in a struct field that cannot be null but has a default means the default, as
when the log reads its own rows; a null anywhere else is refused as the JSON ``null`` would be.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from msgspec.structs import astuple

from .arrow import LOG_SCHEMA, RECORD_COLUMN, _droppable_nulls, column_name, payload_type
from .base import ENVELOPE_FIELDS, Record, current_version, gc_paused, payload_fields, trusted, type_name
from .catalog import BY_NAME, RECORD_TYPES
from .column_checks import Uncovered, record_breaks
from .columnar import (
    ArrowColumns,
    ColumnBatch,
    Validated,
    _checked,
    _columnar_checks,
    _Group,
    _key_parts,
    _payload_array,
    _vouch,
    from_builtins_batch,
)
from .errors import RecordError
from .msgpack_columns import Stampable
from .s3stream import packed_fields
from .upcast import SHAPES

__all__ = ["from_arrow", "rows"]

_COLUMNS = {column_name(cls): cls for cls in RECORD_TYPES if payload_fields(cls)}
"""Struct column name -> the record type whose fields it holds."""
_DERIVED = frozenset({"key", "producer", "producer_seq", RECORD_COLUMN})
"""Columns the log computes for the rows it appends: present in its own tables, not read."""


def _as_row_error(exc: RecordError) -> RecordError:
    return RecordError(exc.message, line=exc.line, record_type=exc.record_type, field=exc.field, unit="row")


def rows(data: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """Each row as the JSON object of its record (``codec.from_builtins`` takes them).
    ``RecordError`` (naming the row, 1-based, and the column) for a table no record fits: no
    ``type`` column, a column no record type has, a row with another type's struct set."""
    names = data.schema.names
    if "type" not in names:
        raise RecordError(
            "an Arrow batch needs a `type` column naming each row's record type", field="type", unit="row"
        )
    for name in names:
        if name != "type" and name not in ENVELOPE_FIELDS and name not in _DERIVED and name not in _COLUMNS:
            raise RecordError(f"no record type has a column `{name}`", field=name, unit="row")
    types = data.column("type").to_pylist()
    envelope = [(k, data.column(k).to_pylist()) for k in ENVELOPE_FIELDS if k in names]
    payloads = [(c, _COLUMNS[c], data.column(c).to_pylist()) for c in names if c in _COLUMNS]
    out: list[dict[str, Any]] = []
    for i, name in enumerate(types):
        row: dict[str, Any] = {"type": name}  # a null type: from_builtins names it
        for key, values in envelope:
            if values[i] is not None:
                row[key] = values[i]
        cls = BY_NAME.get(name) if isinstance(name, str) else None
        for column, owner, values in payloads:
            fields = values[i]
            if fields is None:
                continue
            if owner is not cls:
                raise RecordError(
                    f"`{column}` holds the fields of a {owner.__name__}, and this row is a {name}",
                    line=i + 1,
                    record_type=name if isinstance(name, str) else None,
                    field=column,
                    unit="row",
                )
            drop = _droppable_nulls(owner)
            for key, value in fields.items():
                if value is not None or key not in drop:
                    row[key] = value
        out.append(row)
    return out


def from_arrow(data: pa.Table | pa.RecordBatch, *, decode: bool = True) -> Validated | ColumnBatch:
    """The rows of ``data`` as checked records (columnar; upcast like any input). The first bad
    row raises ``RecordError`` naming the row (1-based), its record type and field.
    ``decode=False`` (an append): a batch the column path checked comes back as its columns
    (``ColumnBatch``), its records decoded only if something asks for them."""
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        raise TypeError(f"expected a pyarrow Table or RecordBatch, got {type(data).__name__}")
    try:
        with gc_paused():
            fast = _by_type(data)
            if isinstance(fast, ColumnBatch) and decode:
                fast = fast.decoded()
    except (TypeError, ValueError, msgspec.MsgspecError, pa.ArrowException):
        fast = None
    if fast is not None:
        return fast
    try:
        return from_builtins_batch(rows(data))
    except RecordError as exc:
        raise _as_row_error(exc) from None


_ENVELOPE_TYPES = {
    "version": pa.types.is_integer,
    "offset": pa.types.is_integer,
    "ts_ms": pa.types.is_integer,
    "source_offset": pa.types.is_integer,
    "source": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
}
"""The envelope columns' Arrow types whose values a cast keeps as msgspec reads them."""
_DECODERS: dict[type[Record], msgspec.msgpack.Decoder] = {}
COLUMNS_FROM = 2_000
"""Batches of this many rows or more are encoded column by column (``_by_type``); smaller ones
row by row (``_by_rows``), which costs less there (bench/RESULTS.md, session 4)."""


class _ArrowGroup(_Group):
    """The rows of one record type, as the batch gave them: their envelope and struct columns
    (typed as the log's), their records decoded from the msgpack those columns encode to, and
    that encoding, ready to be stamped with the offsets and times of the append."""

    stampable = True

    def __init__(
        self,
        cls: type[Record],
        index: np.ndarray | None,
        records: list[Record] | None,
        envelope: dict[str, pa.Array],
        payload: pa.StructArray | None,
        encoded: Stampable,
        count: int,
    ) -> None:
        self.cls, self.index, self._records, self._count = cls, index, records, count
        self._envelope, self._payload, self._encoded = envelope, payload, encoded
        self._fields: list[tuple[Any, ...]] | None = None

    @property
    def records(self) -> list[Record]:  # type: ignore[override]  # decoded on first use: read-only here
        """The group's records, decoded from their encoding when first asked for (the column
        checks vouched for them: ``column_checks``)."""
        if self._records is None:
            records = _decode(self.cls, self._stamped_as_given())
            if records is None:
                raise ValueError(f"rows of {type_name(self.cls)} the column checks passed do not decode")
            self._records = records
        return self._records

    @property
    def count(self) -> int:
        return self._count

    def _stamped_as_given(self) -> pa.Array:
        """The rows' encoding with the offsets and times they came with."""
        env = self._envelope
        return self._encoded.column(env["offset"], env["ts_ms"], env["source_offset"])

    @property
    def fields(self) -> list[tuple[Any, ...]]:  # type: ignore[override]  # only off the hot path
        if self._fields is None:
            self._fields = list(zip(*map(astuple, self.records)))
        return self._fields

    def envelope(self, name: str) -> pa.Array:
        return self._envelope[name]

    def versions(self) -> tuple[int, int]:
        versions = self._envelope["version"]
        return pc.min(versions).as_py(), pc.max(versions).as_py()

    def field_array(self, name: str) -> pa.Array:
        if name in self._envelope:
            return self._envelope[name]
        return pc.struct_field(self._payload, name)

    def stamped(self, offsets: pa.Array, ts_ms: pa.Array, source_offsets: pa.Array) -> pa.Array:
        return self._encoded.column(offsets, ts_ms, source_offsets)


def _by_type(data: pa.Table | pa.RecordBatch) -> Validated | ColumnBatch | None:
    """The fast path (see the module's docstring); None where it cannot vouch for the batch."""
    if data.num_rows < COLUMNS_FROM:
        return _by_rows(data)
    names = data.schema.names
    if "type" not in names or any(
        n != "type" and n not in ENVELOPE_FIELDS and n not in _DERIVED and n not in _COLUMNS for n in names
    ):
        return None
    for name, accepts in _ENVELOPE_TYPES.items():
        if name in names and not (
            pa.types.is_null(data.schema.field(name).type) or accepts(data.schema.field(name).type)
        ):
            return None
    types = data.column("type")
    if isinstance(types, pa.ChunkedArray):
        types = types.combine_chunks()
    n = len(types)
    if types.null_count or n == 0:
        return None
    envelope_given = [k for k in ENVELOPE_FIELDS if k in names]
    structs = {_COLUMNS[c]: c for c in names if c in _COLUMNS and data.column(c).null_count < n}  # set somewhere
    kinds = pc.unique(types).to_pylist()
    for owner, column in structs.items():  # a row with another type's fields set
        if pc.any(pc.and_(pc.is_valid(data.column(column)), pc.not_equal(types, type_name(owner)))).as_py():
            return None
    groups: list[_Group] = []
    for name in kinds:
        cls = BY_NAME.get(name)
        if cls is None or name in SHAPES or packed_fields(cls):
            return None
        if len(kinds) == 1:
            rows_of, index = None, None
        else:
            rows_of = pc.indices_nonzero(pc.equal(types, name))
            index = rows_of.to_numpy()
        count = n if rows_of is None else len(rows_of)

        envelope = {k: _rows(data, k, rows_of).cast(LOG_SCHEMA.field(k).type) for k in envelope_given}
        for k in ENVELOPE_FIELDS:
            if k not in envelope:
                envelope[k] = pa.nulls(count, LOG_SCHEMA.field(k).type)
        version = envelope["version"]
        if "version" not in envelope_given:
            envelope["version"] = pa.array(np.full(count, current_version(cls), np.int32))
        elif version.null_count or not pc.all(pc.equal(version, current_version(cls))).as_py():
            return None  # older versions are upcast record by record; a null is the reference's to judge
        payload = None
        if cls in structs:
            values = _rows(data, structs[cls], rows_of)
            if values.null_count:
                return None
            payload = _own_column(cls, values.type, values.flatten())
            if payload is None:
                return None
        if payload is None and payload_type(cls) is not None:
            if any(f.required for f in msgspec.structs.fields(cls)):  # no struct column: the reference says which field
                return None
            payload = _default_payload(cls, count)
            if payload is None:
                return None
        encoded = Stampable.of(cls, envelope, payload, count)
        if encoded is None:
            return None
        group = _ArrowGroup(cls, index, None, envelope, payload, encoded, count)
        if not _columnar_checks(cls) or _key_parts(cls) is None:
            # Python code reads these records (their own checks, their keys): decode them
            # now, which checks them as well.
            group._records = _decode(cls, group._stamped_as_given())
            if group._records is None:
                return None
        else:
            try:
                if record_breaks(cls, envelope, payload):
                    return None
            except Uncovered:  # a type the column checks do not model: decoding is the check
                group._records = _decode(cls, group._stamped_as_given())
                if group._records is None:
                    return None
        groups.append(group)
    columns = ArrowColumns(groups, n)
    if not _vouch(columns):
        return None
    return ColumnBatch(columns)


def _by_rows(data: pa.Table | pa.RecordBatch) -> Validated | None:
    """The fast path for a small batch: each type's rows turned into Python in C++ and converted
    by msgspec (for a few hundred rows, cheaper than encoding every column); None where it
    cannot vouch for the batch."""
    names = data.schema.names
    if "type" not in names or any(
        n != "type" and n not in ENVELOPE_FIELDS and n not in _DERIVED and n not in _COLUMNS for n in names
    ):
        return None
    types = data.column("type")
    if types.null_count or len(types) == 0:
        return None
    envelope = [k for k in ENVELOPE_FIELDS if k in names]
    structs = [c for c in names if c in _COLUMNS and data.column(c).null_count < len(types)]  # set somewhere
    out: list[Record | None] = [None] * len(types)
    payloads: dict[type[Record], pa.StructArray] = {}
    for name in pc.unique(types).to_pylist():
        cls = BY_NAME.get(name)
        if cls is None or name in SHAPES or packed_fields(cls):
            return None
        rows_of = pc.indices_nonzero(pc.equal(types, name))
        arrays = [data.column(k).take(rows_of) for k in envelope]
        fields = list(envelope)
        for column in structs:
            values = data.column(column).take(rows_of)
            if _COLUMNS[column] is not cls:
                if values.null_count != len(values):  # another type's fields on these rows
                    return None
                continue
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            if values.null_count:
                return None
            children = values.flatten()
            arrays += children
            fields += [f.name for f in values.type]
            own = _own_column(cls, values.type, children)
            if own is not None:
                payloads[cls] = own
        arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
        if "version" in envelope and not pc.all(pc.equal(arrays[0], current_version(cls))).as_py():
            return None  # older versions are upcast record by record; a null is the reference's to judge
        dicts = pa.StructArray.from_arrays(arrays, fields).to_pylist() if arrays else [{}] * len(rows_of)
        with trusted():
            converted = msgspec.convert(dicts, list[cls])  # type: ignore[valid-type]  # a type chosen at run time
        for at, record in zip(rows_of.to_pylist(), converted):
            out[at] = record
    return _checked(out, payloads=payloads)  # type: ignore[arg-type]  # every slot filled


def _rows(data: pa.Table | pa.RecordBatch, column: str, rows_of: pa.Array | None) -> pa.Array:
    """A column's values on the rows ``rows_of`` (all rows for None), in one array."""
    values = data.column(column)
    values = values if rows_of is None else values.take(rows_of)
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _default_payload(cls: type[Record], count: int) -> pa.StructArray | None:
    """The struct column of ``count`` records of ``cls`` holding only defaults (the batch has no
    column for the type: every field takes its default), or None when a default is not a
    constant Arrow holds."""
    try:
        default = cls(**{})
    except (TypeError, ValueError):
        return None
    with gc_paused():
        one = _payload_array(cls, list(zip(*[astuple(default)])), 1)
    if one is None:
        return None
    return one.take(pa.array(np.zeros(count, np.int64)))


def _decode(cls: type[Record], blobs: pa.Array) -> list[Record] | None:
    """The records of ``cls`` a binary column of msgpack encodes, checked by msgspec (types,
    bounds, required fields: in C) and not by their Python checks (``trusted``); None when
    some row is not a valid record (the reference then names it)."""
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _DECODERS[cls] = msgspec.msgpack.Decoder(list[cls])  # type: ignore[valid-type]  # a type chosen at run time
    count = len(blobs)
    offsets = np.frombuffer(blobs.buffers()[1], np.int32, count + 1, blobs.offset * 4)
    data = memoryview(blobs.buffers()[2])[offsets[0] : offsets[-1]]
    try:
        with trusted():
            return decoder.decode(b"".join([b"\xdd", count.to_bytes(4, "big"), data]))
    except msgspec.ValidationError:
        return None


def _own_column(cls: type[Record], given: pa.StructType, children: list[pa.Array]) -> pa.StructArray | None:
    """The rows' own struct column as the log's (``payload_type``: its field order and types),
    when it holds exactly what the records converted from it do; None when building it from
    the records is the safe way. It does when it has every field of the type, recursively (a
    field it lacks takes the record's default), and no null where a null means the default
    (``_droppable_nulls``); msgspec has checked every value, so the casts cannot fail."""
    want = payload_type(cls)
    if want is None or not _same_fields(given, want):
        return None
    by_name = dict(zip([f.name for f in given], children))
    drop = _droppable_nulls(cls)
    if any(by_name[name].null_count for name in drop if name in by_name):
        return None
    try:
        arrays = [pc.cast(by_name[f.name], f.type) for f in want]
    except (pa.ArrowException, TypeError, ValueError):  # e.g. nested fields in another order
        return None
    return pa.StructArray.from_arrays(arrays, fields=list(want))


def _same_fields(given: pa.DataType, want: pa.DataType) -> bool:
    """Whether ``given`` has exactly ``want``'s struct fields at every level, and leaves whose
    values a cast keeps as msgspec does (an integer for an integer, a string for a string...;
    not a string for bytes, which msgspec reads as base64)."""
    if pa.types.is_struct(want):
        if not pa.types.is_struct(given) or sorted(f.name for f in given) != sorted(f.name for f in want):
            return False
        return all(_same_fields(given.field(f.name).type, f.type) for f in want)
    if pa.types.is_list(want):
        return (pa.types.is_list(given) or pa.types.is_large_list(given)) and _same_fields(
            given.value_type, want.value_type
        )
    if pa.types.is_null(given):  # no values
        return True
    for kind in (pa.types.is_integer, pa.types.is_boolean, pa.types.is_floating):
        if kind(want):
            return kind(given)
    if pa.types.is_string(want):
        return pa.types.is_string(given) or pa.types.is_large_string(given)
    if pa.types.is_binary(want):
        return pa.types.is_binary(given) or pa.types.is_large_binary(given)
    return given == want
