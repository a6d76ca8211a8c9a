"""Structs of one type held as columns: a ``Sequence`` of the Struct at a few dozen bytes a row
instead of an object, its strings and its integers apiece.

The report of a long history lists tens of millions of violations and incidents' effects
(bench/RESULTS.md); as Structs they alone outgrow the machine. Here each field is an integer
array: strings are interned (one table, shared by every list given it), ``None`` is a sentinel,
a ``list[int]`` is a slice of one flat array. A Struct is built only when a row is read (an index,
a slice, iteration), and a row can be changed in place (``set``: an effect ends after it began).
Taking rows by index runs on Arrow's kernels over the same buffers, without an object per row.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.records.base import struct_info

T = TypeVar("T", bound=msgspec.Struct)

NONE_INT = -(2**63)
"""An ``int | None`` field's None."""
NONE_STR = 2**32 - 1
"""A ``str | None`` field's None (as a string's number)."""

_ARROW = {"q": pa.int64(), "I": pa.uint32()}


def wrap(a: array | memoryview) -> pa.Array:
    """``a``'s buffer as an Arrow array (no copy; ``a`` must not grow while it is used); ``a`` a
    column (an ``array``, or its ``memoryview`` once ``spill``ed)."""
    code = a.typecode if isinstance(a, array) else a.format
    return pa.Array.from_buffers(_ARROW[code], len(a), [None, pa.py_buffer(a)])


def unwrap(arr: pa.Array, typecode: str) -> array:
    """An Arrow array of ``typecode``'s type (no nulls) as an ``array``."""
    out = array(typecode)
    size = out.itemsize
    out.frombytes(memoryview(arr.buffers()[1])[arr.offset * size : (arr.offset + len(arr)) * size])
    return out


class _Codes(dict):
    """String -> its number in ``table``; a string not seen yet is numbered as it is looked up
    (``__missing__``): a string seen before is one lookup in C, no Python call (the report's
    rows intern several strings each)."""

    __slots__ = ("table",)

    def __init__(self, table: list[str]) -> None:
        super().__init__()
        self.table = table

    def __missing__(self, s: str) -> int:
        code = self[s] = len(self.table)
        self.table.append(s)
        return code


class Strings:
    """Interned strings: each a number into one table."""

    __slots__ = ("table", "codes")

    def __init__(self) -> None:
        self.table: list[str] = []
        self.codes: dict[str, int] = _Codes(self.table)
        """String -> its number; looking a string up numbers it."""

    def code(self, s: str) -> int:
        return self.codes[s]


_STR, _OPT_STR, _INT, _OPT_INT, _INTS = range(5)


def _kinds(cls: type[msgspec.Struct]) -> tuple[tuple[str, int], ...]:
    """(field, kind) of each of ``cls``'s fields; a field of another type is refused."""
    out = []
    for f in struct_info(cls).fields:
        t = f.type
        options: set[Any] = set(type(x) for x in t.types) if isinstance(t, msgspec.inspect.UnionType) else {type(t)}
        kind = {
            frozenset({msgspec.inspect.StrType}): _STR,
            frozenset({msgspec.inspect.StrType, msgspec.inspect.NoneType}): _OPT_STR,
            frozenset({msgspec.inspect.IntType}): _INT,
            frozenset({msgspec.inspect.IntType, msgspec.inspect.NoneType}): _OPT_INT,
        }.get(frozenset(options))
        if (
            kind is None
            and isinstance(t, msgspec.inspect.ListType)
            and isinstance(t.item_type, msgspec.inspect.IntType)
        ):
            kind = _INTS
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: a column holds str, int (or None) or list[int], not {t}")
        out.append((f.name, kind))
    return tuple(out)


def _row_adder(fields: tuple[tuple[str, int], ...]):
    """``add_row`` for ``fields``: one statement per field, no branch per value (the hot path of
    the audit's violations and effects; written out as dataclasses write ``__init__``)."""
    body = []
    for i, (name, kind) in enumerate(fields):
        col, v = f"cols[{name!r}]", f"v{i}"
        body.append(
            {
                _STR: f"{col}.append(code[{v}])",
                _OPT_STR: f"{col}.append(NONE_STR if {v} is None else code[{v}])",
                _INT: f"{col}.append({v})",
                _OPT_INT: f"{col}.append(NONE_INT if {v} is None else {v})",
                _INTS: f"{col}.extend({v}); self._ends[{name!r}].append(len({col}))",
            }[kind]
        )
    args = ", ".join(f"v{i}" for i in range(len(fields)))
    source = f"def add_row(self, {args}):\n    cols, code = self._cols, self.strings.codes\n"
    source += "".join(f"    {line}\n" for line in body)
    namespace = {"NONE_STR": NONE_STR, "NONE_INT": NONE_INT}
    exec(source, namespace)  # noqa: S102 - the source is built from the Struct's own field names
    adder = namespace["add_row"]
    adder.__doc__ = "A row from its fields' values, in the Struct's order."
    return adder


class StructColumns(Sequence[T], Generic[T]):
    """Rows of the Struct ``struct`` (a subclass sets it) in columns."""

    struct: type[T]
    _fields: tuple[tuple[str, int], ...]
    _kind_of: dict[str, int]
    add_row: Callable[..., None]
    """A row from its fields' values, in the Struct's order (``_row_adder``, per subclass)."""

    __slots__ = ("strings", "_cols", "_ends", "_pages")

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        cls._fields = _kinds(cls.struct)
        cls._kind_of = dict(cls._fields)
        cls.add_row = _row_adder(cls._fields)

    def __init__(self, items: Iterable[T] = (), *, strings: Strings | None = None) -> None:
        self.strings = strings or Strings()
        self._cols: dict[str, array] = {
            name: array("I" if kind in (_STR, _OPT_STR) else "q") for name, kind in self._fields
        }
        self._ends: dict[str, array] = {name: array("q") for name, kind in self._fields if kind == _INTS}
        """A ``list[int]`` field's row i is ``_cols[f][_ends[f][i - 1]:_ends[f][i]]``."""
        self._pages: list[tuple[mmap.mmap, int, int]] = []
        """Once ``spill``ed: each column's memory map and its byte range there."""
        for item in items:
            self.append(item)

    # -- rows in -------------------------------------------------------------------------------

    def append(self, item: T) -> None:
        self.add_row(*msgspec.structs.astuple(item))

    def set(self, i: int, **values) -> None:
        """Change row ``i``'s scalar fields (not a ``list[int]``)."""
        for name, v in values.items():
            kind = self._kind_of[name]
            if kind == _INTS:
                raise TypeError(f"{name}: a list field is not changed in place")
            if kind in (_STR, _OPT_STR):
                v = NONE_STR if v is None else self.strings.code(v)
            elif v is None:
                v = NONE_INT
            self._cols[name][i] = v

    def drop_pages(self) -> None:
        """Let the kernel take back the pages of a spilled list read so far (its file keeps
        them, and a later read pages them in again): a pass over millions of spilled rows then
        holds none of them after it. Nothing to do for a list in memory."""
        size = mmap.PAGESIZE
        for mapped, lo, hi in self._pages:
            start = lo - lo % size
            if hi > start:
                mapped.madvise(mmap.MADV_DONTNEED, start, hi - start)

    @property
    def spilled(self) -> bool:
        """The columns are in a file (``spill``), not in memory: no row can be added."""
        return not isinstance(self._cols[self._fields[0][0]], array)

    def get(self, i: int, name: str):
        """Row ``i``'s field ``name``."""
        return self._value(name, self._kind_of[name], i)

    def extend(self, items: Iterable[T]) -> None:
        if isinstance(items, StructColumns):
            self.extend_rows(items, pa.array(range(len(items)), pa.int64()))
            return
        for item in items:
            self.append(item)

    def extend_arrow(self, table: pa.Table) -> None:
        """Append ``table``'s rows: a column per field, by name (nulls for None), strings
        numbered a distinct value at a time; no Python object per row (``list[int]`` fields
        are not read from Arrow)."""
        for name, kind in self._fields:
            column = table.column(name).combine_chunks()
            if kind == _INTS:
                raise TypeError(f"{self.struct.__name__}.{name}: a list field is not read from Arrow")
            if kind in (_STR, _OPT_STR):
                encoded = column.cast(pa.string()).dictionary_encode()
                codes = array("I", [self.strings.code(v) for v in encoded.dictionary.to_pylist()])
                codes.append(NONE_STR)  # a null's index is past the dictionary's last
                at = encoded.indices.fill_null(len(codes) - 1)
                self._cols[name].extend(unwrap(pc.take(wrap(codes), at), "I"))
            else:
                self._cols[name].extend(unwrap(column.cast(pa.int64()).fill_null(NONE_INT), "q"))

    def extend_rows(self, other: StructColumns[T], rows: pa.Array) -> None:
        """Append ``other``'s rows at the indices ``rows`` (an Arrow integer array), in that order."""
        if not len(rows):
            return
        mapping = None
        if other.strings is not self.strings:
            # ``other``'s string numbers in this list's table (None stays None).
            mapped = array("I", [self.strings.code(s) for s in other.strings.table])
            mapped.append(NONE_STR)
            mapping = wrap(mapped)
        for name, kind in self._fields:
            self._extend_field(other, rows, name, kind, mapping)

    def _extend_field(self, other: StructColumns[T], rows: pa.Array, name: str, kind: int, mapping) -> None:
        """``extend_rows`` of one field (``mapping``: ``other``'s string numbers in this list's
        table, None when the two share one)."""
        col = self._cols[name]
        if kind == _INTS:
            values = pc.take(other._list(name), rows)
            offsets = unwrap(values.offsets, "q")
            base, start = len(col), offsets[0]
            col.extend(unwrap(values.flatten(), "q"))
            self._ends[name].extend(unwrap(pc.add(wrap(offsets[1:]), base - start), "q"))
            return
        taken = pc.take(wrap(other._cols[name]), rows)
        if kind in (_STR, _OPT_STR) and mapping is not None:
            # NONE_STR maps through the table's last entry.
            taken = pc.take(mapping, pc.min_element_wise(taken, pa.scalar(len(mapping) - 1, pa.uint32())))
        col.extend(unwrap(taken, col.typecode))

    def _list(self, name: str) -> pa.LargeListArray:
        offsets = array("q", [0])
        offsets.frombytes(memoryview(self._ends[name]).cast("B"))  # a spilled list's view too, in C
        return pa.LargeListArray.from_arrays(wrap(offsets), wrap(self._cols[name]))

    def _string_ranks(self) -> pa.Array:
        """Each string's place in the string table sorted (by its number): sorting by these
        sorts by the strings."""
        table = self.strings.table
        rank = array("q", bytes(8 * len(table)))
        for r, code in enumerate(sorted(range(len(table)), key=table.__getitem__)):
            rank[code] = r
        return wrap(rank)

    def reorder(self, rows: pa.Array, *, spill_to: str | os.PathLike | None | Literal[False] = False) -> None:
        """Keep the rows at the indices ``rows``, in that order. ``spill_to`` (a directory, or
        None for the system's temporary one): the rows kept are ``spill``ed there a field at a
        time, each as soon as it is taken, and this list's own column let go: the list and one
        field's copy are held at once, never two copies of it."""
        taken = type(self)(strings=self.strings)
        if spill_to is False:
            taken.extend_rows(self, rows)
            self._cols, self._ends, self._pages = taken._cols, taken._ends, []
            return
        pages = []
        for name, kind in self._fields:
            taken._extend_field(self, rows, name, kind, None)
            pages += [page for _list, page in _spill_field([taken], name, kind, spill_to)]
            self._cols[name] = taken._cols[name]
            if kind == _INTS:
                self._ends[name] = taken._ends[name]
        self._pages = pages

    # -- Sequence ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._cols[self._fields[0][0]])

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"{self.struct.__name__} index out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[T]:
        return map(self._row, range(len(self)))

    def _value(self, name: str, kind: int, i: int):
        v = self._cols[name]
        if kind == _STR:
            return self.strings.table[v[i]]
        if kind == _OPT_STR:
            return None if v[i] == NONE_STR else self.strings.table[v[i]]
        if kind == _INT:
            return v[i]
        if kind == _OPT_INT:
            return None if v[i] == NONE_INT else v[i]
        ends = self._ends[name]
        return v[ends[i - 1] if i else 0 : ends[i]].tolist()

    def dicts(self, lo: int, hi: int) -> list[dict]:
        """Rows ``lo..hi - 1`` as dicts of their fields in the Struct's order (msgspec encodes
        such a dict as it encodes the Struct, when no field is renamed or left out), built a
        column at a time."""
        table = self.strings.table
        values = []
        for name, kind in self._fields:
            col = self._cols[name][lo:hi]
            if kind == _STR:
                values.append([table[c] for c in col])
            elif kind == _OPT_STR:
                values.append([None if c == NONE_STR else table[c] for c in col])
            elif kind == _INT:
                values.append(col.tolist())
            elif kind == _OPT_INT:
                values.append([None if v == NONE_INT else v for v in col])
            else:
                ends, flat = self._ends[name], self._cols[name]
                bounds = [ends[lo - 1] if lo else 0, *ends[lo:hi]]
                values.append([flat[a:b].tolist() for a, b in zip(bounds, bounds[1:], strict=False)])
        names = [name for name, _ in self._fields]
        return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]

    def to_arrow(self, lo: int = 0, hi: int | None = None) -> pa.Table:
        """Rows ``lo..hi - 1`` as an Arrow table of the Struct's fields (nulls for None), built
        from the columns with Arrow's kernels: no Python object per value (a long history's
        report tables are tens of millions of rows)."""
        hi = len(self) if hi is None else min(hi, len(self))
        strings: pa.Array | None = None
        out = {}
        for name, kind in self._fields:
            if kind == _INTS:
                out[name] = self._list(name).slice(lo, hi - lo).cast(pa.list_(pa.int64()))
                continue
            col = wrap(self._cols[name]).slice(lo, hi - lo)
            if kind in (_STR, _OPT_STR):
                if strings is None:
                    strings = pa.array(self.strings.table, pa.string())
                missing = pc.equal(col, pa.scalar(NONE_STR, pa.uint32()))
                out[name] = pc.take(strings, pc.if_else(missing, pa.scalar(None, pa.uint32()), col))
            else:
                missing = pc.equal(col, pa.scalar(NONE_INT, pa.int64()))
                out[name] = pc.if_else(missing, pa.scalar(None, pa.int64()), col)
        return pa.table(out)

    def _row(self, i: int) -> T:
        return self.struct(**{name: self._value(name, kind, i) for name, kind in self._fields})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compared by value and changed in place, as a list

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} row(s))"


def spill(lists: Iterable[StructColumns], directory: str | os.PathLike | None = None) -> None:
    """Move the columns of ``lists`` (lists of one Struct) out of the process's memory: each
    field's columns, one list after another, into one file under ``directory`` (default the
    system's temporary directory), unlinked as it is created and read back through a memory map.
    The rows read, and change in place, as before (the kernel pages them in and out, and the
    file is gone with the last reference); none can be added. A long history's report (tens of
    millions of violations and effects, bench/RESULTS.md) is then not held in memory while the
    plan's later steps run; a list already spilled or empty is left as it is."""
    held = [c for c in lists if len(c) and not c.spilled]
    if not held:
        return
    for name, kind in held[0]._fields:
        for c, page in _spill_field(held, name, kind, directory):
            c._pages.append(page)


def _spill_field(held: list[StructColumns], name: str, kind: int, directory) -> list:
    """``spill`` of one field of the lists ``held``: their columns of it moved to one file.
    Returns (list, its page range) for each column moved."""
    pages = []
    for part in ("_cols", "_ends") if kind == _INTS else ("_cols",):
        columns = [getattr(c, part)[name] for c in held]
        mapped = _mapped(columns, directory)
        if mapped is None:
            continue
        view, itemsize, lo = memoryview(mapped).cast(columns[0].typecode), columns[0].itemsize, 0
        for c, col in zip(held, columns, strict=True):
            getattr(c, part)[name] = view[lo : lo + len(col)]
            pages.append((c, (mapped, lo * itemsize, (lo + len(col)) * itemsize)))
            lo += len(col)
    return pages


def _mapped(columns: list[array], directory) -> mmap.mmap | None:
    """``columns`` written one after another to an unlinked file, mapped writable (None: all
    empty, nothing to map)."""
    with tempfile.TemporaryFile(dir=directory) as f:
        for col in columns:
            f.write(col)  # the array's own buffer, not a copy
        size = f.tell()
        if not size:
            return None
        f.flush()
        return mmap.mmap(f.fileno(), size)  # keeps its own handle: the file may close
