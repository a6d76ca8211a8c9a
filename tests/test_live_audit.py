"""The following audit (``replay.live_audit``, ``kraftlake audit --follow``) against the batch
audit: on every fixture under fixtures/kraft and on simulated histories fed in random batch sizes,
the violations said live (closed, and still open) are the batch report's, field for field; graced
states open only once a record past the grace arrived; the CLI prints the events as records land."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import Log, iter_lines
from kraftlake.records.times import format_ms
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.replay.incidents import min_isr
from kraftlake.replay.live_audit import SHOWN, STATES, LiveAudit
from kraftlake.statemachine.invariants import BY_ID
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate
from tests.helpers.child import Child

from helpers.tiers import examples

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "kraft").rglob("*.jsonl"))


def numbered(records):
    return [msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)]


def fixture(path: Path):
    return numbered(iter_lines(path.open("rb")))


def batch_violations(records, config=None):
    a = Audit(config)
    a.feed(records)
    return a.report().violations


def live(records, sizes, config=None):
    audit = LiveAudit(config)
    events, i, k = [], 0, 0
    while i < len(records):
        n = sizes[k % len(sizes)]
        k += 1
        events += audit.feed(records[i : i + n])
        i += n
    return audit, events


def check_events(events, said):
    """Each violation said opens once and closes at most once, the close after the open."""
    events = [e for e in events if e.event in ("open", "close")]
    opened = [
        (e.violation.invariant, e.violation.entity, e.violation.first_offset) for e in events if e.event == "open"
    ]
    closed = [
        (e.violation.invariant, e.violation.entity, e.violation.first_offset) for e in events if e.event == "close"
    ]
    assert len(opened) == len(set(opened)) == len(said)
    assert set(closed) <= set(opened) and len(closed) == len(set(closed))
    for e in events:
        assert e.at_offset >= e.violation.first_offset
        if e.event == "close":
            assert e.violation.last_offset is not None and e.at_offset >= e.violation.last_offset


def batch_report(records, config=None):
    """The batch audit's report, and the bad states of the partitions after the last record
    (its incident tracker's)."""
    a = Audit(config)
    a.feed(records)
    return a.report(), [part.flags for part in a.tracker.parts.values()]


def check_incidents(records, events, report):
    """Each incident of the batch report opens once, at its failure, and closes once, at its
    end, if it ended; each event says its record time (UTC) and what failed in words."""
    want = {i.id: i for i in report.incidents}
    ts = {r.offset: r.ts_ms for r in records}
    opened = [e for e in events if e.event == "incident_open"]
    closed = [e for e in events if e.event == "incident_close"]
    assert sorted(e.incident.id for e in opened) == sorted(want)
    assert sorted(e.incident.id for e in closed) == sorted(i for i, inc in want.items() if inc.ended_at is not None)
    for e in opened + closed:
        inc = want[e.incident.id]
        assert e.at_offset == (inc.failed_at if e.event == "incident_open" else inc.ended_at)
        assert e.at_time == format_ms(ts[e.at_offset]) and e.incident.where.startswith(f"broker {inc.broker}")
    for e in events:
        if e.event in ("open", "close"):
            assert e.first_time == format_ms(ts[e.violation.first_offset]) and e.name


def check_now(audit, records, report, flags):
    """What the live gauges read after the last batch (``Now``) is what holds: the partitions
    with no leader and under min ISR as the controller's view has them, those on offline
    directories as the batch audit's tracker has them; the counters (incidents, violations,
    leaderships left leaderless) and the times to move (a histogram) as the batch report's."""
    now = audit.now()
    view = audit.audit.view
    parts = list(view.iter_partitions())
    assert now.partitions == len(parts) and now.last_offset == records[-1].offset
    assert now.records == len(records) and now.last_ms == records[-1].ts_ms
    assert now.states["no_leader"] == sum(p.leader == -1 for p in parts)
    assert now.states["under_min_isr"] == sum(len(p.isr) < min_isr(view, p.topic_id) for p in parts)
    for i, state in enumerate(STATES):
        assert now.states[state] == sum(f[i] for f in flags), state
        shown = now.bad[state]
        assert len(shown) == min(now.states[state], SHOWN)
        since = [p.since_ms for p in shown]
        assert since == sorted(since)  # the longest in the state first
    h = report.handling
    assert {k: n for k, n in now.incidents.items() if n} == h.by_kind
    assert sum(now.open_incidents.values()) == sum(i.ended_at is None for i in report.incidents)
    for role, stats in (("leadership", h.leadership), ("isr", h.isr)):
        got = now.time_to_move[role]
        assert (got.buckets, got.count, got.total_ms) == (stats.buckets, stats.timed, stats.total_ms), role
    assert now.leaderless == h.leaderless.partitions
    by_inv = {i.id: i.violations for i in report.invariants}
    assert {inv: n for inv, n in now.violations.items() if n} == {k: n for k, n in by_inv.items() if n}
    assert sum(now.open_violations.values()) == sum(v.last_offset is None for v in report.violations)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_live_says_what_the_batch_audit_reports_on_every_fixture(path):
    records = fixture(path)
    want = batch_violations(records)
    rng = random.Random(path.stem)
    report, flags = batch_report(records)
    for sizes in ([1], [len(records)], [rng.randint(1, 40) for _ in range(30)]):
        audit, events = live(records, sizes)
        assert audit.said() == want
        check_events(events, want)
        check_incidents(records, events, report)
        check_now(audit, records, report, flags)


def test_the_fixtures_include_violations():
    """The differential test above is not vacuous: the buggy fixtures do report violations, some
    of them graced and some closed."""
    found = [v for p in FIXTURES for v in batch_violations(fixture(p))]
    assert any(BY_ID[v.invariant].graced for v in found)
    assert any(v.last_offset is not None for v in found)


@settings(max_examples=examples(15), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    bug=st.sampled_from([None, "ignore-offline-dirs", "keep-offline-replica-in-isr", "elect-offline-leader"]),
    sizes=st.lists(st.integers(1, 200), min_size=1, max_size=20),
    grace_records=st.sampled_from([0, 5, 1000]),
)
def test_live_equals_batch_on_simulated_histories_in_random_batches(seed, bug, sizes, grace_records):
    cfg = WorkloadConfig(brokers=5, dirs_per_broker=3, topics=2, partitions=12, seed=seed, bug=bug)
    records = numbered(r for batch in generate(cfg, records=600) for r in batch)
    config = AuditConfig(grace_records=grace_records, grace_ms=2_000)
    report, flags = batch_report(records, config)
    want = report.violations
    audit, events = live(records, sizes, config)
    assert audit.said() == want
    check_events(events, want)
    check_incidents(records, events, report)
    check_now(audit, records, report, flags)


def test_a_graced_state_opens_only_once_the_grace_ran_out_in_record_time():
    path = next(p for p in FIXTURES if p.stem == "ignore-offline-dirs")
    records = fixture(path)
    config = AuditConfig(grace_records=3, grace_ms=10**9)
    _, events = live(records, [1], config)
    graced = [e for e in events if e.event == "open" and BY_ID[e.violation.invariant].graced]
    assert graced
    for e in graced:
        # Fed one record at a time: said at the first record more than 3 past the wrong one.
        assert e.at_offset == e.violation.first_offset + 4


def test_cli_audit_follow_prints_violations_as_records_land(tmp_path):
    path = next(p for p in FIXTURES if p.stem == "elect-offline-leader")
    records = list(iter_lines(path.open("rb")))
    want = batch_violations(numbered(records))
    assert want
    log = Log.create(tmp_path / "log")
    half = min(v.first_offset for v in want)  # the first violation lands after the follower started
    log.append(records[:half])
    with Child(
        [sys.executable, "-m", "kraftlake", "audit", str(tmp_path / "log"), "--follow", "--format", "jsonl"]
    ) as child:
        log.append(records[half:])
        opened, closed, incidents = {}, {}, []
        while len(opened) < len(want) or len(closed) < sum(v.last_offset is not None for v in want):
            event = json.loads(child.line())
            if event["event"].startswith("incident_"):
                incidents.append(event)
                continue
            v = event["violation"]
            (opened if event["event"] == "open" else closed)[(v["invariant"], v["entity"], v["first_offset"])] = v
            assert event["name"] and event["first_time"].endswith("Z")  # named, timed (UTC)
        final = {**opened, **closed}
        assert sorted(final.values(), key=lambda v: (v["first_offset"], v["invariant"], v["entity"])) == [
            msgspec.to_builtins(v) for v in want
        ]
        # The directory failure that caused them was said as an incident, with its time and path.
        assert incidents and incidents[0]["event"] == "incident_open"
        assert incidents[0]["incident"]["kind"] == "dir-failure" and incidents[0]["at_time"].endswith("Z")
        assert child.interrupt() == 0, child.stop()


def test_follow_text_says_incidents_and_violations_in_record_order_with_times_and_names():
    """``audit --follow``'s text: an incident opened and ended, each line led by its record time
    (UTC), partitions by name (``topic-1/0``), in the order the records say it."""
    from kraftlake.cli.audit_follow import _text

    path = next(p for p in FIXTURES if p.stem == "elect-offline-leader")
    _, events = live(fixture(path), [1000])
    lines = [_text(e).decode() for e in events]
    assert [e.at_offset for e in events] == sorted(e.at_offset for e in events)
    failed = next(line for line in lines if " INCIDENT dir-failure broker 3 /b3/d0 " in line)
    assert failed.startswith("2023-11-14T22:13:22.000Z") and "at offset 51" in failed
    ended = next(line for line in lines if " ENDED " in line and "broker 3 /b3/d0" in line)
    assert "at offset 156 (failed 2023-11-14T22:13:22.000Z)" in ended
    opened = next(line for line in lines if " OPEN " in line and " K5 " in line)
    assert " topic-1/0 offsets 74- since 2023-11-14T22:13:24.200Z:" in opened


def test_a_failed_directory_is_offline_until_loaded_back_or_left_out_of_a_new_registration():
    """``Now.offline_dirs`` (the ``kraftlake_offline_dirs`` gauge): a directory its broker said
    failed stays offline after the controller moved everything off it, until the broker loads
    it online again, or registers anew without it (a replaced disk has a new id)."""
    from kraftlake.records.kraft import RegisterBroker
    from kraftlake.records.observations import LogDirFailed, LogDirsLoaded

    # Kafka's KIP-858 story: broker 101's directory Ot57… fails at offset 23.
    records = fixture(next(p for p in FIXTURES if p.stem == "jbod-dir-failure"))
    failed = next(i for i, r in enumerate(records) if type(r) is LogDirFailed)
    dead, other = "Ot57GypJXW8c7tKGTPwsPg", "8FATlxS8D75deTGo-YggVg"
    end, ts = len(records), records[-1].ts_ms + 1000
    register = next(r for r in records if type(r) is RegisterBroker and r.broker_id == 101)
    afterwards = {
        "loaded back": LogDirsLoaded(offset=end, ts_ms=ts, broker_id=101, online_dirs=(other, dead)),
        "registered without it": msgspec.structs.replace(
            register, offset=end, ts_ms=ts, broker_epoch=301, log_dirs=[other]
        ),
        "registered with it": msgspec.structs.replace(register, offset=end, ts_ms=ts, broker_epoch=301),
    }
    for what, record in afterwards.items():
        audit = LiveAudit()
        audit.feed(records[:failed])
        assert audit.now().offline_dirs == []
        audit.feed(records[failed:])
        assert [(d.broker, d.directory) for d in audit.now().offline_dirs] == [(101, dead)], what
        audit.feed([record])
        assert [d.directory for d in audit.now().offline_dirs] == ([dead] if what == "registered with it" else [])
