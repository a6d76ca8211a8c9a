"""The BookKeeper audit (B1-B8): every injectable bug is caught by its invariant, correct histories
pass, the fixtures give their verdicts, the CLI simulates, audits and shows bookies; hypothesis
drives the deciders with random commands and failures."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path
from statistics import NormalDist

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import iter_lines
from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieDecommissioned,
    BookieInfo,
    BookieRegistered,
    BookieState,
    BookieStateChange,
    LedgerClosed,
    LedgerCreated,
    LedgerEntriesWritten,
    LedgerReplicationLock,
    LedgerReplicationUnlock,
    LedgerUnderReplicated,
)
from kraftlake.records.errors import ReplayError
from kraftlake.replay.audit import Audit
from kraftlake.replay.bookkeeper_audit import _ENDS, BookiesAudit
from kraftlake.replay.books import AuditConfig
from kraftlake.statemachine.bookkeeper import commands as c
from kraftlake.statemachine.bookkeeper import replay
from kraftlake.statemachine.bookkeeper.bugs import BUGS, CAUGHT_BY
from kraftlake.statemachine.bookkeeper.decider import decide
from kraftlake.statemachine.bookkeeper.invariants import check_view, tail_sigmas
from kraftlake.statemachine.bookkeeper.reducer import apply
from kraftlake.statemachine.bookkeeper.view import BookiesView
from kraftlake.statemachine.bookkeeper.workload import Cluster, WorkloadConfig, generate

from helpers.tiers import examples

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bookkeeper" / "audit"
runner = CliRunner()


def _report(records):
    a = Audit()
    a.feed(records)
    return a.report()


# The second seed is make test's, and unweighted-placement's first too (its 32 000 records take
# 4 s a seed; B7 is broken in make test-fast by test_invariant_parity's history).
@pytest.mark.parametrize(
    "bug", [pytest.param(b, marks=pytest.mark.slow) if b == "unweighted-placement" else b for b in sorted(BUGS)]
)
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_every_bug_is_caught_by_its_invariant(bug, seed):
    # Capped weights are close to uniform: the uniform draws of the bug stand out past 5 sigma only
    # after a few thousand draws.
    n = 32_000 if bug == "unweighted-placement" else 2000
    report = _report(r for b in generate(WorkloadConfig(seed=seed, bug=bug), records=n) for r in b)
    found = collections.Counter(v.invariant for v in report.violations)
    assert report.verdict == "fail" and found[CAUGHT_BY[bug]] > 0, found


@settings(max_examples=examples(6), deadline=None)
@given(seed=st.integers(0, 2**32), bookies=st.integers(7, 10), delay=st.sampled_from([0, 2000, 5000]))
def test_correct_histories_pass(seed, bookies, delay):
    cfg = WorkloadConfig(seed=seed, bookies=bookies, recovery_delay_ms=delay)
    report = _report(r for b in generate(cfg, records=2500) for r in b)
    assert report.violations == [], report.violations[:3]
    checked = {i.id: i.checked for i in report.invariants}
    assert all(checked[i] > 0 for i in ("B1", "B2", "B3", "B5", "B6", "B8")), checked


def test_a_bookie_almost_never_due_and_drawn_once_is_no_outlier():
    """Hypothesis found this history (seed 802): bookie-8, nearly full, was due 0.03 times in 257
    draws and drawn once. The normal approximation called that +5.3 sigma, a B7 failure in a
    correct history; under its real (Poisson-like) law it happens in 3% of such histories."""
    report = _report(
        r for b in generate(WorkloadConfig(seed=802, bookies=9, recovery_delay_ms=0), records=2500) for r in b
    )
    assert report.violations == [], report.violations[:3]
    assert {i.id: i.checked for i in report.invariants}["B7"] > 100


@settings(max_examples=examples(200), deadline=None)
@given(expected=st.floats(0.001, 300), observed=st.integers(0, 700))
def test_tail_sigmas_is_the_poisson_tail_as_a_normal_z(expected, observed):
    pmf = [math.exp(i * math.log(expected) - expected - math.lgamma(i + 1)) for i in range(observed + 2000)]
    z = tail_sigmas(observed, expected)
    if observed > expected:
        p = math.fsum(pmf[observed:])
    else:
        p = math.fsum(pmf[: observed + 1])
    if p >= 0.5:
        assert z == 0.0
    elif p > 1e-300:
        assert math.isclose(abs(z), -NormalDist().inv_cdf(p), rel_tol=1e-6, abs_tol=1e-6)
        assert (z > 0) == (observed > expected)
    else:
        assert abs(z) > 37


def test_simulator_is_deterministic():
    enc = msgspec.json.encode
    assert [enc(r) for b in generate(WorkloadConfig(seed=3), records=1500) for r in b] == [
        enc(r) for b in generate(WorkloadConfig(seed=3), records=1500) for r in b
    ]


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.name)
def test_fixture_verdicts(fixture):
    expected = json.loads((FIXTURES / "expected.json").read_text())[fixture.name]
    report = _report(iter_lines(fixture.open("rb")))
    assert report.verdict == expected["verdict"]
    assert set(expected["caught_by"]) <= {v.invariant for v in report.violations}
    if not expected["caught_by"]:
        assert report.violations == []


def test_a_refused_record_is_an_l3_violation_and_the_audit_goes_on():
    records = list(
        iter_lines(
            [
                '{"type": "BookieRegistered", "offset": 0, "bookie_id": "b0", "rack": "r0"}',
                '{"type": "LedgerClosed", "offset": 1, "ledger_id": 3, "last_entry_id": -1}',
                '{"type": "BookieInfo", "offset": 2, "bookie_id": "b9", "free_bytes": 1, "total_bytes": 2}',
                '{"type": "BookieInfo", "offset": 3, "bookie_id": "b0", "free_bytes": 1, "total_bytes": 2}',
            ]
        )
    )
    report = _report(records)
    assert [(v.invariant, v.entity, v.first_offset, v.message.split(":")[0]) for v in report.violations] == [
        ("L3", "ledger/3", 1, "R-REPLAY-LEDGER"),
        ("L3", "bookie/b9", 2, "R-REPLAY-BOOKIE"),
    ]
    assert (
        report.bookies_state_hash == replay([records[0], records[3]]).state_hash() != replay(records[:1]).state_hash()
    )


def _late_marks(*marks_at: int) -> list:
    """Bookies b0-b2, ledgers 0 and 1 on all three, b0 lost at 1 000 ms (no recovery delay: its
    audit falls due at once); then one mark for ledger i at ``marks_at[i]`` ms."""
    bookies = ("b0", "b1", "b2")
    records: list = []
    for b in bookies:
        records += [BookieRegistered(bookie_id=b), BookieAvailability(bookie_id=b, availability=Availability.WRITABLE)]
    for lid in (0, 1):
        records += [
            LedgerCreated(ledger_id=lid, ensemble_size=3, write_quorum=2, ack_quorum=2, ensemble=bookies),
            LedgerEntriesWritten(ledger_id=lid, last_add_confirmed=5),
            LedgerClosed(ledger_id=lid, last_entry_id=5),
        ]
    records = [msgspec.structs.replace(r, ts_ms=500) for r in records]
    records.append(BookieAvailability(bookie_id="b0", availability=Availability.LOST, ts_ms=1000))
    records += [LedgerUnderReplicated(ledger_id=i, missing=("b0",), ts_ms=t) for i, t in enumerate(marks_at)]
    return [msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)]


@pytest.mark.parametrize(
    ("marks_at", "intervals"),
    [
        # Both marks within the grace (1 000 ms) after the audit fell due: in time.
        ((1500, 2000), []),
        # The first mark comes late and the second with it: the wait was found over by the
        # record that ended it, an instant at that record (it was a mark the audit owed earlier).
        ((1500, 2500), [(14, 14, [14])]),
        # The first mark finds the audit late and leaves ledger 1 unmarked: wrong from it until
        # the second mark, which ends it.
        ((2500, 3000), [(13, 13, [13, 14])]),
    ],
)
def test_b1_late_is_never_an_interval_that_ends_before_it_begins(marks_at, intervals):
    """B1's late side is judged on the state a record finds at its time, before the record is
    applied: a record that finds the audit overdue and ends the wait itself (by the mark it
    brings) is an instant at it, not a state closed at the offset before it was opened."""
    a = Audit(AuditConfig(grace_ms=1000))
    a.feed(_late_marks(*marks_at))
    found = [(v.first_offset, v.last_offset, list(v.evidence)) for v in a.report().violations if v.invariant == "B1"]
    assert found == intervals


def _intervals(records: list, invariant: str) -> list:
    """(first, last, evidence) of each ``invariant`` violation of ``records`` (offsets numbered
    in order), audited with a grace of 1 000 ms."""
    a = Audit(AuditConfig(grace_ms=1000))
    a.feed([msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)])
    return [
        (v.first_offset, v.last_offset, list(v.evidence)) for v in a.report().violations if v.invariant == invariant
    ]


def _held_lock() -> list:
    """Bookies b0-b2 and ledger 0 on them at 500 ms; then (offset 9) worker w1 keeps the ledger's
    lock after a failed repair, its hold ending at 1 000 ms."""
    bookies = ("b0", "b1", "b2")
    records: list = []
    for b in bookies:
        records += [BookieRegistered(bookie_id=b), BookieAvailability(bookie_id=b, availability=Availability.WRITABLE)]
    records += [
        LedgerCreated(ledger_id=0, ensemble_size=3, write_quorum=2, ack_quorum=2, ensemble=bookies),
        LedgerEntriesWritten(ledger_id=0, last_add_confirmed=5),
        LedgerClosed(ledger_id=0, last_entry_id=5),
        LedgerReplicationLock(ledger_id=0, worker="w1", failures=1, held_until_ms=1000),
    ]
    return [msgspec.structs.replace(r, ts_ms=500) for r in records]


def _tick(ts: int | None) -> BookieInfo:
    return BookieInfo(bookie_id="b1", free_bytes=1, total_bytes=2, ts_ms=ts)


def _unlock(ts: int | None) -> LedgerReplicationUnlock:
    return LedgerReplicationUnlock(ledger_id=0, worker="w1", ts_ms=ts)


@pytest.mark.parametrize(
    ("tail", "intervals"),
    [
        # Released within the grace (1 000 ms) after the hold ended: in time.
        ([_tick(1800), _unlock(1900), _tick(4000)], []),
        # Found held past the grace at 10; the unlock at 11 ends it, the last timed record.
        ([_tick(2500), _unlock(3000)], [(10, 10, [10, 11])]),
        # ... and a record after the unlock does not stretch it.
        ([_tick(2500), _unlock(3000), _tick(4000)], [(10, 10, [10, 11])]),
        # An unlock without a time ends it all the same.
        ([_tick(2500), _unlock(None), _tick(4000)], [(10, 10, [10, 11])]),
        # The unlock that finds the hold past the grace ends it itself: an instant at it.
        ([_unlock(2500), _tick(4000)], [(10, 10, [10])]),
    ],
)
def test_b9_closes_at_the_unlock(tail, intervals):
    """B9 (a lock kept after a failed repair, ``ReplicationWorker.deferLedgerLockReleaseOfFailedLedger``)
    is wrong from the record that finds its hold past the grace until the record that releases
    the lock: last = the record before the unlock, evidence names the unlock."""
    assert _intervals(_held_lock() + tail, "B9") == intervals


@pytest.mark.parametrize("delete_cookie", [True, False])
def test_b1_closes_at_the_decommission_that_forgets_the_bookie(delete_cookie):
    """A late audit of b0 (found late at 13) ends when b0's decommission deletes its cookie (14):
    the view owes no audit of it from then on. A later ledger record does not close it instead;
    without the cookie's deletion the audit is still owed, and B1 stays open."""
    records = _late_marks(2500)  # ledger 0 marked late, ledger 1 never: wrong from 13
    records += [
        BookieDecommissioned(bookie_id="b0", delete_cookie=delete_cookie, ts_ms=2600, offset=14),
        LedgerEntriesWritten(ledger_id=1, last_add_confirmed=5, ts_ms=2700, offset=15),
    ]
    assert _intervals(records, "B1") == ([(13, 13, [13, 14])] if delete_cookie else [(13, None, [13])])


def test_every_record_that_ends_a_wait_closes_it():
    """The audit closes B1 and B9 at the records of the classes ``_ENDS`` lists: in the
    simulator's histories (correct and with each bug), every record whose fold drops a bookie's
    due audit or a ledger's hold is of a class listed for that wait."""
    ends: dict[str, set[type]] = {"audit": set(), "hold": set()}
    for bug in [None, *sorted(BUGS)]:
        for seed in (0, 1):
            view = BookiesView()
            for r in (r for b in generate(WorkloadConfig(seed=seed, bug=bug), records=1500) for r in b):
                due, held = set(view.audit_due), set(view.held_until)
                try:
                    apply(view, r)
                except ReplayError:
                    continue
                if due - set(view.audit_due):
                    ends["audit"].add(type(r))
                if held - set(view.held_until):
                    ends["hold"].add(type(r))
    listed = {
        wait: {cls for cls, checks in _ENDS.items() if ended in checks}
        for wait, ended in (("audit", BookiesAudit._audit_ended), ("hold", BookiesAudit._hold_ended))
    }
    assert ends["audit"] >= {LedgerUnderReplicated, BookieAvailability}, ends  # the histories end both waits
    assert ends["hold"] >= {LedgerReplicationUnlock}, ends
    assert ends["audit"] <= listed["audit"] and ends["hold"] <= listed["hold"], (ends, listed)


def test_drain_stories():
    def states(name):
        return [r.state for r in iter_lines((FIXTURES / name).open("rb")) if isinstance(r, BookieStateChange)]

    assert BookieState.DRAINED in states("drain-success.jsonl")
    assert BookieState.DRAINING_FAILED in states("drain-failure.jsonl")
    failed = [
        r
        for r in iter_lines((FIXTURES / "drain-failure.jsonl").open("rb"))
        if isinstance(r, BookieStateChange) and r.state is BookieState.DRAINING_FAILED
    ]
    assert all(r.reason and r.reason.startswith("ledger ") for r in failed)
    loss = [v for v in _report(iter_lines((FIXTURES / "data-loss.jsonl").open("rb"))).violations if v.invariant == "B8"]
    assert loss and all(v.entity.startswith("ledger/") and "entries" in v.message for v in loss)


def test_the_fixtures_are_what_the_simulator_writes(tmp_path):
    out = tmp_path / "x.jsonl"
    args = [
        "simulate",
        "--family",
        "bookkeeper",
        "--seed",
        "14",
        "--records",
        "1200",
        "--correlated-faults",
        "--out",
        str(out),
    ]
    assert runner.invoke(app, args).exit_code == 0
    assert out.read_bytes() == (FIXTURES / "drain-failure.jsonl").read_bytes()


def test_cli_simulate_audit_and_view_bookies(tmp_path):
    sim = tmp_path / "b.jsonl"
    res = runner.invoke(
        app,
        [
            "simulate",
            "--family",
            "bookkeeper",
            "--seed",
            "2",
            "-n",
            "800",
            "--bug",
            "repair-into-same-ensemble",
            "-o",
            str(sim),
        ],
    )
    assert res.exit_code == 0, res.output
    log = tmp_path / "log"
    assert runner.invoke(app, ["init", str(log)]).exit_code == 0
    assert runner.invoke(app, ["append", str(log), str(sim)]).exit_code == 0
    res = runner.invoke(app, ["audit", str(log), "--format", "json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and "B2" in {v["invariant"] for v in doc["violations"]} and doc["bookies_state_hash"]
    image = json.loads(runner.invoke(app, ["view", str(log), "--bookies"]).stdout)
    assert image["state_hash"] == doc["bookies_state_hash"] and image["bookies"]
    res = runner.invoke(app, ["view", str(log), "--bookies", "-f", "table", "--offset", "400"])
    assert res.exit_code == 0 and "under-replicated ledgers" in res.stdout
    res = runner.invoke(app, ["simulate", "--family", "bookkeeper", "--seed", "1", "--bug", "nope", "-o", str(sim)])
    assert res.exit_code == 2 and "unknown BookKeeper bug" in res.output


class Deciders(RuleBasedStateMachine):
    """Random commands and failures: errors decide nothing; the state invariants hold throughout."""

    @initialize(seed=st.integers(0, 2**32))
    def start(self, seed):
        self.k = Cluster(WorkloadConfig(seed=seed, bookies=6))
        self.k.bootstrap()

    def _run(self, cmd):
        before = self.k.view.state_hash()
        d = decide(self.k.view, cmd)
        if d.error_code not in (c.OK, c.WAITING, c.REPAIR_FAILED):
            assert d.records == () and self.k.view.state_hash() == before
        self.k.emit(d.records)

    @rule(e=st.integers(1, 5), w=st.integers(1, 5), a=st.integers(1, 5))
    def create(self, e, w, a):
        self._run(c.CreateLedger(ensemble_size=e, write_quorum=w, ack_quorum=a))

    @rule(lid=st.integers(0, 20), n=st.integers(1, 30))
    def write(self, lid, n):
        self._run(c.WriteEntries(ledger_id=lid, count=n))

    @rule(lid=st.integers(0, 20))
    def close(self, lid):
        self._run(c.CloseLedger(ledger_id=lid))

    @rule(i=st.integers(0, 9), up=st.booleans())
    def flip(self, i, up):
        b = f"bookie-{i}:3181"
        if b in self.k.view.bookies:
            self.k.emit(
                [BookieAvailability(bookie_id=b, availability=Availability.WRITABLE if up else Availability.LOST)]
            )

    @rule(i=st.integers(0, 9), state=st.sampled_from(list(BookieState)))
    def operator(self, i, state):
        self._run(c.ChangeBookieState(bookie_id=f"bookie-{i}:3181", state=state))

    @rule(ms=st.integers(0, 40_000), worker=st.sampled_from(["w1", "w2"]))
    def time_passes(self, ms, worker):
        self.k.now += ms
        self._run(c.AuditorTick(now_ms=self.k.now))
        self._run(c.Replicate(worker=worker, now_ms=self.k.now))
        self._run(c.CheckDrains())

    @rule(delay=st.sampled_from([0, 1000, 5000]))
    def delay(self, delay):
        self._run(c.SetRecoveryDelay(delay_ms=delay))

    @invariant()
    def holds(self):
        if hasattr(self, "k"):
            assert check_view(self.k.view) == []


TestDeciders = Deciders.TestCase
TestDeciders.settings = settings(max_examples=examples(40), stateful_step_count=40, deadline=None)


def test_notebook_facade_shows_bookies_and_under_replicated_ledgers(tmp_path):
    import kraftlake

    records = list(iter_lines((FIXTURES / "data-loss.jsonl").open("rb")))
    lake = kraftlake.init(tmp_path / "log")
    lake.append(records)
    at = lake.at(offset=600)
    want = replay(records[:601])
    assert sorted(at.bookies.bookie) == sorted(want.bookies)
    ur = at.under_replicated
    assert sorted(ur.ledger) == sorted(want.under_replicated)
    assert at.bookies_view.state_hash() == want.state_hash()
