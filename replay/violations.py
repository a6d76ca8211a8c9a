"""The report's violations held as columns: a ``Sequence`` of ``Violation`` at a few dozen bytes
each instead of a Struct, a list and three integers apiece.

A history where a broker keeps replicas UNASSIGNED has a K8 and a K10 interval per replica it
places; at the benchmark's scale those are tens of millions of violations, more than the rest of
the audit's memory put together (bench/RESULTS.md). Here the strings (invariants, severities,
entities, messages) are interned once and each violation is a row of integer arrays; a
``Violation`` is built only when one is read (an index, a slice, iteration). Sorting into report
order and taking rows by index run on Arrow's kernels over the same buffers, without a Python
object per row.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.statemachine.invariants import BY_ID


class Violation(msgspec.Struct, kw_only=True):
    """One violation as the report gives it: an invariant's entity wrong from ``first_offset``
    to ``last_offset`` (None: still open at the end), ``evidence`` the records that caused and
    fixed it (``replay.books``)."""

    invariant: str
    severity: str
    entity: str
    first_offset: int
    last_offset: int | None
    message: str
    evidence: list[int]


_OPEN = -(2**63)
"""``last_offset`` of a violation still open at the end (None)."""

_ARROW = {"q": pa.int64(), "I": pa.uint32()}


def _wrap(a: array) -> pa.Array:
    """``a``'s buffer as an Arrow array (no copy; ``a`` must not grow while it is used)."""
    return pa.Array.from_buffers(_ARROW[a.typecode], len(a), [None, pa.py_buffer(a)])


def _unwrap(arr: pa.Array, typecode: str) -> array:
    """An Arrow array of ``typecode``'s type (no nulls) as an ``array``."""
    out = array(typecode)
    size = out.itemsize
    out.frombytes(memoryview(arr.buffers()[1])[arr.offset * size : (arr.offset + len(arr)) * size])
    return out


class ViolationList(Sequence[Violation]):
    """Violations in columns, appended one at a time or taken from another list by index."""

    __slots__ = ("_strings", "_codes", "_inv", "_sev", "_entity", "_message", "_first", "_last", "_ev_end", "_ev")

    def __init__(self, items: Iterable[Violation] = ()) -> None:
        self._strings: list[str] = []
        self._codes: dict[str, int] = {}
        self._inv, self._sev, self._entity, self._message = array("I"), array("I"), array("I"), array("I")
        self._first, self._last = array("q"), array("q")
        self._ev_end = array("q")
        """Row i's evidence is ``_ev[_ev_end[i - 1]:_ev_end[i]]`` (from 0 for the first row)."""
        self._ev = array("q")
        for v in items:
            self.append(v)

    def _code(self, s: str) -> int:
        code = self._codes.get(s)
        if code is None:
            code = self._codes[s] = len(self._strings)
            self._strings.append(s)
        return code

    # -- appending ------------------------------------------------------------------------------

    def add(self, inv: str, entity: str, first: int, last: int | None, message: str, evidence: Iterable[int]) -> None:
        """A violation of ``inv`` with the catalogue's severity (``books.violation``)."""
        self._add(inv, BY_ID[inv].severity, entity, first, last, message, evidence)

    def add_interval(self, inv: str, entity: str, first: int, message: str, fixed_by: int | None) -> None:
        """An interval from ``first`` until the record ``fixed_by`` (None: still open), its
        evidence the two ends (``driver.interval``)."""
        if fixed_by is None:
            self._add(inv, BY_ID[inv].severity, entity, first, None, message, (first,))
        else:
            self._add(inv, BY_ID[inv].severity, entity, first, fixed_by - 1, message, (first, fixed_by))

    def append(self, v: Violation) -> None:
        self._add(v.invariant, v.severity, v.entity, v.first_offset, v.last_offset, v.message, v.evidence)

    def extend(self, items: Iterable[Violation]) -> None:
        if isinstance(items, ViolationList):
            self.extend_rows(items, pa.array(range(len(items)), pa.int64()))  # a copy of every row
            return
        for v in items:
            self.append(v)

    def _add(self, inv, severity, entity, first, last, message, evidence) -> None:
        code = self._code
        self._inv.append(code(inv))
        self._sev.append(code(severity))
        self._entity.append(code(entity))
        self._message.append(code(message))
        self._first.append(first)
        self._last.append(_OPEN if last is None else last)
        self._ev.extend(evidence)
        self._ev_end.append(len(self._ev))

    def extend_rows(self, other: ViolationList, rows: pa.Array) -> None:
        """Append ``other``'s rows at the indices ``rows`` (an Arrow integer array), in that order."""
        if not len(rows):
            return
        # Codes of ``other``'s strings in this list's table.
        mapping = _wrap(array("I", [self._code(s) for s in other._strings]))
        for name in ("_inv", "_sev", "_entity", "_message"):
            codes = pc.take(_wrap(getattr(other, name)), rows)
            getattr(self, name).extend(_unwrap(pc.take(mapping, codes), "I"))
        self._first.extend(_unwrap(pc.take(_wrap(other._first), rows), "q"))
        self._last.extend(_unwrap(pc.take(_wrap(other._last), rows), "q"))
        evidence = pc.take(other._evidence(), rows)
        base = len(self._ev)
        offsets = _unwrap(evidence.offsets, "q")
        start = offsets[0]
        self._ev.extend(_unwrap(evidence.flatten(), "q"))
        self._ev_end.extend(_unwrap(pc.add(_wrap(offsets[1:]), base - start), "q"))

    def _evidence(self) -> pa.LargeListArray:
        offsets = array("q", [0])
        offsets.extend(self._ev_end)
        return pa.LargeListArray.from_arrays(_wrap(offsets), _wrap(self._ev))

    # -- report order and summaries -------------------------------------------------------------

    def sort(self) -> None:
        """Into report order, stably: by first offset, invariant, entity (``Books.violations``)."""
        if len(self) < 2:
            return
        order = sorted(range(len(self._strings)), key=self._strings.__getitem__)
        rank = array("q", bytes(8 * len(order)))
        for r, code in enumerate(order):
            rank[code] = r
        ranks = _wrap(rank)
        keys = pa.table(
            {
                "first": _wrap(self._first),
                "inv": pc.take(ranks, _wrap(self._inv)),
                "entity": pc.take(ranks, _wrap(self._entity)),
            }
        )
        rows = pc.sort_indices(keys, sort_keys=[("first", "ascending"), ("inv", "ascending"), ("entity", "ascending")])
        taken = ViolationList()
        taken._strings, taken._codes = self._strings, self._codes
        taken.extend_rows(self, rows)
        for name in self.__slots__[2:]:
            setattr(self, name, getattr(taken, name))

    def interval_columns(self) -> pa.Table:
        """``i`` (the row), ``first_offset`` and ``fixed_by`` (the record after ``last_offset``;
        null while open): the intervals as the grace's statement reads them (``plan.sql.held``)."""
        last = _wrap(self._last)
        open_ = pc.equal(last, _OPEN)
        return pa.table(
            {
                "i": pa.array(range(len(self)), pa.int64()),
                "first_offset": _wrap(self._first),
                "fixed_by": pc.if_else(open_, pa.scalar(None, pa.int64()), pc.add(last, 1)),
            }
        )

    def counts(self) -> dict[str, int]:
        """How many violations of each invariant."""
        counted = pc.value_counts(_wrap(self._inv))
        return {self._strings[c]: n for c, n in zip(counted.field(0).to_pylist(), counted.field(1).to_pylist())}

    def severities(self) -> set[str]:
        return {self._strings[c] for c in pc.unique(_wrap(self._sev)).to_pylist()}

    def of_entities(self, entities: Iterable[str]) -> Iterator[tuple[int, Violation]]:
        """(index, violation) of the violations of any of ``entities``, in order."""
        codes = [self._codes[e] for e in entities if e in self._codes]
        if not codes:
            return
        hits = pc.indices_nonzero(pc.is_in(_wrap(self._entity), value_set=pa.array(codes, pa.uint32())))
        for i in hits.to_pylist():
            yield i, self._row(i)

    # -- Sequence -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._first)

    @overload
    def __getitem__(self, i: int) -> Violation: ...
    @overload
    def __getitem__(self, i: slice) -> list[Violation]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("violation index out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[Violation]:
        return map(self._row, range(len(self)))

    def _row(self, i: int) -> Violation:
        s, last = self._strings, self._last[i]
        return Violation(
            invariant=s[self._inv[i]],
            severity=s[self._sev[i]],
            entity=s[self._entity[i]],
            first_offset=self._first[i],
            last_offset=None if last == _OPEN else last,
            message=s[self._message[i]],
            evidence=self._ev[self._ev_end[i - 1] if i else 0 : self._ev_end[i]].tolist(),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ViolationList({len(self)} violation(s))"
