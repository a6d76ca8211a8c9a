"""Metadata transactions as Kafka publishes them: what the audit sees of a log's
``BeginTransaction`` ... ``EndTransaction``/``AbortTransaction`` runs (KIP-868).

The active controller applies a transaction's records as they come, but they are published (to
brokers, into the image) only at its EndTransaction; an AbortTransaction reverts the controller
to its state before the Begin, and the records of a transaction still open are not published.
The audit checks the published history, on every engine alike:

- ``Transactions`` holds a transaction's records until it ends, then gives them all
  (committed), or gives every record from its Begin to its Abort, both included, as a ``NoOp``
  at the same offset and time (aborted). A transaction still open at the end is given as NoOps
  too (``finish``). Offsets stay gapless and times in place, so the log's own checks (L1) and the
  graces count the same records whatever became of them.
- ``unpublished_ranges`` names the same offset ranges from the transaction records alone, for
  engines that leave those offsets out of a column store (``spark.audit``, ``spark.replay``).

A Begin inside an open transaction is one of its records (the reducer refuses it if the
transaction commits); an End or Abort outside one passes through (the reducer refuses it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kraftlake.records.base import Record
from kraftlake.records.kraft import AbortTransaction, BeginTransaction, EndTransaction, NoOp

BEGIN, END, ABORT = "BeginTransaction", "EndTransaction", "AbortTransaction"


def _unpublished(r: Record) -> NoOp:
    return NoOp(offset=r.offset, ts_ms=r.ts_ms)


class Transactions:
    """Records in, published records out (see the module's docstring)."""

    __slots__ = ("held", "ranges", "unfinished")

    def __init__(self) -> None:
        self.held: list[Record] | None = None
        """The open transaction's records, its Begin first; None outside one."""
        self.ranges: list[tuple[int, int]] = []
        """[first, last] offsets of the aborted transactions (of records that carry offsets)."""
        self.unfinished: int | None = None
        """The Begin's offset of the transaction ``finish`` found still open."""

    def push(self, r: Record) -> Sequence[Record]:
        """The records ``r`` releases, in offset order (none while a transaction is open)."""
        held = self.held
        if held is None:
            if type(r) is BeginTransaction:
                self.held = [r]
                return ()
            return (r,)
        held.append(r)
        cls = type(r)
        if cls is EndTransaction:
            self.held = None
            return held
        if cls is AbortTransaction:
            self.held = None
            return self._drop(held)
        return ()

    def finish(self) -> list[Record]:
        """The records of a transaction still open, as NoOps (the end of what is audited)."""
        held, self.held = self.held, None
        if held is None:
            return []
        self.unfinished = held[0].offset
        return [_unpublished(r) for r in held]

    def _drop(self, held: list[Record]) -> list[Record]:
        first, last = held[0].offset, held[-1].offset
        if first is not None and last is not None:
            self.ranges.append((first, last))
        return [_unpublished(r) for r in held]


def published(records: Iterable[Record], transactions: Transactions | None = None) -> Iterable[Record]:
    """``records`` as ``Transactions`` gives them, to the end (``finish`` included)."""
    t = transactions or Transactions()
    for r in records:
        yield from t.push(r)
    yield from t.finish()


def unpublished_ranges(events: Iterable[tuple[int, str]], last: int) -> list[tuple[int, int]]:
    """The [first, last] offset ranges ``Transactions`` gives as NoOps, from the (offset, type)
    of a log's transaction records in offset order, the log ending at ``last``: the same
    ``Transactions`` fed those records alone."""
    kinds = {BEGIN: BeginTransaction, END: EndTransaction, ABORT: AbortTransaction}
    t = Transactions()
    for offset, kind in events:
        t.push(kinds[kind](offset=offset))
    t.finish()
    return t.ranges + ([] if t.unfinished is None else [(t.unfinished, last)])


__all__ = ["Transactions", "published", "unpublished_ranges"]
