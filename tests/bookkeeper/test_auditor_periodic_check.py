"""The auditor's periodic schedules (``statemachine.bookkeeper.schedule``), from BookKeeper's
``AuditorPeriodicCheckTest``: the case issue 35 asked for (the initial delay of checkAllLedgers),
and the bookie check's fixed rate from the auditor's election, on the real view, decider and reducer
(``helpers.bookkeeper_cluster``). The other cases of that class check what checkAllLedgers, the
placement and the replicas checks read from bookies (entry I/O), which kraftlake does not model."""

from __future__ import annotations

from kraftlake.records.bookkeeper import AuditorCheckRan
from kraftlake.statemachine.bookkeeper import commands as c
from kraftlake.statemachine.bookkeeper.schedule import ALL_LEDGERS, BOOKIE, initial_delay, next_due

from helpers.bookkeeper_cluster import BkCluster

S = 1000


def test_testInitialDelayOfCheckAllLedgers():
    """``validateInitialDelayOfCheckAllLedgers`` with interval 1000 s and the last run never, 999 s
    and 1001 s ago: initial delays 0, 1 and 0 s."""
    now = 10_000_000
    assert initial_delay(1000 * S, None, now) == 0
    assert initial_delay(1000 * S, now - 999 * S, now) == 1 * S
    assert initial_delay(1000 * S, now - 1001 * S, now) == 0


def _checks(d: c.Decision) -> list[tuple[str, bool]]:
    return [(r.check.value, r.completed) for r in d.records if isinstance(r, AuditorCheckRan)]


def _run(k: BkCluster, at: int) -> c.Decision:
    k.now = at
    return k.run(c.RunPeriodicChecks(now_ms=at, bookie_interval_ms=100 * S, all_ledgers_interval_ms=1000 * S))


def test_the_bookie_check_fires_at_election_then_at_its_rate_and_skips_while_an_audit_waits():
    k = BkCluster(delay_ms=50 * S)
    start = k.view.auditor_since
    assert _checks(_run(k, start)) == [(BOOKIE, True), (ALL_LEDGERS, True)]  # never ran: no initial delay
    assert _checks(_run(k, start + 99 * S)) == []
    lid = k.ledger(("b0:3181", "b1:3181", "b2:3181"))
    k.stop("b1:3181")  # a delayed audit now waits 50 s
    assert _checks(_run(k, start + 100 * S)) == [(BOOKIE, False)] and k.marked() == {}
    assert next_due(k.view, BOOKIE, 100 * S) == start + 200 * S  # the schedule moved on
    k.audit(60 * S)
    assert k.marked() == {lid: ("b1:3181",)}


def test_a_new_auditor_restarts_the_schedules_and_reads_when_checkAllLedgers_last_completed():
    k = BkCluster()
    start = k.view.auditor_since
    _run(k, start)
    k.now = start + 300 * S
    k.run(c.ElectAuditor(auditor="another"))
    assert next_due(k.view, BOOKIE, 100 * S) == start + 300 * S  # at once
    assert next_due(k.view, ALL_LEDGERS, 1000 * S) == start + 1000 * S  # the rest of the week
