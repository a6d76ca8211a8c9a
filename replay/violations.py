"""The report's violations: ``Violation`` and ``ViolationList``, the violations in columns
(``replay.columns``).

A history where a broker keeps replicas UNASSIGNED has a K8 and a K10 interval per replica it
places; at the benchmark's scale those are tens of millions of violations (bench/RESULTS.md).
The list adds what the audit does with them to the columns: sorting into report order on Arrow's
kernels, counts per invariant, the grace's intervals as Arrow columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Literal

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.replay.columns import NONE_INT, StructColumns, spill, wrap
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


_HITS_AT_ONCE = 65_536
"""``of_entities`` reads the hits' columns this many rows at a time."""


class ViolationList(StructColumns[Violation]):
    """Violations in columns (``replay.columns``), appended one at a time or taken from another
    list by index, sorted into report order."""

    struct = Violation
    __slots__ = ()

    def add(self, inv: str, entity: str, first: int, last: int | None, message: str, evidence: Iterable[int]) -> None:
        """A violation of ``inv`` with the catalogue's severity (``books.violation``)."""
        self.add_row(inv, BY_ID[inv].severity, entity, first, last, message, evidence)

    def add_interval(self, inv: str, entity: str, first: int, message: str, fixed_by: int | None) -> None:
        """An interval from ``first`` until the record ``fixed_by`` (None: still open), its
        evidence the two ends (``driver.interval``)."""
        if fixed_by is None:
            self.add_row(inv, BY_ID[inv].severity, entity, first, None, message, (first,))
        else:
            self.add_row(inv, BY_ID[inv].severity, entity, first, fixed_by - 1, message, (first, fixed_by))

    def sort(self, *, spill_to: str | os.PathLike | None | Literal[False] = False) -> None:
        """Into report order, stably: by first offset, invariant, entity (``Books.violations``).
        ``spill_to``: the sorted rows spilled there a field at a time (``reorder``)."""
        if len(self) < 2:
            if spill_to is not False:
                spill([self], spill_to)
            return
        ranks = self._string_ranks()
        keys = pa.table(
            {
                "first": wrap(self._cols["first_offset"]),
                "inv": pc.take(ranks, wrap(self._cols["invariant"])),
                "entity": pc.take(ranks, wrap(self._cols["entity"])),
            }
        )
        order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in ("first", "inv", "entity")])
        del keys, ranks
        self.reorder(order, spill_to=spill_to)

    def interval_columns(self) -> pa.Table:
        """``i`` (the row), ``first_offset`` and ``fixed_by`` (the record after ``last_offset``;
        null while open): the intervals as the grace's statement reads them (``plan.sql.held``)."""
        last = wrap(self._cols["last_offset"])
        return pa.table(
            {
                "i": pa.array(range(len(self)), pa.int64()),
                "first_offset": wrap(self._cols["first_offset"]),
                "fixed_by": pc.if_else(pc.equal(last, NONE_INT), pa.scalar(None, pa.int64()), pc.add(last, 1)),
            }
        )

    def counts(self) -> dict[str, int]:
        """How many violations of each invariant."""
        counted = pc.value_counts(wrap(self._cols["invariant"]))
        table = self.strings.table
        return {table[c]: n for c, n in zip(counted.field(0).to_pylist(), counted.field(1).to_pylist(), strict=True)}

    def severities(self) -> set[str]:
        return {self.strings.table[c] for c in pc.unique(wrap(self._cols["severity"])).to_pylist()}

    def of_entities(self, entities: Iterable[str]) -> Iterator[tuple[int, str, str, int, int | None]]:
        """(index, invariant, entity, first offset, last offset) of the violations of any of
        ``entities``, in order: read off the columns, no ``Violation`` built (a long history's
        incidents span millions of violations)."""
        codes = self.strings.codes
        wanted = [codes[e] for e in entities if e in codes]
        if not wanted:
            return
        hits = pc.indices_nonzero(pc.is_in(wrap(self._cols["entity"]), value_set=pa.array(wanted, pa.uint32())))
        cols, table = self._cols, self.strings.table
        for lo in range(0, len(hits), _HITS_AT_ONCE):  # as Python values, a slice at a time
            part = hits.slice(lo, _HITS_AT_ONCE)
            taken = [pc.take(wrap(cols[name]), part).to_pylist() for name in ("invariant", "entity", "first_offset")]
            lasts = [None if v == NONE_INT else v for v in pc.take(wrap(cols["last_offset"]), part).to_pylist()]
            for i, inv, ent, first, last in zip(part.to_pylist(), *taken, lasts, strict=True):
                yield i, table[inv], table[ent], first, last

    def entities(self) -> set[str]:
        """The entities some violation names."""
        return {self.strings.table[c] for c in pc.unique(wrap(self._cols["entity"])).to_pylist()}
