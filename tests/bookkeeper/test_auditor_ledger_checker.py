"""BookKeeper's ``AuditorLedgerCheckerTest``, case by case. BookKeeper's tests run bookies and an
auditor and wait on ZooKeeper watches; here the real view, decider and reducer run on a simulated
clock (``helpers.bookkeeper_cluster``): a latch that "must not complete within 2 s" is no mark
after 2 s of ticks."""

from __future__ import annotations

from kraftlake.records.bookkeeper import Availability
from kraftlake.statemachine.bookkeeper import commands as c

from helpers.bookkeeper_cluster import BkCluster


def test_testSimpleLedger():
    k = BkCluster()
    lid = k.ledger()
    lost = k.ensemble(lid)[-1]
    k.stop(lost)
    k.audit()
    assert k.marked() == {lid: (lost,)}


def test_testRestartBookie():
    """Delay 0: the ledgers are marked when the bookie goes, and stay marked when it comes back."""
    k = BkCluster()
    l1, l2 = k.ledger(("b0:3181", "b1:3181", "b2:3181")), k.ledger(("b1:3181", "b2:3181", "b3:3181"))
    k.stop("b2:3181")
    k.audit()
    k.set("b2:3181", Availability.WRITABLE)
    k.audit(1000)
    assert k.marked() == {l1: ("b2:3181",), l2: ("b2:3181",)}


def test_testMultipleBookieFailures():
    k = BkCluster(6)
    ledgers = [k.ledger(("b0:3181", "b1:3181", "b2:3181")) for _ in range(3)]
    k.stop("b1:3181")
    k.stop("b2:3181")
    k.audit()
    assert k.marked() == dict.fromkeys(ledgers, ("b1:3181", "b2:3181"))


def test_testToggleLedgerReplication():
    k = BkCluster()
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    assert k.run(c.SetReplicationEnabled(enabled=False)).error_code == c.OK
    k.stop("b2:3181")
    k.stop("b1:3181")
    assert k.audit(1000).error_code == c.REPLICATION_DISABLED and k.marked() == {}
    k.run(c.SetReplicationEnabled(enabled=True))
    k.audit()
    assert k.marked() == {lid: ("b1:3181", "b2:3181")}


def test_testDuplicateEnDisableAutoRecovery():
    """BookKeeper fails the second disable (NodeExists) and the second enable (NoNode)."""
    k = BkCluster()
    assert k.run(c.SetReplicationEnabled(enabled=False)).error_code == c.OK
    assert k.run(c.SetReplicationEnabled(enabled=False)).error_code == c.NOTHING_TO_DO
    assert k.run(c.SetReplicationEnabled(enabled=True)).error_code == c.OK
    again = k.run(c.SetReplicationEnabled(enabled=True))
    assert again.error_code == c.NOTHING_TO_DO and again.records == ()


def test_testReadOnlyBookieExclusionFromURLedgersCheck():
    k = BkCluster()
    k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.set("b2:3181", Availability.READ_ONLY)
    k.audit(5000)
    k.run(c.PeriodicCheck(now_ms=k.now))
    assert k.marked() == {}


def test_testReadOnlyBookieShutdown():
    k = BkCluster()
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.set("b2:3181", Availability.READ_ONLY)
    k.audit()
    assert k.marked() == {}
    k.stop("b2:3181")
    k.audit()
    assert k.marked() == {lid: ("b2:3181",)}


def test_testInnerDelayedAuditOfLostBookies():
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b1:3181")
    k.audit(4000)
    assert k.marked() == {}
    k.audit(2000)
    assert k.marked() == {lid: ("b1:3181",)}


def test_testDelayedAuditOfLostBookies():
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    k.audit(4000)
    assert k.marked() == {} and k.view.audit_due == {"b0:3181": k.now + 1000}
    k.audit(1000)
    assert k.marked() == {lid: ("b0:3181",)} and k.view.audit_due == {}


def test_testDelayedAuditWithPeriodicBookieCheck():
    """The periodic bookie check is skipped while a delayed audit is pending (issue #3817)."""
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    k.now += 2000
    assert k.run(c.PeriodicCheck(now_ms=k.now)).error_code == c.WAITING and k.marked() == {}
    k.audit(3000)
    assert k.marked() == {lid: ("b0:3181",)}


def test_testRescheduleOfDelayedAuditOfLostBookiesToStartImmediately():
    k = BkCluster(delay_ms=50_000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b1:3181")
    k.audit(1000)
    assert k.marked() == {}
    k.run(c.SetRecoveryDelay(delay_ms=0))
    k.audit()
    assert k.marked() == {lid: ("b1:3181",)}


def test_testRescheduleOfDelayedAuditOfLostBookiesToStartLater():
    k = BkCluster(delay_ms=3000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b1:3181")
    k.now += 1000
    k.run(c.SetRecoveryDelay(delay_ms=4000))  # the wait restarts: 4 s from now
    k.audit(3500)
    assert k.marked() == {}
    k.audit(600)
    assert k.marked() == {lid: ("b1:3181",)}


def test_testTriggerAuditorWithNoPendingAuditTask():
    """Ledgers whose ensembles name bookies that never registered: rewriting the delay to its value
    (``triggerAudit``) audits at once and marks them all (``AuditorBookieCheckTask`` counts every
    unavailable bookie an ensemble names, registered or not)."""
    k = BkCluster(delay_ms=5000)
    ensemble = ("99.99.99.99:9999", "11.11.11.11:1111", "88.88.88.88:8888")
    ledgers = [k.ledger(ensemble, entries=0) for _ in range(5)]
    assert k.view.audit_due == {}
    k.run(c.SetRecoveryDelay(delay_ms=5000))
    k.audit()
    assert k.marked() == dict.fromkeys(ledgers, tuple(sorted(ensemble)))
    assert k.view.audit_due == {}


def test_testTriggerAuditorWithPendingAuditTask():
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b2:3181")
    k.audit(2000)
    assert k.marked() == {} and k.view.audit_due  # the delayed audit is pending
    k.run(c.SetRecoveryDelay(delay_ms=5000))
    k.audit()
    assert k.marked() == {lid: ("b2:3181",)} and k.view.audit_due == {}
    assert k.view.recovery_delay_ms == 5000


def test_testTriggerAuditorBySettingDelayToZeroWithPendingAuditTask():
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b2:3181")
    k.audit(2000)
    assert k.marked() == {}
    k.run(c.SetRecoveryDelay(delay_ms=0))
    k.audit()
    assert k.marked() == {lid: ("b2:3181",)} and k.view.audit_due == {} and k.view.recovery_delay_ms == 0


def test_testDelayedAuditWithMultipleBookieFailures():
    """A second bookie lost while the first one's audit waits: both are audited at once."""
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b1:3181")
    k.audit(2000)
    assert k.marked() == {}
    k.stop("b2:3181")
    k.audit()
    assert k.marked() == {lid: ("b1:3181", "b2:3181")}


def test_testDelayedAuditWithRollingUpgrade():
    """A bookie restarted within the delay is not marked; the audit that falls due marks only the
    bookie still down (the audit reads the metadata, not the set of bookies it waited for)."""
    k = BkCluster(delay_ms=5000)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b1:3181")
    k.audit(2000)
    k.set("b1:3181", Availability.WRITABLE)
    k.stop("b2:3181")
    k.audit(2000)
    assert k.marked() == {}
    k.audit(3500)
    assert k.marked() == {lid: ("b2:3181",)}


def test_a_new_auditor_audits_at_once_every_unavailable_bookie_named():
    """kraftlake's own: the first periodic bookie check of an elected auditor runs at once
    (``Auditor.scheduleBookieCheckTask``, initial delay 0)."""
    k = BkCluster(delay_ms=5000, auditor=False)
    lid = k.ledger(("gone:3181", "b1:3181", "b2:3181"))
    k.run(c.ElectAuditor(auditor="a"))
    assert k.view.audit_due == {"gone:3181": k.now}
    k.audit()
    assert k.marked() == {lid: ("gone:3181",)}
