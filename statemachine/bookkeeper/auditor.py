"""The auditor: lost bookies are audited once their audit falls due (``lostBookieRecoveryDelay``,
as BookKeeper's ``Auditor.submitAuditTask`` and ``submitLostBookieRecoveryDelayChangedEvent``
schedule it: the view keeps when each falls due), and an audit, whichever task runs it, is
``AuditorBookieCheckTask.auditBookies``: every bookie an ensemble names that is not available,
registered or never seen, gets every ledger naming it marked under-replicated with it missing."""

from __future__ import annotations

from kraftlake.records.bookkeeper import AuditorElected, LedgerUnderReplicated, RecoveryDelayChanged

from . import commands as c
from .view import BookiesView


def marks(view: BookiesView, bookies: list[str]) -> tuple[LedgerUnderReplicated, ...]:
    """The marks ``auditBookies`` writes for ``bookies``: each ledger naming one, with it missing."""
    return tuple(LedgerUnderReplicated(ledger_id=i, missing=(b,)) for b in bookies for i in view.unmarked(b))


def tick(
    view: BookiesView, cmd: c.AuditorTick, *, honour_delay: bool = True, registered_only: bool = False
) -> c.Decision:
    """The auditor's thread runs: when an audit fell due, the full bookie audit marks every
    unavailable bookie's ledgers (``registered_only``: the faulty auditor of ``bugs`` skips bookies
    it never saw register)."""
    if not view.replication_enabled:
        return c.fail(c.REPLICATION_DISABLED, "the audit waits for ledger replication to be enabled")
    if honour_delay and not any(due <= cmd.now_ms for due in view.audit_due.values()):
        return c.Decision()
    lost = view.unavailable_named()
    if registered_only:
        lost = [b for b in lost if b in view.bookies]
    return c.Decision(records=marks(view, lost))


def periodic(view: BookiesView, cmd: c.PeriodicCheck) -> c.Decision:
    if not view.replication_enabled:
        return c.fail(c.REPLICATION_DISABLED, "the check waits for ledger replication to be enabled")
    if view.audit_due:
        return c.fail(c.WAITING, "a delayed audit is pending: the periodic check is skipped")
    return c.Decision(records=marks(view, view.unavailable_named()))


def set_delay(view: BookiesView, cmd: c.SetRecoveryDelay) -> c.Decision:
    if cmd.delay_ms < 0:
        return c.fail(c.ILLEGAL_TRANSITION, "the delay is not negative")
    return c.Decision(records=(RecoveryDelayChanged(delay_ms=cmd.delay_ms),))


def elect(view: BookiesView, cmd: c.ElectAuditor) -> c.Decision:
    return c.Decision(records=(AuditorElected(auditor=cmd.auditor),))
