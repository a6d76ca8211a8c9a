"""msgspec's decode checks as Arrow compute: would decoding these columns' records fail?

``arrow_input`` encodes a record type's rows from their Arrow columns into each record's msgpack
(``msgpack_columns``). Decoding those bytes with msgspec checks what a record's type says of
each field (``msgspec.inspect``): a value of the field's kind, integer bounds (``ge``/``le``...),
string, bytes and list lengths, enum members, and no null where the type is not optional, in
nested structs and list items too. ``breaks`` answers the same question over the columns,
reading the constraints from ``msgspec.inspect`` of the record type (nothing written per type),
so the append need not decode a Struct per row. It raises ``Uncovered`` for a type it does not
model (a pattern, a union of two kinds, a nested struct with checks of its own...): the caller
then decodes, as before. tests/test_column_checks.py holds it to msgspec's decode, row by row.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from functools import cache

import msgspec
import msgspec.inspect as mi
import pyarrow as pa
import pyarrow.compute as pc

from .base import struct_info

__all__ = ["Uncovered", "breaks", "record_breaks"]


class Uncovered(Exception):
    """A type (or an Arrow column for it) these checks do not model: decode to check it."""


def _unwrap(t: mi.Type) -> mi.Type:
    return t.type if isinstance(t, mi.Metadata) else t


def _optional(t: mi.Type) -> tuple[mi.Type, bool]:
    """The type without its Metadata, and whether None is allowed (``X | None``)."""
    t = _unwrap(t)
    if isinstance(t, mi.UnionType):
        rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
        if len(rest) != 1 or len(rest) == len(t.types):
            raise Uncovered(repr(t))
        return _unwrap(rest[0]), True
    return t, False


def _out_of(bounds: mi.IntType | mi.FloatType, values: pa.Array) -> bool:
    """Whether some value breaks ``ge``/``gt``/``le``/``lt`` (no nulls in ``values``)."""
    if bounds.multiple_of is not None:
        raise Uncovered("multiple_of")
    if bounds.ge is None and bounds.gt is None and bounds.le is None and bounds.lt is None:
        return False
    low_high = pc.min_max(values)
    low, high = low_high["min"].as_py(), low_high["max"].as_py()
    if isinstance(bounds, mi.FloatType) and pc.any(pc.is_nan(values)).as_py():
        raise Uncovered("NaN against a bound")
    return (
        (bounds.ge is not None and low < bounds.ge)
        or (bounds.gt is not None and low <= bounds.gt)
        or (bounds.le is not None and high > bounds.le)
        or (bounds.lt is not None and high >= bounds.lt)
    )


def _length_out_of(
    t: mi.StrType | mi.BytesType | mi.VarTupleType | mi.ListType, lengths: Callable[[], pa.Array]
) -> bool:
    if t.min_length is None and t.max_length is None:
        return False
    low_high = pc.min_max(lengths())
    low, high = low_high["min"].as_py(), low_high["max"].as_py()
    return (t.min_length is not None and low < t.min_length) or (t.max_length is not None and high > t.max_length)


def _members(t: mi.EnumType | mi.LiteralType) -> pa.Array:
    return _member_array(t.cls if isinstance(t, mi.EnumType) else tuple(t.values))


@cache
def _member_array(of: type[enum.Enum] | tuple[object, ...]) -> pa.Array:
    values = list(of) if isinstance(of, tuple) else [m.value for m in of]
    if not values or len({type(v) for v in values}) != 1 or type(values[0]) not in (int, str):
        raise Uncovered(repr(of))
    return pa.array(values)


def breaks(t: mi.Type, array: pa.Array) -> bool:
    """Whether msgspec would refuse some value of ``array`` as a ``t`` (a null as None)."""
    t, optional = _optional(t)
    if array.null_count:
        if not optional:
            return True
        array = array.drop_null()
    if len(array) == 0:
        return False
    kind = array.type
    if isinstance(t, mi.IntType):
        if not pa.types.is_integer(kind):
            raise Uncovered(str(kind))
        return _out_of(t, array)
    if isinstance(t, mi.FloatType):
        if not pa.types.is_floating(kind):
            raise Uncovered(str(kind))
        return _out_of(t, array)
    if isinstance(t, mi.BoolType):
        if not pa.types.is_boolean(kind):
            raise Uncovered(str(kind))
        return False
    if isinstance(t, mi.StrType):
        if t.pattern is not None or not pa.types.is_string(kind):
            raise Uncovered(str(kind))
        array.validate(full=True)  # UTF-8, as msgspec's decode checks (pa.ArrowInvalid: not vouched for)
        return _length_out_of(t, lambda: pc.utf8_length(array))
    if isinstance(t, mi.BytesType):
        if not pa.types.is_binary(kind):
            raise Uncovered(str(kind))
        return _length_out_of(t, lambda: pc.binary_length(array))
    if isinstance(t, (mi.EnumType, mi.LiteralType)):
        members = _members(t)
        if not (
            (pa.types.is_integer(kind) and pa.types.is_integer(members.type))
            or (pa.types.is_string(kind) and pa.types.is_string(members.type))
        ):
            raise Uncovered(str(kind))
        return not pc.all(pc.is_in(array, value_set=members.cast(kind, safe=False))).as_py()
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        if not pa.types.is_list(kind):
            raise Uncovered(str(kind))
        return _length_out_of(t, lambda: pc.list_value_length(array)) or breaks(t.item_type, array.flatten())
    if isinstance(t, mi.StructType):
        if not pa.types.is_struct(kind) or not _plain(t.cls):
            raise Uncovered(repr(t))
        children = dict(zip([f.name for f in kind], array.flatten()))
        return _fields_break(t, children.get)
    raise Uncovered(repr(t))


def _plain(cls: type[msgspec.Struct]) -> bool:
    """A nested Struct msgspec decodes from a plain map of its fields, with no code of its own."""
    config = cls.__struct_config__
    return (
        config.tag is None
        and not config.array_like
        and tuple(cls.__struct_encode_fields__) == tuple(cls.__struct_fields__)
        and getattr(cls, "__post_init__", None) is None
    )


def _fields_break(t: mi.StructType, column: Callable[[str], pa.Array | None]) -> bool:
    for f in t.fields:
        array = column(f.name)
        if array is None:  # the encoding would lack the field: decode to judge
            raise Uncovered(f.name)
        if breaks(f.type, array):
            return True
    return False


def record_breaks(cls: type[msgspec.Struct], envelope: Mapping[str, pa.Array], payload: pa.StructArray | None) -> bool:
    """Whether msgspec would refuse some record of type ``cls`` whose fields are the arrays
    ``envelope`` and the children of ``payload`` (``Uncovered``: decode to tell)."""
    children = {} if payload is None else dict(zip([f.name for f in payload.type], payload.flatten()))

    def column(name: str) -> pa.Array | None:
        array = envelope.get(name)
        return children.get(name) if array is None else array

    return _fields_break(_info(cls), column)


@cache
def _info(cls: type[msgspec.Struct]) -> mi.StructType:
    return struct_info(cls)
