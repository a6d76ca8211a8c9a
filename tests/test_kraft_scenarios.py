"""Kafka's own controller tests as given / when / then: given records, when a command, then exactly
these records and this state. The test names number them:

- s1: ReplicationControlManagerTest.testHandleDirectoriesOffline;
- s2: ReplicationControlManagerTest.testHandleAssignReplicasToDirs and
  testHandleAssignReplicasToDirsFailsOnOlderMv;
- s3: ReplicationControlManagerTest.testFenceMultipleBrokers and testRemoveLeaderships;
- s4: PartitionChangeBuilderTest's elections and leader-epoch bumps (testNoChange,
  testIsrChangeDoesntBumpLeaderEpoch, testIsrChangeAndLeaderChange, testElectLeader,
  testUncleanLeaderElection, testReassignmentRearrangesReplicas,
  testLeaderEpochBumpOnNewReplicaSetDisjoint, testLeaderEpochBumpOnIsrShrink,
  testNoLeaderEpochBumpOnIsrShrink, testNoLeaderEpochBumpOnIsrExpansion);
- s5: PartitionChangeBuilderTest.testUpdateDirectories and testKeepsDirectoriesAfterReassignment;
- s6: ClusterControlManagerTest.testHasOnlineDir, testDefaultDir,
  testRegisterWithDuplicateDirectoryId and testReRegistrationAndBrokerEpoch;
- s7: PartitionChangeBuilderTest.testChangeInLeadershipDoesNotChangeRecoveryState and
  testUncleanSetsLeaderRecoveringState;
- s8: ReplicationControlManagerTest.testEligibleLeaderReplicas_BrokerFence, which needs ELR (off
  in kraftlake).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlake.records import (
    LOST,
    MIGRATING,
    NO_LEADER,
    UNASSIGNED,
    AssignReplicasToDirsRequest,
    BrokerRegistrationChange,
    DirectoryReplicas,
    HeartbeatOfflineDirs,
    LogDirFailed,
    Partition,
    PartitionChange,
    ReplicaDirectory,
    TopicPartitions,
    iter_lines,
)
from kraftlake.statemachine.kraft import Election, PartitionChangeBuilder, PartitionRegistration, merge, replay
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.brokers import supported_features
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.directory_ids import default_dir

from helpers.kraft import MV, bootstrap, controller_with_brokers, strip, uid

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"


# -- s1: ReplicationControlManagerTest.testHandleDirectoriesOffline ------------------------------

A1, A2, B1, B2 = (uid(f"dir-{n}") for n in ("A1", "A2", "B1", "B2"))


def test_s1_directories_offline_fixture_matches_the_decider():
    """The committed fixture (fixtures/kraft/jbod-dir-failure.jsonl) is testHandleDirectoriesOffline;
    the decider reproduces each of its controller batches."""
    records = list(iter_lines(FIXTURE.open("rb")))
    failed = next(i for i, r in enumerate(records) if isinstance(r, LogDirFailed))
    ctl = Controller(records[:failed])
    # Steps 3 and 4 (AssignReplicasToDirs) are in the fixture as request + resulting changes.
    replayed = Controller(records[:13])
    for i in (13, 18):
        request = records[i]
        assert isinstance(request, AssignReplicasToDirsRequest)
        replayed.append([request])
        decision = replayed.handle(c.AssignReplicasToDirs(request=request))
        assert strip(decision.records) == strip(records[i + 1 : i + 5])
        assert all(e.error_code == 0 for d in decision.reply.directories for e in d.partitions)
    hb = records[failed + 1]
    assert isinstance(hb, HeartbeatOfflineDirs)
    ctl.append(records[failed : failed + 2])
    decision = ctl.handle(
        c.Heartbeat(
            broker_id=101,
            broker_epoch=201,
            current_metadata_offset=ctl.view.offset,
            offline_log_dirs=hb.offline_log_dirs,
        )
    )
    assert strip(decision.records) == strip(records[failed + 2 :])


def test_s1_heartbeat_with_a_foreign_dir_gives_exactly_three_records():
    ctl = controller_with_brokers({101: [A1, A2], 102: [B1, B2]})
    ta = ctl.handle(c.CreateTopic(name="a", assignments=((101, 102), (101, 102)))).reply.topic_id
    tb = ctl.handle(c.CreateTopic(name="b", assignments=((101, 102), (101, 102)))).reply.topic_id
    for t in (ta, tb):
        for p in (0, 1):
            part = ctl.view.partition(t, p)
            assert (part.leader, part.isr, part.directories) == (101, (101, 102), (UNASSIGNED, UNASSIGNED))
            assert (part.leader_epoch, part.partition_epoch) == (0, 0)

    def assign(broker, epoch, mapping):
        req = AssignReplicasToDirsRequest(
            broker_id=broker,
            broker_epoch=epoch,
            directories=tuple(
                DirectoryReplicas(id=d, topics=tuple(TopicPartitions(topic_id=t, partitions=(p,)) for t, p in tps))
                for d, tps in mapping.items()
            ),
        )
        return ctl.handle(c.AssignReplicasToDirs(request=req))

    d = assign(101, 201, {A1: [(ta, 0), (tb, 0)], A2: [(ta, 1), (tb, 1)]})
    assert len(d.records) == 4 and ctl.view.partition(ta, 0).directories == (A1, UNASSIGNED)
    d = assign(102, 202, {B1: [(ta, 0), (tb, 0)], B2: [(ta, 1), (tb, 1)]})
    assert len(d.records) == 4 and ctl.view.partition(ta, 0).directories == (A1, B1)
    assert ctl.view.partition(ta, 0).partition_epoch == 2

    d = ctl.handle(
        c.Heartbeat(broker_id=101, broker_epoch=201, current_metadata_offset=ctl.view.offset, offline_log_dirs=(A1, B1))
    )
    v = PartitionChange.__struct_config__  # noqa: F841 - version is MV's
    assert strip(d.records) == [
        PartitionChange(version=1, topic_id=min(ta, tb), partition_id=0, leader=102, isr=(102,)),
        PartitionChange(version=1, topic_id=max(ta, tb), partition_id=0, leader=102, isr=(102,)),
        BrokerRegistrationChange(version=2, broker_id=101, broker_epoch=201, log_dirs=(A2,)),
    ]
    assert ctl.view.brokers[101].log_dirs == (A2,)
    for t in (ta, tb):
        p0, p1 = ctl.view.partition(t, 0), ctl.view.partition(t, 1)
        assert (p0.leader, p0.isr, p0.leader_epoch, p0.partition_epoch) == (102, (102,), 1, 3)
        assert (p1.leader, p1.isr, p1.partition_epoch) == (101, (101, 102), 2)
    # Repeating the report is idempotent: handleDirectoriesOffline acts on registered dirs only.
    again = ctl.handle(
        c.Heartbeat(broker_id=101, broker_epoch=201, current_metadata_offset=ctl.view.offset, offline_log_dirs=(A1, B1))
    )
    assert again.records == ()


# -- s2: ReplicationControlManagerTest.testHandleAssignReplicasToDirs -----------------------------

D1, D2, E1, X = (uid(f"dir-{n}") for n in ("D1", "D2", "E1", "X"))


def test_s2_assign_replicas_to_dirs():
    ctl = controller_with_brokers({1: [D1, D2], 2: [E1]})
    a = ctl.handle(c.CreateTopic(name="a", assignments=((1, 2),) * 3)).reply.topic_id
    b = ctl.handle(c.CreateTopic(name="b", assignments=((1, 2),) * 2)).reply.topic_id
    t_c = ctl.handle(c.CreateTopic(name="c", assignments=((2,),))).reply.topic_id
    assert ctl.view.partition(a, 0).directories == (UNASSIGNED, E1)
    unknown = uid("unknown-topic")

    def tp(t, *ps):
        return TopicPartitions(topic_id=t, partitions=ps)

    req = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=101,
        directories=(
            DirectoryReplicas(id=D1, topics=(tp(a, 0, 137), tp(b, 0), tp(t_c, 0))),
            DirectoryReplicas(id=D2, topics=(tp(a, 1), tp(unknown, 1))),
            DirectoryReplicas(id=X, topics=(tp(a, 2),)),
            DirectoryReplicas(id=LOST, topics=(tp(b, 1),)),
        ),
    )
    d = ctl.handle(c.AssignReplicasToDirs(request=req))
    codes = {(r.topic_id, r.partition_id): r.error_code for x in d.reply.directories for r in x.partitions}
    assert d.reply.error_code == 0
    assert codes == {
        (a, 0): 0,
        (a, 137): c.UNKNOWN_TOPIC_OR_PARTITION,
        (b, 0): 0,
        (t_c, 0): c.NOT_LEADER_OR_FOLLOWER,
        (a, 1): 0,
        (unknown, 1): c.UNKNOWN_TOPIC_ID,
        (a, 2): 0,
        (b, 1): 0,
    }

    def dirs(t, p, d0):
        return PartitionChange(
            version=1,
            topic_id=t,
            partition_id=p,
            assignment=(ReplicaDirectory(broker=1, directory=d0), ReplicaDirectory(broker=2, directory=E1)),
        )

    assert strip(d.records) == [
        dirs(a, 0, D1),
        dirs(b, 0, D1),
        dirs(a, 1, D2),
        dirs(a, 2, X),
        dirs(b, 1, LOST),
        # Computed from the pre-request state: Leader and ISR, no directories.
        *sorted(
            [
                PartitionChange(version=1, topic_id=a, partition_id=2, leader=2, isr=(2,)),
                PartitionChange(version=1, topic_id=b, partition_id=1, leader=2, isr=(2,)),
            ],
            key=lambda r: (r.topic_id, r.partition_id),
        ),
    ]
    v = ctl.view
    in_isr_1 = {(t, p) for t in (a, b, t_c) for p in v.partitions[t] if 1 in v.partition(t, p).isr}
    in_isr_2 = {(t, p) for t in (a, b, t_c) for p in v.partitions[t] if v.partition(t, p).isr == (2,)}
    assert in_isr_1 == {(a, 0), (a, 1), (b, 0)}
    assert in_isr_2 == {(a, 2), (b, 1), (t_c, 0)}
    # A stale epoch or an old metadata.version gets no records at all.
    assert (
        ctl.handle(
            c.AssignReplicasToDirs(
                request=AssignReplicasToDirsRequest(broker_id=1, broker_epoch=7, directories=req.directories)
            )
        ).reply.error_code
        == c.STALE_BROKER_EPOCH
    )
    old = controller_with_brokers({1: [D1, D2]}, mv=16)
    r = old.handle(
        c.AssignReplicasToDirs(request=AssignReplicasToDirsRequest(broker_id=1, broker_epoch=101, directories=()))
    )
    assert r.reply.error_code == c.UNSUPPORTED_VERSION and r.records == ()


# -- s3: ReplicationControlManagerTest.testFenceMultipleBrokers -----------------------------------


def test_s3_fence_multiple_brokers():
    ctl = controller_with_brokers({b: [uid(f"s3-{b}")] for b in range(5)})
    foo = ctl.handle(c.CreateTopic(name="foo", assignments=((1, 2, 3), (2, 3, 4), (0, 2, 1)))).reply.topic_id
    for b in (2, 3):
        d = ctl.handle(c.ExpireSession(broker_id=b))
        assert isinstance(d.records[-1], BrokerRegistrationChange) and d.records[-1].fenced == 1
    got = {p: (ctl.view.partition(foo, p).leader, ctl.view.partition(foo, p).isr) for p in range(3)}
    assert got == {0: (1, (1,)), 1: (4, (4,)), 2: (0, (0, 1))}
    # testRemoveLeaderships: after fencing broker 0, no ISR lists it.
    ctl.handle(c.ExpireSession(broker_id=0))
    assert all(0 not in p.isr for p in ctl.view.iter_partitions())


# -- s4: PartitionChangeBuilderTest, elections and leader-epoch bumps ------------------------------

DA, DB = uid("d_a"), uid("d_b")
FOO = PartitionRegistration(
    topic_id=uid("foo"),
    partition_id=0,
    replicas=(2, 1, 3),
    directories=(DA, DB, UNASSIGNED),
    isr=(2, 1, 3),
    leader=1,
    leader_epoch=100,
    partition_epoch=200,
)


def foo_builder(p=FOO, mv=MV, acceptor=lambda r: r != 3):
    return PartitionChangeBuilder(p, acceptor=acceptor, metadata_version=mv, default_dir=lambda r: UNASSIGNED)


def pcr(p=FOO, **fields):
    return PartitionChange(version=1, topic_id=p.topic_id, partition_id=p.partition_id, **fields)


def test_s4_builder_elections():
    assert foo_builder().build() is None
    assert foo_builder().set_target_isr((2, 1)).build() == pcr(isr=(2, 1))
    assert foo_builder().set_target_isr((2, 3)).build() == pcr(isr=(2, 3), leader=2)
    assert foo_builder().set_election(Election.PREFERRED).build() == pcr(leader=2)
    assert foo_builder().set_target_isr((3,)).build() == pcr(isr=(3,), leader=NO_LEADER)
    assert foo_builder().set_target_isr((3,)).set_election(Election.UNCLEAN).build() == pcr(
        isr=(2,), leader=2, leader_recovery_state=1
    )
    four = foo_builder().set_target_isr((4,)).set_target_replicas((2, 1, 3, 4)).set_election(Election.UNCLEAN).build()
    assert (four.leader, four.isr, four.leader_recovery_state) == (4, (4,), -1)
    assert foo_builder().set_target_replicas((3, 2, 1)).build() == pcr(
        replicas=(3, 2, 1),
        assignment=tuple(ReplicaDirectory(broker=b, directory=d) for b, d in ((3, UNASSIGNED), (2, DA), (1, DB))),
    )
    bump = foo_builder().set_target_replicas((2, 1, 4)).build()
    assert bump.leader == 1 and bump.replicas == (2, 1, 4)
    # KAFKA-15021: before 3.6-IV0 an ISR shrink forces a leader-epoch bump; not from 3.6-IV0 on.
    for mv, leader in ((8, 1), (11, 1), (12, -2), (MV, -2)):
        assert foo_builder(mv=mv).set_target_isr((2, 1)).build().leader == leader
    assert foo_builder().set_target_isr((2, 1, 3, 4)).build().leader == -2
    offline = PartitionRegistration(
        topic_id=uid("offline"),
        partition_id=0,
        replicas=(2, 1, 3),
        directories=(MIGRATING,) * 3,
        isr=(3,),
        leader=NO_LEADER,
        leader_epoch=5,
        partition_epoch=7,
    )
    for target in ((3,), (2,)):
        got = (
            foo_builder(offline, acceptor=lambda r: r == 1)
            .set_target_isr(target)
            .set_election(Election.UNCLEAN)
            .build()
        )
        assert got == pcr(offline, isr=(1,), leader=1, leader_recovery_state=1)


# -- s5: PartitionChangeBuilderTest, directory updates ----------------------------------------------


def test_s5_directory_updates():
    S, N, P, R = (uid(f"s5-{n}") for n in "SNPR")
    p = PartitionRegistration(
        topic_id=uid("s5"), partition_id=0, replicas=(2, 1, 3), directories=(S, N, UNASSIGNED), isr=(2, 1, 3), leader=2
    )
    got = foo_builder(p, mv=25, acceptor=lambda r: True).set_directory(3, P).set_directory(1, LOST).build()
    assert got == PartitionChange(
        version=2,
        topic_id=p.topic_id,
        partition_id=0,
        assignment=tuple(ReplicaDirectory(broker=b, directory=d) for b, d in ((2, S), (1, LOST), (3, P))),
    )
    v, i, f = (uid(f"s5-{n}") for n in ("v", "i", "f"))
    p = PartitionRegistration(
        topic_id=uid("s5b"), partition_id=0, replicas=(2, 1, 3), directories=(v, i, f), isr=(2, 1, 3), leader=1
    )
    got = foo_builder(p, mv=17, acceptor=lambda r: True).set_target_replicas((3, 1, 5, 4)).set_directory(5, R).build()
    assert (got.version, got.leader, got.replicas) == (1, 1, (3, 1, 5, 4))
    assert [a.directory for a in got.assignment] == [f, i, R, UNASSIGNED]
    # Applying it: the directories follow their replicas.
    assert merge(p, got).directories == (f, i, R, UNASSIGNED)


# -- s6: ClusterControlManagerTest, registration and directory predicates ---------------------------


def test_s6_registration_and_directory_predicates():
    Xd, Yd = uid("s6-X"), uid("s6-Y")
    ctl = controller_with_brokers({0: [uid("s6-zero")], 1: [Xd, Yd]})
    v = ctl.view
    assert all(v.has_online_dir(1, d) for d in (Xd, Yd, UNASSIGNED, MIGRATING))
    assert not any(v.has_online_dir(1, d) for d in (uid("other"), LOST)) and not v.has_online_dir(77, Xd)
    S = uid("s6-S")
    assert [default_dir(d, directories_supported=True) for d in ((), (S,), (Xd, Yd), None)] == [
        MIGRATING,
        S,
        UNASSIGNED,
        UNASSIGNED,
    ]

    def register(broker, dirs, incarnation="s6"):
        return ctl.handle(
            c.RegisterBroker(
                broker_id=broker,
                incarnation_id=uid(f"{incarnation}-{broker}"),
                log_dirs=tuple(dirs),
                features=supported_features(ctl.view.metadata_version),
            )
        )

    cases = {
        (): "No directories specified in request",
        (uid("s6-zero"),): "Broker 0 is already registered with directory",
        (UNASSIGNED,): "Reserved directory ID",
        (Xd, Xd): "Duplicate directory ID",
    }
    for dirs, message in cases.items():
        d = register(5, dirs)
        assert d.reply.error_code == c.INVALID_REGISTRATION and message in d.reply.message and d.records == ()
    # Re-registering broker 0 with its own dirs is accepted (its session ended first).
    ctl.handle(c.ExpireSession(broker_id=0))
    assert register(0, [uid("s6-zero")]).reply.error_code == 0
    # Same incarnation keeps its epoch; a new incarnation's epoch is the registration's offset.
    first = register(7, [uid("s6-seven")]).reply.broker_epoch
    ctl.append(bootstrap() * 3)
    assert register(7, [uid("s6-seven")]).reply.broker_epoch == first
    d = register(7, [uid("s6-seven")], incarnation="new")
    assert d.reply.broker_epoch == d.records[0].offset == ctl.view.brokers[7].epoch != first
    assert ctl.view.brokers[7].incarnation_id == uid("new-7")


# -- s7: PartitionChangeBuilderTest, leader recovery state -------------------------------------------


def test_s7_leader_recovery_state():
    p = PartitionRegistration(
        topic_id=uid("s7"),
        partition_id=0,
        replicas=(1, 2, 3),
        directories=(MIGRATING,) * 3,
        isr=(1,),
        leader=1,
        leader_recovery_state=1,
    )
    change = foo_builder(p, acceptor=lambda r: False).set_target_isr(()).build()
    assert change == pcr(p, leader=NO_LEADER)
    p = merge(p, change)
    assert (p.isr, p.leader_recovery_state) == ((1,), 1)
    change = foo_builder(p, acceptor=lambda r: True).build()
    assert change == pcr(p, leader=1)
    assert merge(p, change).leader_recovery_state == 1
    q = PartitionRegistration(
        topic_id=uid("s7b"),
        partition_id=0,
        replicas=(1, 2, 3),
        directories=(MIGRATING,) * 3,
        isr=(2, 3),
        leader=NO_LEADER,
    )
    unclean = foo_builder(q, acceptor=lambda r: r == 1).set_election(Election.UNCLEAN)
    assert unclean.build() == pcr(q, leader=1, isr=(1,), leader_recovery_state=1)
    old = foo_builder(q, mv=1, acceptor=lambda r: r == 1).set_election(Election.UNCLEAN).build()
    assert (old.version, old.leader, old.isr, old.leader_recovery_state) == (0, 1, (1,), -1)


# -- s8: testEligibleLeaderReplicas_BrokerFence: eligible leader replicas are off in kraftlake -------


def test_s8_elr_is_off_fields_pass_through_and_the_isr_is_never_emptied():
    """Kafka's testEligibleLeaderReplicas_BrokerFence needs ELR on (MV >= 4.0-IV1 plus the ELR
    feature). kraftlake models 3.8/3.9 with ELR off: ELR fields in records are carried through
    unchanged and the controller never empties an ISR (last replica standing) nor writes ELR
    fields."""
    ctl = controller_with_brokers({b: [uid(f"s8-{b}")] for b in range(4)}, mv=25)
    foo = ctl.handle(
        c.CreateTopic(name="foo", assignments=((0, 1, 2, 3),), configs={"min.insync.replicas": "3"})
    ).reply.topic_id
    elr_record = PartitionChange(
        version=2, topic_id=foo, partition_id=0, eligible_leader_replicas=(), last_known_elr=(3,)
    )
    ctl.append([elr_record])
    for b in (1, 2, 3):
        d = ctl.handle(c.ExpireSession(broker_id=b))
        assert all(
            r.eligible_leader_replicas is None and r.last_known_elr is None
            for r in d.records
            if isinstance(r, PartitionChange)
        )
    p = ctl.view.partition(foo, 0)
    assert (p.isr, p.leader, p.last_known_elr) == ((0,), 0, (3,))
    ctl.handle(c.ExpireSession(broker_id=0))
    p = ctl.view.partition(foo, 0)
    assert (p.isr, p.leader) == ((0,), NO_LEADER)  # never emptied


def test_partition_record_without_directories_reads_as_migrating():
    ctl = controller_with_brokers({1: [uid("m1")]})
    t = ctl.handle(c.CreateTopic(name="m", assignments=((1,),))).reply.topic_id
    ctl.append(
        [
            Partition(
                version=0,
                topic_id=t,
                partition_id=1,
                replicas=(1,),
                isr=(1,),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            )
        ]
    )
    assert ctl.view.partition(t, 1).directories == (MIGRATING,)
    assert replay(ctl.records).state_hash() == ctl.view.state_hash()


@pytest.mark.parametrize("mv, version", [(16, 0), (17, 1), (21, 1), (23, 2)])
def test_partition_change_version_follows_metadata_version(mv, version):
    ctl = controller_with_brokers({1: [uid("v1")], 2: [uid("v2")]}, mv=mv)
    t = ctl.handle(c.CreateTopic(name="v", assignments=((1, 2),))).reply.topic_id
    d = ctl.handle(c.ExpireSession(broker_id=1))
    change = d.records[0]
    assert isinstance(change, PartitionChange) and change.version == version and change.topic_id == t
    assert (change.assignment is None) if version == 0 else True
