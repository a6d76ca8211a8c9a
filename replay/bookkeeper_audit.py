"""The BookKeeper family's part of the audit: replays BookKeeper records into a ``BookiesView`` and
checks B1-B10 (the catalogue's, ``statemachine.invariants``) where a record can have changed them,
reporting through the audit's books (``replay.books``); the engine (``replay.audit``) feeds it
records (``replay.family.FamilyAudit``), each to the checks of its class, before and after the
reducer folds it in (``_BEFORE``, ``_AFTER``, as the reducer's ``_APPLY``), and to the waits its
fold can end (``_ENDS``: B1's audits, B9's holds). What is wrong is each rule's to say
(``statemachine.bookkeeper.invariants``); this module decides when to ask, counts the checks, names
the entities and keeps the graces."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraftlake.records.bookkeeper import (
    BOOKKEEPER_RECORDS,
    BookieAvailability,
    BookieDecommissioned,
    BookieDecommissionStarted,
    BookieState,
    BookieStateChange,
    LedgerClosed,
    LedgerCreated,
    LedgerDeleted,
    LedgerEnsembleChange,
    LedgerEntriesWritten,
    LedgerReplicated,
    LedgerReplicationLock,
    LedgerReplicationUnlock,
    LedgerUnderReplicated,
)
from kraftlake.records.errors import ReplayError
from kraftlake.statemachine.bookkeeper import invariants as binv
from kraftlake.statemachine.bookkeeper.ensembles import allowed, neighbours_of
from kraftlake.statemachine.bookkeeper.reducer import apply
from kraftlake.statemachine.bookkeeper.view import BookiesView

from .books import violation

if TYPE_CHECKING:
    from .books import Books

PLACEMENT_SIGMAS = 5.0
"""B7's tolerance: a bookie drawn more than this many standard deviations away from what the
capped weights expect (about one false alarm in 1.7 million per bookie)."""
PLACEMENT_MIN_DRAWS = 100


class BookiesAudit:
    """B1-B10 over the records of one log, fed in offset order by ``Audit``."""

    def __init__(self, books: Books) -> None:
        self.books = books
        self._state = books.state
        self._instant = books.instant
        self.view = BookiesView()
        self.placement = binv.PlacementStats()
        self._placement_judged = False

    def feed(self, r: Any, offset: int) -> None:
        """Check and fold in one BookKeeper record: what its time makes due (``_overdue``), the
        checks of its class on the state it finds (``_BEFORE``), the fold, those on the state it
        leaves (``_AFTER``), the waits its fold ended (``_ENDS``), and what its time found late
        settled on that state (``_found_late``). A record the reducer refuses is an instant
        violation, skipped."""
        ts, cls = r.ts_ms, type(r)
        late = self._overdue(offset, ts) if ts is not None else []
        before = _BEFORE.get(cls)
        if before is not None:
            before(self, r, offset)
        try:
            apply(self.view, r)
        except ReplayError as exc:
            self.books.refused(exc, offset)
            self.view.offset = offset
        else:
            after = _AFTER.get(cls)
            if after is not None:
                after(self, r, offset)
            for ended in _ENDS.get(cls, ()):
                ended(self, r, offset)
        self._found_late(late, offset, ts)

    # -- the checks on the state a record finds (``_BEFORE``) --------------------------------------

    def _repair(self, r: LedgerEnsembleChange, offset: int) -> None:
        """B2: a repair keeps the ensemble's shape; and its new bookies are placement draws (B7)."""
        self.books.checked["B2"] += 1
        bad = binv.repair_problem(self.view, r)
        if bad:
            self._instant("B2", f"ledger/{r.ledger_id}", offset, bad, count=False)
        self._placement_of_change(r, offset)

    def _created(self, r: LedgerCreated, offset: int) -> None:
        """A new ledger's ensemble is a placement draw (B7)."""
        view = self.view
        self.placement.draw(view, r.ensemble[0], view.writable(), offset)

    def _written(self, r: LedgerEntriesWritten, offset: int) -> None:
        """B5 (``invariants.written_while_open``)."""
        self.books.checked["B5"] += 1
        bad = binv.written_while_open(self.view, r)
        if bad:
            self._instant("B5", f"ledger/{r.ledger_id}", offset, bad, count=False)

    def _locked(self, r: LedgerReplicationLock, offset: int) -> None:
        """B6 (``invariants.lock_has_one_holder``)."""
        self.books.checked["B6"] += 1
        bad = binv.lock_has_one_holder(self.view, r)
        if bad:
            self._instant("B6", f"ledger/{r.ledger_id}", offset, bad, count=False)

    def _state_change(self, r: BookieStateChange, offset: int) -> None:
        """B4 (``invariants.drained_when_clean``) when a bookie becomes DRAINED."""
        if r.state is not BookieState.DRAINED:
            return
        self.books.checked["B4"] += 1
        bad = binv.drained_when_clean(self.view, r.bookie_id)
        if bad:
            self._instant("B4", f"bookie/{r.bookie_id}", offset, bad, count=False)

    # -- the checks on the state a record leaves (``_AFTER``) --------------------------------------

    def _replicated(self, r: LedgerReplicated, offset: int) -> None:
        """B3 (``invariants.replicated_to_ack_quorum``) on the state the mark's removal leaves."""
        self.books.checked["B3"] += 1
        bad = binv.replicated_to_ack_quorum(self.view, r)
        if bad:
            self._instant("B3", f"ledger/{r.ledger_id}", offset, bad, count=False)
        self._ledger_touched(r, offset)

    def _availability(self, r: BookieAvailability, offset: int) -> None:
        """B8 for every ledger naming the bookie that came or went."""
        for ledger_id in sorted(self.view.refs.get(r.bookie_id, ())):
            self._loss(ledger_id, offset, r.ts_ms)

    def _ledger_changed(self, r: Any, offset: int) -> None:
        """A record that changes a ledger's ensembles or entries: B8 for it."""
        self._loss(r.ledger_id, offset, r.ts_ms)

    def _ledger_touched(self, r: Any, offset: int) -> None:
        """Any other record of a ledger: B8 closes if the ledger is gone."""
        if r.ledger_id not in self.view.ledgers:
            self._loss(r.ledger_id, offset, r.ts_ms)

    def _loss(self, ledger_id: int, offset: int, ts: int | None) -> None:
        """B8 of a ledger there is; one gone closes what was wrong of it, no check."""
        ledger = self.view.ledgers.get(ledger_id)
        if ledger is None:
            self._state("B8", f"ledger/{ledger_id}", offset, ts, None, count=False)
        else:
            self._state("B8", f"ledger/{ledger_id}", offset, ts, binv.data_loss(self.view, ledger))

    def _early_marks(self, r: LedgerUnderReplicated, offset: int) -> None:
        """B1, one side (``invariants.marked_after_delay``), for each bookie the mark lists."""
        self.books.checked["B1"] += len(r.missing)
        for b in r.missing:
            bad = binv.marked_after_delay(self.view, r, b)
            if bad:
                self._instant("B1", f"bookie/{b}", offset, bad, count=False)

    def _decommission(self, r: BookieDecommissionStarted | BookieDecommissioned, offset: int) -> None:
        """B10 (``invariants.decommission_allowed``) at a decommission's start and end."""
        self.books.checked["B10"] += 1
        bad = binv.decommission_allowed(self.view, r)
        if bad:
            self._instant("B10", f"bookie/{r.bookie_id}", offset, bad, count=False)

    def _overdue(self, offset: int, ts: int) -> list[tuple[str, str, str]]:
        """What time makes due, on the state the record finds: B9's holds
        (``invariants.lock_released_after_hold``) and B1's audits (``invariants.marked_in_time``),
        each asked once its moment passed more than the grace ago, returned as (invariant, entity,
        message) for ``_found_late`` to settle once the record is applied. One check of each hold
        and of each audit due at each record with a time."""
        view, books, grace = self.view, self.books, self.books.config.grace_ms
        books.checked["B9"] += len(view.held_until)
        books.checked["B1"] += len(view.audit_due)
        late = []
        for lid, until in view.held_until.items():
            if ts > until + grace and not books.is_wrong("B9", f"ledger/{lid}"):
                bad = binv.lock_released_after_hold(view, lid, ts)
                if bad:
                    late.append(("B9", f"ledger/{lid}", bad))
        for b, due in sorted(view.audit_due.items()):
            if ts > due + grace and not books.is_wrong("B1", f"bookie/{b}"):
                bad = binv.marked_in_time(view, b, ts)
                if bad:
                    late.append(("B1", f"bookie/{b}", bad))
        return late

    def _found_late(self, late: list[tuple[str, str, str]], offset: int, ts: int | None) -> None:
        """What the record at ``offset`` found late (``_overdue``), settled on the state it leaves:
        a wait still running (an audit still due, a hold still kept) is wrong from this record on
        (``_ENDS`` closes it at the record that ends it); one this record ended (its own mark, the
        bookie back, the unlock) ended late, at its time: an instant at it. Settled after the
        record's checks, so that one record never both opens and closes the same wrong state (an
        interval ending before it begins)."""
        for inv, entity, bad in late:
            if self._waiting(inv, entity):
                self._state(inv, entity, offset, ts, bad, count=False)
            else:
                self._instant(inv, entity, offset, bad, count=False)

    def _waiting(self, inv: str, entity: str) -> bool:
        """Whether the wait B1 or B9 times is still running for ``entity``: the bookie's audit
        still due, the ledger's hold still kept."""
        key = entity.split("/", 1)[1]
        if inv == "B9":
            return int(key) in self.view.held_until
        return key in self.view.audit_due

    # -- the waits a record's fold can end (``_ENDS``) ----------------------------------------------

    def _audit_ended(self, r: Any, offset: int) -> None:
        """B1's late side closes for each bookie whose audit is no longer due (all its ledgers
        marked, none naming it any more, the bookie back or forgotten), no check (``_overdue``
        counts them): the record that ended the wait fixed it."""
        self._wait_ended("B1", offset, r.ts_ms)

    def _hold_ended(self, r: Any, offset: int) -> None:
        """B9 closes for each ledger whose hold is gone (its lock released, the ledger deleted),
        no check (``_overdue`` counts them): the record that released it fixed it."""
        self._wait_ended("B9", offset, r.ts_ms)

    def _wait_ended(self, inv: str, offset: int, ts: int | None) -> None:
        for e in [e for e in self.books.wrong_entities(inv) if not self._waiting(inv, e)]:
            self._state(inv, e, offset, ts, None, count=False)

    def _placement_of_change(self, r: LedgerEnsembleChange, offset: int) -> None:
        ledger = self.view.ledgers.get(r.ledger_id)
        if ledger is None:
            return
        old = ledger.ensembles.get(r.first_entry_id) or ledger.ensembles[ledger.keys()[-1]]
        if len(old) != len(r.ensemble):
            return
        work = list(old)
        taken = set(old)
        candidates = self.view.writable()
        for i, (was, now) in enumerate(zip(old, r.ensemble)):
            if was != now:
                keys = allowed(self.view, candidates, taken, neighbours_of(work, i))
                self.placement.draw(self.view, now, keys, offset)
                work[i] = now
                taken.add(now)

    def finish(self) -> None:
        """B7 over the whole history, judged once: at the first report."""
        if self._placement_judged:
            return
        self._placement_judged = True
        p = self.placement
        for bookie, message in p.outliers(PLACEMENT_SIGMAS, PLACEMENT_MIN_DRAWS):
            assert p.first is not None and p.last is not None  # outliers come of draws
            self.books.closed.append(
                violation("B7", f"placement/{bookie}", p.first, p.last, message, [p.first, p.last])
            )
        self.books.checked["B7"] += p.draws

    def state_hash(self) -> str:
        return self.view.state_hash()


Check = Callable[[BookiesAudit, Any, int], None]
"""``(audit, record, offset)``: the checks of a record of its class, before or after its fold."""

_BEFORE: dict[type, Check] = {
    LedgerUnderReplicated: BookiesAudit._early_marks,
    LedgerEnsembleChange: BookiesAudit._repair,
    LedgerCreated: BookiesAudit._created,
    LedgerEntriesWritten: BookiesAudit._written,
    LedgerReplicationLock: BookiesAudit._locked,
    BookieDecommissionStarted: BookiesAudit._decommission,
    BookieDecommissioned: BookiesAudit._decommission,
    BookieStateChange: BookiesAudit._state_change,
}
"""Record class -> the checks on the state it finds."""

_AFTER: dict[type, Check] = {
    # Every record of a ledger (a class with a ``ledger_id``), unless named below.
    **{cls: BookiesAudit._ledger_touched for cls in BOOKKEEPER_RECORDS if "ledger_id" in cls.__struct_fields__},
    LedgerCreated: BookiesAudit._ledger_changed,
    LedgerEnsembleChange: BookiesAudit._ledger_changed,
    LedgerEntriesWritten: BookiesAudit._ledger_changed,
    LedgerClosed: BookiesAudit._ledger_changed,
    LedgerReplicated: BookiesAudit._replicated,
    BookieAvailability: BookiesAudit._availability,
}
"""Record class -> the checks on the state it leaves; every other record has none."""

_ENDS: dict[type, tuple[Check, ...]] = {
    BookieAvailability: (BookiesAudit._audit_ended,),  # back, or lost with its ledgers marked
    BookieDecommissioned: (BookiesAudit._audit_ended,),  # its cookie deleted: forgotten
    LedgerUnderReplicated: (BookiesAudit._audit_ended,),
    LedgerEnsembleChange: (BookiesAudit._audit_ended,),
    LedgerDeleted: (BookiesAudit._audit_ended, BookiesAudit._hold_ended),
    LedgerReplicationUnlock: (BookiesAudit._hold_ended,),
}
"""Record class -> the waits its fold can end, closed at it: a bookie's audit (``view.audit_due``,
which the reducer's ``_back`` and ``_audited`` drop) and a failed repair's hold
(``view.held_until``, dropped by ``_unlock`` and ``_deleted``). No other record ends one
(tests/test_bookkeeper_audit.py holds the reducer to this table)."""

__all__ = ["BookiesAudit"]
