"""The classic decommission of a stopped bookie, as BookKeeper has it
(``BookKeeperAdmin.decommissionBookie``), kept apart from BP-4's drain of a live bookie
(``lifecycle``): refused with BookKeeper's ``IllegalOpException`` while the bookie is writable or
read-only; else it triggers an audit (``triggerAudit``: the recovery delay rewritten to its value,
refused when replication is disabled or no auditor is elected) and waits until no ensemble names
the bookie and no mark lists it, then deletes its cookie (the CLI always, the HTTP call when asked).
Also the switch that enables and disables ledger replication."""

from __future__ import annotations

from kraftlake.records.bookkeeper import (
    Availability,
    BookieDecommissioned,
    BookieDecommissionStarted,
    LedgerReplicationToggled,
    RecoveryDelayChanged,
)

from . import commands as c
from .lifecycle import clean
from .view import BookiesView


def trigger_audit(view: BookiesView) -> c.Decision:
    """``BookKeeperAdmin.triggerAudit``: rewrite lostBookieRecoveryDelay to its value."""
    if not view.replication_enabled:
        return c.fail(c.REPLICATION_DISABLED, "Autorecovery is disabled. So giving up!")
    if view.auditor is None:
        return c.fail(c.NO_AUDITOR, "No auditor elected, though Autorecovery is enabled. So giving up.")
    return c.Decision(records=(RecoveryDelayChanged(delay_ms=view.recovery_delay_ms),))


def decommission(view: BookiesView, cmd: c.DecommissionBookie, *, refuse_available: bool = True) -> c.Decision:
    """``refuse_available`` False: the faulty admin of ``bugs`` decommissions a running bookie."""
    b = view.bookies.get(cmd.bookie_id)
    if b is None:
        return c.fail(c.NO_SUCH_BOOKIE, f"no bookie {cmd.bookie_id}")
    if refuse_available and b.availability != Availability.LOST.value:
        return c.fail(c.ILLEGAL_OP, f"bookie {cmd.bookie_id} is not shut down yet ({b.availability.lower()})")
    if cmd.bookie_id in view.decommissioning:
        return c.fail(c.NOTHING_TO_DO, f"bookie {cmd.bookie_id} is being decommissioned")
    audit = trigger_audit(view)
    if audit.error_code != c.OK:
        return audit
    started = BookieDecommissionStarted(bookie_id=cmd.bookie_id, delete_cookie=cmd.delete_cookie)
    return c.Decision(records=(started, *audit.records))


def check(view: BookiesView, cmd: c.CheckDecommissions) -> c.Decision:
    """Decommissions whose bookie is clean finish (``waitForLedgersToBeReplicated``, then the
    double check of the marks listing it)."""
    records = [
        BookieDecommissioned(bookie_id=b, delete_cookie=delete_cookie)
        for b, delete_cookie in sorted(view.decommissioning.items())
        if b in view.bookies and clean(view, b) is None
    ]
    return c.Decision(records=tuple(records))


def set_replication(view: BookiesView, cmd: c.SetReplicationEnabled) -> c.Decision:
    if cmd.enabled == view.replication_enabled:
        return c.fail(c.NOTHING_TO_DO, f"ledger replication is already {'enabled' if cmd.enabled else 'disabled'}")
    return c.Decision(records=(LedgerReplicationToggled(enabled=cmd.enabled),))
