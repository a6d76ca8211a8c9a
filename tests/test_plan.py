"""The audit plan agrees with the Python engine: the same report (violations with their ids,
entities, offsets, messages and evidence; verdict; state hash) on every audit fixture, on
Kafka's own logs, and on simulated histories that hypothesis picks (seeds, sizes, directories,
metadata.versions, faults, bugs, graces), on DuckDB (``plan``). The plan is one SQL text: Spark
runs it on a few logs that run every statement (``test_spark_parity.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import Log, iter_lines
from kraftlake.replay import report_json
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.replay.plan import audit_snapshot
from kraftlake.replay.plan.duck import DuckEngine
from kraftlake.replay.summary import bounded
from kraftlake.statemachine.kraft.bugs import BUGS
from kraftlake.statemachine.kraft.workload import BROKER_BUGS, FAULTS, WorkloadConfig, generate
from kraftlake.statemachine.s3stream.bugs import BUGS as S3_BUGS

from helpers.kafka_logs import KAFKA_LOG_NAMES, KAFKA_LOGS
from helpers.kraft import bootstrap, registration, uid, without_offsets
from helpers.tiers import examples

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "kraft" / "audit").glob("*.jsonl"))


def _duckdb(log: Log, config: AuditConfig | None = None):
    return audit_snapshot(log.at(), config)


@pytest.fixture(scope="module")
def plan():
    """The audit plan on DuckDB: a function of (log, config) giving its report. Spark runs the
    same statements on a few logs that run them all (``test_spark_parity.py``)."""
    return _duckdb


@pytest.fixture(scope="module")
def engine_of():
    """The plan's DuckDB engine reading a log: a function of the log giving it (a context manager)."""

    def duck(log: Log):
        engine = DuckEngine(threads=1)
        engine.read_snapshot(log.at())
        return engine

    return duck


def _both(plan, log: Log, config: AuditConfig | None = None):
    local = Audit(config)
    local.feed(log.at().records())
    return local.report(), plan(log, config)


def _same(local, remote) -> None:
    assert [msgspec.to_builtins(v) for v in remote.violations] == [msgspec.to_builtins(v) for v in local.violations]
    assert (remote.verdict, remote.records, remote.first_offset, remote.last_offset, remote.state_hash) == (
        local.verdict,
        local.records,
        local.first_offset,
        local.last_offset,
        local.state_hash,
    )
    # ``checked`` too: both count what the catalogue says one check of each invariant is.
    assert [(i.id, i.violations, i.checked) for i in remote.invariants] == [
        (i.id, i.violations, i.checked) for i in local.invariants
    ]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_the_plan_gives_the_python_report_on_every_fixture(plan, tmp_path, fixture):
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(fixture.open("rb"))))
    local, remote = _both(plan, log)
    _same(local, remote)
    # Not two empty lists: each story has the violations it is about (fixtures/.../expected.json).
    expected = json.loads((FIXTURES[0].parent / "expected.json").read_text())[fixture.name]
    assert remote.verdict == expected["verdict"]
    assert {v.invariant for v in remote.violations} >= set(expected["caught_by"])


@settings(max_examples=examples(8), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    records=st.integers(100, 2500),
    dirs=st.integers(1, 3),
    mv=st.sampled_from([1, 7, 12, 17, 21, 23]),
    # The KIP-966 bugs need ELR on (metadata.version 4.1-IV1): tests/test_plan_elr.py.
    bug=st.sampled_from([None, *(b for b in BUGS if b not in ("elr-overlaps-isr", "elect-outside-elr")), *BROKER_BUGS]),
    policy=st.booleans(),
    # Directory failures alone run out of brokers to fail, and an operator's elections alone can
    # run out of changes (the simulator says so): bring brokers back.
    faults=st.sets(st.sampled_from(FAULTS), min_size=1).map(
        lambda f: f if f & {"controlled-shutdown", "broker-crash"} else f | {"broker-crash"}
    ),
    grace=st.sampled_from([(1000, 5000), (5, 100), (0, 0), (50, 10**9)]),
)
def test_the_plan_and_python_agree_on_simulated_histories(
    plan, tmp_path_factory, seed, records, dirs, mv, bug, policy, faults, grace
):
    cfg = WorkloadConfig(
        brokers=5,
        dirs_per_broker=dirs,
        topics=2,
        partitions=12,
        seed=seed,
        bug=bug,
        faults=tuple(sorted(faults)),
        metadata_version=mv,
        fence_policy=policy,
    )
    log = Log.create(tmp_path_factory.mktemp("sim") / "log")
    log.append([r for batch in generate(cfg, records=records) for r in batch])
    _same(*_both(plan, log, AuditConfig(grace_records=grace[0], grace_ms=grace[1])))


@pytest.mark.slow  # every bug x hypothesis: make test's; test-fast has test_invariant_parity (every invariant, both engines)
@pytest.mark.parametrize("bug", [None, *BUGS, *BROKER_BUGS])
@settings(max_examples=examples(2), deadline=None)
@given(seed=st.integers(0, 10_000), dirs=st.integers(2, 3), grace=st.sampled_from([(0, 0), (20, 10**9)]))
def test_every_simulator_bug_gives_the_same_report(plan, tmp_path_factory, bug, seed, dirs, grace):
    """Each bug the simulator can plant (controller's and brokers'), in a JBOD history with every
    fault, audited by both engines: the same report."""
    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=dirs, topics=2, partitions=12, seed=seed, bug=bug, faults=FAULTS, fence_policy=True
    )
    log = Log.create(tmp_path_factory.mktemp("bug") / "log")
    log.append([r for batch in generate(cfg, records=1200) for r in batch])
    _same(*_both(plan, log, AuditConfig(grace_records=grace[0], grace_ms=grace[1])))


OPERATIONS = ("delete-topic", "create-partitions", "cancel-reassign", "elect-leaders")
"""The operator's operations (opt-in in the simulator): DeleteTopics, CreatePartitions, cancelled
reassignments, preferred and unclean ElectLeaders."""


@pytest.mark.parametrize(
    "bug, caught_by", [(None, None), ("keep-offline-replica-in-isr", "K5"), ("no-leader-epoch-bump", "K3")]
)
@pytest.mark.parametrize("mv", [pytest.param(17, marks=pytest.mark.slow), 21])  # 17: make test's
def test_the_plan_and_python_agree_on_the_operators_operations(plan, tmp_path, mv, bug, caught_by):
    """Topics deleted (and new ones created), partitions added, reassignments cancelled and
    leaders elected on top of the default faults: both engines give the same report; the correct
    controller's has no error, a bug's names its invariant."""
    from kraftlake.records import RemoveTopic

    faults = (*FAULTS[:3], *OPERATIONS)
    for seed in (1, 2):
        cfg = WorkloadConfig(
            brokers=5,
            dirs_per_broker=2,
            topics=2,
            partitions=12,
            seed=seed,
            faults=faults,
            metadata_version=mv,
            bug=bug,
        )
        history = [r for batch in generate(cfg, records=1500) for r in batch]
        assert any(isinstance(r, RemoveTopic) for r in history)
        log = Log.create(tmp_path / f"log-{seed}")
        log.append(history)
        local, remote = _both(plan, log)
        _same(local, remote)
        errors = {v.invariant for v in local.violations if v.severity == "error"}
        assert errors == set() if bug is None else caught_by in errors, (seed, errors)


def test_broker_records_against_the_registration_in_force(plan, tmp_path):
    """L3/L4 as the local reducer rules them: a change of a broker never registered, a stale
    epoch, a valid unregistration, then changes of the broker it removed; a re-registration
    starts over."""

    from kraftlake.records import BrokerRegistrationChange, FenceBroker, UnregisterBroker

    records = [
        *bootstrap(),
        registration(1, [uid("d1")], epoch=10),
        BrokerRegistrationChange(broker_id=2, broker_epoch=5, fenced=-1),  # L3: never registered
        BrokerRegistrationChange(broker_id=1, broker_epoch=9, fenced=-1),  # L4: stale epoch
        UnregisterBroker(broker_id=1, broker_epoch=7),  # L4: stale, not removed
        UnregisterBroker(broker_id=1, broker_epoch=10),  # removed
        FenceBroker(id=1, epoch=10),  # L3: no longer registered
        UnregisterBroker(broker_id=1, broker_epoch=10),  # L3
        registration(1, [uid("d1")], epoch=20),
        BrokerRegistrationChange(broker_id=1, broker_epoch=20, fenced=-1),  # fine
        BrokerRegistrationChange(broker_id=1, broker_epoch=10, fenced=1),  # L4: the old epoch
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log)
    assert [(v.invariant, v.first_offset) for v in local.violations] == [
        ("L3", 2),
        ("L4", 3),
        ("L4", 4),
        ("L3", 6),
        ("L3", 7),
        ("L4", 10),
    ]
    _same(local, remote)


def test_metadata_transactions_aborted_committed_and_unfinished(plan, tmp_path):
    """Both engines audit the published history (``replay.transactions``): a partition made wrong
    inside an aborted transaction never was, the same change committed is wrong, and the
    records of the transaction still open at the end are no state (nor in the state hash)."""

    from kraftlake.records import NoOp, Partition, PartitionChange, ReplicaDirectory, Topic
    from kraftlake.records.kraft import AbortTransaction, BeginTransaction, EndTransaction

    t, d = uid("t"), {b: uid(f"d{b}") for b in (1, 2, 3)}

    def change(p, **kw):
        return PartitionChange(topic_id=t, partition_id=p, **kw)

    records = [
        *bootstrap(),
        *(registration(b, [d[b]], epoch=b, fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=t),
        *(
            Partition(
                topic_id=t,
                partition_id=p,
                replicas=(1, 2),
                isr=(1, 2),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
                assignment=(ReplicaDirectory(broker=1, directory=d[1]), ReplicaDirectory(broker=2, directory=d[2])),
            )
            for p in (0, 1, 2)
        ),
        BeginTransaction(name="aborted"),
        change(0, leader=3),
        change(1, isr=(2,)),
        NoOp(),
        AbortTransaction(),
        change(1, isr=(1,)),  # K1 were the aborted change kept (leader 1 of ISR [2] then [1])
        BeginTransaction(name="committed"),
        change(2, leader=3),
        EndTransaction(),  # K1 from here
        BeginTransaction(name="open"),
        change(0, leader=3),
        change(1, replicas=(2, 3), isr=(3,), leader=3),
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log, AuditConfig(grace_records=0))
    assert [(v.invariant, v.first_offset) for v in local.violations] == [("K1", 15)]
    _same(local, remote)


def test_the_reports_the_controller_accepts_are_the_local_audits(plan, tmp_path):
    """The plan tells which AssignReplicasToDirsRequests the controller accepts (K9 follows only
    those) from the brokers' registration epochs, as the local audit does record by record: a
    registered broker at its epoch, not a stale epoch, a broker never registered or
    unregistered, nor a request inside an aborted transaction or one still open at the end; one
    inside a committed transaction after the broker registered again there, at the new epoch."""
    from kraftlake.records import NoOp, Partition, ReplicaDirectory, Topic
    from kraftlake.records.kraft import AbortTransaction, BeginTransaction, EndTransaction, UnregisterBroker
    from kraftlake.records.observations import AssignReplicasToDirsRequest, DirectoryReplicas, TopicPartitions

    t, d = uid("t"), {b: [uid(f"d{b}a"), uid(f"d{b}b")] for b in (1, 2, 3, 9)}

    def report(broker, epoch, p):  # replica ``p`` of ``broker`` in its other directory: wrong
        moved = DirectoryReplicas(id=d[broker][1], topics=(TopicPartitions(topic_id=t, partitions=(p,)),))
        return AssignReplicasToDirsRequest(broker_id=broker, broker_epoch=epoch, directories=(moved,))

    records = [
        *bootstrap(),
        *(registration(b, d[b], epoch=b, fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=t),
        *(
            Partition(
                topic_id=t,
                partition_id=p,
                replicas=(1, 2, 3),
                isr=(1, 2, 3),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
                assignment=tuple(ReplicaDirectory(broker=b, directory=d[b][0]) for b in (1, 2, 3)),
            )
            for p in range(7)
        ),
        report(1, 1, 0),  # accepted
        report(2, 7, 1),  # a stale epoch
        report(9, 9, 2),  # never registered
        UnregisterBroker(broker_id=3, broker_epoch=3),
        report(3, 3, 3),  # unregistered
        BeginTransaction(name="aborted"),
        report(2, 2, 4),
        AbortTransaction(),
        BeginTransaction(name="committed"),
        registration(2, d[2], epoch=20, fenced=False),
        report(2, 2, 5),  # the old epoch: refused
        report(2, 20, 5),  # accepted
        EndTransaction(),
        NoOp(),
        BeginTransaction(name="open"),
        report(1, 1, 6),
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    _same(local, remote)
    k9 = sorted(v.entity for v in remote.violations if v.invariant == "K9")
    assert k9 == [f"replica/{t}/0/1", f"replica/{t}/5/2"]
    assert {i.id: i.checked for i in remote.invariants}["K9"] == 2


def test_refused_partition_records_and_directories_that_follow_replicas(plan, tmp_path):
    """The records the reducer refuses (a partition of a missing topic, a change of a missing
    partition, an assignment that does not fit the replicas) are left out of the state on Spark
    too; a change that sets replicas without directories keeps the staying replicas' ones and
    puts the new replica in UNASSIGNED, so a leader moved there is on an online directory."""

    from kraftlake.records import Partition, PartitionChange, ReplicaDirectory, Topic

    t, ghost = uid("t"), uid("ghost")
    d = {b: uid(f"d{b}") for b in (1, 2, 3)}
    records = [
        *bootstrap(),
        *(registration(b, [d[b]], epoch=b, fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=t),
        Partition(topic_id=ghost, partition_id=0, replicas=(1,), isr=(1,), leader=1),  # L3: no topic
        PartitionChange(topic_id=t, partition_id=0, isr=(1,)),  # L3: no partition
        Partition(
            topic_id=t,
            partition_id=0,
            replicas=(1, 2),
            isr=(1, 2),
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
            assignment=(ReplicaDirectory(broker=1, directory=d[1]), ReplicaDirectory(broker=2, directory=d[2])),
        ),
        PartitionChange(
            topic_id=t, partition_id=0, isr=(9,), assignment=(ReplicaDirectory(broker=1, directory=d[1]),)
        ),  # K2
        PartitionChange(topic_id=t, partition_id=0, replicas=(2, 3), isr=(2, 3), leader=3),
        PartitionChange(topic_id=t, partition_id=0, isr=(3,)),
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log)
    got = [(v.invariant, v.first_offset) for v in local.violations]
    assert got[:3] == [("L3", 5), ("L3", 6), ("K2", 8)]
    assert not any(v.invariant in ("K1", "K4", "K5") for v in local.violations)
    _same(local, remote)


def test_replicas_added_without_directories_to_an_all_migrating_partition_are_migrating(plan, tmp_path):
    """Issue 34, item 8b (Kafka's ``PartitionRegistration.merge``, KAFKA-16583): a change without
    directories (v0) that adds replicas to a partition whose directories are all MIGRATING leaves
    every replica MIGRATING; to one with a real directory, the new replica is UNASSIGNED. Both
    engines fold it alike: on a broker with two directories an UNASSIGNED replica is K8/K10's,
    a MIGRATING one is not."""
    from kraftlake.records import NoOp, Partition, PartitionChange, ReplicaDirectory, Topic
    from kraftlake.records.kraft import MIGRATING, UNASSIGNED
    from kraftlake.replay.state import state_at

    t, u = uid("migrating-t"), uid("migrating-u")
    d = {b: [uid(f"migrating-d{b}-{i}") for i in (0, 1)] for b in (1, 2, 3)}
    records = [
        *bootstrap(),
        *(registration(b, d[b], epoch=b, fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=t),
        Partition(topic_id=t, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1),  # all MIGRATING
        PartitionChange(topic_id=t, partition_id=0, replicas=(1, 2, 3), adding_replicas=(3,)),
        PartitionChange(topic_id=t, partition_id=0, replicas=(2, 3), isr=(2, 3), leader=3, adding_replicas=()),
        Topic(name="u", topic_id=u),
        Partition(
            topic_id=u,
            partition_id=0,
            replicas=(1, 2),
            isr=(1, 2),
            leader=1,
            assignment=(ReplicaDirectory(broker=1, directory=d[1][0]), ReplicaDirectory(broker=2, directory=MIGRATING)),
        ),
        PartitionChange(topic_id=u, partition_id=0, replicas=(1, 2, 3), adding_replicas=(3,)),
    ]
    added = len(records) - 1
    records += [NoOp(), NoOp()]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    _same(local, remote)
    view = state_at(log)
    assert view.partition(t, 0).directories == (MIGRATING, MIGRATING)
    assert view.partition(u, 0).directories == (d[1][0], MIGRATING, UNASSIGNED)
    assert {(v.invariant, v.entity, v.first_offset) for v in local.violations if v.invariant in ("K8", "K10")} == {
        ("K8", "broker/3", added),
        ("K10", "broker/3", added),
    }


def test_a_local_sessions_scratch_is_a_temporary_directory_removed_on_close(spark):
    from kraftlake.spark.scratch import Scratch

    with Scratch(spark) as s:
        root = Path(s.root)
        df = s.keep(spark.range(50).selectExpr("id", "id * id AS square"), "squares")
        assert sorted(r.square for r in df.where("id < 4").collect()) == [0, 1, 4, 9]
        assert any(root.iterdir())
    assert not root.exists()


def test_a_scratch_directory_is_removed_without_a_jvm_on_spark_connect(tmp_path):
    """A Spark Connect session has no SparkContext (no JVM on this side): a scratch directory
    given as a local path or file:// URI is removed here; one elsewhere is left, with a warning,
    not an error that would hide the report."""
    from kraftlake.spark.scratch import _delete

    class ConnectSession:
        @property
        def sparkContext(self):
            raise RuntimeError(
                "[JVM_ATTRIBUTE_NOT_SUPPORTED] Attribute `sparkContext` is not supported in Spark Connect"
            )

    for i, name in enumerate((str, lambda p: f"file://{p}")):
        kept = tmp_path / f"timeline-{i}"
        (kept / "part-0").mkdir(parents=True)
        _delete(ConnectSession(), name(kept))
        assert not kept.exists()
    _delete(ConnectSession(), "hdfs://namenode/scratch/timeline-2")


def test_a_topic_recreated_under_its_id_is_a_new_partition_history(plan, tmp_path):
    """Spark numbers each partition lifetime (topic lifetime, partition id) for its windows: a
    topic removed and created again under the same id starts its partitions afresh (a change
    between the lives is refused, the new life's first change does not continue the old
    epochs or ISR), and records of two missing topics, which share one window, are each refused."""

    from kraftlake.records import Partition, PartitionChange, RemoveTopic, Topic

    t, ghost1, ghost2 = uid("t"), uid("ghost1"), uid("ghost2")
    records = [
        *bootstrap(),
        *(registration(b, [uid(f"d{b}")], epoch=b, fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=t),
        Partition(topic_id=t, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=4, partition_epoch=7),
        PartitionChange(topic_id=t, partition_id=0, isr=(1,)),
        PartitionChange(topic_id=ghost1, partition_id=0, isr=(1,)),  # L3: no topic
        RemoveTopic(topic_id=t),
        PartitionChange(topic_id=t, partition_id=0, isr=(2,)),  # L3: the topic is gone
        PartitionChange(topic_id=ghost2, partition_id=0, isr=(2,)),  # L3: no topic
        Topic(name="t", topic_id=t),
        PartitionChange(topic_id=t, partition_id=0, isr=(3,)),  # L3: no partition in this life yet
        Partition(topic_id=t, partition_id=0, replicas=(2, 3), isr=(2, 3), leader=2, leader_epoch=0, partition_epoch=0),
        PartitionChange(topic_id=t, partition_id=0, isr=(9,)),  # K1: 9 is not a replica
        PartitionChange(topic_id=t, partition_id=0, replicas=(2, 3), isr=(2, 3), leader=3),
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log)
    assert sorted(v.invariant for v in local.violations) == ["K1", "L3", "L3", "L3", "L3"]
    _same(local, remote)
    replayed = Audit()
    replayed.feed(log.at().records())
    (partition,) = replayed.view.partitions[t].values()
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (
        3,
        1,
        2,
    )  # the second life's epochs


@pytest.mark.parametrize("name", KAFKA_LOG_NAMES)
def test_the_plan_gives_the_python_report_on_kafkas_own_logs(plan, tmp_path, name):
    from kraftlake.records.kafka.importer import import_kafka

    log = Log.create(tmp_path / "log")
    import_kafka(KAFKA_LOGS / name, log)
    _same(*_both(plan, log))


def _k6_k8_k9_log(tmp_path: Path) -> Log:
    """3 000 records of a JBOD cluster whose controller acknowledges directory reports without
    recording them (K6, K8 and K9 abound)."""
    cfg = WorkloadConfig(
        brokers=6,
        dirs_per_broker=4,
        topics=3,
        partitions=30,
        seed=5,
        bug="skip-dir-assignment",
        faults=("broker-crash", "controlled-shutdown", "dir-failure", "reassign"),
    )
    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(cfg, records=3000) for r in batch])
    return log


def test_the_plan_and_python_agree_where_k6_k8_and_k9_abound(plan, tmp_path):
    """A JBOD cluster whose controller acknowledges directory reports without recording them:
    hundreds of K9 intervals, K8 warnings whose messages carry the count at each broker record,
    K6 with no grace at all."""
    log = _k6_k8_k9_log(tmp_path)
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    _same(local, remote)
    found = {i.id: i.violations for i in remote.invariants}
    assert found["K9"] > 50 and found["K8"] > 20 and found["K6"] > 20


def test_k9_names_a_reported_directory_no_record_knows(plan, tmp_path):
    """A broker reports a replica in a directory that no partition record, registration or
    other report names: the plan carries reported directories in its dictionary of directory
    ids, and this one must come back as the same string in K9's words as the Python engine's."""
    from kraftlake.records import NoOp
    from kraftlake.records.observations import AssignReplicasToDirsRequest, DirectoryReplicas, TopicPartitions
    from kraftlake.statemachine.kraft.reducer import apply
    from kraftlake.statemachine.kraft.view import ControllerView

    log = _k6_k8_k9_log(tmp_path)
    records = list(log.at().records())
    view = ControllerView()
    for r in records:
        apply(view, r)
    before = Audit(AuditConfig(grace_records=0, grace_ms=0))
    before.feed(records)
    still_open = {v.entity for v in before.report().violations if v.invariant == "K9" and v.last_offset is None}
    # A replica of a registered broker that is not wrong already: a new K9 interval opens there.
    topic, pid, broker = next(
        (p.topic_id, p.partition_id, b)
        for p in view.iter_partitions()
        for b in p.replicas
        if b in view.brokers and f"replica/{p.topic_id}/{p.partition_id}/{b}" not in still_open
    )
    stranger = uid("a directory nobody else names")
    assert all(stranger not in msgspec.json.encode(r).decode() for r in records)
    report = AssignReplicasToDirsRequest(
        broker_id=broker,
        broker_epoch=view.brokers[broker].epoch,
        directories=(DirectoryReplicas(id=stranger, topics=(TopicPartitions(topic_id=topic, partitions=(pid,)),)),),
    )
    log.append([report, NoOp()])  # a record after it: an interval lasts beyond its first offset
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    _same(local, remote)
    (named,) = [v for v in remote.violations if v.invariant == "K9" and stranger in v.message]
    assert named.entity == f"replica/{topic}/{pid}/{broker}" and named.last_offset is None


def test_checked_counts_what_the_catalogue_says_a_check_is(plan, tmp_path):
    """``checked`` per the catalogue's ``counts``, computed here from the records themselves: a
    partition state per partition record (K1, K4, K5; and K2), a change per record of an existing
    partition (K3), a request per UnfenceRequested (K11), a removal per directory taken from a
    broker (K7), a report per replica directory an accepted request names (K9); not the Python
    engine's re-checks of a partition at its brokers' records."""
    from kraftlake.records import BrokerRegistrationChange, Partition, PartitionChange
    from kraftlake.records.observations import AssignReplicasToDirsRequest, UnfenceRequested
    from kraftlake.statemachine.kraft.reducer import apply
    from kraftlake.statemachine.kraft.view import ControllerView

    cfg = WorkloadConfig(
        brokers=5,
        dirs_per_broker=3,
        topics=2,
        partitions=12,
        seed=9,
        bug="skip-dir-assignment",
        faults=("broker-crash", "controlled-shutdown", "dir-failure", "reassign"),
        fence_policy=True,
    )
    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(cfg, records=1500) for r in batch])
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    _same(local, remote)
    assert not any(v.invariant in ("L3", "L4", "L5", "K2") for v in local.violations)  # every record applies
    view, seen = ControllerView(), set()
    expected = dict.fromkeys(("K1", "K2", "K3", "K7", "K9", "K11"), 0)
    for r in log.at().records():
        if isinstance(r, (Partition, PartitionChange)):
            expected["K1"] += 1
            expected["K2"] += 1  # each held to its replicas as it is applied
            expected["K3"] += (r.topic_id, r.partition_id) in seen
            seen.add((r.topic_id, r.partition_id))
        elif isinstance(r, UnfenceRequested):
            expected["K11"] += 1
        elif isinstance(r, AssignReplicasToDirsRequest):
            reg = view.brokers.get(r.broker_id)
            if reg is not None and reg.epoch == r.broker_epoch:
                expected["K9"] += sum(len(tp.partitions) for d in r.directories for tp in d.topics)
        elif isinstance(r, BrokerRegistrationChange) and r.log_dirs:
            expected["K7"] += len(set(view.brokers[r.broker_id].log_dirs) - set(r.log_dirs))
        apply(view, r)
    checked = {i.id: i.checked for i in remote.invariants}
    assert {inv: checked[inv] for inv in expected} == expected
    assert checked["K4"] == checked["K5"] == checked["K1"]
    assert all(expected.values()), expected
    # K8 and K10 judge the same broker states (each broker record, each UNASSIGNED crossing).
    assert checked["K8"] == checked["K10"] > 0


@pytest.mark.parametrize("per", [1, 2, 100])
def test_k4_k5_cut_into_narrow_offset_buckets(plan, tmp_path, monkeypatch, per):
    """K4/K5's ranked lookups are cut into buckets per key (``ranks.PER_BUCKET`` offsets to a
    bucket): buckets far narrower than a partition state or a bad interval, each straddled by
    many (one or two offsets each), or one per key, give the same violations as the local audit
    (the whole report: K7's instants on the same history too)."""
    import kraftlake.replay.plan.ranks as plan_ranks

    monkeypatch.setattr(plan_ranks, "PER_BUCKET", per)
    cfg = WorkloadConfig(
        brokers=5,
        dirs_per_broker=3,
        topics=2,
        partitions=16,
        seed=11,
        bug="elect-offline-leader",
        faults=("broker-crash", "controlled-shutdown", "dir-failure"),
    )
    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(cfg, records=1500) for r in batch])
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    _same(local, remote)
    found = {i.id: i.violations for i in remote.invariants}
    assert found["K4"] > 10 and found["K5"] > 10 and found["K7"] > 10, found


@pytest.mark.parametrize("per", [1, 8])
def test_leaders_on_brokers_never_registered_or_left_fenced_to_the_end(plan, tmp_path, monkeypatch, per):
    """K4 on a leader whose broker never registered (no bad interval: the known brokers' anti
    join) and on one whose broker is fenced to the log's end while the partition's last state
    lasts to the end too (a long state meeting a long interval, in one bucket or across many):
    each found once, as the local audit finds them."""
    import kraftlake.replay.plan.ranks as plan_ranks
    from kraftlake.records import FenceBroker, Partition, PartitionChange, ReplicaDirectory, Topic

    monkeypatch.setattr(plan_ranks, "PER_BUCKET", per)
    t = uid("t")
    d = {b: uid(f"d{b}") for b in (1, 2, 9)}

    def partition(p: int, replicas: tuple[int, ...]) -> Partition:
        assignment = tuple(ReplicaDirectory(broker=b, directory=d[b]) for b in replicas)
        return Partition(topic_id=t, partition_id=p, replicas=replicas, isr=replicas, leader=replicas[0],
                         leader_epoch=0, partition_epoch=0, assignment=assignment)  # fmt: skip

    records = [
        *bootstrap(),
        *(registration(b, [d[b]], epoch=b, fenced=False) for b in (1, 2)),
        Topic(name="t", topic_id=t),
        partition(0, (1, 2)),
        partition(1, (9, 1)),  # broker 9 never registers
        FenceBroker(id=2, epoch=2),  # fenced to the end
        PartitionChange(topic_id=t, partition_id=0, leader=2),
        *(PartitionChange(topic_id=t, partition_id=2 + i % 2, isr=(1,)) for i in range(6)),  # L3: filler
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log, AuditConfig(grace_records=0, grace_ms=0))
    k4 = sorted((v.entity, v.first_offset, v.last_offset) for v in local.violations if v.invariant == "K4")
    assert k4 == [(f"partition/{t}/0", 7, None), (f"partition/{t}/1", 5, None)]
    _same(local, remote)


def test_a_history_generated_in_shards_is_one_history(plan, tmp_path):
    """Shards (parts of the cluster with their own brokers, topics and seeds) generated apart and
    laid end to end make one log: gapless, times never going back, the same records on every
    run, a correct controller's audit passing, and both engines agreeing on it."""
    from kraftlake.statemachine.kraft.workload import shard_config, sharded

    cfg = WorkloadConfig(brokers=8, dirs_per_broker=2, topics=4, partitions=24, seed=11)

    def history():
        shards = (batch for k in range(3) for batch in generate(shard_config(cfg, k, 3), records=400))
        return [r for batch in sharded(shards, start_ms=cfg.start_ms, step_ms=cfg.step_ms) for r in batch]

    records = history()
    assert [r.offset for r in records] == list(range(len(records)))
    assert all(a.ts_ms <= b.ts_ms for a, b in zip(records, records[1:]))
    assert records == history()
    brokers = {r.broker_id for r in records if type(r).__name__ == "RegisterBroker"}
    assert brokers == set(range(9))  # 3 shards x max(RF 3, 8 // 3) brokers, ids of their own
    assert sorted(r.name for r in records if type(r).__name__ == "Topic") == ["topic-s0-0", "topic-s1-0", "topic-s2-0"]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log)
    assert local.verdict == "pass"
    _same(local, remote)


def test_the_brokers_side_in_the_plan(plan, tmp_path):
    """K10, K11, K12 (the brokers' side of KIP-858) from one log where brokers make all three
    mistakes' worth of states: Kafka-as-shipped brokers (K11 at each early request), a broker
    that never places replicas (K10), one that never reports a failed disk (K12)."""
    records = []
    for i, (bug, policy) in enumerate((("broker-skip-assign", True), ("broker-silent-dir-failure", False))):
        cfg = WorkloadConfig(
            brokers=5,
            dirs_per_broker=3,
            topics=2,
            partitions=18,
            seed=40 + i,
            bug=bug,
            fence_policy=policy,
            first_broker=10 * i,
            topic_prefix=f"t{i}",
        )
        records += [r for batch in generate(cfg, records=900) for r in batch]
    records = without_offsets(records)
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log, AuditConfig(grace_records=20, grace_ms=10**9))
    _same(local, remote)
    found = {inv: sum(v.invariant == inv for v in remote.violations) for inv in ("K10", "K11", "K12")}
    assert all(n > 0 for n in found.values()), found


FAMILY_FIXTURES = sorted(
    p
    for family in ("s3stream", "bookkeeper")
    for p in (Path(__file__).parent.parent / "fixtures" / family / "audit").glob("*.jsonl")
)


# make test's: the plan runs the per-record audit on these families' records (``plan.control``);
# test_invariant_parity's cases compare both engines on each of their invariants in make test-fast.
@pytest.mark.slow
@pytest.mark.parametrize("fixture", FAMILY_FIXTURES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_the_plan_gives_the_python_report_on_every_s3stream_and_bookkeeper_fixture(plan, tmp_path, fixture):
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(fixture.open("rb"))))
    local, remote = _both(plan, log)
    _same(local, remote)
    family_hash = "streams_state_hash" if fixture.parent.parent.name == "s3stream" else "bookies_state_hash"
    assert getattr(remote, family_hash) == getattr(local, family_hash) is not None
    expected = json.loads((fixture.parent / "expected.json").read_text())[fixture.name]
    assert remote.verdict == expected["verdict"]
    assert {v.invariant for v in remote.violations} >= set(expected["caught_by"])


@settings(max_examples=examples(4), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    bug=st.sampled_from([None, *S3_BUGS]),
    grace=st.sampled_from([(1000, 5000), (0, 0), (3, 50)]),
)
def test_the_plan_and_python_agree_on_simulated_s3stream_histories(plan, tmp_path_factory, seed, bug, grace):
    from kraftlake.statemachine.s3stream.workload import WorkloadConfig as S3Config
    from kraftlake.statemachine.s3stream.workload import generate as s3_generate

    log = Log.create(tmp_path_factory.mktemp("s3") / "log")
    log.append(
        [r for batch in s3_generate(S3Config(seed=seed, bug=bug, streams=8, ttl_ms=5_000), records=1500) for r in batch]
    )
    local, remote = _both(plan, log, AuditConfig(grace_records=grace[0], grace_ms=grace[1]))
    _same(local, remote)
    assert remote.streams_state_hash == local.streams_state_hash


@pytest.mark.parametrize("bug", ["ignore-offline-dirs", "skip-dir-assignment"])
def test_a_state_shorter_than_the_record_grace_is_held_by_its_time(plan, tmp_path, bug):
    """With the record grace out of reach, what is held depends on the records' times alone (the
    grace's lookup of both ends' times; K4/K5 candidates from the driver, K9's from Spark): at a
    grace in time that keeps some wrong states and lets others go, Spark keeps the same ones."""
    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=2, topics=2, partitions=12, seed=3, bug=bug, faults=("broker-crash", "dir-failure")
    )
    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(cfg, records=1500) for r in batch])

    def local(grace_ms: int) -> int:
        a = Audit(AuditConfig(grace_records=10**9, grace_ms=grace_ms))
        a.feed(log.at().records())
        return len(a.report().violations)

    every, none = local(0), local(10**12)
    between = [g for g in (200, 500, 1000, 2000, 5000) if none < local(g) < every]
    assert between, (every, none)
    _same(*_both(plan, log, AuditConfig(grace_records=10**9, grace_ms=between[len(between) // 2])))


def test_the_registrations_other_fields_are_the_last_each_record_set(plan, tmp_path):
    """Removing/adding replicas, the leader recovery state and the ELR fields no invariant reads
    still make the final state's hash: each is the value of the last record that set it (a
    change that leaves it null keeps it; a PartitionRecord sets all of them), where directories
    are named and where they are folded per replica (a change of replicas without directories)."""

    from kraftlake.records import Partition, PartitionChange, ReplicaDirectory, Topic

    t = uid("t")
    d = {b: uid(f"d{b}") for b in (1, 2, 3, 4)}

    def placed(*brokers):
        return tuple(ReplicaDirectory(broker=b, directory=d[b]) for b in brokers)

    records = [
        *bootstrap(),
        *(registration(b, [d[b]], epoch=b, fenced=False) for b in (1, 2, 3, 4)),
        Topic(name="t", topic_id=t),
    ]
    for p, careful in ((0, False), (1, True)):
        records += [
            Partition(
                topic_id=t,
                partition_id=p,
                replicas=(1, 2),
                isr=(1, 2),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
                assignment=placed(1, 2),
                eligible_leader_replicas=(2,),
                last_known_elr=(1,),
            ),
            PartitionChange(
                topic_id=t,
                partition_id=p,
                replicas=(1, 2, 3),
                adding_replicas=(3,),
                removing_replicas=(1,),
                **({} if careful else {"assignment": placed(1, 2, 3)}),
            ),
            PartitionChange(topic_id=t, partition_id=p, leader_recovery_state=1, eligible_leader_replicas=()),
            PartitionChange(
                topic_id=t,
                partition_id=p,
                replicas=(2, 3),
                isr=(2, 3),
                leader=2,
                adding_replicas=(),
                removing_replicas=(),
                assignment=placed(2, 3),
            ),
            PartitionChange(topic_id=t, partition_id=p, last_known_elr=(2, 3)),
            PartitionChange(topic_id=t, partition_id=p, isr=(2,)),  # sets none of them: the last state keeps them
        ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local, remote = _both(plan, log)
    from kraftlake.statemachine.kraft.reducer import replay

    final = replay(log.at().records()).partitions[t]
    assert {
        p: (
            r.removing_replicas,
            r.adding_replicas,
            r.leader_recovery_state,
            r.eligible_leader_replicas,
            r.last_known_elr,
        )
        for p, r in final.items()
    } == {p: ((), (), 1, (), (2, 3)) for p in (0, 1)}
    _same(local, remote)


@pytest.mark.parametrize("bug", [None, "elect-offline-leader", "skip-dir-assignment"])
def test_the_one_pass_timeline_equals_the_general_form(engine_of, tmp_path, bug):
    """``fills`` states a partition in one window pass where ``unclean`` does not name it; the
    general form (``judged``, ``states``) states every partition. Here every partition is
    stated both ways: the rows are the same, column for column; and a partition registered
    twice, one with a refused change and one whose replicas change without directories are
    named unclean."""
    from kraftlake.records import Partition, PartitionChange, ReplicaDirectory
    from kraftlake.replay.plan import sql
    from kraftlake.replay.plan.control import replay_control_plane
    from kraftlake.replay.plan.run import LIVES, build_timeline, control_records
    from kraftlake.statemachine.kraft.features import MV_3_0_IV1, MV_3_6_IV0

    cfg = WorkloadConfig(brokers=5, dirs_per_broker=3, topics=2, partitions=12, seed=11, bug=bug)
    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(cfg, records=2000) for r in batch])
    first = {}
    for r in log.at().records():
        if isinstance(r, Partition):
            first.setdefault((r.topic_id, r.partition_id), r)
    (t0, p0), (t1, p1), (t2, p2) = list(first)[:3]
    again = msgspec.structs.replace(first[(t0, p0)], offset=None, ts_ms=None)
    refused = PartitionChange(
        topic_id=t1, partition_id=p1, isr=(9,), assignment=(ReplicaDirectory(broker=9, directory=uid("nine")),)
    )
    bare = PartitionChange(topic_id=t2, partition_id=p2, replicas=first[(t2, p2)].replicas[::-1])
    log.append([again, refused, bare])
    snap = log.at()
    with engine_of(log) as engine:
        control = sum(1 for r in snap.records() if not isinstance(r, (Partition, PartitionChange)))
        plane = replay_control_plane(control_records(engine, 0, snap.last_offset, control), AuditConfig())
        engine.table("lives", [(i, *life) for i, life in enumerate(plane.topics)], LIVES)
        build_timeline(engine, plane.unpublished, plane.mv_levels)
        d = engine.dialect
        fast = engine.rows(f"SELECT {sql.TIMELINE} FROM fills WHERE pk NOT IN (SELECT pk FROM unclean)")
        unclean = {pk for (pk,) in engine.rows("SELECT pk FROM unclean")}
        engine.keep("unclean", "SELECT DISTINCT pk FROM fills")
        engine.view("judged", sql.judged(d))
        everything = engine.rows(f"SELECT * FROM ({sql.general_states(d, plane.mv_levels, MV_3_0_IV1, MV_3_6_IV0)}) g")
    assert len(unclean) == 3
    general = [r for r in everything if r[0] not in unclean]
    assert len(fast) > 500
    key = lambda r: (r[0], r[1])  # noqa: E731
    assert sorted(map(tuple, fast), key=key) == sorted(map(tuple, general), key=key)


def test_the_driver_reads_the_control_plane_a_range_of_offsets_at_a_time(engine_of, tmp_path):
    """``plan.run.control_records`` reads a range of offsets at a time from the engine (an
    S3Stream log is nearly all control records): with a window of a few records, every
    non-partition record comes once, in offset order, whatever the ranges' edges cut through;
    of each run of AssignReplicasToDirsRequests between two of the others, where it ends
    (``Reports``: the last one's offset and time), read from the columns."""
    from kraftlake.records.observations import AssignReplicasToDirsRequest
    from kraftlake.replay.plan.control import Reports
    from kraftlake.replay.plan.run import control_records

    log = Log.create(tmp_path / "log")
    log.append([r for batch in generate(WorkloadConfig(brokers=4, partitions=6, seed=3), records=600) for r in batch])
    snap = log.at()
    expected = []
    for r in snap.records():
        if type(r).__name__ in ("Partition", "PartitionChange"):
            continue
        if isinstance(r, AssignReplicasToDirsRequest):
            if expected and isinstance(expected[-1], Reports):
                expected.pop()
            r = Reports(r.offset, r.ts_ms)
        expected.append(r)
    assert 20 < len(expected) < 600
    requests = sum(isinstance(r, AssignReplicasToDirsRequest) for r in snap.records())
    assert requests > sum(isinstance(r, Reports) for r in expected) > 3  # runs of several among them
    with engine_of(log) as engine:
        for window in (7, 1000):
            got = list(control_records(engine, 0, snap.last_offset, len(expected), window=window))
            assert [msgspec.to_builtins(r) for r in got] == [msgspec.to_builtins(r) for r in expected]
        assert list(control_records(engine, None, None, 0)) == []


def test_duckdb_reads_the_snapshot_as_an_arrow_dataset_over_a_pyarrow_filesystem(tmp_path):
    """Object storage is read through pyarrow.fs, not DuckDB's extensions: a dataset of the
    snapshot's files through a file system rooted at the table (as an S3 bucket would be, paths
    relative to it) gives the report the local files give, cut where the snapshot is cut."""
    import pyarrow.dataset as ds
    from pyarrow import fs

    fixture = next(f for f in FIXTURES if f.name == "elect-offline-leader.jsonl")
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(fixture.open("rb"))))
    snap = log.at(offset=40)
    root = str(Path(log.path).resolve())
    remote = fs.SubTreeFileSystem(root, fs.LocalFileSystem())
    files = [str(Path(f).resolve().relative_to(root)) for f in snap.files()]
    dataset = ds.dataset(files, schema=snap.schema(), format="parquet", filesystem=remote)
    report = audit_snapshot(snap, dataset=dataset)
    local = Audit()
    local.feed(snap.records())
    _same(local.report(), report)
    assert report.last_offset == 40 and report.engine.startswith("duckdb")


def test_audit_runs_the_plan_on_duckdb_by_default_and_python_on_request(tmp_path):
    """``kraftlake audit``: the plan on DuckDB on a KRaft log, the Python engine with ``--engine
    python``, with ``--from`` and on an S3Stream log; the same violations, verdict and exit code,
    and the report says which engine ran what."""
    from typer.testing import CliRunner

    from kraftlake.cli.app import app

    runner = CliRunner()
    fixture = next(f for f in FIXTURES if f.name == "keep-offline-replica-in-isr.jsonl")
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(fixture.open("rb"))))
    args = ["audit", str(log.path), "--format", "json", "--grace-records", "3"]
    default, python = (runner.invoke(app, args + extra) for extra in ([], ["--engine", "python"]))
    assert (default.exit_code, python.exit_code) == (1, 1), default.output
    d, p = json.loads(default.stdout), json.loads(python.stdout)
    assert d["engine"].startswith("duckdb: partition records") and p["engine"] == "python"
    assert d["violations"] == p["violations"] != [] and d["state_hash"] == p["state_hash"]
    since = runner.invoke(app, args + ["--from", "10"])
    assert json.loads(since.stdout)["engine"] == "python"
    refused = runner.invoke(app, args + ["--from", "10", "--engine", "duckdb"])
    assert refused.exit_code == 2 and "--engine python" in refused.output
    family = next(f for f in FAMILY_FIXTURES if f.parent.parent.name == "s3stream")
    s3 = Log.create(tmp_path / "s3log")
    s3.append(list(iter_lines(family.open("rb"))))
    auto = runner.invoke(app, ["audit", str(s3.path), "--format", "json"])
    planned = runner.invoke(app, ["audit", str(s3.path), "--format", "json", "--engine", "duckdb"])
    assert json.loads(auto.stdout)["engine"] == "python" and json.loads(planned.stdout)["engine"].startswith("duckdb")
    assert json.loads(auto.stdout)["violations"] == json.loads(planned.stdout)["violations"]


def test_duckdb_reads_files_older_than_the_schema_through_an_arrow_dataset(tmp_path, monkeypatch):
    """DuckDB's own Parquet reader takes the files only when their columns have the table's
    types and hold the columns the plan reads; a file whose column differs from the table's (a
    struct written before a field existed) is read through an Arrow dataset of the table's
    schema. Either way the same rows."""
    import pyarrow as pa

    from kraftlake.records.store.snapshot import LogSnapshot

    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(FIXTURES[0].open("rb"))))
    snap = log.at()
    with DuckEngine(threads=1) as engine:
        engine.read_snapshot(snap)
        assert "read_parquet" in engine.rows("SELECT sql FROM duckdb_views() WHERE view_name = 'log'")[0][0]
        ((n,),) = engine.rows("SELECT count(*) FROM log")
    schema = snap.schema()
    i = schema.get_field_index("ts_ms")
    wider = schema.set(i, pa.field("ts_ms", pa.int32())).append(pa.field("a_later_column", pa.int64()))
    monkeypatch.setattr(LogSnapshot, "schema", lambda self: wider)
    with DuckEngine(threads=1) as engine:
        engine.read_snapshot(snap)
        assert "read_parquet" not in engine.rows("SELECT sql FROM duckdb_views() WHERE view_name = 'log'")[0][0]
        assert engine.rows("SELECT count(*), count(a_later_column) FROM log") == [(n, 0)]
    assert n == snap.last_offset + 1


def test_duckdb_runs_on_every_core_within_its_memory_limit_spilling_to_its_own_directory(tmp_path):
    """The engine ``kraftlake audit`` runs: a thread per core this process may use, DuckDB held to
    ``MEMORY_LIMIT`` (or the limit given), spilling to a temporary directory of its own that
    ``close`` removes (or the one given, left in place)."""
    import os

    import duckdb

    from kraftlake.replay.plan.duck import MEMORY_LIMIT

    def setting(engine, name):
        return engine.rows(f"SELECT current_setting('{name}')")[0][0]

    def spelled(limit):  # as DuckDB reports a limit (in MiB/GiB)
        return (
            duckdb.connect(config={"memory_limit": limit})
            .execute("SELECT current_setting('memory_limit')")
            .fetchone()[0]
        )

    with DuckEngine() as engine:
        assert setting(engine, "threads") == len(os.sched_getaffinity(0))
        assert setting(engine, "memory_limit") == spelled(MEMORY_LIMIT) != spelled("10GB")
        spill = Path(setting(engine, "temp_directory"))
        assert spill.is_dir() and spill.name.startswith("kraftlake-duckdb-")
    assert not spill.exists()
    with DuckEngine(threads=1, memory_limit="200MB", temp_directory=tmp_path) as engine:
        assert (setting(engine, "threads"), setting(engine, "memory_limit")) == (1, spelled("200MB"))
        assert Path(setting(engine, "temp_directory")) == tmp_path
    assert tmp_path.is_dir()


def test_duckdb_draws_no_progress_bar_on_standard_output(capfd):
    """DuckDB draws a progress bar on standard output for a query past ``progress_bar_time``
    (two seconds): an audit run as a library call wrote it there, into the caller's output
    (``kraftlake audit --format json``'s report is written to standard output)."""
    with DuckEngine() as engine:
        engine.con.execute("SET progress_bar_time = 0")
        assert engine.rows("SELECT count(*) FROM range(3000000) r WHERE r.range % 7 = 3") == [(428571,)]
    out, _err = capfd.readouterr()
    assert out == ""


def test_an_engine_removes_the_spills_of_engines_whose_process_is_gone(tmp_path, monkeypatch):
    """A process killed mid-audit never closes its engine: the next engine removes that spill
    directory (its process id is gone), and leaves those of running processes and directories
    not named as its own."""
    import os
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    orphan = tmp_path / f"kraftlake-duckdb-{dead}-abc123"
    (orphan / "nested").mkdir(parents=True)
    (orphan / "nested" / "duckdb_temp_block.tmp").write_bytes(b"x" * 1000)
    running = tmp_path / f"kraftlake-duckdb-{os.getpid()}-def456"
    running.mkdir()
    unnamed = tmp_path / "kraftlake-duckdb-xyz789"  # no process id: not the engine's naming
    unnamed.mkdir()
    other = tmp_path / f"someone-else-{dead}-abc"
    other.mkdir()
    with DuckEngine(threads=1) as engine:
        own = Path(engine.spill)
        assert own.parent == tmp_path and own.name.startswith(f"kraftlake-duckdb-{os.getpid()}-")
        assert not orphan.exists()
        assert running.is_dir() and unnamed.is_dir() and other.is_dir()
    assert not own.exists()


def test_a_kept_table_beyond_the_memory_limit_spills_and_reads_back_whole(tmp_path):
    """A table the plan keeps (``keep``) that outgrows DuckDB's memory limit is written to the
    temporary directory, not refused, and reads back row for row."""
    with DuckEngine(threads=1, memory_limit="32MB", temp_directory=tmp_path) as engine:
        digits = " || ".join(f"md5(CAST(range + {i} AS VARCHAR))" for i in range(3))  # 96 bytes DuckDB cannot compress
        engine.keep("big", f"SELECT range AS x, {digits} AS s FROM range(1000000)")
        ((files, size),) = engine.rows("SELECT count(*), coalesce(sum(size), 0) FROM duckdb_temporary_files()")
        assert files > 0 and size > 32 * 2**20  # more than the limit is on disk
        assert any(tmp_path.iterdir())
        assert engine.rows("SELECT count(*), sum(x), count(DISTINCT s), min(length(s)) FROM big") == [
            (1_000_000, 999_999 * 1_000_000 // 2, 1_000_000, 96)
        ]


def test_the_violations_are_sorted_into_files_before_the_state_hash(tmp_path, monkeypatch):
    """Nothing is found after the grace: from there on the violations are sorted into files, so
    the state hash, the incidents and availability never run beside them held in memory."""
    from kraftlake.replay.violations import ViolationList
    from kraftlake.statemachine.kraft.view import ControllerView

    steps = []
    sort, state_hash, encoded = ViolationList.sort, ControllerView.state_hash, ControllerView.state_hash_encoded

    def sorted_(self, *, spill_to=False):
        sort(self, spill_to=spill_to)
        steps.append(("sorted", len(self), self.spilled))

    def hashed(self, partitions=None):
        steps.append(("hash",))
        return state_hash(self, partitions)

    def hashed_encoded(self, partitions):
        steps.append(("hash",))
        return encoded(self, partitions)

    monkeypatch.setattr(ViolationList, "sort", sorted_)
    monkeypatch.setattr(ControllerView, "state_hash", hashed)
    monkeypatch.setattr(ControllerView, "state_hash_encoded", hashed_encoded)
    log = _k6_k8_k9_log(tmp_path)
    local = Audit(AuditConfig(grace_records=0, grace_ms=0))
    local.feed(log.at().records())
    steps.clear()  # the Python engine's own, if any
    remote = _duckdb(log, AuditConfig(grace_records=0, grace_ms=0))
    # The last hash is the plan's (the control plane's own audit hashes its partitionless view).
    assert steps[-2:] == [("sorted", len(remote.violations), True), ("hash",)]
    _same(local.report(), remote)


def test_the_plan_under_a_small_memory_limit_gives_the_python_report(tmp_path, monkeypatch):
    """The plan held to 48 MB (the limit in force through every step) on a history where K6, K8
    and K9 abound gives the Python engine's report; ``kraftlake audit --memory-limit`` gives the
    report the default limit gives, and refuses a limit DuckDB cannot read or one too small for
    the work (exit 2, the option named); ``--temp-directory`` spills where it says, and a place
    it cannot spill to ends the plan the same way."""
    import tempfile

    import duckdb
    from typer.testing import CliRunner

    from kraftlake.cli.app import app
    from kraftlake.replay.plan import audit as plan_audit

    log = _k6_k8_k9_log(tmp_path)
    limits = []
    with DuckEngine(threads=1, memory_limit="48MB") as engine:
        engine.read_snapshot(log.at())

        def limit(_step: str) -> None:
            cursor = engine.con.cursor()  # beside a read the step may interrupt
            limits.append(cursor.execute("SELECT current_setting('memory_limit')").fetchone()[0])

        remote = plan_audit(engine, step=limit)
    local = Audit()
    local.feed(log.at().records())
    _same(local.report(), remote)
    as_set = duckdb.connect(config={"memory_limit": "48MB"}).execute("SELECT current_setting('memory_limit')")
    assert len(limits) > 5 and set(limits) == {as_set.fetchone()[0]}
    runner = CliRunner()
    args = ["audit", str(log.path), "--format", "json"]
    default, small = runner.invoke(app, args), runner.invoke(app, [*args, "--memory-limit", "64MB"])
    assert default.exit_code == small.exit_code == 1
    assert json.loads(default.stdout) == json.loads(small.stdout)
    shown = report_json.to_builtins(bounded(remote, times=log.at().record_times))
    assert {k: v for k, v in json.loads(small.stdout).items() if k != "engine"} == {
        k: v for k, v in shown.items() if k != "engine"
    }
    spills = tmp_path / "tmp"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))  # where the engine makes its directory
    refused = runner.invoke(app, [*args, "--memory-limit", "lots"])
    assert refused.exit_code == 2 and "--memory-limit: memory limit 'lots'" in refused.output
    # A limit too small for the work: exit 2 saying which limit held and how to raise it.
    starved = runner.invoke(app, [*args, "--memory-limit", "1MB"])
    assert starved.exit_code == 2, starved.output
    assert "more than DuckDB's memory limit" in starved.output and "raise it with --memory-limit" in starved.output
    assert "in the stage 'reading the log'" in starved.output  # where it ran out: before any audit step
    assert not any(spills.iterdir())  # none left behind
    # --temp-directory: where it spills. A place it can spill to gives the same report and is
    # kept; one it cannot write (a file) ends the plan with exit 2 naming it, not a traceback.
    chosen = tmp_path / "spill-here"
    chosen.mkdir()
    spilled = runner.invoke(app, [*args, "--memory-limit", "48MB", "--temp-directory", str(chosen)])
    assert spilled.exit_code == 1, spilled.output
    assert json.loads(spilled.stdout) == json.loads(default.stdout)
    assert chosen.is_dir()  # the user's directory: not removed with the engine's files
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    stuck = runner.invoke(app, [*args, "--memory-limit", "8MB", "--temp-directory", str(blocked)])
    assert stuck.exit_code == 2, stuck.output
    assert f"could not spill to {blocked}" in stuck.output and "--temp-directory" in stuck.output
    assert "Traceback" not in stuck.output
