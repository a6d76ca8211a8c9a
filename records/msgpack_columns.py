"""The ``record`` column encoded column by column: msgpack bytes equal to msgspec's, from Arrow.

``arrow.encoded_column`` encodes a batch of Structs, one Python object per record (and a copy
of each, stamped with its offset). Here a record type's rows are encoded from their Arrow
columns (the envelope and the type's struct column, as the log's table holds them): every field
becomes an array of its msgpack bytes (key and value) built with numpy and Arrow compute, and
the fields are joined row by row (``binary_join_element_wise``). The bytes are msgspec's own for
the same record (a map with the tag first, then every field in declaration order; each integer
in its shortest form, as msgspec writes it): tests/test_msgpack_columns.py checks them, byte
for byte, on generated batches of every record type.

``encode_rows`` returns None for a type it cannot encode so (a packed field, an Arrow type it
does not know): the caller encodes those records as Structs.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TypeAlias

import msgspec
import msgspec.inspect as mi
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .base import Record, type_name
from .s3stream import packed_fields

__all__ = ["Stampable", "encode_rows"]

_NIL = b"\xc0"
_EMPTY = pa.scalar(b"", pa.binary())
_SHIFT = np.arange(9, dtype=np.int64)


class Unsupported(Exception):
    """A column type this encoder does not write (the caller falls back to Structs)."""


def _packed(lead: np.ndarray, value: np.ndarray, width: np.ndarray) -> pa.Array:
    """Per row: the byte ``lead``, then the low ``width`` bytes of ``value`` big-endian (a
    msgpack type byte and its argument)."""
    n = len(lead)
    if n == 0:
        return pa.array([], pa.binary())
    low, high = int(width.min()), int(width.max())
    big = value.astype(">u8", copy=False).view(np.uint8).reshape(n, 8)
    if low == high:  # one form for the whole column (the usual case): a fixed-size grid
        grid = np.empty((n, 1 + low), np.uint8)
        grid[:, 0] = lead
        grid[:, 1:] = big[:, 8 - low :]
        offsets = np.arange(0, (n + 1) * (1 + low), 1 + low, dtype=np.int32)
        data = grid.ravel()
    else:
        grid = np.empty((n, 9), np.uint8)
        grid[:, 0] = lead
        grid[:, 1:] = big
        keep = _SHIFT[None, :] > (8 - width)[:, None]
        keep[:, 0] = True
        data = grid[keep]
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(width + 1, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_INT_BOUNDS = np.array([-(2**31), -(2**15), -(2**7), -32, 0, 128, 256, 2**16, 2**32], np.int64)
_INT_LEAD = np.array([0xD3, 0xD2, 0xD1, 0xD0, 0, 0, 0xCC, 0xCD, 0xCE, 0xCF], np.uint8)
_INT_WIDTH = np.array([8, 4, 2, 1, 0, 0, 1, 2, 4, 8], np.int64)
_FIXINT = (4, 5)
"""Classes of ``_INT_BOUNDS`` whose type byte is the value itself (-32..127)."""


def _ints(values: np.ndarray, null: np.ndarray | None) -> pa.Array:
    """msgspec's integer encoding (``mpack_encode_long``): the shortest form of each value."""
    x = values.astype(np.int64, copy=False)
    form = np.searchsorted(_INT_BOUNDS, x, side="right")
    lead = _INT_LEAD[form]
    fix = (form == _FIXINT[0]) | (form == _FIXINT[1])
    lead[fix] = (x[fix] & 0xFF).astype(np.uint8)
    width = _INT_WIDTH[form]
    if null is not None:
        lead[null] = 0xC0
        width[null] = 0
    return _packed(lead, x.view(np.uint64), width)


def _lengths(
    length: np.ndarray, null: np.ndarray | None, small: int, small_bits: int, leads: tuple[int, ...]
) -> pa.Array:
    """A length header: ``small_bits | length`` below ``small`` (none when ``small`` is 0), else
    the lead of the first of 1-, 2-, 4-byte lengths that fits (``leads``: 0 where a form does
    not exist), nil for a null."""
    bounds = np.array([small, 1 << 8, 1 << 16], np.int64)
    form = np.searchsorted(bounds, length, side="right")
    if leads[0] == 0:  # no 1-byte form: lengths up to 65535 take the 2-byte one
        form[form == 1] = 2
    lead = np.array([0, *leads], np.uint8)[form]
    small_rows = form == 0
    lead[small_rows] = (small_bits | length[small_rows]).astype(np.uint8)
    width = np.array([0, 1, 2, 4], np.int64)[form]
    if null is not None:
        lead[null] = 0xC0
        width[null] = 0
    return _packed(lead, length.astype(np.uint64), width)


def _nulls(array: pa.Array) -> np.ndarray | None:
    if not array.null_count:
        return None
    return pc.is_null(array).to_numpy(zero_copy_only=False)


Encoded: TypeAlias = pa.Array | bytes
"""A column's msgpack bytes: an array (a value per row), or bytes every row shares."""


def _as_array(value: Encoded, count: int) -> pa.Array:
    if isinstance(value, bytes):
        return pa.array([value] * count, pa.binary())
    return value


def _join(parts: list[Encoded], count: int) -> Encoded:
    """The parts' bytes end to end, row by row; bytes when every part is constant."""
    merged: list[Encoded] = []
    for part in parts:
        if isinstance(part, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += part
        elif part != b"":
            merged.append(part)
    if not merged:
        return b""
    if len(merged) == 1:
        return merged[0]
    return pc.binary_join_element_wise(
        *[pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in merged], _EMPTY
    )


def _value_bytes(array: pa.Array) -> Encoded:
    """Each value of ``array`` as msgpack bytes (bytes when all rows encode alike)."""
    t = array.type
    count = len(array)
    if array.null_count == count:
        return _NIL
    null = _nulls(array)
    if pa.types.is_integer(t):
        values = (array if null is None else pc.fill_null(array, 0)).to_numpy(zero_copy_only=False)
        if null is None and values.min() == values.max():
            return msgspec.msgpack.encode(int(values[0]))
        return _ints(values, null)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        data = array.cast(pa.binary()) if pa.types.is_string(t) else array
        length = pc.binary_length(data)
        length = (length if null is None else pc.fill_null(length, 0)).to_numpy(zero_copy_only=False)
        length = length.astype(np.int64, copy=False)
        if pa.types.is_string(t):  # fixstr, str8, str16, str32
            header = _lengths(length, null, 32, 0xA0, (0xD9, 0xDA, 0xDB))
        else:  # bin8, bin16, bin32
            header = _lengths(length, null, 0, 0, (0xC4, 0xC5, 0xC6))
        return pc.binary_join_element_wise(header, data if null is None else pc.fill_null(data, _EMPTY), _EMPTY)
    if pa.types.is_boolean(t):
        if null is None and pc.all(array).as_py():
            return b"\xc3"
        if null is None and not pc.any(array).as_py():
            return b"\xc2"
        return pc.if_else(pc.is_null(array), _NIL, pc.if_else(pc.fill_null(array, False), b"\xc3", b"\xc2")).cast(
            pa.binary()
        )
    if pa.types.is_float64(t):
        values = pc.fill_null(array, 0.0).to_numpy(zero_copy_only=False)
        lead = np.full(count, 0xCB, np.uint8)
        width = np.full(count, 8, np.int64)
        if null is not None:
            lead[null] = 0xC0
            width[null] = 0
        return _packed(lead, values.view(np.uint64), width)
    if pa.types.is_list(t):
        length = pc.list_value_length(array)
        length = (length if null is None else pc.fill_null(length, 0)).to_numpy(zero_copy_only=False)
        length = length.astype(np.int64, copy=False)
        header = _lengths(length, null, 16, 0x90, (0, 0xDC, 0xDD))
        flat = array.flatten()
        items = _as_array(_value_bytes(flat), len(flat))
        offsets = np.zeros(count + 1, np.int32)
        np.cumsum(length, out=offsets[1:])
        body = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), items), _EMPTY)
        return pc.binary_join_element_wise(header, body, _EMPTY)
    if pa.types.is_struct(t):
        names = [f.name for f in t]
        body = _map(names, [_value_bytes(pc.struct_field(array, name)) for name in names], count)
        if null is None:
            return body
        return pc.if_else(pa.array(null), _NIL, _as_array(body, count)).cast(pa.binary())
    raise Unsupported(str(t))


@cache
def _key(name: str) -> bytes:
    encoded = name.encode()
    assert len(encoded) < 32, name  # field names are short: a fixstr
    return bytes([0xA0 | len(encoded)]) + encoded


def _map_header(size: int) -> bytes:
    return bytes([0x80 | size]) if size < 16 else b"\xde" + size.to_bytes(2, "big")


def _map(names: list[str], values: list[Encoded], count: int, head: bytes = b"") -> Encoded:
    """Rows of a msgpack map of ``names`` to the encoded ``values`` (``head``: pairs that come
    first, already encoded, such as the tag)."""
    size = len(names) + (1 if head else 0)
    parts: list[Encoded] = [_map_header(size) + head]
    for name, value in zip(names, values):
        parts += [_key(name), value]
    return _join(parts, count)


@cache
def _tag(cls: type[Record]) -> bytes:
    config = cls.__struct_config__
    tag = str(config.tag)
    return _key(config.tag_field) + _key(tag) if len(tag.encode()) < 32 else b""


def _field_bytes(
    cls: type[Record], envelope: Mapping[str, pa.Array], payload: pa.StructArray | None, count: int
) -> list[tuple[str, Encoded]] | None:
    """Each field of ``cls`` (in encoding order) and its values' msgpack bytes; None when this
    encoder does not write the type."""
    if not _tag(cls) or packed_fields(cls) or type_name(cls) != cls.__struct_config__.tag:
        return None
    names = list(cls.__struct_encode_fields__)
    if list(cls.__struct_fields__) != names:
        return None
    children = {}
    if payload is not None:
        children = {f.name: pc.struct_field(payload, f.name) for f in payload.type}
    out: list[tuple[str, Encoded]] = []
    try:
        for name in names:
            column = envelope.get(name)
            if column is None:
                column = children.get(name)
            if column is None or len(column) != count:
                return None
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            out.append((name, _value_bytes(column)))
    except Unsupported:
        return None
    return out


def encode_rows(
    cls: type[Record], envelope: Mapping[str, pa.Array], payload: pa.StructArray | None, count: int
) -> pa.Array | None:
    """The msgpack encoding of ``count`` records of type ``cls`` whose envelope fields are the
    arrays ``envelope`` (``version``, ``offset``, ``ts_ms``, ``source``, ``source_offset``) and
    whose own fields are the children of ``payload``, as ``msgspec.msgpack.encode`` writes each
    record; None when this encoder does not write the type (the caller encodes Structs)."""
    fields = _field_bytes(cls, envelope, payload, count)
    if fields is None:
        return None
    return _as_array(_map([n for n, _ in fields], [v for _, v in fields], count, head=_tag(cls)), count)


_STAMPED = ("offset", "ts_ms", "source", "source_offset")
"""The envelope fields after ``version``: an append sets the offset and time of each record it
stores, and its old offset as ``source_offset`` (``arrow.record_column``)."""


class Stampable:
    """Records encoded but for their offset, time and source offset: the ``record`` column of
    any of those in a few joins (``column``), without encoding the other fields again."""

    def __init__(self, head: Encoded, source: Encoded, tail: Encoded, count: int) -> None:
        self.head, self.source, self.tail, self.count = head, source, tail, count

    @classmethod
    def of(
        cls_, cls: type[Record], envelope: Mapping[str, pa.Array], payload: pa.StructArray | None, count: int
    ) -> Stampable | None:
        fields = _field_bytes(cls, envelope, payload, count)
        if fields is None or [n for n, _ in fields[1:5]] != list(_STAMPED):
            return None
        size = len(fields) + 1
        head = _join([_map_header(size) + _tag(cls) + _key(fields[0][0]), fields[0][1]], count)
        parts: list[Encoded] = []
        for name, value in fields[5:]:
            parts += [_key(name), value]
        return cls_(head, fields[3][1], _join(parts, count), count)

    def column(self, offsets: pa.Array, ts_ms: pa.Array, source_offsets: pa.Array) -> pa.Array:
        """The records with these offsets, times and source offsets (int64 arrays), each as
        ``msgspec.msgpack.encode`` writes it."""
        parts = [
            self.head,
            _key("offset"),
            _value_bytes(offsets),
            _key("ts_ms"),
            _value_bytes(ts_ms),
            _key("source"),
            self.source,
            _key("source_offset"),
            _value_bytes(source_offsets),
            self.tail,
        ]
        return _as_array(_join(parts, self.count), self.count)


_RAW_ITEMS = msgspec.msgpack.Decoder(list[msgspec.Raw])
_BLANK = b"".join(_key(name) + _NIL for name in _STAMPED)
"""A record's offset, time, source and source offset when it has none of them (each nil)."""


@cache
def head_length(cls: type[Record]) -> int | None:
    """How many bytes of a record of ``cls`` come before its ``offset`` key, at a version below
    128 (its map header, tag and version); None when this encoder does not write the type."""
    names = list(cls.__struct_encode_fields__)
    if not _tag(cls) or names[:5] != ["version", *_STAMPED] or list(cls.__struct_fields__) != names:
        return None
    if _holds_float(mi.type_info(cls)):  # an int given for a float decodes as a float: other bytes
        return None
    return len(_map_header(len(names) + 1)) + len(_tag(cls)) + len(_key("version")) + 1


def _holds_float(t: mi.Type) -> bool:
    if isinstance(t, mi.Metadata):
        return _holds_float(t.type)
    if isinstance(t, mi.FloatType):
        return True
    if isinstance(t, mi.UnionType):
        return any(map(_holds_float, t.types))
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        return _holds_float(t.item_type)
    if isinstance(t, mi.StructType):
        return any(_holds_float(f.type) for f in t.fields)
    return False


def stamp_blank(
    message: bytes, heads: np.ndarray, offsets: np.ndarray, ts_ms: int, lengths: np.ndarray | None = None
) -> pa.Array | None:
    """The ``record`` column of the records ``message`` encodes (one msgpack array, as
    ``msgspec.msgpack.encode`` writes a list of records), stamped with ``offsets`` and the time
    ``ts_ms``: each record's bytes with its blank offset, time, source and source offset
    (``_BLANK``, ``heads[i]`` bytes into it) replaced. None when some record's bytes there are
    not blank (the caller encodes stamped copies). ``lengths``: each record's length in
    ``message`` when the caller knows them (else one ``list[Raw]`` decode finds them)."""
    n = len(heads)
    if lengths is None:
        lengths = np.fromiter(map(len, _RAW_ITEMS.decode(message)), np.int64, n)
    if n == 0 or len(message) >= 2**31:
        return None
    ends = np.cumsum(lengths)
    starts = ends - lengths + (len(message) - int(ends[-1]))  # behind the array's header
    ends += len(message) - int(ends[-1])
    at = starts + heads
    if (at + len(_BLANK) > ends).any():
        return None
    # The message cut at every record's start, blank and blank's end: heads, blanks and tails
    # are every third piece of it (no copy until the takes).
    cuts = np.empty(3 * n + 1, np.int32)
    cuts[0:-1:3], cuts[1:-1:3], cuts[2:-1:3], cuts[-1] = starts, at, at + len(_BLANK), ends[-1]
    pieces = pa.Array.from_buffers(pa.binary(), 3 * n, [None, pa.py_buffer(cuts), pa.py_buffer(message)])
    if not pc.equal(pieces, pa.scalar(_BLANK, pa.binary())).to_numpy(zero_copy_only=False)[1::3].all():
        return None
    stamp = _key("ts_ms") + msgspec.msgpack.encode(ts_ms) + _key("source") + _NIL + _key("source_offset") + _NIL
    parts = [
        pieces.take(pa.array(np.arange(0, 3 * n, 3))),
        _key("offset"),
        _value_bytes(pa.array(offsets)),
        stamp,
        pieces.take(pa.array(np.arange(2, 3 * n, 3))),
    ]
    return _as_array(_join(parts, n), n)
