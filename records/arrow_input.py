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
The fast path (``_by_type``): the rows of each record type in one piece, their envelope and
struct fields as one Arrow struct array turned into Python in C++, and one ``msgspec.convert``
per type (types and bounds checked in C); then the records' own checks as Arrow compute
(``columnar``). A batch it cannot vouch for (an old version to upcast, a renamed or packed
type, a null, a failed check) goes to the reference, which raises its error or returns its own
result. A null in a struct field that cannot be null but has a default means the default, as
when the log reads its own rows; a null anywhere else is refused as the JSON ``null`` would be.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .arrow import RECORD_COLUMN, _droppable_nulls, column_name, payload_type
from .base import ENVELOPE_FIELDS, Record, current_version, gc_paused, payload_fields, trusted
from .catalog import BY_NAME, RECORD_TYPES
from .columnar import Validated, _checked, from_builtins_batch
from .errors import RecordError
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


def from_arrow(data: pa.Table | pa.RecordBatch) -> Validated:
    """The rows of ``data`` as checked records (columnar; upcast like any input). The first bad
    row raises ``RecordError`` naming the row (1-based), its record type and field."""
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        raise TypeError(f"expected a pyarrow Table or RecordBatch, got {type(data).__name__}")
    try:
        with gc_paused():
            fast = _by_type(data)
    except (TypeError, ValueError, msgspec.MsgspecError, pa.ArrowException):
        fast = None
    if fast is not None:
        return fast
    try:
        return from_builtins_batch(rows(data))
    except RecordError as exc:
        raise _as_row_error(exc) from None


def _by_type(data: pa.Table | pa.RecordBatch) -> Validated | None:
    """The fast path (see the module's docstring); None where it cannot vouch for the batch."""
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
            converted = msgspec.convert(dicts, list[cls])  # type: ignore[valid-type]
        for at, record in zip(rows_of.to_pylist(), converted):
            out[at] = record
    return _checked(out, payloads=payloads)  # type: ignore[arg-type]


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
