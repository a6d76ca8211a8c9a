"""The plan's incidents and availability (``replay.plan.incidents``) are ``find_incidents``'s: the
same incidents with their effects, the same availability per partition and outages, the same
handling stats, topics and directory paths, and the same violations tied to each incident
(``link_violations``), on every KRaft fixture, on Kafka's own logs and on simulated histories
with every fault and bug; without the per-record pass, but for logs it cannot serve
(``FALLBACK``)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import Log, iter_lines
from kraftlake.replay import incidents as tracker
from kraftlake.replay import report_json
from kraftlake.replay.incidents import find_incidents, link_violations
from kraftlake.replay.plan import audit_snapshot
from kraftlake.replay.plan import incidents as plan_incidents
from kraftlake.statemachine.kraft.bugs import BUGS
from kraftlake.statemachine.kraft.workload import BROKER_BUGS, FAULTS, WorkloadConfig, generate

from helpers.kafka_logs import KAFKA_LOG_NAMES, KAFKA_LOGS
from helpers.tiers import examples

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "kraft").rglob("*.jsonl"))


def _fixture(tmp_path, path: Path) -> Log:
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(path.open("rb"))))
    return log


def _simulated(tmp_path, records: int, **kw) -> Log:
    """A simulated history: a JBOD cluster of 5 brokers, 2 topics of 12 partitions, unless ``kw`` says."""
    cfg = {"brokers": 5, "topics": 2, "partitions": 12, **kw}
    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(WorkloadConfig(**cfg), records=records) for r in batch])
    return log


def _plan(log: Log, monkeypatch=None):
    """The plan's report on DuckDB; with ``monkeypatch``, the per-record pass may not run."""
    if monkeypatch is not None:

        def refuse(*_a, **_kw):
            raise AssertionError("the plan ran the per-record incidents pass")

        monkeypatch.setattr(plan_incidents, "find_incidents", refuse)
    return audit_snapshot(log.at(), threads=1)


def _same(log: Log, report) -> None:
    """``report``'s incidents and availability are those of ``find_incidents`` over the log."""
    expected = find_incidents(log.at().records())
    link_violations(expected.incidents, report.violations)
    got = {
        "incidents": report.incidents,
        "handling": report.handling,
        "availability": report.availability,
        "topics": report.topics,
        "dir_paths": report.dir_paths,
    }
    want = report_json.to_builtins(expected)
    have = report_json.to_builtins(got)
    for key in want:
        assert have[key] == want[key], key


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_the_plans_incidents_are_the_trackers_on_every_kraft_fixture(tmp_path, monkeypatch, fixture):
    log = _fixture(tmp_path, fixture)
    report = _plan(log, monkeypatch)
    _same(log, report)


def test_the_fixtures_have_incidents_of_every_kind_and_availability_to_compare(tmp_path):
    """The comparison above is not of empty lists."""
    kinds, effects, outages, partitions = set(), 0, 0, 0
    for i, fixture in enumerate(FIXTURES):
        report = _plan(_fixture(tmp_path / str(i), fixture))
        kinds |= {inc.kind for inc in report.incidents}
        effects += sum(len(inc.effects) for inc in report.incidents)
        outages += len(report.availability.outages)
        partitions += len(report.availability.partitions)
    assert kinds == {"dir-failure", "controlled-shutdown", "broker-fenced"}
    assert effects > 20 and outages > 5 and partitions > 5


@pytest.mark.parametrize("name", KAFKA_LOG_NAMES)
def test_the_plans_incidents_are_the_trackers_on_kafkas_own_logs(tmp_path, name):
    from kraftlake.records.kafka.importer import import_kafka

    log = Log.create(tmp_path / "log")
    import_kafka(KAFKA_LOGS / name, log)
    _same(log, _plan(log))


@settings(max_examples=examples(12), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    records=st.integers(200, 2500),
    dirs=st.integers(1, 3),
    mv=st.sampled_from([7, 17, 21, 23]),
    bug=st.sampled_from([None, *(b for b in BUGS if b not in ("elr-overlaps-isr", "elect-outside-elr")), *BROKER_BUGS]),
    policy=st.booleans(),
    faults=st.sets(st.sampled_from(FAULTS), min_size=1).map(
        lambda f: f if f & {"controlled-shutdown", "broker-crash"} else f | {"broker-crash"}
    ),
)
def test_the_plans_incidents_are_the_trackers_on_simulated_histories(
    tmp_path_factory, seed, records, dirs, mv, bug, policy, faults
):
    log = _simulated(
        tmp_path_factory.mktemp("sim"),
        dirs_per_broker=dirs,
        seed=seed,
        bug=bug,
        faults=tuple(sorted(faults)),
        metadata_version=mv,
        fence_policy=policy,
        records=records,
    )
    _same(log, _plan(log))


# make test's: make test-fast compares the incidents on every KRaft fixture and on a history of shards.
@pytest.mark.slow
@pytest.mark.parametrize("bug", [None, *BUGS, *BROKER_BUGS])
@settings(max_examples=examples(1), deadline=None)
@given(seed=st.integers(0, 10_000), dirs=st.integers(2, 3))
def test_the_plans_incidents_are_the_trackers_with_every_simulator_bug(tmp_path_factory, bug, seed, dirs):
    mv = 23 if bug in ("elr-overlaps-isr", "elect-outside-elr") else 21
    log = _simulated(
        tmp_path_factory.mktemp("bug"),
        dirs_per_broker=dirs,
        seed=seed,
        bug=bug,
        faults=FAULTS,
        metadata_version=mv,
        fence_policy=True,
        records=1200,
    )
    _same(log, _plan(log))


def test_metadata_transactions_committed_aborted_and_unfinished(tmp_path, monkeypatch):
    """A committed transaction's records count where they are (in offset order), an aborted
    one's and an unfinished one's are NoOps: the plan's incidents are the tracker's, without
    the per-record pass. The aborted transaction holds broker changes and partition changes."""
    from kraftlake.records.kraft import AbortTransaction, BeginTransaction, EndTransaction

    fixture = next(p for p in FIXTURES if p.name == "controlled-shutdown.jsonl")
    records = [msgspec.structs.replace(r, offset=None) for r in iter_lines(fixture.open("rb"))]
    n = len(records)
    records = [
        *records[:30],
        BeginTransaction(name="a"),
        *records[30:50],
        EndTransaction(),
        *records[50:70],
        BeginTransaction(name="b"),
        *records[70:90],
        AbortTransaction(),
        *records[90 : n - 10],
        BeginTransaction(name="c"),
        *records[n - 10 :],
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    report = _plan(log, monkeypatch)
    _same(log, report)
    assert report.incidents


def test_a_log_with_a_record_without_a_time_falls_back_to_the_per_record_pass(tmp_path, monkeypatch):
    """The tracker skips an untimed record's durations in a way that does not add up per
    interval: for such a table (kraftlake's appends always stamp a time; a table written by
    something else may not), the plan runs ``find_incidents`` and says so; the same answer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    log = _fixture(tmp_path, next(p for p in FIXTURES if p.name == "controlled-shutdown.jsonl"))
    snap = log.at()
    table = snap.dataset().to_table()
    untimed = pc.equal(table["offset"], 57)
    table = table.set_column(
        table.schema.get_field_index("ts_ms"), "ts_ms", pc.if_else(untimed, pa.scalar(None, pa.int64()), table["ts_ms"])
    )
    calls = []
    monkeypatch.setattr(plan_incidents, "find_incidents", lambda rs: calls.append(1) or find_incidents(rs))
    report = audit_snapshot(snap, threads=1, dataset=table)
    assert calls == [1]
    records = [msgspec.structs.replace(r, ts_ms=None) if r.offset == 57 else r for r in snap.records()]
    expected = find_incidents(records)
    link_violations(expected.incidents, report.violations)
    assert msgspec.to_builtins(report.availability) == msgspec.to_builtins(expected.availability)
    assert report_json.to_builtins(report.incidents) == report_json.to_builtins(expected.incidents)


def test_a_history_without_incidents_has_none_and_full_availability(tmp_path, monkeypatch):
    """Reassignments and min.insync.replicas changes fail no broker: no incident; raising
    min.insync.replicas above the ISR leaves partitions under it, measured as the tracker does."""
    log = _simulated(
        tmp_path, brokers=3, topics=1, partitions=4, seed=1, faults=("alter-min-isr", "reassign"), records=600
    )
    report = _plan(log, monkeypatch)
    _same(log, report)
    assert report.incidents == []


def test_the_cli_does_not_run_the_per_record_pass_after_the_plan(tmp_path, monkeypatch):
    """``kraftlake audit`` on DuckDB: the report carries the plan's incidents; ``emit`` leaves
    them be."""
    from typer.testing import CliRunner

    from kraftlake.cli.app import app

    log = _fixture(tmp_path, next(p for p in FIXTURES if p.name == "jbod-dir-failure.jsonl"))

    def refuse(*_a, **_kw):
        raise AssertionError("find_incidents ran")

    monkeypatch.setattr(tracker, "find_incidents", refuse)
    monkeypatch.setattr(plan_incidents, "find_incidents", refuse)
    result = CliRunner().invoke(app, ["audit", str(log.path), "--format", "json", "--engine", "duckdb"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    doc = msgspec.json.decode(result.stdout.encode())
    assert doc["incidents"] and doc["availability"]["partitions"]


@pytest.mark.parametrize("per", [1, 3, 8])
def test_the_plans_incidents_are_the_trackers_on_a_history_of_shards(tmp_path, monkeypatch, per):
    """Shards laid end to end: earlier shards' failed directories, fenced brokers and open
    effects stay to the end while later ones fail, recover and remove topics (both sides index
    them by broker, incident and topic); a broker's requests and offline intervals, all in its
    shard, ranked through buckets of its own of ``per`` offsets (``ranks.PER_BUCKET``)."""
    from test_incidents import SHARDED, _shards

    from kraftlake.replay.plan import ranks

    monkeypatch.setattr(ranks, "PER_BUCKET", per)

    log = Log.create(tmp_path / "log")
    log.append(_shards(SHARDED, 3, 2000)[1])
    report = _plan(log, monkeypatch)
    assert any(i.ended_at is None for i in report.incidents)
    _same(log, report)


@pytest.mark.parametrize("rows", [1, 7])
def test_closed_incidents_effects_spilled_during_the_replay_are_the_trackers(tmp_path, monkeypatch, rows):
    """Effects of incidents that closed are spilled out of memory as the replay goes, once
    ``SPILL_ROWS`` of them are held (``_Incidents._closed``: in an ``EffectArena``'s chunk), not
    only after the replay; the report is the tracker's all the same."""
    from test_incidents import SHARDED, _shards

    from kraftlake.replay import incidents as tracker

    monkeypatch.setattr(plan_incidents, "SPILL_ROWS", rows)
    spills = []
    real = plan_incidents.spill

    def counted(lists, directory=None):
        lists = list(lists)
        spills.append(sum(len(x) for x in lists if not x.spilled))
        real(lists, directory)

    monkeypatch.setattr(plan_incidents, "spill", counted)
    monkeypatch.setattr(tracker, "spill", counted)
    log = Log.create(tmp_path / "log")
    log.append(_shards(SHARDED, 3, 2000)[1])
    report = _plan(log, monkeypatch)
    during = spills[:-1]  # the last: what was still held after the replay
    assert len(during) >= 2 and all(n >= rows for n in during)
    assert sum(spills) == sum(len(i.effects) for i in report.incidents)
    assert any(i.ended_at is not None and i.effects for i in report.incidents)
    _same(log, report)


def test_the_plans_incidents_are_the_trackers_when_a_directory_comes_back(tmp_path, monkeypatch):
    from test_incidents import back_and_dropped

    log = Log.create(tmp_path / "log")
    log.append(back_and_dropped())
    _same(log, _plan(log, monkeypatch))


def _ends_and_comebacks() -> list:
    """The KIP-858 story's set-up (brokers 101 and 102 with two directories each; topics a and b
    of two partitions, all led by 101, both in every ISR; 101's replicas of a-0 and b-0 on ``d0``,
    of a-1 and b-1 on ``d1``), then effects ended at the edges (``effects``' ended_by):

    - 23: 101's ``d0`` fails (a-0, b-0: leader and ISR effects under ``d0``);
    - 24: a-0 moves its leader and ISR to 102: two effects ended by one record;
    - 25, 26: b-0's leader moves to 102 (ends leadership) and back to 101 (does not reopen it);
    - 27: b-0's ISR drops 101 (its ISR effect ends here, not at 25 or 26);
    - 28: 102 starts a controlled shutdown (a-0, b-0: leader and ISR; a-1, b-1: ISR; any directory);
    - 29, 30: 102 leaves a-1's ISR (ends it) and comes back;
    - 31, 32: b-1 moves 102's replica to another directory (ends nothing: the effect is the
      broker's, not a directory's), then drops 102 from its ISR (ends it);
    - 33, 34: a-0 drops 102 from its replicas (ends leadership and ISR at once), then takes it back;
    - 35: 101's ``d1`` fails (a-1, b-1: leader and ISR);
    - 36, 37: a-1 moves 101's replica off ``d1`` (ends both) and back (reopens nothing)."""
    from test_incidents import fixture_records

    from kraftlake.records.kraft import BrokerRegistrationChange, PartitionChange, ReplicaDirectory
    from kraftlake.records.observations import LogDirFailed

    a, b = "YW6soxYeId5Lgf56lnEg3g", "dAMvN9tlpM4l1TsGqSyGsA"
    d0, d1 = "Ot57GypJXW8c7tKGTPwsPg", "8FATlxS8D75deTGo-YggVg"
    e0, e1 = "sEFAvcev_iE-QOdjsFNH7Q", "5LXlCV8-Nx0cMeDCNWf-hg"
    t = 1_700_000_010_000

    def dirs(*pairs):
        return tuple(ReplicaDirectory(broker=x, directory=y) for x, y in pairs)

    def change(offset, topic, p, **kw):
        return PartitionChange(offset=offset, ts_ms=t + offset * 1000, topic_id=topic, partition_id=p, **kw)

    return fixture_records()[:23] + [
        LogDirFailed(offset=23, ts_ms=t + 23_000, broker_id=101, directory=d0),
        change(24, a, 0, leader=102, isr=(102,)),
        change(25, b, 0, leader=102),
        change(26, b, 0, leader=101),
        change(27, b, 0, leader=102, isr=(102,)),
        BrokerRegistrationChange(
            offset=28, ts_ms=t + 28_000, broker_id=102, broker_epoch=202, fenced=0, in_controlled_shutdown=1,
        ),
        change(29, a, 1, isr=(101,)),
        change(30, a, 1, isr=(101, 102)),
        change(31, b, 1, assignment=dirs((101, d1), (102, e0))),
        change(32, b, 1, isr=(101,)),
        change(33, a, 0, replicas=(101,), isr=(101,), leader=101, assignment=dirs((101, d0))),
        change(34, a, 0, replicas=(101, 102), isr=(101, 102), leader=102, assignment=dirs((101, d0), (102, e0))),
        LogDirFailed(offset=35, ts_ms=t + 35_000, broker_id=101, directory=d1),
        change(36, a, 1, assignment=dirs((101, d0), (102, e1))),
        change(37, a, 1, assignment=dirs((101, d1), (102, e1))),
    ]  # fmt: skip


ENDS = {
    ("dir-failure", 23): {
        ("a", 0, "leader", 24, "leader moved"),
        ("a", 0, "isr", 24, "left the ISR"),
        ("b", 0, "leader", 25, "leader moved"),
        ("b", 0, "isr", 27, "left the ISR"),
    },
    ("controlled-shutdown", 28): {
        ("a", 0, "leader", 33, "replica removed"),
        ("a", 0, "isr", 33, "replica removed"),
        ("b", 0, "leader", None, "open"),
        ("b", 0, "isr", None, "open"),
        ("a", 1, "isr", 29, "left the ISR"),
        ("b", 1, "isr", 32, "left the ISR"),
    },
    ("dir-failure", 35): {
        ("a", 1, "leader", 36, "replica moved"),
        ("a", 1, "isr", 36, "replica moved"),
        ("b", 1, "leader", None, "open"),
        ("b", 1, "isr", None, "open"),
    },
}
"""Each incident of ``_ends_and_comebacks`` (kind, failed at): its effects (topic, partition,
role, ended by, outcome)."""


def _ends(report) -> dict:
    return {
        (inc.kind, inc.failed_at): {(e.topic, e.partition, e.role, e.ended_by, e.outcome) for e in inc.effects}
        for inc in report.incidents
    }


def test_effects_end_at_the_first_record_that_breaks_them_and_stay_ended(tmp_path, monkeypatch):
    """Each effect ends at the first later record that takes the broker's role (on the failed
    directory) away, also when one record ends several, and a broker that leaves and comes back
    does not reopen or extend an effect: the plan's ``effects`` says so as the tracker does."""
    log = Log.create(tmp_path / "log")
    log.append(_ends_and_comebacks())
    assert _ends(find_incidents(log.at().records())) == ENDS
    report = _plan(log, monkeypatch)
    assert _ends(report) == ENDS
    _same(log, report)


# -- the effects' rows streamed to the replay ------------------------------------------------------


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12), st.integers(1, 7), st.randoms(use_true_random=False))
def test_streamed_rows_are_each_requests_in_the_order_the_replay_asks(counts, batch_rows, rnd):
    """``_Streamed`` gives each request exactly its rows across batch boundaries, for requests
    without rows too, in the order the replay asks: by offset, the requests of one offset in any
    order; a request of an offset the replay has passed without asking is never asked (more are
    asked than the rules open) and its rows are let go; a key never registered is None (the
    replay asks for it), and a second ask is refused."""
    import pyarrow as pa

    keys = [(i // 2 * 10, i % 3, None if i % 2 else f"d{i}") for i in range(len(counts))]
    reqs = [r for r, n in enumerate(counts) for _ in range(n)]
    table = pa.table({"req": pa.array(reqs, pa.int64()), "value": pa.array([r * 100 + j for r, n in enumerate(counts) for j in range(n)], pa.int64())})  # fmt: skip
    started = []

    def reader():
        started.append(1)
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(batch_rows))

    streamed = plan_incidents._Streamed(keys, reader)
    assert streamed.get((-1, 0, None)) is None and not started  # the statement waits for a real ask
    order = list(range(len(keys)))
    rnd.shuffle(order)
    skipped = set(order[: len(order) // 3])  # rules that open fewer incidents than were asked
    order = sorted((r for r in order if r not in skipped), key=lambda r: keys[r][0])  # stable: shuffled per offset
    for r in order:
        (values,) = streamed.get(keys[r]).columns()
        assert values == [r * 100 + j for j in range(counts[r])]
        assert all(n >= r or keys[n][0] == keys[r][0] for n in streamed.pieces), "rows of passed offsets held"
    assert started == ([1] if order else [])
    if order:
        with pytest.raises(RuntimeError, match="asked twice"):
            streamed.get(keys[order[0]])


def test_a_closed_stream_leaves_duckdb_free_for_the_next_statement():
    """A round of the replay may leave requests unread (it asks for fewer than the round before):
    DuckDB refuses any statement while a result is open, so the stream is closed after each
    round (``_Streamed.close``)."""
    from kraftlake.replay.plan.duck import DuckEngine

    with DuckEngine(threads=1) as engine:
        keys = list(range(5000))
        streamed = plan_incidents._Streamed(
            keys, lambda: engine.arrow_batches("SELECT range // 2 AS req, range AS v FROM range(10000) ORDER BY 1", 100)
        )
        assert streamed.get(3).columns() == ([6, 7],)
        streamed.close()
        assert engine.rows("SELECT 42") == [(42,)]


_dirs = st.lists(st.sampled_from(["d0", "d1", "d2", "LOST"]), max_size=3).map(tuple)
_reg = st.one_of(st.just((None, None)), st.tuples(_dirs, st.tuples(st.booleans(), st.booleans())))
_times = st.one_of(st.none(), st.integers(-(1 << 62), 1 << 62))
_event = st.one_of(
    st.tuples(st.just("dir"), st.integers(0, 1 << 40), _times, st.integers(0, 9), _dirs, st.booleans(), _reg),
    st.tuples(
        st.just("loaded"),
        st.integers(0, 1 << 40),
        _times,
        st.integers(0, 9),
        _dirs,
        _dirs,
        st.lists(st.sampled_from(["", "/a", "/b"]), max_size=6).map(tuple),
        _reg,
    ),
    st.tuples(st.just("broker"), st.integers(0, 1 << 40), _times, st.integers(0, 9), st.integers(-1, 1 << 40), _reg),
    st.tuples(st.just("remove"), st.integers(0, 1 << 40), _times, st.sampled_from(["t1", "t2", "t3"])),
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_event, max_size=40))
def test_the_observers_events_as_columns_iterate_as_the_tuples_they_were_given(events):
    """``Events`` keeps the broker side's events as columns (what repeats once) and gives back,
    in order, the very tuples the incidents' replay reads, a missing time included."""
    kept = plan_incidents.Events()
    for ev in events:
        kind, offset, ts = ev[:3]
        if kind == "remove":
            kept.add(kind, offset, ts, ev[3], None, None)
        elif kind == "broker":
            kept.add(kind, offset, ts, ev[3], ev[4], ev[5])
        else:
            kept.add(kind, offset, ts, ev[3], ev[4:-1], ev[-1])
    assert len(kept) == len(events)
    assert list(kept) == events
    assert list(kept) == events  # read again: iterating does not consume them
