"""The append's hot path, columnar: a batch to checked records and Arrow columns.

The reference path (``codec.normalize_batch`` / ``codec.iter_lines`` / ``codec.from_builtins``
record by record, then ``arrow.to_table``) runs every record's Python checks
(``Record.__post_init__``) and builds each column from per-record Python lists. Here:

- records are decoded by msgspec alone (``trusted()``: msgspec checks types, bounds, required
  and unknown fields in C; no Python code runs per record);
- the batch is grouped by record type once, each group transposed to columns once
  (``Columns``), and those columns serve both the checks and the table;
- the records' Python checks run as Arrow compute over those columns (``_check_group``: version
  range, Kafka uuids, and the ported ``_validate`` rules in ``_CHECKS``). A type whose rules are
  not ported (or that has removed fields, packed fields or a ``__post_init__`` of its own) is
  checked record by record with its own ``__post_init__``, as the reference does.

A batch this path cannot vouch for (a decode error, a failed check) goes to the reference path,
which raises the exact error naming line, type and field, or returns its own result where the
columnar checks were merely cautious. The outputs equal the reference's
(tests/test_columnar.py checks tables and errors on generated batches); the speed is in
bench/RESULTS.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from itertools import repeat
from operator import itemgetter
from typing import Any

import msgspec
import msgspec.inspect as mi
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from msgspec.structs import astuple

from .arrow import (
    LOG_SCHEMA,
    RECORD_COLUMN,
    _field_array,
    _stream_ranges_array,
    column_name,
    null_columns,
    record_column,
)
from .base import (
    ENVELOPE_FIELDS,
    PART,
    PARTS,
    UUID,
    UUIDS,
    Record,
    current_version,
    gc_paused,
    struct_info,
    trusted,
    type_name,
    uuid_fields,
)
from .catalog import RECORD_TYPES, AnyRecord
from .codec import decode_line, from_builtins, iter_lines, normalize, normalize_batch
from .errors import RecordError
from .kraft import BrokerRegistrationChange, Partition, PartitionChange, RegisterBroker, RemoveTopic, Topic
from .msgpack_columns import head_length, stamp_blank
from .s3stream import packed_fields
from .types import is_reserved

__all__ = [
    "ArrowColumns",
    "ColumnBatch",
    "Columns",
    "Validated",
    "from_builtins_batch",
    "from_lines",
    "from_msgpack_items",
    "from_python",
    "to_table",
]

_ENVELOPE_AT = {name: i for i, name in enumerate(ENVELOPE_FIELDS)}
"""Where each envelope field is in a record's fields (every record type starts with them)."""
_UUID_RE = r"^[A-Za-z0-9_-]{21}[AQgw]$"
"""``types._UUID_RE`` as an anchored RE2 pattern (what ``check_uuid`` matches in full)."""
_RESERVED_PREFIX = "A" * 20
"""Every reserved id (``is_reserved``: 15 zero bytes, then a byte below 100) starts so."""


class Validated(list):
    """A checked batch (a list of records) that keeps its ``Columns`` for ``to_table``."""

    columns: Columns | None = None


class ColumnBatch:
    """A checked batch held as columns (Arrow rows, ``arrow_input``): ``to_table`` reads them,
    and no record is made unless ``decoded`` asks for them."""

    def __init__(self, columns: ArrowColumns) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return self.columns.size

    def decoded(self) -> Validated:
        """The batch as its records (a ``Validated`` list keeping these columns)."""
        out = Validated(self.columns.records)
        out.columns = self.columns
        return out


# -- the batch as columns ----------------------------------------------------------------------


class _Group:
    """The records of one type in a batch: where they are (``index``; None when the batch holds
    only this type) and their fields as columns (a tuple of values per struct field)."""

    __slots__ = ("cls", "index", "records", "fields", "_payload", "_versions")

    def __init__(self, cls: type[Record], index: np.ndarray | None, records: Sequence[Record]) -> None:
        self.cls = cls
        self.index = index
        self.records = records
        # One C call per record to get its values, one transposition for the whole group.
        self.fields: list[tuple[Any, ...]] = list(zip(*map(astuple, records)))
        self._payload: pa.StructArray | None | bool = False
        self._versions: tuple[int, int] | None = None

    def payload(self) -> pa.StructArray | None:
        """The group's struct column (compact: one row per record of the group), or None when
        the type has no payload column."""
        if self._payload is False:
            self._payload = _payload_array(self.cls, self.fields, len(self.records))
        return self._payload

    @property
    def count(self) -> int:
        return len(self.records)

    def envelope(self, name: str) -> pa.Array:
        """An envelope field (``ENVELOPE_FIELDS``) of the group's records, typed as the log's."""
        values = self.fields[_ENVELOPE_AT[name]]
        if values.count(None) == len(values):  # the common case (no time, source, offset): no conversion
            return pa.nulls(len(values), LOG_SCHEMA.field(name).type)
        return pa.array(values, LOG_SCHEMA.field(name).type)

    def versions(self) -> tuple[int, int]:
        """The lowest and highest version among the group's records (asked for by the checks,
        the upcast, the stamping and the table: found once)."""
        if self._versions is None:
            versions = self.fields[0]
            self._versions = min(versions), max(versions)
        return self._versions

    def field_array(self, name: str) -> pa.Array:
        """A payload field's values (from the struct column when it holds the field: built
        already, no second conversion of the Python values)."""
        payload = self.payload()
        if payload is not None and payload.type.get_field_index(name) >= 0 and name not in packed_fields(self.cls):
            return payload.field(name)
        return pa.array(self.fields[self.cls.__struct_fields__.index(name)])

    stampable = False
    """Whether ``stamped`` gives the group's ``record`` column (its encoding is at hand)."""

    def stamped(self, offsets: pa.Array, ts_ms: pa.Array, source_offsets: pa.Array) -> pa.Array | None:
        """The group's ``record`` column at these offsets, times and source offsets, when it has its encoding at
        hand (``arrow_input``'s groups); None: encode the batch's Structs."""
        return None


class Columns:
    """A batch grouped by record type, each group transposed once; the checks and the table
    both read these columns."""

    message: bytes | None = None
    """msgspec's encoding of the records (a list), when the batch was checked through it
    (``from_python``) or encoded for the stamping (``encodes``): the ``record`` column is
    stamped into it."""
    lengths: np.ndarray | None = None
    """Each record's length in ``message``, when known (``from_msgpack_items``: the items')."""
    encodes = False
    """Whether ``record_column`` encodes the records once to stamp into (their encoding, with
    offset, time and source blank, is the stored one: records decoded from the wire)."""
    _group_of: pa.Array | None = None
    """Each row's group (its index in ``groups``), once asked for (``_by_group``)."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        n = len(records)
        types = list(map(type, records))
        kinds = list(dict.fromkeys(types))  # in order of first appearance: deterministic
        self.order: np.ndarray | None = None
        self._inverse: pa.Array | None = None
        if len(kinds) == 1:
            self.groups = [_Group(kinds[0], None, records)]
            return
        code = {t: i for i, t in enumerate(kinds)}
        codes = np.fromiter(map(code.__getitem__, types), np.intp, n)
        order = np.argsort(codes, kind="stable")
        ends = np.cumsum(np.bincount(codes, minlength=len(kinds)))
        self.order = order
        self.groups = []
        start = 0
        for cls, end in zip(kinds, ends.tolist()):
            index = order[start:end]
            # itemgetter picks the group's records in one C call (a tuple when it picks two or more)
            picked = itemgetter(*index.tolist())(records) if len(index) > 1 else [records[int(index[0])]]
            self.groups.append(_Group(cls, index, picked))
            start = end

    @property
    def size(self) -> int:
        """The batch's number of records."""
        return len(self.records)

    def _in_row_order(self, arrays: list[pa.Array]) -> pa.Array:
        """Per-group arrays (in group order) as one column in the batch's row order."""
        if self.order is None:
            return arrays[0]
        if all(a.null_count == len(a) for a in arrays):  # nothing to put in order
            return pa.nulls(len(self.order), arrays[0].type)
        if self._inverse is None:
            inverse = np.empty(len(self.order), np.intp)
            inverse[self.order] = np.arange(len(self.order))
            self._inverse = pa.array(inverse)
        return pa.concat_arrays(arrays).take(self._inverse)

    def _by_group(self, values: list[Any], dtype: pa.DataType) -> pa.Array:
        """A column holding ``values[i]`` in every row of group ``i``: one take from the groups'
        values by each row's group, where the groups' columns would be joined and put in row
        order."""
        if self._group_of is None:
            codes = np.zeros(self.size, np.int32)
            if len(self.groups) > 1:
                for i, g in enumerate(self.groups):
                    codes[g.index] = i
            self._group_of = pa.array(codes)
        return pa.array(values, dtype).take(self._group_of)

    def _versions(self) -> pa.Array:
        """The ``version`` column (each group's one version, the usual case, by ``_by_group``)."""
        versions = [g.versions() for g in self.groups]
        if all(low == high for low, high in versions):
            return self._by_group([low for low, _ in versions], LOG_SCHEMA.field("version").type)
        return self._in_row_order([g.envelope("version") for g in self.groups])

    def table(
        self,
        *,
        first_offset: int,
        ts_ms: int,
        producer: str | None = None,
        producer_seq: int | None = None,
        schema: pa.Schema = LOG_SCHEMA,
    ) -> pa.Table:
        """The rows ``arrow.to_table`` makes of these records, built column by column."""
        n = self.size
        if n == 0:
            return schema.empty_table()
        env: dict[str, list[pa.Array]] = {k: [] for k in ("ts_ms", "key", "source", "so")}
        for g in self.groups:
            env["ts_ms"].append(g.envelope("ts_ms"))
            env["key"].append(_entity_keys(g))
            env["source"].append(g.envelope("source"))
            env["so"].append(_source_offsets(g))
        columns: dict[str, Any] = {
            "offset": pa.array(np.arange(first_offset, first_offset + n, dtype=np.int64)),
            "ts_ms": _times(self._in_row_order(env["ts_ms"]), ts_ms),
            "type": self._by_group([type_name(g.cls) for g in self.groups], pa.string()),
            "version": self._versions(),
            "key": self._in_row_order(env["key"]),
            "source": self._in_row_order(env["source"]),
            "source_offset": self._in_row_order(env["so"]),
            "producer": pa.nulls(n, pa.string()) if producer is None else pa.array([producer] * n, pa.string()),
            "producer_seq": pa.nulls(n, pa.int64())
            if producer_seq is None
            else pa.array([producer_seq] * n, pa.int64()),
            RECORD_COLUMN: self.record_column(first_offset, ts_ms),
        }
        for g in self.groups:
            col = column_name(g.cls)
            if col not in schema.names:
                continue
            compact = g.payload()
            if compact is None:
                continue
            if schema.field(col).type != compact.type:  # another table's schema: its own field types
                compact = _payload_array(g.cls, g.fields, g.count, schema.field(col).type)
            if g.index is None:
                columns[col] = compact
            else:
                where = np.full(n, -1, np.int64)
                where[g.index] = np.arange(len(g.index))
                columns[col] = compact.take(pa.array(where, mask=where < 0))  # type: ignore[union-attr]  # given its type, one is built
        absent = [f.type for f in schema if f.name not in columns]
        nulls = iter(null_columns(n, absent))
        return pa.table([columns[f.name] if f.name in columns else next(nulls) for f in schema], schema=schema)

    def record_column(self, first_offset: int, ts_ms: int) -> pa.Array:
        """The ``record`` column at offsets from ``first_offset`` (``arrow.record_column``): stamped
        into the groups' encodings where they hold one, else encoded from stamped copies."""
        if self.message is None and self.encodes:
            # One encoding (~2 ms at 10 000 records) and the stamping, against copies stamped
            # and encoded (bench/RESULTS.md, session 7).
            self.message = _MSGPACK.encode(self.records)
        if self.message is not None:
            column = self._stamp_message(first_offset, ts_ms)
            if column is not None:
                return column
        if not all(g.stampable for g in self.groups):
            return record_column(self.records, first_offset=first_offset, ts_ms=ts_ms)
        offsets = np.arange(first_offset, first_offset + self.size, dtype=np.int64)
        blobs = [
            g.stamped(
                pa.array(offsets if g.index is None else offsets[g.index]),
                pc.fill_null(g.envelope("ts_ms"), ts_ms),
                _source_offsets(g),
            )
            for g in self.groups
        ]
        return self._in_row_order(blobs)

    def _stamp_message(self, first_offset: int, ts_ms: int) -> pa.Array | None:
        """The ``record`` column stamped into ``message`` (``msgpack_columns.stamp_blank``), or
        None where it cannot be (a version above 127, a type it does not write, a record
        with an offset, time, source or source offset of its own)."""
        heads = np.empty(self.size, np.int64)
        for g in self.groups:
            head = head_length(g.cls)
            low, high = g.versions()
            if head is None or not 0 <= low <= high < 128:
                return None
            heads[slice(None) if g.index is None else g.index] = head
        offsets = np.arange(first_offset, first_offset + self.size, dtype=np.int64)
        assert self.message is not None  # record_column asks only then
        return stamp_blank(self.message, heads, offsets, ts_ms, self.lengths)


def _times(given: pa.Array, ts_ms: int) -> pa.Array:
    """The ``ts_ms`` column: each record's own time, or the append's."""
    if given.null_count == len(given):  # no record has a time of its own
        return pa.array(np.full(len(given), ts_ms, np.int64))
    return pc.fill_null(given, ts_ms)


def _source_offsets(g: _Group) -> pa.Array:
    # A record copied from another log keeps its old offset as source_offset, unless it
    # already carries one from further upstream.
    return pc.coalesce(g.envelope("source_offset"), g.envelope("offset"))


def stamped(batch: Sequence[Record] | ColumnBatch, first_offset: int, ts_ms: int) -> pa.Array:
    """The ``record`` column of a checked batch at offsets from ``first_offset`` (a retried
    append's, after another writer took its offsets)."""
    columns = getattr(batch, "columns", None)
    if columns is None:
        return record_column(batch, first_offset=first_offset, ts_ms=ts_ms)  # type: ignore[arg-type]  # no columns: records
    return columns.record_column(first_offset, ts_ms)


class ArrowColumns(Columns):
    """A batch that arrived as Arrow columns (``arrow_input``), grouped by record type: the
    groups keep the columns they came in, and the records decoded from them."""

    def __init__(self, groups: list[_Group], n: int) -> None:
        self.groups = groups
        self._inverse = None
        self._size = n
        self._records: list[Record] | None = None
        self.order = None if len(groups) == 1 and groups[0].index is None else np.concatenate([g.index for g in groups])

    @property
    def size(self) -> int:
        return self._size

    @property
    def records(self) -> list[Record]:  # type: ignore[override]  # decoded on first use: read-only here
        """The batch's records in row order, decoded group by group when first asked for."""
        if self._records is None:
            if self.order is None:
                self._records = list(self.groups[0].records)
            else:
                records = np.empty(self._size, object)
                for g in self.groups:
                    records[g.index] = g.records
                self._records = records.tolist()
        return self._records


def _payload_array(
    cls: type[Record], fields: list[tuple[Any, ...]], count: int, ftype: pa.StructType | None = None
) -> pa.StructArray | None:
    if ftype is None:
        col = column_name(cls)
        if col not in LOG_SCHEMA.names:
            return None
        ftype = LOG_SCHEMA.field(col).type
    position = {name: i for i, name in enumerate(cls.__struct_fields__)}
    packed = packed_fields(cls)
    arrays = [
        (_stream_ranges_array if f.name in packed else _field_array)(list(fields[position[f.name]]), f.type)
        if f.name in position
        else pa.nulls(count, f.type)
        for f in ftype
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(ftype))


def to_table(records: Sequence[Record] | ColumnBatch, **keywords: Any) -> pa.Table:
    """``arrow.to_table`` (the same keywords, an equal table), column by column; a
    ``Validated`` batch brings its columns along."""
    with gc_paused():  # no cycles among the values and blobs made here: nothing to collect
        columns = getattr(records, "columns", None) or Columns(records)  # type: ignore[arg-type]  # a ColumnBatch has columns
        return columns.table(**keywords)


# -- entity keys -------------------------------------------------------------------------------

_FIELD_REF = re.compile(r"\{r\.(\w+)\}")


@cache
def _key_parts(cls: type[Record]) -> tuple[tuple[bool, str], ...] | None:
    """``KEY`` as (is_field, text) parts when Arrow can fill it in (plain int or str fields, the
    base ``entity_key``); None when the type computes its key in Python."""
    if cls.entity_key is not Record.entity_key:
        return None
    pieces = _FIELD_REF.split(cls.KEY)
    literals, names = pieces[0::2], pieces[1::2]
    if any("{" in s or "}" in s for s in literals):
        return None
    types = {f.name: f.type for f in struct_info(cls).fields}
    for name in names:
        t = types.get(name)
        if isinstance(t, mi.Metadata):
            t = t.type
        if not isinstance(t, (mi.IntType, mi.StrType)):  # enums, bools, optionals: Python's str()
            return None
    return tuple((i % 2 == 1, s) for i, s in enumerate(pieces) if s)


def _entity_keys(g: _Group) -> pa.Array:
    if _key_parts(g.cls) is None:
        return pa.array([r.entity_key() for r in g.records], pa.string())
    keys = key_column(g.cls, g.field_array, g.count)
    assert keys is not None
    return keys


def key_column(cls: type[Record], field: Callable[[str], pa.Array], count: int) -> pa.Array | None:
    """The ``key`` column of ``count`` records of type ``cls`` whose fields are the arrays
    ``field(name)`` gives (``KEY`` filled in by Arrow); None when the type computes its key in
    Python (``entity_key`` overridden, or fields Arrow would write differently from ``str()``)."""
    parts = _key_parts(cls)
    if parts is None:
        return None
    if not any(is_field for is_field, _ in parts):
        return pa.array([cls.KEY] * count, pa.string())
    pieces = [pc.cast(field(text), pa.string()) if is_field else pa.scalar(text) for is_field, text in parts]
    return pc.binary_join_element_wise(*pieces, "")


# -- the checks ------------------------------------------------------------------------------------


def _any(mask: pa.Array) -> bool:
    return bool(pc.any(mask).as_py())


_UUID_BODY = np.zeros(256, bool)
_UUID_BODY[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")] = True
_UUID_LAST = np.zeros(256, bool)
_UUID_LAST[list(b"AQgw")] = True
"""``_UUID_RE``'s two character classes as byte tables (a uuid is 22 ASCII bytes)."""


def _bad_uuids(strings: pa.Array) -> bool:
    """Whether some non-null string is not a Kafka uuid's text form (``check_uuid``)."""
    if len(strings) == 0 or strings.null_count == len(strings):
        return False
    if not pa.types.is_string(strings.type):
        return _any(pc.invert(pc.match_substring_regex(strings, _UUID_RE)))
    if strings.null_count:
        strings = strings.drop_null()
    # 22 bytes each, every byte in its class: the regex's full match, on a grid of the bytes.
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], np.int32, n + 1, strings.offset * 4)
    if offsets[-1] - offsets[0] != 22 * n or (np.diff(offsets) != 22).any():
        return True
    grid = np.frombuffer(strings.buffers()[2], np.uint8, 22 * n, int(offsets[0])).reshape(n, 22)
    return not (_UUID_BODY[grid[:, :21]].all() and _UUID_LAST[grid[:, 21]].all())


def _reserved_uuids(strings: pa.Array) -> bool:
    """Whether some uuid of the column is a reserved id: ``check_real_uuid`` over uuids already
    checked as uuids (``_vouch`` runs ``_bad_nested_uuids`` over every uuid field first)."""
    candidates = strings.filter(pc.fill_null(pc.starts_with(strings, _RESERVED_PREFIX), False))
    return any(is_reserved(u) for u in candidates.to_pylist())


def _bad_nested_uuids(cls: type[msgspec.Struct], values: pa.StructArray) -> bool:
    """``check_uuids`` over a struct column of ``cls`` values."""
    for name, kind in uuid_fields(cls):
        child = pc.struct_field(values, name)
        if kind == UUID and _bad_uuids(child):
            return True
        if kind == UUIDS and _bad_uuids(pc.list_flatten(child)):
            return True
        if kind in (PART, PARTS):
            nested = _nested_class(cls, name)
            inner = child if kind == PART else pc.list_flatten(child)
            if _bad_nested_uuids(nested, inner):
                return True
    return False


@cache
def _nested_class(cls: type[msgspec.Struct], name: str) -> type[msgspec.Struct]:
    t = next(f.type for f in struct_info(cls).fields if f.name == name)
    if isinstance(t, mi.UnionType):
        t = next(u for u in t.types if not isinstance(u, mi.NoneType))
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        t = t.item_type
    return t.cls  # type: ignore[attr-defined]  # a nested Struct's field: a StructType


def _has_duplicates(lists: pa.Array) -> bool:
    """Whether some list in the column holds a value twice."""
    values = pc.list_flatten(lists)
    if len(values) < 2:
        return False
    parents = pc.list_parent_indices(lists)
    if pa.types.is_int32(values.type) and not values.null_count:  # brokers: one sort of (list, broker)
        keys = np.sort((parents.to_numpy().astype(np.int64) << 32) | values.to_numpy().astype(np.int64) & 0xFFFFFFFF)
        return bool((keys[1:] == keys[:-1]).any())
    distinct = pa.table({"p": parents, "v": values}).group_by(["p", "v"]).aggregate([])
    return distinct.num_rows != len(values)


def _bad_partition(p: pa.StructArray) -> bool:
    """``kraft._check_partition``: a real topic id, no broker twice in replicas or isr, and an
    assignment (when given with replicas) naming the replicas' brokers in order."""
    if _reserved_uuids(pc.struct_field(p, "topic_id")):
        return True
    replicas = pc.struct_field(p, "replicas")
    if _has_duplicates(replicas) or _has_duplicates(pc.struct_field(p, "isr")):
        return True
    assignment = pc.struct_field(p, "assignment")
    given = pc.fill_null(pc.and_(pc.greater(pc.list_value_length(assignment), 0), pc.is_valid(replicas)), False)
    if not _any(given):
        return False
    assignment, replicas = assignment.filter(given), replicas.filter(given)
    if not pc.all(pc.equal(pc.list_value_length(assignment), pc.list_value_length(replicas))).as_py():
        return True
    brokers = pc.struct_field(pc.list_flatten(assignment), "broker")
    return not pc.all(pc.equal(brokers, pc.list_flatten(replicas))).as_py()


def _bad_register_broker(p: pa.StructArray) -> bool:
    log_dirs = pc.struct_field(p, "log_dirs")
    return (
        _reserved_uuids(pc.struct_field(p, "incarnation_id"))
        or _reserved_uuids(pc.list_flatten(log_dirs))
        or _has_duplicates(log_dirs)
    )


_CHECKS: dict[type[Record], Callable[[pa.StructArray], bool]] = {
    Partition: _bad_partition,
    PartitionChange: _bad_partition,
    RegisterBroker: _bad_register_broker,
    BrokerRegistrationChange: lambda p: _reserved_uuids(pc.list_flatten(pc.struct_field(p, "log_dirs"))),
    Topic: lambda p: _reserved_uuids(pc.struct_field(p, "topic_id")),
    RemoveTopic: lambda p: _reserved_uuids(pc.struct_field(p, "topic_id")),
}
"""Each type's ``_validate`` as Arrow compute over its struct column: True when a row breaks it.
The uuids' form is checked before (``_bad_nested_uuids``, by ``_vouch``): these look for
reserved ids only, where ``check_real_uuid`` checks the form again."""


@cache
def _columnar_checks(cls: type[Record]) -> bool:
    """Whether ``cls``'s ``__post_init__`` is wholly the generic checks plus ``_CHECKS``."""
    if cls.__post_init__ is not Record.__post_init__:
        return False
    if cls.UNTIL or packed_fields(cls):
        return False
    return cls._validate is Record._validate or cls in _CHECKS


def _vouch(columns: Columns) -> bool:
    """Whether every record passes the checks ``Record.__post_init__`` makes (decoding under
    ``trusted()`` skipped them): False sends the batch to the reference path."""
    for g in columns.groups:
        low, high = g.versions()
        if not g.cls.MIN_VERSION <= low <= high <= current_version(g.cls):
            return False
        if not _columnar_checks(g.cls):
            try:
                for r in g.records:
                    r.__post_init__()
            except (ValueError, TypeError):
                return False
            continue
        payload = g.payload()
        if payload is None:
            continue
        if _bad_nested_uuids(g.cls, payload):
            return False
        check = _CHECKS.get(g.cls)
        if check is not None and check(payload):
            return False
    return True


def _checked(
    records: list[Record],
    upcast: Callable[[int, Record], Record] | None = None,
    payloads: dict[type[Record], pa.StructArray] | None = None,
) -> Validated | None:
    """The records as a ``Validated`` batch, or None when the checks cannot vouch for them.
    ``upcast(index, record)`` replaces records produced at an older version first. ``payloads``:
    struct columns the caller already holds for some types (their records' fields, in the
    batch's order, as ``_payload_array`` would build them), used instead of building them."""
    columns = Columns(records)
    if upcast is not None and any(g.versions()[0] < current_version(g.cls) for g in columns.groups):
        records = [r if r.version >= current_version(type(r)) else upcast(i, r) for i, r in enumerate(records)]
        columns = Columns(records)
    elif payloads:
        for g in columns.groups:
            if g.cls in payloads:
                g._payload = payloads[g.cls]
    if not _vouch(columns):
        return None
    # The columns hold the plain list, not the ``Validated`` one that holds them: no reference
    # cycle, so the batch is freed as soon as the append drops it, without a collection.
    out = Validated(records)
    out.columns = columns
    return out


# -- the ways a batch arrives --------------------------------------------------------------------

_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()
_BATCH_DECODER = msgspec.msgpack.Decoder(list[AnyRecord])


def _upcast(i: int, record: Record) -> Record:
    with trusted():
        return normalize(record, index=i + 1)


def from_python(records: Sequence[Record]) -> Validated:
    """``codec.normalize_batch``, columnar: Structs built in Python, checked and upcast.

    One msgpack round trip checks types and bounds in C; the Python checks run per column.
    """
    try:
        # The collector would scan the batch's tuples again and again as they are made
        # (``gc_paused``: no reference cycles here).
        with gc_paused():
            message = _MSGPACK.encode(records)
            with trusted():
                out = _BATCH_DECODER.decode(message)
            checked = _checked(out, _upcast)
            # The message is the decoded records' encoding too when none was upcast and each
            # equals the one given (not, say, a mapping where a nested Struct is meant).
            if checked is not None and checked.columns.records is out and out == records:  # type: ignore[union-attr]  # _checked sets columns
                checked.columns.message = message  # type: ignore[union-attr]  # _checked sets columns
    except (TypeError, ValueError, msgspec.MsgspecError):
        checked = None
    if checked is None:
        return Validated(normalize_batch(records))  # raises the error naming index, type, field
    return checked


def from_lines(lines: Iterable[bytes | str]) -> Validated:
    """``list(codec.iter_lines(lines))``, columnar: JSON Lines to checked records."""
    lines = lines if isinstance(lines, list) else list(lines)
    try:
        with gc_paused():
            body = [line.encode() if isinstance(line, str) else line for line in lines if line.strip()]
            out = _decode_lines(body)
            checked = None if out is None else _checked(out, lambda i, _: _decode_one(body[i]))
            if checked is not None:
                checked.columns.encodes = True  # type: ignore[union-attr]  # _checked sets columns
    except (TypeError, ValueError, RecursionError, msgspec.MsgspecError):
        checked = None
    if checked is None:
        return Validated(iter_lines(lines))  # raises the error naming line, type and field
    return checked


_JSON_LIST = msgspec.json.Decoder(list[AnyRecord])
_RECORD_START = b'{"type":"'
"""How every record's JSON encoding starts (msgspec writes the tag first)."""


def _decode_one(line: bytes) -> Record:
    with trusted():
        return decode_line(line)


def _decode_lines(body: list[bytes]) -> list[Record] | None:
    """The records of non-blank JSON lines, each what ``decode_line`` makes of it (under
    ``trusted()``); an error (or None) when some line does not decode.

    One decode of the lines as one JSON array, then the records encoded again: a line equal to
    its record's encoding is that record alone (so no line holds two records, or a piece of
    one) and holds no key twice, as an encoding never does. That settles ``decode_line``'s
    duplicate-key check (a generic decode and encode of every line) for lines as kraftlake
    writes them (``encode_line``), in a fraction of its cost. A line that differs (other key
    order, spaces, omitted fields) goes through ``decode_line`` alone.

    The whole batch is compared at once first: when the encoding equals the joined lines, every
    line starts like a record (``{"type":"``), and the encoding holds that text only where its
    records start (a JSON string cannot hold an unescaped quote; counted, unless no record type
    can hold an object with a ``type`` key: ``_starts_only_records``), the lines start exactly
    where the records do, so each line is its record's encoding."""
    joined = _json_array(body)
    try:
        with trusted():
            out = _JSON_LIST.decode(joined)
    except (msgspec.ValidationError, msgspec.DecodeError):  # another shape, an old version...
        return [_decode_one(line) for line in body]  # ...or a bad line: decode_line says which
    if len(out) != len(body):
        return None
    whole = _JSON.encode(out)
    if (
        whole == joined
        and all(map(bytes.startswith, body, repeat(_RECORD_START)))
        and (_starts_only_records() or whole.count(_RECORD_START) == len(body))
    ):
        return out
    for i, (again, line) in enumerate(zip(map(_JSON.encode, out), body)):
        if again != line:
            out[i] = _decode_one(line)
    return out


_PLAIN = (
    mi.BoolType,
    mi.IntType,
    mi.FloatType,
    mi.StrType,
    mi.BytesType,
    mi.ByteArrayType,
    mi.NoneType,
    mi.EnumType,
    mi.LiteralType,
    mi.UUIDType,
    mi.DateTimeType,
    mi.DateType,
    mi.TimeType,
    mi.TimeDeltaType,
    mi.DecimalType,
)
"""Types whose JSON holds no object (so no ``{``: a string escapes every quote in it)."""


@cache
def _starts_only_records() -> bool:
    """Whether ``{"type":"`` starts only records in any JSON msgspec writes of a record list:
    no record type holds, at any depth, an object that could have a ``type`` key (a nested
    Struct with a field or tag named so, a dict, a value of any type). Then ``_decode_lines``
    need not count that text to know where records start."""
    return all(_no_inner_type_key(mi.type_info(cls), top=True) for cls in RECORD_TYPES)


def _no_inner_type_key(t: mi.Type, top: bool = False) -> bool:
    if isinstance(t, mi.Metadata):
        return _no_inner_type_key(t.type)
    if isinstance(t, _PLAIN):
        return True
    if isinstance(t, mi.UnionType):
        return all(map(_no_inner_type_key, t.types))
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return _no_inner_type_key(t.item_type)
    if isinstance(t, mi.TupleType):
        return all(map(_no_inner_type_key, t.item_types))
    if isinstance(t, mi.StructType):
        # Any field may be first in the object (``omit_defaults`` leaves out those before it).
        names = {f.encode_name for f in t.fields} | {t.tag_field}
        return (top or "type" not in names) and all(_no_inner_type_key(f.type) for f in t.fields)
    return False  # a dict, Any, Raw, a custom type: its JSON may be any object


def _json_array(body: list[bytes]) -> bytes:
    """``b"[" + b",".join(body) + b"]"`` in one join: each ``+`` copies the whole text again
    (2.5 ms against 0.3 at 10 000 lines of 260 bytes)."""
    if not body:
        return b"[]"
    ends = body[:]
    ends[0] = b"[" + ends[0]
    ends[-1] = ends[-1] + b"]"
    return b",".join(ends)


def _from_builtins_trusted(raw: Any) -> Record:
    with trusted():
        return from_builtins(raw)


def from_msgpack_items(items: Sequence[bytes | msgspec.Raw]) -> Validated | None:
    """Records each sent as one whole msgpack object (an HTTP request's records, as
    ``msgspec.Raw``): ``from_builtins_batch`` of their decoded objects, without making those
    objects. One typed decode of the items as one array (types and bounds in C; a repeated key
    is taken as a dict would take it, the last), the Python checks per column, older versions
    upcast from their objects. None where it cannot vouch for the batch: the caller decodes
    each item and calls ``from_builtins_batch``, which names the bad record."""
    try:
        with gc_paused():
            joined = b"".join([b"\xdd", len(items).to_bytes(4, "big"), *items])
            with trusted():
                out = _BATCH_DECODER.decode(joined)
            if len(out) != len(items):
                return None
            checked = _checked(out, lambda i, _: _from_builtins_trusted(msgspec.msgpack.decode(items[i])))
            if checked is not None:
                _keep_encoding(checked.columns, joined, items)  # type: ignore[arg-type]  # _checked sets columns
            return checked
    except (TypeError, ValueError, OverflowError, RecordError, msgspec.MsgspecError):
        return None


def _keep_encoding(columns: Columns, joined: bytes, items: Sequence[bytes | msgspec.Raw]) -> None:
    """Give ``columns`` the records' encoding to stamp the ``record`` column into. Where the
    items are that encoding (as msgspec wrote it: the records encode to the items end to end),
    each record's length there is its item's, and no decode looks for them."""
    message = _MSGPACK.encode(columns.records)
    columns.message = message
    body = memoryview(joined)[5:]  # behind the array header ``from_msgpack_items`` wrote
    if len(message) - len(body) == _array_header(len(items)) and message.endswith(body):
        # msgpack objects delimit themselves: equal bytes end to end, equal boundaries.
        columns.lengths = np.fromiter(map(len, items), np.int64, len(items))


def _array_header(n: int) -> int:
    """The length of the msgpack array header msgspec writes for ``n`` items."""
    return 1 if n < 16 else 3 if n < 2**16 else 5


def from_builtins_batch(raws: Sequence[Any]) -> Validated:
    """``[codec.from_builtins(raw, line=i + 1) for i, raw in enumerate(raws)]``, columnar: decoded
    JSON or msgpack objects (an HTTP request's records) to checked records."""
    try:
        with gc_paused():
            try:  # one conversion of the whole batch (types and bounds in C)...
                with trusted():
                    out = msgspec.convert(raws, list[AnyRecord])
            except msgspec.ValidationError:  # ...or record by record: another shape, a bad record
                with trusted():
                    out = [from_builtins(raw, line=i) for i, raw in enumerate(raws, 1)]
            checked = _checked(out, lambda i, _: _from_builtins_trusted(raws[i]))  # older versions upcast
    except (TypeError, ValueError, msgspec.MsgspecError):
        checked = None
    if checked is None:
        return Validated(from_builtins(raw, line=i) for i, raw in enumerate(raws, 1))
    return checked
