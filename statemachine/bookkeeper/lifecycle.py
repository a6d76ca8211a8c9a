"""The bookie lifecycle (BP-4's proposal as kraftlake defines it; upstream has only
``BookKeeperAdmin.decommissionBookie``, whose completion test DRAINED follows): ACTIVE <->
READ_ONLY, either -> DRAINING (the bookie turns read-only and every ledger naming it is marked
with it as missing), DRAINING -> DRAINED once no ensemble names it and no mark lists it,
DRAINING -> DRAINING_FAILED when a ledger cannot be repaired (the worker says so);
DRAINING_FAILED -> DRAINED only by an operator once the bad ledgers are fixed, or back to
DRAINING to retry."""

from __future__ import annotations

from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieState,
    BookieStateChange,
    LedgerUnderReplicated,
)

from . import commands as c
from .view import BookiesView

S = BookieState
TRANSITIONS: dict[BookieState, tuple[BookieState, ...]] = {
    S.ACTIVE: (S.READ_ONLY, S.DRAINING),
    S.READ_ONLY: (S.ACTIVE, S.DRAINING),
    S.DRAINING: (S.ACTIVE,),
    S.DRAINING_FAILED: (S.DRAINING, S.DRAINED, S.ACTIVE),
    S.DRAINED: (),
}
"""What an operator may ask from each state. DRAINING -> DRAINED and -> DRAINING_FAILED are the
drain's own outcomes (``check_drains``, the worker), never asked for."""


def clean(view: BookiesView, bookie: str) -> str | None:
    """Why the bookie is not drained yet (None: no ensemble names it, no mark lists it)."""
    refs = sorted(view.refs.get(bookie, ()))
    if refs:
        return f"ledgers {refs[:10]}{' ...' if len(refs) > 10 else ''} still name it in an ensemble"
    marked = sorted(i for i, m in view.under_replicated.items() if bookie in m.missing)
    if marked:
        return f"under-replication marks of ledgers {marked[:10]} still list it"
    return None


def change_state(view: BookiesView, cmd: c.ChangeBookieState) -> c.Decision:
    b = view.bookies.get(cmd.bookie_id)
    if b is None:
        return c.fail(c.NO_SUCH_BOOKIE, f"no bookie {cmd.bookie_id}")
    current = BookieState(b.state)
    allowed = TRANSITIONS[current]
    if cmd.state not in allowed:
        return c.fail(
            c.ILLEGAL_TRANSITION,
            f"{current.value} -> {cmd.state.value} is not allowed",
            allowed=tuple(s.value for s in allowed),
        )
    if cmd.state is S.DRAINED:
        why = clean(view, cmd.bookie_id)
        if why is not None:
            return c.fail(
                c.ILLEGAL_TRANSITION,
                f"not drained: {why}",
                allowed=tuple(s.value for s in allowed if s is not S.DRAINED),
            )
    records: list = [BookieStateChange(bookie_id=cmd.bookie_id, state=cmd.state)]
    if cmd.state in (S.READ_ONLY, S.DRAINING) and b.availability == Availability.WRITABLE.value:
        records.append(BookieAvailability(bookie_id=cmd.bookie_id, availability=Availability.READ_ONLY))
    if cmd.state is S.ACTIVE and b.availability == Availability.READ_ONLY.value:
        records.append(BookieAvailability(bookie_id=cmd.bookie_id, availability=Availability.WRITABLE))
    if cmd.state is S.DRAINING:
        for ledger_id in sorted(view.refs.get(cmd.bookie_id, ())):
            mark = view.under_replicated.get(ledger_id)
            if mark is None or cmd.bookie_id not in mark.missing:
                records.append(LedgerUnderReplicated(ledger_id=ledger_id, missing=(cmd.bookie_id,)))
    return c.Decision(records=tuple(records))


def check_drains(view: BookiesView, cmd: c.CheckDrains, *, wait_for_repairs: bool = True) -> c.Decision:
    records = []
    for bookie in sorted(b.bookie_id for b in view.bookies.values() if b.state == S.DRAINING.value):
        if wait_for_repairs:
            why = clean(view, bookie)
        else:  # the faulty check: a ledger marked for repair counts as repaired
            marks = (getattr(view.under_replicated.get(i), "missing", ()) for i in view.refs.get(bookie, ()))
            why = None if all(bookie in missing for missing in marks) else "unmarked ledgers"
        if why is None:
            records.append(BookieStateChange(bookie_id=bookie, state=S.DRAINED))
    return c.Decision(records=tuple(records))
