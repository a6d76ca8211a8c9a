"""Kafka's ``PartitionChangeBuilderTest`` (metadata module, org.apache.kafka.controller), ported case
by case: each test is the Java method of the same name, at the metadata versions it uses
(``metadataVersionForPartitionChangeRecordVersion``: record v0 = 3.7-IV0, v1 = 3.7-IV2,
v2 = 4.0-IV1, where ELR is on). Kafka's directories are random uuids in the Java test; here they
are real ids named after the test, which the cases never compare."""

from __future__ import annotations

import msgspec
import pytest

from kraftlake.records.kraft import MIGRATING, UNASSIGNED, PartitionChange, ReplicaDirectory
from kraftlake.statemachine.kraft.features import partition_record_version
from kraftlake.statemachine.kraft.partitions import Election, PartitionChangeBuilder, _JavaHashSet, merge
from kraftlake.statemachine.kraft.reassignment import PartitionReassignmentReplicas
from kraftlake.statemachine.kraft.view import PartitionRegistration
from tests.helpers.kraft import uid

TOPIC = uid("FbrrdcfiR-KC2CPSTHaJrg")
MV_BY_RECORD_VERSION = {0: 15, 1: 17, 2: 23}
"""3.7-IV0, 3.7-IV2, 4.0-IV1 (``metadataVersionForPartitionChangeRecordVersion``)."""
RECORD_VERSIONS = sorted(MV_BY_RECORD_VERSION)


def registration(replicas, isr, leader, *, elr=(), last_known_elr=(), directories=None, name="p"):
    dirs = directories or tuple(uid(f"{name}-dir-{r}") for r in replicas)
    return PartitionRegistration(
        topic_id=TOPIC,
        partition_id=0,
        replicas=tuple(replicas),
        directories=tuple(dirs),
        isr=tuple(isr),
        removing_replicas=(),
        adding_replicas=(),
        leader=leader,
        leader_recovery_state=0,
        leader_epoch=100,
        partition_epoch=200,
        eligible_leader_replicas=tuple(elr),
        last_known_elr=tuple(last_known_elr),
    )


def builder(p, acceptor, version, min_isr=3, *, elr=None, last_known_leader=True) -> PartitionChangeBuilder:
    b = PartitionChangeBuilder(
        p,
        acceptor=acceptor,
        metadata_version=MV_BY_RECORD_VERSION[version],
        min_isr=min_isr,
        elr_enabled=version >= 2 if elr is None else elr,
    )
    return b.set_election(Election.PREFERRED).set_use_last_known_leader_in_balanced_recovery(last_known_leader)


def change(version, **fields) -> PartitionChange:
    return PartitionChange(version=version, topic_id=TOPIC, partition_id=0, **fields)


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testEligibleLeaderReplicas_IsrShrinkBelowMinISR(version):
    p = registration((1, 2, 3, 4), (1, 2, 3, 4), 1)
    b = builder(p, lambda r: r != 3, version, last_known_leader=False).set_target_isr((1, 2))
    fields = {"eligible_leader_replicas": (3, 4)} if version >= 2 else {}
    assert b.build() == change(version, isr=(1, 2), **fields)
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == ((3, 4) if version >= 2 else ())
    assert merged.last_known_elr == ()


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testEligibleLeaderReplicas_IsrExpandAboveMinISR(version):
    p = registration((1, 2, 3, 4), (1, 2), 1, elr=(3,), last_known_elr=(4,))
    b = builder(p, lambda r: r != 3, version, last_known_leader=False).set_target_isr((1, 2, 3))
    # Both versions empty the ELR and LastKnownElr.
    assert b.build() == change(version, isr=(1, 2, 3), eligible_leader_replicas=(), last_known_elr=())
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == () and merged.last_known_elr == ()


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testEligibleLeaderReplicas_IsrAddNewMemberNotInELR(version):
    p = registration((1, 2, 3, 4), (1,), 1, elr=(3,), last_known_elr=(2,))
    b = builder(p, lambda r: r != 3, version, last_known_leader=False).set_target_isr((1, 4))
    fields = {} if version >= 2 else {"eligible_leader_replicas": (), "last_known_elr": ()}
    assert b.build() == change(version, isr=(1, 4), **fields)
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == ((3,) if version >= 2 else ())
    assert merged.last_known_elr == ((2,) if version >= 2 else ())


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr(version):
    p = registration((1, 2, 3, 4), (1,), 1, elr=(2, 3))
    b = builder(p, lambda r: r != 3, version, last_known_leader=False).set_unclean_shutdown_replicas((3,))
    if version >= 2:
        expected = change(version, eligible_leader_replicas=(2,), last_known_elr=(3,))
    else:
        expected = change(version, eligible_leader_replicas=())
    assert b.build() == expected
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == ((2,) if version >= 2 else ())
    assert merged.last_known_elr == ((3,) if version >= 2 else ())


@pytest.mark.parametrize("last_known_leader_enabled", [True, False])
def test_testEligibleLeaderReplicas_ElrCanBeElected(last_known_leader_enabled):
    p = registration(
        (1, 2, 3, 4),
        (1,),
        1,
        elr=(3,),
        last_known_elr=() if last_known_leader_enabled else (2,),
        directories=(MIGRATING,) * 4,
    )
    # Replica 1 is offline.
    b = builder(p, lambda r: r != 1, 2, last_known_leader=last_known_leader_enabled).set_target_isr(())
    assert b.build() == change(2, isr=(3,), eligible_leader_replicas=(1,), leader=3)
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == (1,)
    assert merged.last_known_elr == (() if last_known_leader_enabled else (2,))
    assert merged.isr == (3,)


@pytest.mark.parametrize("last_known_leader_enabled", [True, False])
def test_testEligibleLeaderReplicas_IsrCanShrinkToZero(last_known_leader_enabled):
    p = registration((1, 2, 3, 4), (1, 2, 3, 4), 1)
    # Every replica is offline.
    b = builder(p, lambda r: False, 2, elr=True, last_known_leader=last_known_leader_enabled).set_target_isr(())
    fields = {"last_known_elr": (1,)} if last_known_leader_enabled else {}
    assert b.build() == change(2, isr=(), leader=-1, eligible_leader_replicas=(1, 2, 3, 4), **fields)
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == (1, 2, 3, 4)
    if last_known_leader_enabled:
        assert merged.last_known_elr == (1,)
        again = builder(merged, lambda r: False, 2, elr=True).set_unclean_shutdown_replicas((2,)).build()
        assert again is not None and again.last_known_elr is None
    else:
        assert merged.last_known_elr == ()
    assert merged.isr == ()


def test_testEligibleLeaderReplicas_ElectLastKnownLeader():
    p = registration((1, 2, 3, 4), (), -1, last_known_elr=(1,), directories=(MIGRATING,) * 4)
    b = builder(p, lambda r: True, 2, elr=True).set_target_isr(())
    assert b.build() == change(2, isr=(1,), leader=1, leader_recovery_state=1, last_known_elr=())
    merged = merge(p, b.build())
    assert merged.eligible_leader_replicas == () and merged.last_known_elr == () and merged.isr == (1,)


def test_testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail():
    p = registration((1, 2, 3, 4), (), -1, elr=(3,), last_known_elr=(1,))
    b = builder(p, lambda r: r != 3, 2, elr=True).set_target_isr(())
    # No change to the partition.
    assert b.build() is None


def test_testEligibleLeaderReplicas_NotEligibleLastKnownLeader():
    """KAFKA-19522 (Kafka 4.1): a last known leader that is not acceptable is not elected."""
    p = registration((1, 2, 3, 4), (), -1, last_known_elr=(1,), directories=(MIGRATING,) * 4)
    b = builder(p, lambda r: r != 1, 2, elr=True).set_target_isr(())
    assert b.build() is None


@pytest.mark.parametrize("mv", [8, 11, 12, 17])  # 3.4-IV0, 3.5-IV2, 3.6-IV0, 3.7-IV2
def test_testNoLeaderEpochBumpOnEmptyTargetIsr(mv):
    """KAFKA-16624: an emptied target ISR, which the record cannot carry without ELR, triggers no
    ISR-shrink bump before 3.6 either. Java calls the bump step alone on an empty record; the
    step is internal here, so the whole build is checked: the only leader field is the election's
    (nobody is valid without an ISR), and no ISR is written."""
    p = registration((2,), (2,), 2)
    b = PartitionChangeBuilder(p, acceptor=lambda r: True, metadata_version=mv, min_isr=2, elr_enabled=False)
    b.set_target_replicas(()).set_target_isr(())
    assert b.build() == change(partition_record_version(mv), leader=-1)
    # The step itself: an ISR-shrinking record with the leader unchanged gets a bump before 3.6 only.
    shrink = PartitionChangeBuilder(registration((1, 2), (1, 2), 1), acceptor=lambda r: True, metadata_version=mv)
    built = shrink.set_target_isr((1,)).build()
    assert built.leader == (1 if mv < 12 else -2)


def test_java_hash_set_order():
    """ELR lists come out in java.util.HashSet order: by value mod the table size, then insertion."""
    assert list(_JavaHashSet([20, 3, 17, 4])) == [17, 3, 20, 4]
    assert list(_JavaHashSet([4, 3, 2, 1])) == [1, 2, 3, 4]
    big = _JavaHashSet(list(range(13, 0, -1)))  # 13 members: the table doubles to 32
    assert list(big) == list(range(1, 14))


def test_elr_change_round_trips_through_the_registration():
    p = registration((1, 2, 3), (1, 2, 3), 1)
    c1 = builder(p, lambda r: r == 1, 2, min_isr=2).set_target_isr((1,)).build()
    assert c1 == change(2, isr=(1,), eligible_leader_replicas=(2, 3))
    p1 = merge(p, c1)
    assert msgspec.structs.astuple(p1)[4] == (1,)


FOO_DIRS = (uid("dpdvA5AZSWySmnPFTnu5Kw"), uid("V60B3cglScq3Xk8BX1NxAQ"), UNASSIGNED)
"""FOO's directories (replicas 2, 1, 3), the Java test's ids as real ones."""


def foo_builder(version: int, directories=FOO_DIRS) -> PartitionChangeBuilder:
    """``createFooBuilder``: FOO, replica 3 not acceptable, min ISR 2, ELR as the version has it,
    the default directory UNASSIGNED (``DEFAULT_DIR_PROVIDER``)."""
    return PartitionChangeBuilder(
        registration((2, 1, 3), (2, 1, 3), 1, directories=directories),
        acceptor=lambda r: r != 3,
        metadata_version=MV_BY_RECORD_VERSION[version],
        min_isr=2,
        elr_enabled=version >= 2,
        default_dir=lambda _r: UNASSIGNED,
    )


def placed(replicas, directories) -> tuple[ReplicaDirectory, ...]:
    return tuple(ReplicaDirectory(broker=b, directory=d) for b, d in zip(replicas, directories))


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testAddingReplicaReassignment(version):
    replicas = PartitionReassignmentReplicas.of((2, 1, 3), (1, 2, 3, 4))
    assert (replicas.removing, replicas.adding, replicas.replicas) == ((), (4,), (1, 2, 3, 4))
    dirs = dict(zip((2, 1, 3), FOO_DIRS))
    fields = {"assignment": placed((1, 2, 3, 4), (dirs[1], dirs[2], dirs[3], UNASSIGNED))} if version >= 1 else {}
    expected = change(version, replicas=(1, 2, 3, 4), adding_replicas=(4,), **fields)
    b = foo_builder(version).set_target_replicas(replicas.replicas).set_target_adding(replicas.adding)
    assert b.build() == expected


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testAddingReplicaReassignment_to_all_migrating_directories(version):
    """Issue 34, item 8b: ``testAddingReplicaReassignment``'s change to a FOO whose directories are
    all MIGRATING (created before 3.7-IV2), replayed (``PartitionRegistration.merge``). The v0
    record carries no directories, and Kafka 3.8+'s ``defaultToMigrating`` (KAFKA-16583) leaves
    every replica MIGRATING, the added one included; from v1 the builder writes them: the kept
    replicas' MIGRATING, the added one's default directory."""
    migrating = (MIGRATING,) * 3
    b = foo_builder(version, migrating).set_target_replicas((1, 2, 3, 4)).set_target_adding((4,))
    record = b.build()
    assert record.assignment == (placed((1, 2, 3, 4), (*migrating, UNASSIGNED)) if version >= 1 else None)
    merged = merge(b.partition, record)
    assert merged.replicas == (1, 2, 3, 4)
    assert merged.directories == ((MIGRATING,) * 4 if version == 0 else (*migrating, UNASSIGNED))
    # A partition with a real directory keeps Kafka's createDirectoriesFrom: the new one UNASSIGNED.
    real = foo_builder(0).set_target_replicas((1, 2, 3, 4)).set_target_adding((4,))
    assert merge(real.partition, real.build()).directories == (FOO_DIRS[1], FOO_DIRS[0], UNASSIGNED, UNASSIGNED)
