"""Incidents and availability (``replay.incidents``): the dir failure of Kafka's KIP-858 story as
one incident; the audit's inline tracker and the standalone pass agree; simulated histories keep
the accounting consistent (effects end after they begin, outages sum to the availability), and a
buggy controller costs availability that a correct one does not."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlake.records import iter_lines
from kraftlake.records.kraft import Config, NoOp
from kraftlake.replay import report_json
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.replay.incidents import TIME_BUCKETS_MS, find_incidents, percentile
from kraftlake.statemachine.kraft.workload import FAULTS, WorkloadConfig, generate

from helpers.tiers import examples

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"


def fixture_records():
    records = list(iter_lines(FIXTURE.open("rb")))
    return [msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)]


def simulated(*, seed: int = 3, bug: str | None = None, faults=None, records: int = 2000):
    cfg = WorkloadConfig(brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=seed, bug=bug)
    if faults is not None:
        cfg = WorkloadConfig(**{**cfg.__dict__, "faults": faults})
    return [r for batch in generate(cfg, records=records) for r in batch]


def audit(records, **config):
    a = Audit(AuditConfig(**config))
    a.feed(records)
    return a.report()


def test_the_kip858_dir_failure_is_one_incident_with_its_story():
    report = audit(fixture_records())
    assert report.verdict == "pass" and len(report.incidents) == 1
    inc = report.incidents[0]
    assert (inc.kind, inc.broker, inc.directory) == ("dir-failure", 101, "Ot57GypJXW8c7tKGTPwsPg")
    # LogDirFailed at 23, the heartbeat at 24, a-0 and b-0 moved at 25 and 26, the directory
    # left the registration at 27.
    assert (inc.failed_at, inc.reported_at, inc.removed_at, inc.ended_at) == (23, 24, 27, 27)
    assert inc.reported_at_ms - inc.failed_at_ms == 500
    moved = {(e.topic, e.partition, e.role): (e.ended_by, e.outcome, e.new_leader) for e in inc.effects}
    assert moved == {
        ("a", 0, "leader"): (25, "leader moved", 102),
        ("a", 0, "isr"): (25, "left the ISR", None),
        ("b", 0, "leader"): (26, "leader moved", 102),
        ("b", 0, "isr"): (26, "left the ISR", None),
    }
    assert {e.time_to_move_ms for e in inc.effects} == {600}
    h = report.handling
    assert (h.leadership.moved, h.leadership.open, h.leadership.p50_ms, h.leadership.max_ms) == (2, 0, 600, 600)
    # a-0 and b-0 were led from the dead disk from its failure (ts ...10000) to the move (...10600).
    a = report.availability
    assert (a.leader_offline_ms, a.no_leader_ms, a.unavailable_ms, a.isr_offline_ms) == (1200, 0, 1200, 1200)
    assert {(p.topic, p.partition, p.unavailable_ms) for p in a.partitions} == {("a", 0, 600), ("b", 0, 600)}
    assert inc.unavailable_ms == 1200
    assert report.topics == {"YW6soxYeId5Lgf56lnEg3g": "a", "dAMvN9tlpM4l1TsGqSyGsA": "b"}
    doc = msgspec.json.decode(report_json.encode(report))
    assert doc["incidents"][0]["effects"][0]["topic"] == "a" and doc["handling"]["isr"]["p99_ms"] == 600


def test_an_audit_fails_on_unavailability_over_the_limit():
    assert audit(fixture_records(), fail_on_unavailable_ms=1200).verdict == "pass"
    report = audit(fixture_records(), fail_on_unavailable_ms=1199)
    assert report.verdict == "fail" and not report.violations


def test_min_insync_replicas_of_the_topic_is_measured():
    records = fixture_records()
    config = Config(resource_type=2, resource_name="a", name="min.insync.replicas", value="2", ts_ms=records[0].ts_ms)
    later = NoOp(ts_ms=records[-1].ts_ms + 1000)
    records = [msgspec.structs.replace(r, offset=i) for i, r in enumerate([records[0], config, *records[1:], later])]
    a = audit(records).availability
    under = {(p.topic, p.partition): p.under_min_isr_ms for p in a.partitions if p.under_min_isr_ms}
    # a-0's ISR shrank to [102] at the move and stayed so for the last second; b-0 has no such config.
    assert under == {("a", 0): 1000} and a.under_min_isr_ms == 1000


@pytest.mark.parametrize("bug", [None, "ignore-offline-dirs", "keep-offline-replica-in-isr"])
def test_the_standalone_pass_equals_the_audits_tracker(bug):
    """Another engine's report carries the incidents of ``find_incidents``: the same as the
    per-record audit finds on its own view."""
    records = simulated(bug=bug)
    report = audit(records)
    found = find_incidents(records)
    strip = [msgspec.structs.replace(i, violations=[], invariants={}) for i in report.incidents]
    assert report_json.encode(strip) == report_json.encode(found.incidents)
    assert msgspec.json.encode(report.availability) == msgspec.json.encode(found.availability)
    assert report.handling == found.handling and report.handling.incidents > 10


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), bug=st.sampled_from([None, "ignore-offline-dirs", "keep-offline-replica-in-isr"]))
def test_the_accounting_holds_on_simulated_histories(seed, bug):
    records = simulated(seed=seed, bug=bug, records=1200)
    ts = {r.offset: r.ts_ms for r in records}
    found = find_incidents(records)
    for inc in found.incidents:
        assert inc.failed_at <= (inc.reported_at if inc.reported_at is not None else inc.failed_at)
        if inc.ended_at is not None:
            assert inc.ended_at >= inc.failed_at and all(e.ended_by is not None for e in inc.effects)
        for e in inc.effects:
            if e.ended_by is not None:
                assert e.ended_by >= e.caused_by == inc.failed_at
                assert e.time_to_move_ms == ts[e.ended_by] - ts[e.caused_by]
    # Outages (intervals) and per-partition sums are two bookings of the same time.
    a = found.availability
    end = a.to_ms
    per: dict = {}
    for o in a.outages:
        per[(o.topic_id, o.partition)] = per.get((o.topic_id, o.partition), 0) + (
            (end if o.to_ms is None else o.to_ms) - o.from_ms
        )
    assert {k: v for k, v in per.items() if v} == {
        (p.topic_id, p.partition): p.unavailable_ms for p in a.partitions if p.unavailable_ms
    }
    assert a.unavailable_ms == a.no_leader_ms + a.leader_offline_ms == sum(per.values())
    _attribution_holds(found)


def _attribution_holds(found) -> None:
    """Each instant of an outage is in at most one incident's account: one that led its
    partition from what failed then (or had left it leaderless), or onto whose failed replica
    the leader had moved; each incident's unavailability is its pieces', and the kinds' sums and
    the time no incident caused add up to the total."""
    a = found.availability
    end = a.to_ms
    assert len(a.outage_incidents) == len(a.outages)
    splits: dict = {}
    for row, at, at_ms, who in a.outage_splits:
        splits.setdefault(row, []).append((at, at_ms, who))
    own = [0] * len(found.incidents)
    for row, (o, k) in enumerate(zip(a.outages, a.outage_incidents, strict=True)):
        cuts = [(o.first_offset, o.from_ms, k), *splits.get(row, ())]
        for (at, at_ms, who), nxt in zip(cuts, [*cuts[1:], None], strict=True):
            stop = (end if o.to_ms is None else o.to_ms) if nxt is None else nxt[1]
            if who < 0:
                continue
            inc = found.incidents[who]
            # It led the partition from what failed then, or the leader had moved onto its
            # failed replica (an ISR member there): ``replay.attribution``'s two claims.
            held = any(
                e.role in ("leader", "isr")
                and (e.topic_id, e.partition) == (o.topic_id, o.partition)
                and e.caused_by <= at
                and (e.ended_by is None or at <= e.ended_by)
                for e in inc.effects
            )
            assert held, (inc.id, o)
            own[who] += stop - at_ms
    assert [i.unavailable_ms for i in found.incidents] == own
    by_kind: dict = {}
    for inc in found.incidents:
        by_kind[inc.kind] = by_kind.get(inc.kind, 0) + inc.unavailable_ms
        assert 0 <= inc.unavailable_after_ms <= inc.unavailable_ms
    assert by_kind == a.by_kind
    assert a.outside_incidents_ms >= 0 and sum(a.by_kind.values()) + a.outside_incidents_ms == a.unavailable_ms


def test_overlapping_incidents_each_count_what_they_caused_once():
    """Dense faults: incidents share partitions while both are open. Each says which others it
    overlapped; an outage or a violation is in one incident's account only, so the kinds' sums
    are the total's parts (summed over each incident's window they came to more than it)."""
    report = audit(simulated(bug="keep-offline-replica-in-isr", records=3000))
    pairs = [(i, o) for i in report.incidents for o in i.overlaps]
    assert pairs
    by_id = {i.id: i for i in report.incidents}
    for inc, other in pairs:
        assert inc.id in by_id[other].overlaps
        assert not set(inc.violations) & set(by_id[other].violations)
    a = report.availability
    assert sum(a.by_kind.values()) + a.outside_incidents_ms == a.unavailable_ms
    assert sum(i.unavailable_ms for i in report.incidents) <= a.unavailable_ms
    # A violation of a broker's or directory's own entity is that incident's.
    for inc in report.incidents:
        for k in inc.violations:
            entity = report.violations[k].entity
            if entity.startswith(("broker/", "dir/")):
                assert entity in inc.own_entities


def test_leaderships_left_without_a_leader_are_counted_apart_with_their_wait():
    """A leadership ended with no leader is not "moved": it is counted apart with how long the
    partition waited for one, and those waits are the time without a leader that followed."""
    found = find_incidents(simulated(records=3000))
    h = found.handling
    leaderless = [
        e
        for i in found.incidents
        for e in i.effects
        if e.role == "leader" and e.ended_by is not None and e.new_leader == -1
    ]
    assert h.leaderless.partitions == len(leaderless) == sum(i.leaderless for i in found.incidents) > 0
    moved = [
        e
        for i in found.incidents
        for e in i.effects
        if e.role == "leader" and e.ended_by is not None and e.new_leader not in (-1, None)
    ]
    assert h.leadership.moved == len(moved)
    assert 0 < h.leaderless.total_ms <= found.availability.no_leader_ms
    assert h.leaderless.max_ms >= h.leaderless.p99_ms >= h.leaderless.p50_ms
    # Their histogram (Prometheus' kraftlake_leaderless_wait_seconds) agrees with the waits'
    # nearest-rank median and maximum: at least half are at most the median, all at most the max.
    waits = h.leaderless
    assert 0 < waits.timed <= waits.partitions
    for bound, n in zip(TIME_BUCKETS_MS, waits.buckets, strict=True):
        half = -(-waits.timed // 2)
        assert (n >= half) == (bound >= waits.p50_ms), bound
        assert (n == waits.timed) == (bound >= waits.max_ms), bound


def test_a_controller_that_ignores_offline_dirs_leaves_leaders_on_dead_disks():
    correct = find_incidents(simulated()).availability
    buggy = find_incidents(simulated(bug="ignore-offline-dirs")).availability
    assert correct.leader_offline_ms == 0 < buggy.leader_offline_ms
    assert buggy.isr_offline_ms > correct.isr_offline_ms


def test_a_controller_that_keeps_offline_replicas_in_the_isr_costs_isr_time():
    correct = find_incidents(simulated(seed=5)).availability
    buggy = find_incidents(simulated(seed=5, bug="keep-offline-replica-in-isr")).availability
    assert buggy.isr_offline_ms > correct.isr_offline_ms


def test_controlled_shutdowns_and_fenced_brokers_are_incidents():
    found = find_incidents(simulated(faults=("controlled-shutdown", "broker-crash")))
    kinds = found.handling.by_kind
    assert kinds.get("controlled-shutdown", 0) > 0 and kinds.get("broker-fenced", 0) > 0 and "dir-failure" not in kinds
    for inc in found.incidents:
        assert inc.directory is None and inc.removed_at is not None and inc.removed_at >= inc.failed_at
        if inc.kind == "broker-fenced":
            # Kafka writes the partition changes before the fencing: they are the effects, all ended.
            assert all(e.ended_by is not None and e.ended_by <= inc.removed_at for e in inc.effects)
        else:
            assert inc.reported_at == inc.failed_at


def test_violations_are_tied_to_the_incident_they_happened_in():
    report = audit(simulated(bug="keep-offline-replica-in-isr"))
    linked = [i for i in report.incidents if i.violations]
    assert linked
    owners = [k for inc in report.incidents for k in inc.violations]
    assert len(owners) == len(set(owners))  # each violation in one incident's account
    for inc in linked:
        counts: dict = {}
        for k in inc.violations:
            v = report.violations[k]
            assert v.entity in inc.entities
            assert inc.ended_at is None or v.first_offset <= inc.ended_at
            counts[v.invariant] = counts.get(v.invariant, 0) + 1
        assert counts == inc.invariants


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile([7], 0.99), percentile([], 0.5)) == (
        50,
        99,
        7,
        None,
    )


# -- the command line ------------------------------------------------------------------------------


@pytest.fixture
def fixture_log(tmp_path):
    from typer.testing import CliRunner

    from kraftlake.cli.app import app

    path = tmp_path / "log"
    run = CliRunner().invoke
    assert run(app, ["init", str(path)]).exit_code == 0
    assert run(app, ["append", str(path), str(FIXTURE)]).exit_code == 0
    return str(path)


def cli(*args):
    from typer.testing import CliRunner

    from kraftlake.cli.app import app

    return CliRunner().invoke(app, list(args))


def test_cli_prometheus_output_parses_and_names_topics(fixture_log):
    from prometheus_client.parser import text_string_to_metric_families

    res = cli("audit", fixture_log, "--format", "prometheus")
    assert res.exit_code == 0, res.output
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(res.stdout)
        for s in fam.samples
    }
    assert samples[("kraftlake_audit_pass", ())] == 1
    a0 = (("partition", "0"), ("topic", "a"))
    assert samples[("kraftlake_partition_unavailable_seconds_total", a0)] == 0.6
    assert samples[("kraftlake_partition_state_seconds_total", (("state", "unavailable"),))] == 1.2
    assert samples[("kraftlake_incidents_total", (("kind", "dir-failure"),))] == 1
    # Both leaderships moved 0.6 s after the failure: in the 1 s bucket, not in the 0.5 s one.
    lead = (("role", "leadership"),)
    assert samples[("kraftlake_time_to_move_seconds_count", lead)] == 2
    assert samples[("kraftlake_time_to_move_seconds_sum", lead)] == 1.2
    assert samples[("kraftlake_time_to_move_seconds_bucket", (("le", "0.5"), *lead))] == 0
    assert samples[("kraftlake_time_to_move_seconds_bucket", (("le", "1.0"), *lead))] == 2


def test_cli_fails_on_unavailable_seconds(fixture_log):
    assert cli("audit", fixture_log, "--fail-on-unavailable-seconds", "1.2").exit_code == 0
    res = cli("audit", fixture_log, "--fail-on-unavailable-seconds", "1", "--format", "json")
    assert res.exit_code == 1
    doc = msgspec.json.decode(res.stdout)
    assert doc["violations"] == [] and doc["fail_on_unavailable_ms"] == 1000


def test_cli_record_time_filters_match_offsets(fixture_log):
    # ts_ms of the fixture: the dir failure at ...10000 (offset 23), the moves at ...10600 (25-27).
    by_time = cli("audit", fixture_log, "--from-time", "2023-11-14T22:13:30Z", "--format", "json")
    by_offset = cli("audit", fixture_log, "--from", "23", "--format", "json")
    assert by_time.exit_code == by_offset.exit_code == 0
    t, o = msgspec.json.decode(by_time.stdout), msgspec.json.decode(by_offset.stdout)
    assert t["first_offset"] == o["first_offset"] == 23 and t["incidents"] == o["incidents"]
    assert len(t["incidents"]) == 1
    # The same instant in another zone, and as milliseconds.
    res = cli("log", fixture_log, "--from-time", "2023-11-14T23:13:30.500+01:00", "--to-time", "1700000010500")
    assert [msgspec.json.decode(line)["type"] for line in res.stdout.splitlines()] == ["HeartbeatOfflineDirs"]
    at = cli("view", fixture_log, "--at-time", "2023-11-14T22:13:30.500Z")
    assert msgspec.json.decode(at.stdout)["offset"] == 24
    bad = cli("audit", fixture_log, "--to-time", "yesterday")
    assert bad.exit_code == 2 and "ISO 8601" in bad.output


def test_directory_paths_come_from_the_start_up_record():
    found = find_incidents(simulated())
    dirs = [i for i in found.incidents if i.kind == "dir-failure"]
    assert dirs and all(i.path is not None and i.path.startswith(f"/b{i.broker}/d") for i in dirs)
    assert all(path.startswith("/b") for path in found.dir_paths.values())


def test_log_dirs_loaded_paths_are_one_per_directory_or_none():
    from kraftlake.records.observations import LogDirsLoaded

    a, b = "Ot57GypJXW8c7tKGTPwsPg", "8FATlxS8D75deTGo-YggVg"
    assert LogDirsLoaded(broker_id=1, online_dirs=(a,), offline_dirs=(b,), paths=("/d0", "")).paths == ("/d0", "")
    assert LogDirsLoaded(broker_id=1, online_dirs=(a,)).paths == ()
    with pytest.raises(ValueError, match="paths"):
        LogDirsLoaded(broker_id=1, online_dirs=(a,), offline_dirs=(b,), paths=("/d0",))


def test_cli_text_report_leads_with_the_verdict_and_the_incidents(tmp_path):
    records = simulated(bug="keep-offline-replica-in-isr", records=1500)
    path = tmp_path / "log"
    lines = tmp_path / "log.jsonl"
    lines.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
    assert cli("init", str(path)).exit_code == 0 and cli("append", str(path), str(lines)).exit_code == 0
    res = cli("audit", str(path))
    assert res.exit_code == 1
    first, second = res.stdout.splitlines()[:2]
    assert first.startswith("FAIL: ") and second.startswith("record time 2") and "Z to " in second  # UTC
    text = " ".join(res.stdout.split())
    assert "The verdict judges the controller; availability judges the cluster:" in text
    assert "partition-seconds unavailable" in text and "incident(s)" in text
    assert "Leadership moved to a live leader" in text and "p99" in text
    # The worst incidents name their directory's path; only the violated invariants are listed.
    assert "broker 0 /b0/" in text or " /b" in text
    assert "K1 " not in text and "S1 " not in text


def test_cli_text_report_of_a_log_without_kraft_topics_tells_no_incidents(tmp_path):
    """A BookKeeper log has no partitions to lose a leader: its text report leads with the
    verdict and its own invariants, without the KRaft incident and availability lines."""
    fixture = Path(__file__).parent.parent / "fixtures" / "bookkeeper" / "audit" / "data-loss.jsonl"
    path = tmp_path / "log"
    assert cli("init", str(path)).exit_code == 0 and cli("append", str(path), str(fixture)).exit_code == 0
    res = cli("audit", str(path))
    assert res.exit_code == 1 and res.stdout.startswith("FAIL: ")
    assert "B8" in res.stdout
    assert "incident(s)" not in res.stdout and "partition-seconds" not in res.stdout


SHARDED = WorkloadConfig(brokers=12, dirs_per_broker=3, topics=6, partitions=36, seed=5, faults=FAULTS)
"""A history of shards with every fault (topics removed among them)."""


def _shards(cfg: WorkloadConfig, shards: int, records: int) -> tuple[list[list], list]:
    """Each shard of ``cfg`` alone (from offset 0) and the history laid end to end from them."""
    from kraftlake.statemachine.kraft.workload import shard_config, sharded

    alone = [[r for b in generate(shard_config(cfg, k, shards), records=records) for r in b] for k in range(shards)]
    whole = [r for b in sharded(iter(alone), start_ms=cfg.start_ms, step_ms=cfg.step_ms) for r in b]
    return alone, whole


def _by_offsets(found, shift: int) -> tuple[list, list]:
    """Incidents and outages with offsets moved by ``shift`` and times left out (``sharded``
    redraws the times)."""
    moved = lambda x: None if x is None else x + shift  # noqa: E731
    incidents = [
        (
            i.kind,
            i.broker,
            i.directory,
            moved(i.failed_at),
            moved(i.reported_at),
            moved(i.removed_at),
            moved(i.ended_at),
            [(e.topic, e.partition, e.role, moved(e.caused_by), moved(e.ended_by), e.outcome) for e in i.effects],
        )
        for i in found.incidents
    ]
    outages = sorted(
        (o.partition, o.why, moved(o.first_offset), moved(o.last_offset)) for o in found.availability.outages
    )
    return incidents, outages


def test_each_shard_of_a_sharded_history_has_the_incidents_it_has_alone():
    """Shards have brokers and topics of their own: in the history laid end to end, each shard's
    incidents, effects and outages are those it has alone, offsets shifted, though earlier
    shards' failed directories, fenced brokers and open effects stay to the end of the log (the
    tracker looks those up by broker, incident and topic), and topics are removed."""
    alone, whole = _shards(SHARDED, 3, 2000)
    found = find_incidents(whole)
    start, left_open, outcomes = 0, 0, set()
    for k, records in enumerate(alone):
        own = find_incidents(records)
        brokers = {r.broker_id for r in records if type(r).__name__ == "RegisterBroker"}
        topics = {r.topic_id for r in records if type(r).__name__ == "Topic"}
        mine = msgspec.structs.replace(
            found,
            incidents=[i for i in found.incidents if i.broker in brokers],
            availability=msgspec.structs.replace(
                found.availability, outages=[o for o in found.availability.outages if o.topic_id in topics]
            ),
        )
        assert own.incidents and own.availability.outages, k
        assert _by_offsets(mine, 0) == _by_offsets(own, start), k
        left_open += sum(i.ended_at is None for i in own.incidents)
        outcomes |= {e.outcome for i in own.incidents for e in i.effects}
        start += len(records)
    assert left_open  # incidents of one shard are still open while the next ones run
    assert {"broker back", "topic removed", "replica moved", "open"} <= outcomes


def back_and_dropped():
    """The KIP-858 story's disk fails (offset 23, ts ...10000), comes back online while the broker
    serves (24, ...11000), then leaves the registration (25, ...13000: the last record)."""
    from kraftlake.records.kraft import BrokerRegistrationChange
    from kraftlake.records.observations import LogDirFailed, LogDirsLoaded

    dead, other, t = "Ot57GypJXW8c7tKGTPwsPg", "8FATlxS8D75deTGo-YggVg", 1_700_000_000_000
    return fixture_records()[:23] + [
        LogDirFailed(offset=23, ts_ms=t + 10_000, broker_id=101, directory=dead),
        LogDirsLoaded(offset=24, ts_ms=t + 11_000, broker_id=101, online_dirs=(dead, other)),
        BrokerRegistrationChange(
            offset=25, ts_ms=t + 13_000, broker_id=101, broker_epoch=201, fenced=0, in_controlled_shutdown=0,
            log_dirs=(other,),
        ),
    ]  # fmt: skip


def test_a_directory_back_online_ends_its_incident_and_its_offline_time():
    """What the directory indexes hold is dropped when the disk comes back: the incident ends
    there with its effects (not marked removed by a later registration), and the partitions it
    led are offline only while it was failed, until the registration drops it."""
    found = find_incidents(back_and_dropped())
    (inc,) = found.incidents
    assert (inc.failed_at, inc.removed_at, inc.ended_at) == (23, None, 24)
    assert {(e.topic, e.partition, e.role, e.ended_by, e.outcome) for e in inc.effects} == {
        (t, 0, role, 24, "directory back") for t in "ab" for role in ("leader", "isr")
    }
    a = found.availability
    assert (a.leader_offline_ms, a.isr_offline_ms) == (2000, 2000)  # a-0 and b-0, 10000..11000
    assert [(o.topic_id[:2], o.first_offset, o.last_offset) for o in a.outages] == [("YW", 23, 23), ("dA", 23, 23)] + [
        ("YW", 25, None),
        ("dA", 25, None),
    ]


def test_the_plans_driver_follows_the_trackers_own_rules():
    """The incident rules are written once (``IncidentRules``): the plan's driver and the tracker
    only say where partitions come from; neither defines a rule of its own again."""
    from kraftlake.replay.incidents import IncidentRules, IncidentTracker
    from kraftlake.replay.plan.incidents import _Incidents

    rules = {"dir_failed", "loaded", "broker", "_removed_check", "_open", "_end", "_end_effects", "_maybe_close"}
    rules |= {"_close", "_broker_incident"}
    for follower in (IncidentTracker, _Incidents):
        assert issubclass(follower, IncidentRules)
        assert not rules & set(vars(follower)), follower
    assert "topic_removed" not in vars(_Incidents)  # the tracker adds its availability to it


def test_min_insync_replicas_is_the_topics_else_the_clusters_else_one():
    """One lookup (``min_isr``) for the tracker and the plan's driver: the topic's config, else the
    cluster default (a broker config with no name), else 1; a value that is not a number is 1."""
    from kraftlake.replay.incidents import min_isr
    from kraftlake.statemachine.kraft.reducer import replay
    from kraftlake.statemachine.kraft.view import ControllerView

    records = fixture_records()
    a, b = (r.topic_id for r in records if type(r).__name__ == "Topic")
    view = ControllerView()
    replay(records, view)
    assert (min_isr(view, a), min_isr(view, b), min_isr(view, "no-such-topic")) == (1, 1, 1)
    replay([Config(resource_type=4, resource_name="", name="min.insync.replicas", value="3", ts_ms=1)], view)
    replay([Config(resource_type=2, resource_name="a", name="min.insync.replicas", value="2", ts_ms=1)], view)
    assert (min_isr(view, a), min_isr(view, b), min_isr(view, "no-such-topic")) == (2, 3, 3)
    replay([Config(resource_type=2, resource_name="b", name="min.insync.replicas", value="two", ts_ms=1)], view)
    assert min_isr(view, b) == 1
