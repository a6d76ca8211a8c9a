"""BookKeeper's own tests as scenarios through kraftlake's deciders and reducer: auditor delays,
marks, locks, repairs, open-ledger fencing, loss, drains. The test names number them:

- s1: AuditorLedgerCheckerTest.testSimpleLedger and testMultipleBookieFailures;
- s2: AuditorLedgerCheckerTest.testReadOnlyBookieExclusionFromURLedgersCheck and
  testReadOnlyBookieShutdown;
- s3: AuditorLedgerCheckerTest's lostBookieRecoveryDelay tests (testDelayedAuditOfLostBookies,
  testRescheduleOfDelayedAuditOfLostBookiesToStartImmediately and ...ToStartLater,
  testTriggerAuditorWithPendingAuditTask, testDelayedAuditWithMultipleBookieFailures,
  testDelayedAuditWithRollingUpgrade);
- s4: TestLedgerUnderreplicationManager.test2reportSame and testLocking;
- s5: TestReplicationWorker.testRWShouldReplicateFragmentsToTargetBookie,
  testRWShouldRetryUntilThereAreEnoughBksAvailableForReplication and
  testRWShouldReplicateTheLedgersAfterTimeoutIfLastFragmentIsUR;
- s6: TestLedgerChecker.testShouldNotGetTheFragmentIfThereIsNoMissedEntry;
- s7: the write sets of RoundRobinDistributionSchedule, on a ledger shaped as the first of
  AuditorReplicasCheckTest.testReplicasCheckForLedgersFoundHavingLessThanAQReplicasOfAnEntry
  (E=4, W=3, A=2, entries 0-3);
- s8, s9: kraftlake's own bookie lifecycle (BookKeeper has no Draining, Drained or DrainingFailed
  state): a drain ends where BookieDecommissionTest's decommission does, with no ensemble naming
  the bookie and no under-replication mark listing it.
"""

from __future__ import annotations

import msgspec
import pytest

from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieInfo,
    BookieRegistered,
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
from kraftlake.statemachine.bookkeeper import commands as c
from kraftlake.statemachine.bookkeeper.decider import decide
from kraftlake.statemachine.bookkeeper.reducer import apply
from kraftlake.statemachine.bookkeeper.view import BookiesView

T0 = 1_000_000


class Cluster:
    def __init__(self, n: int = 3, delay_ms: int = 0) -> None:
        self.view = BookiesView()
        self.now = T0
        for i in range(n):
            self.emit(
                [
                    BookieRegistered(bookie_id=f"b{i}", rack=f"r{i % 3}"),
                    BookieInfo(bookie_id=f"b{i}", free_bytes=1000, total_bytes=2000),
                ]
            )
        if delay_ms:
            self.ok(c.SetRecoveryDelay(delay_ms=delay_ms))

    def emit(self, records) -> None:
        for r in records:
            apply(self.view, msgspec.structs.replace(r, offset=self.view.offset + 1, ts_ms=self.now))

    def do(self, cmd) -> c.Decision:
        d = decide(self.view, cmd)
        self.emit(d.records)
        return d

    def ok(self, cmd) -> c.Decision:
        d = self.do(cmd)
        assert d.error_code == c.OK, d.reply
        return d

    def at(self, ms: int) -> None:
        self.now = T0 + ms

    def kill(self, b: str) -> None:
        self.emit([BookieAvailability(bookie_id=b, availability=Availability.LOST)])

    def revive(self, b: str) -> None:
        self.emit([BookieAvailability(bookie_id=b, availability=Availability.WRITABLE)])

    def ledger(self, e=3, w=2, a=2, entries=100, close=True) -> int:
        lid = self.ok(c.CreateLedger(ensemble_size=e, write_quorum=w, ack_quorum=a)).reply.ledger_id
        if entries:
            self.ok(c.WriteEntries(ledger_id=lid, count=entries))
        if close:
            self.ok(c.CloseLedger(ledger_id=lid))
        return lid

    def tick(self) -> c.Decision:
        return self.do(c.AuditorTick(now_ms=self.now))

    def marked(self, lid: int) -> tuple[str, ...] | None:
        m = self.view.under_replicated.get(lid)
        return None if m is None else m.missing


def test_s1_lost_bookie_marks_its_ledgers_and_a_second_loss_marks_again():
    k = Cluster(3)
    lid = k.ledger()
    b = k.view.ledgers[lid].ensembles[0][-1]
    k.kill(b)
    k.tick()
    assert k.marked(lid) == (b,)
    k.emit([BookieRegistered(bookie_id="b3", rack="r0"), BookieInfo(bookie_id="b3", free_bytes=1000, total_bytes=2000)])
    d = k.ok(c.Replicate(worker="w1", now_ms=k.now))
    assert [type(r) for r in d.records] == [
        LedgerReplicationLock,
        LedgerEnsembleChange,
        LedgerReplicated,
        type(d.records[-1]),
    ]
    assert k.marked(lid) is None and b not in k.view.ledgers[lid].ensembles[0]
    other = k.view.ledgers[lid].ensembles[0][0]
    k.kill(other)
    k.tick()
    assert k.marked(lid) == (other,)


def test_s2_read_only_is_not_lost_until_it_shuts_down():
    k = Cluster(3)
    lid = k.ledger()
    b = k.view.ledgers[lid].ensembles[0][0]
    k.emit([BookieAvailability(bookie_id=b, availability=Availability.READ_ONLY)])
    k.tick()
    assert k.marked(lid) is None
    k.kill(b)
    k.tick()
    assert k.marked(lid) == (b,)


@pytest.mark.parametrize(
    ("name", "steps", "expect"),
    [
        ("delayed", [("kill", "A", 0), ("tick", None, 4000), ("check", None, None), ("tick", None, 6000)], "A"),
        ("to-zero", [("kill", "A", 0), ("delay", 0, 4000), ("tick", None, 4000)], "A"),
        (
            "later",
            [
                ("kill", "A", 0),
                ("delay", 4000, 2000),
                ("tick", None, 4000),
                ("check", None, None),
                ("tick", None, 6001),
            ],
            "A",
        ),
        ("same-value", [("kill", "A", 0), ("delay", 5000, 2000), ("tick", None, 2000)], "A"),
        ("second-loss", [("kill", "A", 0), ("kill", "B", 3000), ("tick", None, 3000)], "AB"),
        (
            "rolling-upgrade",
            [
                ("kill", "A", 0),
                ("revive", "A", 2000),
                ("kill", "B", 2000),
                ("tick", None, 6000),
                ("check", None, None),
                ("tick", None, 7001),
            ],
            "B",
        ),
    ],
)
def test_s3_lost_bookie_recovery_delay(name, steps, expect):
    k = Cluster(4, delay_ms=5000)
    lid = k.ledger(e=4, w=4, a=2)
    names = dict(zip("AB", k.view.ledgers[lid].ensembles[0]))
    for op, arg, at in steps:
        if op == "check":
            assert k.marked(lid) is None, f"{name}: marked too early"
            continue
        k.at(at)
        if op == "kill":
            k.kill(names[arg])
        elif op == "revive":
            k.revive(names[arg])
        elif op == "delay":
            k.ok(c.SetRecoveryDelay(delay_ms=arg))
        else:
            k.tick()
    assert k.marked(lid) == tuple(sorted(names[x] for x in expect))


def test_s4_marks_are_sets_and_locks_are_held_by_one_worker():
    k = Cluster(4)
    lid = k.ledger()
    a, b = k.view.ledgers[lid].ensembles[0][:2]
    k.emit([LedgerUnderReplicated(ledger_id=lid, missing=(a,)), LedgerUnderReplicated(ledger_id=lid, missing=(a,))])
    assert k.marked(lid) == (a,) and k.view.under_replicated[lid].version == 0
    k.emit([LedgerUnderReplicated(ledger_id=lid, missing=(b,))])
    assert k.marked(lid) == tuple(sorted((a, b))) and k.view.under_replicated[lid].version == 1
    k.emit([LedgerReplicationLock(ledger_id=lid, worker="w1"), LedgerReplicationLock(ledger_id=lid, worker="w2")])
    assert k.view.locks[lid] == "w1"
    assert k.do(c.Replicate(worker="w2", now_ms=k.now)).error_code == c.NOTHING_TO_DO


def test_s5_repair_keeps_positions_and_excludes_the_ensemble():
    k = Cluster(5)
    lid = k.ledger(e=3, w=3, a=2, entries=10, close=False)
    first = k.view.ledgers[lid].ensembles[0]
    k.kill(first[0])
    k.ok(c.WriteEntries(ledger_id=lid, count=10))  # the writer replaces it: new ensemble at 10
    assert sorted(k.view.ledgers[lid].ensembles) == [0, 10]
    k.ok(c.CloseLedger(ledger_id=lid))
    k.tick()
    assert k.marked(lid) == (first[0],)
    k.ok(c.Replicate(worker="w1", now_ms=k.now))
    ens = k.view.ledgers[lid].ensembles[0]
    assert ens[1:] == first[1:] and ens[0] not in first and k.marked(lid) is None
    assert k.view.lost_entries(k.view.ledgers[lid]) == []


def test_s5_no_copy_to_read_stays_under_replicated_until_the_bookie_returns():
    k = Cluster(3)
    lid = k.ledger(e=1, w=1, a=1, entries=5)
    (only,) = k.view.ledgers[lid].ensembles[0]
    k.kill(only)
    k.tick()
    d = k.do(c.Replicate(worker="w1", now_ms=k.now))
    assert d.error_code == c.REPAIR_FAILED and "no replica" in d.reply.message and k.marked(lid) == (only,)
    assert k.view.lost_entries(k.view.ledgers[lid]) == [(0, 4)]
    # The worker keeps the ledger for the backoff (ReplicationWorker.deferLedgerLockReleaseOfFailedLedger:
    # lockReleaseOfFailedLedgerGracePeriod, 300 s, / 2^5 after a first failure).
    assert k.view.locks[lid] == "w1" and k.view.held_until[lid] == k.now + 9375
    k.revive(only)
    assert k.do(c.Replicate(worker="w2", now_ms=k.now)).error_code == c.NOTHING_TO_DO
    k.at(9375)
    d = k.ok(c.Replicate(worker="w1", now_ms=k.now))
    assert k.marked(lid) is None and k.view.lost_entries(k.view.ledgers[lid]) == [] and lid not in k.view.locks


def test_s5_open_ledger_is_fenced_after_the_grace_but_not_before():
    k = Cluster(4)
    lid = k.ledger(e=3, w=3, a=2, entries=10, close=False)
    k.kill(k.view.ledgers[lid].ensembles[0][0])
    k.tick()
    assert k.do(c.Replicate(worker="w1", now_ms=k.now)).error_code == c.WAITING
    assert k.view.locks[lid] == "w1" and k.view.ledgers[lid].state == "OPEN"
    k.at(31_000)
    k.ok(c.Replicate(worker="w1", now_ms=k.now))
    ledger = k.view.ledgers[lid]
    assert ledger.state == "CLOSED" and ledger.fenced and ledger.last_entry_id == 9 and k.marked(lid) is None
    assert k.do(c.WriteEntries(ledger_id=lid)).error_code == c.LEDGER_FENCED


def test_s6_a_dead_bookie_holding_nothing_still_needs_a_metadata_swap():
    k = Cluster(4)
    lid = k.ledger(e=3, w=2, a=2, entries=1)  # entry 0 on positions 0, 1
    dead = k.view.ledgers[lid].ensembles[0][2]
    k.kill(dead)
    k.tick()
    assert k.marked(lid) == (dead,)
    k.ok(c.Replicate(worker="w1", now_ms=k.now))
    assert dead not in k.view.ledgers[lid].ensembles[0]


def test_s7_copies_of_entries_follow_round_robin_striping():
    k = Cluster(4)
    lid = k.ledger(e=4, w=3, a=2, entries=4)
    ledger = k.view.ledgers[lid]
    ens = ledger.ensembles[0]
    assert [ledger.write_set(e) for e in range(4)] == [
        (ens[0], ens[1], ens[2]),
        (ens[1], ens[2], ens[3]),
        (ens[2], ens[3], ens[0]),
        (ens[3], ens[0], ens[1]),
    ]
    k.kill(ens[0]), k.kill(ens[2])
    assert [k.view.copies(ledger, e) for e in range(4)] == [1, 2, 1, 2]
    k.kill(ens[1])
    assert k.view.lost_entries(ledger) == [(0, 0)]


def test_s8_drain_moves_data_off_and_ends_drained_or_failed():
    k = Cluster(5)
    ledgers = [k.ledger(e=3, w=2, a=2, entries=12) for _ in range(6)]
    victim = k.view.ledgers[ledgers[0]].ensembles[0][0]
    mine = sorted(k.view.refs[victim])
    k.ok(c.ChangeBookieState(bookie_id=victim, state=BookieState.DRAINING))
    assert k.view.bookies[victim].availability == "READ_ONLY"
    assert all(k.marked(i) == (victim,) for i in mine)
    assert k.ok(c.CheckDrains()).records == ()  # still referenced
    while k.do(c.Replicate(worker="w1", now_ms=k.now)).error_code == c.OK:
        pass
    assert victim not in k.view.refs and k.view.under_replicated == {}
    k.ok(c.CheckDrains())
    assert k.view.bookies[victim].state == "DRAINED"
    d = k.do(c.ChangeBookieState(bookie_id=victim, state=BookieState.ACTIVE))
    assert d.error_code == c.ILLEGAL_TRANSITION and d.reply.allowed == ()


def test_s8_drain_fails_when_a_ledger_cannot_be_repaired_and_the_operator_finishes_it():
    k = Cluster(4)
    lid = k.ledger(e=2, w=2, a=1, entries=4)
    a, b = k.view.ledgers[lid].ensembles[0]
    k.kill(b)  # the other copy is gone: draining a cannot copy anything from b, nor... a itself serves reads
    k.ok(c.ChangeBookieState(bookie_id=a, state=BookieState.DRAINING))
    k.kill(a)  # and now the draining bookie dies too: no copy left
    d = k.do(c.Replicate(worker="w1", now_ms=k.now))
    assert d.error_code == c.REPAIR_FAILED
    assert k.view.bookies[a].state == "DRAINING_FAILED" and f"ledger {lid}" in k.view.bookies[a].state_reason
    d = k.do(c.ChangeBookieState(bookie_id=a, state=BookieState.DRAINED))
    assert d.error_code == c.ILLEGAL_TRANSITION and "DRAINING" in d.reply.allowed
    k.ok(c.DeleteLedger(ledger_id=lid))  # the operator gives the ledger up
    k.ok(c.ChangeBookieState(bookie_id=a, state=BookieState.DRAINED))
    assert k.view.bookies[a].state == "DRAINED"


def test_backoff_after_failed_repairs():
    assert [c.lock_hold_ms(n) for n in range(1, 8)] == [9375, 18750, 37500, 75000, 150000, 300000, 300000]
    assert [c.lock_hold_ms(n, 64) for n in range(1, 10)] == [2, 4, 8, 16, 32, 64, 64, 64, 64]


def test_periodic_check_is_skipped_while_a_delayed_audit_waits():
    k = Cluster(4, delay_ms=5000)
    lid = k.ledger(e=3, w=3, a=2, entries=3)
    b = k.view.ledgers[lid].ensembles[0][0]
    k.kill(b)
    assert k.do(c.PeriodicCheck(now_ms=k.now)).error_code == c.WAITING and k.marked(lid) is None
    k.at(6000)
    k.tick()
    k.emit([LedgerReplicated(ledger_id=lid)])  # a mark cleared by hand: the periodic check finds it again
    assert k.ok(c.PeriodicCheck(now_ms=k.now)).records and k.marked(lid) == (b,)


def test_s9_illegal_transitions_name_the_allowed_ones():
    k = Cluster(3)
    d = k.do(c.ChangeBookieState(bookie_id="b0", state=BookieState.DRAINED))
    assert d.error_code == c.ILLEGAL_TRANSITION and set(d.reply.allowed) == {"READ_ONLY", "DRAINING"}
    assert k.do(c.ChangeBookieState(bookie_id="nope", state=BookieState.DRAINING)).error_code == c.NO_SUCH_BOOKIE


def test_image_round_trip_and_hash():
    k = Cluster(5)
    for _ in range(3):
        k.ledger()
    k.kill("b1")
    k.tick()
    again = BookiesView.from_image(msgspec.json.decode(msgspec.json.encode(k.view.image()), type=type(k.view.image())))
    assert again.state_hash() == k.view.state_hash() and again.refs == k.view.refs


def test_rack_rule_neighbours_in_the_ring_sit_in_different_racks():
    k = Cluster(6)  # racks r0, r1, r2, r0, r1, r2
    for _ in range(40):
        lid = k.ledger(e=3, w=2, a=2, entries=0, close=False)
        ens = k.view.ledgers[lid].ensembles[0]
        racks = [k.view.bookies[b].rack for b in ens]
        assert all(racks[i] != racks[(i + 1) % 3] for i in range(3)), racks
    # One rack left: the rule is soft, the ensemble is still made.
    for b in ("b1", "b2", "b4", "b5"):
        k.kill(b)
    lid = k.ledger(e=2, w=2, a=1, entries=0, close=False)
    assert set(k.view.ledgers[lid].ensembles[0]) == {"b0", "b3"}


@pytest.mark.parametrize(
    "bad, rule",
    [
        (
            LedgerCreated(ledger_id=0, ensemble_size=1, write_quorum=1, ack_quorum=1, ensemble=("b1",)),
            "R-REPLAY-LEDGER",
        ),
        (LedgerEnsembleChange(ledger_id=7, first_entry_id=0, ensemble=("b0", "b1", "b2")), "R-REPLAY-LEDGER"),
        (LedgerClosed(ledger_id=7, last_entry_id=-1), "R-REPLAY-LEDGER"),
        (LedgerDeleted(ledger_id=7), "R-REPLAY-LEDGER"),
        (BookieInfo(bookie_id="b9", free_bytes=1, total_bytes=2), "R-REPLAY-BOOKIE"),
        (BookieStateChange(bookie_id="b9", state=BookieState.DRAINING), "R-REPLAY-BOOKIE"),
        (BookieAvailability(bookie_id="b9", availability=Availability.LOST), "R-REPLAY-BOOKIE"),
    ],
)
def test_a_record_the_metadata_store_would_refuse_names_offset_and_rule(bad, rule):
    k = Cluster(3)
    k.ledger()
    before = k.view.state_hash()
    with pytest.raises(ReplayError) as info:
        k.emit([bad])
    err = info.value
    assert (err.rule, err.offset, err.record_type) == (rule, k.view.offset + 1, type(bad).__name__)
    assert k.view.state_hash() == before


def test_marks_locks_and_entries_of_a_deleted_ledger_change_nothing():
    # They are not ledger metadata: a worker that finds its ledger deleted marks it replicated.
    k = Cluster(3)
    lid = k.ledger()
    k.ok(c.DeleteLedger(ledger_id=lid))
    k.emit(
        [
            LedgerUnderReplicated(ledger_id=lid, missing=("b0",)),
            LedgerReplicationLock(ledger_id=lid, worker="w1"),
            LedgerEntriesWritten(ledger_id=lid, last_add_confirmed=200),
            LedgerReplicated(ledger_id=lid, worker="w1"),
            LedgerReplicationUnlock(ledger_id=lid, worker="w1"),
        ]
    )
    assert (k.view.ledgers, k.view.under_replicated, k.view.locks, k.view.refs) == ({}, {}, {}, {})
