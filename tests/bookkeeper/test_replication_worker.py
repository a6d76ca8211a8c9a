"""BookKeeper's ``TestReplicationWorker``, case by case, on kraftlake's real view, decider and
reducer (``helpers.bookkeeper_cluster``): where BookKeeper's test starts ReplicationWorker threads
against ZooKeeper, the workers here are ``Replicate`` commands on a simulated clock, and the marks
the Java test writes with ``markLedgerUnderreplicated`` are ``LedgerUnderReplicated`` records."""

from __future__ import annotations

from kraftlake.records.bookkeeper import LedgerDeleted, LedgerReplicationLock, LedgerUnderReplicated
from kraftlake.statemachine.bookkeeper import commands as c

from helpers.bookkeeper_cluster import BkCluster


def _mark(k: BkCluster, lid: int, *bookies: str) -> None:
    k.emit([LedgerUnderReplicated(ledger_id=lid, missing=bookies)])


def _replicate(k: BkCluster, worker: str = "rw1", **kw) -> c.Decision:
    return k.run(c.Replicate(worker=worker, now_ms=k.now, **kw))


def test_testRWShouldReplicateFragmentsToTargetBookie():
    k = BkCluster(4)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    _mark(k, lid, "b0:3181")
    assert _replicate(k).error_code == c.OK
    assert k.ensemble(lid) == ("b3:3181", "b1:3181", "b2:3181")
    assert k.marked() == {} and k.view.locks == {}


def test_testRWShouldRetryUntilThereAreEnoughBksAvailableForReplication():
    k = BkCluster(3)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    _mark(k, lid, "b0:3181")
    assert _replicate(k).error_code == c.REPAIR_FAILED and k.marked() == {lid: ("b0:3181",)}
    k.add_bookie("b9:3181", rack="r9")
    k.now += c.LOCK_RELEASE_OF_FAILED_LEDGER_MS  # the deferred release fires
    assert _replicate(k).error_code == c.OK and "b9:3181" in k.ensemble(lid)


def test_test2RWsShouldCompeteForReplicationOf2FragmentsAndCompleteReplication():
    k = BkCluster(6)
    l1, l2 = k.ledger(("b0:3181", "b1:3181", "b2:3181")), k.ledger(("b0:3181", "b3:3181", "b4:3181"))
    k.stop("b0:3181")
    _mark(k, l1, "b0:3181")
    _mark(k, l2, "b0:3181")
    done = {_replicate(k, "rw1").reply.ledger_id, _replicate(k, "rw2").reply.ledger_id}
    assert done == {l1, l2} and k.marked() == {} and "b0:3181" not in k.view.refs


def test_testRWShouldCleanTheLedgerFromUnderReplicationIfLedgerAlreadyDeleted():
    k = BkCluster(4)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    _mark(k, lid, "b0:3181")
    k.emit([LedgerDeleted(ledger_id=lid)])
    assert k.marked() == {} and _replicate(k).error_code == c.NOTHING_TO_DO


def test_testMultipleLedgerReplicationWithReplicationWorker():
    k = BkCluster(5)
    ledgers = [k.ledger(("b0:3181", "b1:3181", "b2:3181")) for _ in range(4)]
    k.stop("b0:3181")
    for lid in ledgers:
        _mark(k, lid, "b0:3181")
    outcomes = [_replicate(k).error_code for _ in ledgers]
    assert outcomes == [c.OK] * 4 and k.marked() == {}
    assert all("b0:3181" not in k.ensemble(lid) for lid in ledgers)


def test_testMultipleLedgerReplicationWithReplicationWorkerBatchRead():
    """Cannot apply: batch reads (``rereplicationEntryBatchSize``) are entry I/O, which kraftlake does not model."""


def test_testRWShouldReplicateTheLedgersAfterTimeoutIfLastFragmentIsUR():
    k = BkCluster(4)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"), close=False)
    k.stop("b0:3181")
    _mark(k, lid, "b0:3181")
    assert _replicate(k).error_code == c.WAITING and k.view.locks == {lid: "rw1"}  # the writer may fix it
    k.now += c.OPEN_LEDGER_GRACE_MS
    assert _replicate(k).error_code == c.OK
    ledger = k.view.ledgers[lid]
    assert ledger.state == "CLOSED" and ledger.fenced and "b0:3181" not in k.ensemble(lid)


def test_testBookiesNotAvailableScenarioForReplicationWorker():
    k = BkCluster(6)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    for b in ("b0:3181", "b1:3181", "b2:3181"):
        k.stop(b)
    _mark(k, lid, "b0:3181", "b1:3181", "b2:3181")
    d = _replicate(k)
    assert d.error_code == c.REPAIR_FAILED and "no replica" in d.reply.message
    assert k.marked() == {lid: ("b0:3181", "b1:3181", "b2:3181")}


def test_testDeferLedgerLockReleaseForReplicationWorker():
    """Two workers fail on a ledger whose every replica is down; each defers the lock 2, 4, 8 ...
    64 ms (lockReleaseOfFailedLedgerGracePeriod 64), the release fires on its timer, and both keep
    getting the ledger: neither starves. Which worker wins a release is a race in BookKeeper; here
    the waiting worker decides first, which with a release only in the holder's own next attempt
    (kraftlake's old worker) still left it waiting for good."""
    k = BkCluster(6)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"), entries=7)
    for b in ("b0:3181", "b1:3181", "b2:3181"):
        k.stop(b)
    _mark(k, lid, "b0:3181", "b1:3181", "b2:3181")
    holds: dict[str, list[int]] = {"rw1": [], "rw2": []}
    for _ in range(2000):
        k.now += 1
        for w in ("rw1", "rw2") if k.view.locks.get(lid) != "rw1" else ("rw2", "rw1"):
            d = _replicate(k, w, lock_release_ms=64)
            holds[w] += [
                r.held_until_ms - k.now for r in d.records if isinstance(r, LedgerReplicationLock) and r.failures
            ]
        if min(len(h) for h in holds.values()) >= 10:
            break
    expected = [min(64, 2 * 2**i) for i in range(9)]
    assert holds["rw1"][:9] == expected and holds["rw2"][:9] == expected
    assert k.marked() == {lid: ("b0:3181", "b1:3181", "b2:3181")}


def test_testRWShouldReplicateTheLedgersAfterTimeoutIfLastFragmentIsNotUR():
    """kraftlake repairs an open ledger whose last ensemble is whole at once; BookKeeper's worker
    re-checks it after the grace, with the same outcome (the bad earlier fragment is replaced)."""
    k = BkCluster(5)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"), close=False)
    k.stop("b0:3181")
    assert k.run(c.WriteEntries(ledger_id=lid, count=5)).error_code == c.OK  # the writer replaced b0
    _mark(k, lid, "b0:3181")
    assert _replicate(k).error_code == c.OK
    assert "b0:3181" not in k.view.refs and k.view.ledgers[lid].state == "OPEN"


def test_testRWZKConnectionLost():
    """Cannot apply: ZooKeeper sessions are not modelled."""


def test_testRWZKConnectionLostOnNonRecoverableZkError():
    """Cannot apply: ZooKeeper errors are not modelled."""


def test_testRWShutDownInTheCaseOfZKOperationFailures():
    """Cannot apply: ZooKeeper operation failures are not modelled."""


def test_testReplicateEmptyOpenStateLedger():
    k = BkCluster(4)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"), entries=0, close=False)
    k.stop("b0:3181")
    _mark(k, lid, "b0:3181")
    k.now += c.OPEN_LEDGER_GRACE_MS
    assert _replicate(k).error_code == c.OK
    ledger = k.view.ledgers[lid]
    assert ledger.state == "CLOSED" and ledger.last_entry_id == -1 and k.marked() == {}


def test_testRepairedNotAdheringPlacementPolicyLedgerFragmentsOnRack():
    """Cannot apply: the placement-policy check and its repair (``repairedPlacementPolicyNotAdheringBookie``) are not modelled."""


def test_testReplicationStats():
    """Cannot apply: metrics are not modelled."""


def test_a_transient_read_failure_defers_the_lock_and_another_worker_takes_it():
    """kraftlake's own, after the deferred release: the timer fires at any worker's decision."""
    k = BkCluster(5)
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b0:3181")
    _mark(k, lid, "b0:3181")
    assert _replicate(k, "rw1", read_fails=True).error_code == c.REPAIR_FAILED
    assert k.view.held_until == {lid: k.now + c.lock_hold_ms(1)}
    assert _replicate(k, "rw2").error_code == c.NOTHING_TO_DO  # still held
    k.now += c.lock_hold_ms(1)
    assert _replicate(k, "rw2").error_code == c.OK and k.marked() == {}
