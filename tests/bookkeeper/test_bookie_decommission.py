"""BookKeeper's ``BookieDecommissionTest``, case by case, on kraftlake's real view, decider and
reducer (``helpers.bookkeeper_cluster``): the classic decommission (``DecommissionBookie``), kept
apart from BP-4's drain of a live bookie. BookKeeper's test waits in ``decommissionBookie`` while
the auditor and workers run; here the auditor ticks, the workers replicate and
``CheckDecommissions`` finishes the decommission."""

from __future__ import annotations

from kraftlake.records.bookkeeper import Availability, BookieState
from kraftlake.statemachine.bookkeeper import commands as c

from helpers.bookkeeper_cluster import BkCluster


def _settle(k: BkCluster, rounds: int = 20) -> None:
    for _ in range(rounds):
        k.audit(1000)
        for w in ("rw1", "rw2"):
            k.run(c.Replicate(worker=w, now_ms=k.now, grace_ms=5000))
        k.run(c.CheckDecommissions())


def test_testDecommissionBookie():
    k = BkCluster(6, delay_ms=60_000)
    ledgers = [k.ledger() for _ in range(5)]
    victim = max(k.view.refs, key=lambda b: len(k.view.refs[b]))
    refused = k.run(c.DecommissionBookie(bookie_id=victim))
    assert refused.error_code == c.ILLEGAL_OP and refused.records == ()
    k.set(victim, Availability.READ_ONLY)
    assert k.run(c.DecommissionBookie(bookie_id=victim)).error_code == c.ILLEGAL_OP
    k.stop(victim)
    started = k.run(c.DecommissionBookie(bookie_id=victim))
    assert started.error_code == c.OK and k.view.decommissioning == {victim: True}
    k.audit()  # the triggered audit runs at once, the 60 s delay notwithstanding
    assert all(victim in m for m in k.marked().values()) and k.marked()
    _settle(k)
    assert victim not in k.view.bookies and victim not in k.view.refs and k.marked() == {}
    assert all(victim not in b for lid in ledgers for b in k.view.ledgers[lid].ensembles.values())


def test_testDecommissionForLedgersWithMultipleSegmentsAndNotWriteClosed():
    k = BkCluster(7)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"), close=False)
    k.stop("b1:3181")
    k.run(c.WriteEntries(ledger_id=lid, count=3))  # a second segment, the ledger still open
    k.set("b1:3181", Availability.WRITABLE)
    k.stop("b0:3181")
    assert len(k.view.ledgers[lid].ensembles) == 2
    assert k.run(c.DecommissionBookie(bookie_id="b0:3181")).error_code == c.OK
    _settle(k)
    assert "b0:3181" not in k.view.bookies and "b0:3181" not in k.view.refs


def test_testDecommissionForEmptyLedgers():
    k = BkCluster(5)
    ledgers = [k.ledger(("b0:3181", "b1:3181", "b2:3181"), entries=0, close=close) for close in (True, False)]
    k.stop("b0:3181")
    assert k.run(c.DecommissionBookie(bookie_id="b0:3181")).error_code == c.OK
    _settle(k)
    assert "b0:3181" not in k.view.bookies and all("b0:3181" not in k.ensemble(lid) for lid in ledgers)


def test_decommission_needs_an_auditor_and_replication_and_keeps_the_cookie_when_asked():
    """``triggerAudit`` refuses without an auditor or with replication disabled (kraftlake's own)."""
    k = BkCluster(5, auditor=False)
    k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    assert k.run(c.DecommissionBookie(bookie_id="b0:3181")).error_code == c.NO_AUDITOR
    k.run(c.ElectAuditor(auditor="a"))
    k.run(c.SetReplicationEnabled(enabled=False))
    assert k.run(c.DecommissionBookie(bookie_id="b0:3181")).error_code == c.REPLICATION_DISABLED
    k.run(c.SetReplicationEnabled(enabled=True))
    assert k.run(c.DecommissionBookie(bookie_id="b0:3181", delete_cookie=False)).error_code == c.OK
    _settle(k)
    assert k.view.bookies["b0:3181"].state == BookieState.ACTIVE.value and "b0:3181" not in k.view.decommissioning
