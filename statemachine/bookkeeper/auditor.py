"""The auditor: lost bookies are audited once their audit falls due (``lostBookieRecoveryDelay``,
as BookKeeper's ``Auditor.submitAuditTask`` and ``submitLostBookieRecoveryDelayChangedEvent``
schedule it: the view keeps when each falls due), and every ledger whose ensembles name a lost
bookie gets an under-replication mark listing it (``AuditorBookieCheckTask.auditBookies``)."""

from __future__ import annotations

from kraftlake.records.bookkeeper import AuditorElected, LedgerUnderReplicated, RecoveryDelayChanged

from . import commands as c
from .view import BookiesView


def tick(view: BookiesView, cmd: c.AuditorTick, *, honour_delay: bool = True) -> c.Decision:
    records = []
    for bookie in sorted(view.audit_due if honour_delay else view.lost_at):
        if honour_delay and view.audit_due[bookie] > cmd.now_ms:
            continue
        for ledger_id in sorted(view.refs.get(bookie, ())):
            mark = view.under_replicated.get(ledger_id)
            if mark is None or bookie not in mark.missing:
                records.append(LedgerUnderReplicated(ledger_id=ledger_id, missing=(bookie,)))
    return c.Decision(records=tuple(records))


def periodic(view: BookiesView, cmd: c.PeriodicCheck) -> c.Decision:
    if view.audit_due:
        return c.fail(c.WAITING, "a delayed audit is pending: the periodic check is skipped")
    records = []
    for bookie in view.lost():
        for ledger_id in sorted(view.refs.get(bookie, ())):
            mark = view.under_replicated.get(ledger_id)
            if mark is None or bookie not in mark.missing:
                records.append(LedgerUnderReplicated(ledger_id=ledger_id, missing=(bookie,)))
    return c.Decision(records=tuple(records))


def set_delay(view: BookiesView, cmd: c.SetRecoveryDelay) -> c.Decision:
    if cmd.delay_ms < 0:
        return c.fail(c.ILLEGAL_TRANSITION, "the delay is not negative")
    return c.Decision(records=(RecoveryDelayChanged(delay_ms=cmd.delay_ms),))


def elect(view: BookiesView, cmd: c.ElectAuditor) -> c.Decision:
    return c.Decision(records=(AuditorElected(auditor=cmd.auditor),))
