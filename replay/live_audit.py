"""The following audit: the per-record engine (``replay.audit.Audit``) fed each batch as it lands,
saying when a violation opens and when it closes.

It is the batch audit run in pieces, not a second engine: the same ``Audit`` object is fed every
record once, in offset order, so graces run in record time exactly as in the batch audit (a graced
wrong state is confirmed by the first record past its grace, whenever that record arrives). After
each batch the books are compared with what was already said:

- **open**: a wrong state newly confirmed (held past its grace, or one with no grace), or an
  instant violation (it opens and closes at one record: both events come together);
- **close**: a violation whose interval ended (the record that fixed it is its last evidence).

Each event carries the violation's fields as the batch report has them (``Violation``), the close
with its final interval. What has been said (closed, and still open) over some records is what the
batch audit over the same records reports (tests/test_live_audit.py holds the two to each other).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kraftlake.records.base import Record
from kraftlake.statemachine.kraft.view import ControllerView
from kraftlake.statemachine.s3stream.view import StreamsView

from .audit import Audit
from .books import AuditConfig, Violation


class Event(msgspec.Struct, kw_only=True):
    """A violation opening or closing, said after the record at ``at_offset`` was audited."""

    event: str
    """``open`` or ``close``."""
    at_offset: int
    violation: Violation


def _key(v: Violation) -> tuple[str, str, int]:
    return (v.invariant, v.entity, v.first_offset)


class LiveAudit:
    """Feed batches in offset order (``feed``): the events each batch caused; ``open_violations``
    now; ``said()`` everything reported so far (closed, then still open)."""

    def __init__(
        self,
        config: AuditConfig | None = None,
        view: ControllerView | None = None,
        *,
        streams: StreamsView | None = None,
    ) -> None:
        self.audit = Audit(config, view, streams=streams)
        self._closed_seen = 0
        self._open: dict[tuple[str, str, int], Violation] = {}
        """Violations said to be open and not yet closed, by (invariant, entity, first offset)."""
        self.closed: list[Violation] = []

    @property
    def last_offset(self) -> int:
        """The offset of the last record audited (-1 before any)."""
        return self.audit.view.offset

    def feed(self, records: Iterable[Record]) -> list[Event]:
        self.audit.feed(records)
        return self._events(self.audit.view.offset)

    def _events(self, at: int) -> list[Event]:
        books = self.audit.books
        events: list[Event] = []
        fresh = books.closed[self._closed_seen :]
        self._closed_seen = len(books.closed)
        for (inv, entity), w in books._wrong.items():  # noqa: SLF001 - the books' open states, read only
            if w.confirmed:
                v = w.interval(inv, entity, None, None)
                if _key(v) not in self._open:
                    self._open[_key(v)] = v
                    events.append(Event(event="open", at_offset=at, violation=v))
        for v in fresh:
            if self._open.pop(_key(v), None) is None:
                events.append(Event(event="open", at_offset=at, violation=_opened(v)))
            events.append(Event(event="close", at_offset=at, violation=v))
            self.closed.append(v)
        return events

    @property
    def open_violations(self) -> list[Violation]:
        return sorted(self._open.values(), key=lambda v: (v.first_offset, v.invariant, v.entity))

    def said(self) -> list[Violation]:
        """Every violation reported: the closed ones with their intervals, the open ones still
        open (``last_offset`` None), in the batch report's order."""
        found = self.closed + list(self._open.values())
        found.sort(key=lambda v: (v.first_offset, v.invariant, v.entity))
        return found


def _opened(v: Violation) -> Violation:
    """A violation as it was when it opened: no end yet (an instant opens and ends at once)."""
    if v.last_offset == v.first_offset and v.evidence == [v.first_offset]:
        return v
    return msgspec.structs.replace(v, last_offset=None, evidence=v.evidence[:-1] or v.evidence)
