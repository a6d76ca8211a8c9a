"""Kafka's ``PartitionChangeBuilderTest`` (metadata module, org.apache.kafka.controller), ported case
by case: each test is the Java method of the same name, at the metadata versions it uses
(``metadataVersionForPartitionChangeRecordVersion``: record v0 = 3.7-IV0, v1 = 3.7-IV2,
v2 = 4.0-IV1, where ELR is on), with the Java class's fixtures and uuids (FOO, BAR, BAZ,
OFFLINE_*); the ELR cases use ids named after the test, which they never compare.

All 32 methods of the class as of apache/kafka tag 4.2.0-rc1 (6eef6636) are here: 4.1 added
the KAFKA-19522 case (run for every election since 4.1.1) and, in 4.1.1 (4369d8e0, with its
simpler ``maybeUpdateLastKnownLeader``), testEligibleLeaderReplicas_lastKnownElrShouldBePopulated
WhenNoLeader. Issue 34
item 8b (v0 changes to all-MIGRATING directories, KAFKA-16583, which Kafka tests through replay
only) is ``test_testAddingReplicaReassignment_to_all_migrating_directories``. Kafka's
``triggerLeaderEpochBump*`` steps are internal to ``build()`` in kraftlake, so the bump cases
build and read the record's leader field; ``electLeader`` is ``elect_leader``."""

from __future__ import annotations

import msgspec
import pytest

from kraftlake.records.kafka.metadata import BY_CLASS
from kraftlake.records.kraft import (
    LEADER_UNCHANGED,
    LOST,
    LRS_RECOVERED,
    LRS_RECOVERING,
    LRS_UNCHANGED,
    MIGRATING,
    NO_LEADER,
    UNASSIGNED,
    PartitionChange,
    ReplicaDirectory,
)
from kraftlake.statemachine.kraft.features import (
    MV_4_0_IV1,
    MV_4_1_IV1,
    parse_metadata_version,
    partition_record_version,
)
from kraftlake.statemachine.kraft.partitions import (
    Election,
    PartitionChangeBuilder,
    _JavaHashSet,
    change_record_is_no_op,
    merge,
)
from kraftlake.statemachine.kraft.reassignment import PartitionReassignmentReplicas, PartitionReassignmentRevert
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


# -- the fixtures of the Java class (FOO, BAR, BAZ, OFFLINE_*), with its ids -----------------------

FOO_ID, BAR_ID, BAZ_ID = "FbrrdcfiR-KC2CPSTHaJrg", "LKfUsCBnQKekvL9O5dY9nw", "wQzt5gkSTwuQNXZF5gIw7A"
OFFLINE_ID = BAR_ID  # as in the Java class


def _reg(
    topic, replicas, dirs, isr, leader, *, removing=(), adding=(), elr=(), lke=(), lrs=LRS_RECOVERED, epochs=(100, 200)
):
    return PartitionRegistration(
        topic,
        0,
        tuple(replicas),
        tuple(dirs),
        tuple(isr),
        tuple(removing),
        tuple(adding),
        leader,
        lrs,
        *epochs,
        tuple(elr),
        tuple(lke),
    )


FOO = _reg(FOO_ID, (2, 1, 3), ("dpdvA5AZSWySmnPFTnu5Kw", "V60B3cglScq3Xk8BX1NxAQ", UNASSIGNED), (2, 1, 3), 1)
BAR = _reg(
    BAR_ID,
    (1, 2, 3, 4),
    (UNASSIGNED, "X5FnAcIgTheWgTMzeO5WHw", "GtrcdoSOTm2vFMGFeZq0eg", "YcOqPw5ARmeKr1y9W3AkFw"),
    (1, 2, 3),
    1,
    removing=(1,),
    adding=(4,),
)
BAZ = _reg(BAZ_ID, (2, 1, 3), ("ywnfFpTBTbOsFdZ6uAdOmw", "Th0x70ecRbWvZNNV33jyRA", "j216tuSoQsC9JFd1Z5ZP6w"), (1, 3), 3)
OFFLINE_WITHOUT_ELR = _reg(
    OFFLINE_ID, (2, 1, 3), ("iYGgiDV5Sb2EtH6hbgYnCA", "XI2t4qAUSkGlLZSKeEVf8g", "eqRW24kIRlitzQFzmovE0Q"), (3,), -1
)
OFFLINE_WITH_ELR = _reg(
    OFFLINE_ID,
    (2, 1, 3),
    ("CQEqt7trRrmqyNxUT1CY0g", "59Mb9smoSsC0bGUP2FYV8A", "LBTmsCVJREqJuIEtwqxRDg"),
    (),
    -1,
    elr=(3,),
    lke=(2,),
)


def _java_builder(p, acceptor, mv, *, elr=None) -> PartitionChangeBuilder:
    """``new PartitionChangeBuilder(p, id, 0, acceptor, mv, 2)`` with the class's default-dir
    provider (UNASSIGNED) and ELR as ``mv.isElrSupported()`` unless told."""
    return PartitionChangeBuilder(
        p,
        acceptor=acceptor,
        metadata_version=mv,
        default_dir=lambda _r: UNASSIGNED,
        min_isr=2,
        elr_enabled=mv >= MV_4_0_IV1 if elr is None else elr,
    )


def foo(version=None, *, mv=None) -> PartitionChangeBuilder:
    return _java_builder(FOO, lambda r: r != 3, MV_BY_RECORD_VERSION[version] if mv is None else mv)


def bar(version) -> PartitionChangeBuilder:
    return _java_builder(BAR, lambda r: r != 3, MV_BY_RECORD_VERSION[version])


def baz(version) -> PartitionChangeBuilder:
    return _java_builder(BAZ, lambda r: True, MV_BY_RECORD_VERSION[version])


def offline(version) -> PartitionChangeBuilder:
    mv = MV_BY_RECORD_VERSION[version]
    p = OFFLINE_WITH_ELR if mv >= MV_4_0_IV1 else OFFLINE_WITHOUT_ELR
    return _java_builder(p, lambda r: r == 1, mv, elr=mv >= MV_4_0_IV1)


def record(p: PartitionRegistration, version: int, **fields) -> PartitionChange:
    return PartitionChange(version=version, topic_id=p.topic_id, partition_id=0, **fields)


def dirs_of(p: PartitionRegistration, replicas, version) -> dict:
    """The expected ``setDirectories`` of a record of ``version`` (v1+): each replica's directory
    in ``p``, UNASSIGNED for a new one (``DirectoryId.createAssignmentMap``)."""
    if version < 1:
        return {}
    where = dict(zip(p.replicas, p.directories))
    return {"assignment": tuple(ReplicaDirectory(broker=r, directory=where.get(r, UNASSIGNED)) for r in replicas)}


def mv(name: str) -> int:
    return parse_metadata_version(name)


def test_testChangeRecordIsNoOp():
    """The schema checks read kraftlake's Kafka codec table (records.kafka.metadata): versions 0-2,
    six tagged fields at v0."""
    schema = BY_CLASS[PartitionChange]
    assert schema.versions == (0, 2)
    assert sum(1 for f in schema.fields if f.tag is not None and f.since == 0) == 6
    assert change_record_is_no_op(change(2))
    d = ("5JwD0VNXRV2Wr9CCON38Tw", "zpL1bRzTQXmmgdxlLHOWuw", "6iGUpAkHQXC6bY0FTcPRDw")
    for fields in (
        {"leader": 1},
        {"isr": (1, 2, 3)},
        {"removing_replicas": (1,)},
        {"adding_replicas": (4,)},
        {"eligible_leader_replicas": (5,)},
        {"last_known_elr": (6,)},
        {"leader_recovery_state": LRS_RECOVERED},
        {
            "replicas": (1, 2, 3),
            "assignment": tuple(ReplicaDirectory(broker=b, directory=x) for b, x in zip((1, 2, 3), d)),
        },
    ):
        assert not change_record_is_no_op(change(2, **fields)), fields


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testElectLeader(version):
    assert foo(version).set_election(Election.PREFERRED).elect_leader() == (2, False)
    assert foo(version).elect_leader() == (1, False)
    assert foo(version).set_election(Election.UNCLEAN).elect_leader() == (1, False)
    assert foo(version).set_target_isr((1, 3)).elect_leader() == (1, False)
    assert foo(version).set_election(Election.UNCLEAN).set_target_isr((1, 3)).elect_leader() == (1, False)
    assert foo(version).set_target_isr((3,)).elect_leader() == (NO_LEADER, False)
    assert foo(version).set_election(Election.UNCLEAN).set_target_isr((3,)).elect_leader() == (2, True)
    b = foo(version).set_election(Election.UNCLEAN).set_target_isr((4,)).set_target_replicas((2, 1, 3, 4))
    assert b.elect_leader() == (4, False)
    assert baz(version).set_election(Election.PREFERRED).elect_leader() == (3, False)
    assert baz(version).elect_leader() == (3, False)
    assert baz(version).set_election(Election.UNCLEAN).elect_leader() == (3, False)


# Kafka's helper runs the two leader-epoch bump steps on a record whose ISR is the target ISR; they
# are steps of ``build()`` here, so these cases build and read the record's leader field.


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testNoLeaderEpochBumpIfNothingChanged(version):
    assert foo(version).build() is None


@pytest.mark.parametrize("name", ["3.6-IV0", "3.7-IV2", "4.0-IV0"])
def test_testNoLeaderEpochBumpOnIsrShrink(name):
    """Shrinking the ISR does not bump the leader epoch from 3.6 on."""
    built = foo(mv=mv(name)).set_target_isr((2, 1)).build()
    assert built == record(FOO, partition_record_version(mv(name)), isr=(2, 1))
    assert built.leader == LEADER_UNCHANGED


@pytest.mark.parametrize("name", ["3.4-IV0", "3.5-IV2"])
def test_testLeaderEpochBumpOnIsrShrink(name):
    """Before 3.6 an ISR shrink bumps the leader epoch (KAFKA-15021)."""
    built = foo(mv=mv(name)).set_target_isr((2, 1)).build()
    assert built == record(FOO, 0, isr=(2, 1), leader=1)


@pytest.mark.parametrize("name", ["3.4-IV0", "3.5-IV2", "3.6-IV0", "3.7-IV2", "4.0-IV0"])
def test_testNoLeaderEpochBumpOnIsrExpansion(name):
    built = foo(mv=mv(name)).set_target_isr((2, 1, 3, 4)).build()
    assert built == record(FOO, partition_record_version(mv(name)), isr=(2, 1, 3, 4))


@pytest.mark.parametrize("name", ["3.4-IV0", "3.5-IV2", "3.6-IV0", "3.7-IV2", "4.0-IV0"])
def test_testLeaderEpochBumpOnNewReplicaSetDisjoint(name):
    """A replica set that drops an old replica always bumps the leader epoch."""
    built = foo(mv=mv(name)).set_target_replicas((2, 1, 4)).build()
    assert (built.leader, built.replicas) == (1, (2, 1, 4))


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testNoChange(version):
    assert foo(version).build() is None
    assert foo(version).set_election(Election.UNCLEAN).build() is None
    assert bar(version).build() is None
    assert bar(version).set_election(Election.UNCLEAN).build() is None
    assert baz(version).set_election(Election.PREFERRED).build() is None


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testIsrChangeDoesntBumpLeaderEpoch(version):
    assert foo(version).set_target_isr((2, 1)).build() == record(FOO, version, isr=(2, 1))


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testIsrChangeAndLeaderChange(version):
    assert foo(version).set_target_isr((2, 3)).build() == record(FOO, version, isr=(2, 3), leader=2)


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testReassignmentRearrangesReplicas(version):
    expected = record(FOO, version, replicas=(3, 2, 1), **dirs_of(FOO, (3, 2, 1), version))
    assert foo(version).set_target_replicas((3, 2, 1)).build() == expected


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testIsrEnlargementCompletesReassignment(version):
    expected = record(
        BAR,
        version,
        replicas=(2, 3, 4),
        isr=(2, 3, 4),
        leader=2,
        removing_replicas=(),
        adding_replicas=(),
        **dirs_of(BAR, (2, 3, 4), version),
    )
    assert bar(version).set_target_isr((1, 2, 3, 4)).build() == expected


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testRevertReassignment(version):
    revert = PartitionReassignmentRevert.of(BAR.replicas, BAR.isr, BAR.removing_replicas, BAR.adding_replicas)
    assert (revert.replicas, revert.isr) == ((1, 2, 3), (1, 2, 3))
    expected = record(
        BAR,
        version,
        replicas=(1, 2, 3),
        leader=1,
        removing_replicas=(),
        adding_replicas=(),
        **dirs_of(BAR, (1, 2, 3), version),
    )
    built = (
        bar(version)
        .set_target_replicas(revert.replicas)
        .set_target_isr(revert.isr)
        .set_target_removing(())
        .set_target_adding(())
        .build()
    )
    assert built == expected


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testRemovingReplicaReassignment(version):
    replicas = PartitionReassignmentReplicas.of(FOO.replicas, (1, 2))
    assert (replicas.removing, replicas.adding, replicas.replicas) == ((3,), (), (1, 2, 3))
    expected = record(FOO, version, replicas=(1, 2), isr=(2, 1), leader=1, **dirs_of(FOO, (1, 2), version))
    built = foo(version).set_target_replicas(replicas.replicas).set_target_removing(replicas.removing).build()
    assert built == expected


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testAddingReplicaReassignment(version):
    replicas = PartitionReassignmentReplicas.of(FOO.replicas, (1, 2, 3, 4))
    assert (replicas.removing, replicas.adding, replicas.replicas) == ((), (4,), (1, 2, 3, 4))
    expected = record(FOO, version, replicas=(1, 2, 3, 4), adding_replicas=(4,), **dirs_of(FOO, (1, 2, 3, 4), version))
    built = foo(version).set_target_replicas(replicas.replicas).set_target_adding(replicas.adding).build()
    assert built == expected


@pytest.mark.parametrize("version", RECORD_VERSIONS)
def test_testUncleanLeaderElection(version):
    expected = record(FOO, version, isr=(2,), leader=2, leader_recovery_state=LRS_RECOVERING)
    assert foo(version).set_election(Election.UNCLEAN).set_target_isr((3,)).build() == expected
    # With ELR (v2) the partition has ELR members, and the unclean election clears them.
    cleared = {"eligible_leader_replicas": (), "last_known_elr": ()} if version >= 2 else {}
    expected = record(OFFLINE_WITH_ELR, version, isr=(1,), leader=1, leader_recovery_state=LRS_RECOVERING, **cleared)
    assert offline(version).set_election(Election.UNCLEAN).build() == expected
    assert offline(version).set_election(Election.UNCLEAN).set_target_isr((2,)).build() == expected


def _recovering_registration(isr, leader, lrs, directories):
    return _reg(FOO_ID, (1, 2, 3), directories, isr, leader, lrs=lrs)


@pytest.mark.parametrize("is_leader_recovery_supported", [True, False])
def test_testChangeInLeadershipDoesNotChangeRecoveryState(is_leader_recovery_supported):
    version_mv = mv("3.2-IV0" if is_leader_recovery_supported else "3.1-IV0")
    dirs = ("1sF6XXLkSN2LtDums7CJ8Q", "iaBBVsoHQR6NDKXwliKMqw", "sHaBwjdrR2S3bL4E1RKC8Q")
    p = _recovering_registration((1,), 1, LRS_RECOVERING, dirs)
    # The partition loses its leader: the ISR is emptied, the last leader is offline.
    c = _java_builder(p, lambda r: False, version_mv, elr=False).set_target_isr(()).build()
    assert c.leader_recovery_state == LRS_UNCHANGED and c.leader == NO_LEADER
    p = merge(p, c)
    assert (p.leader, p.isr[0], p.leader_recovery_state) == (NO_LEADER, 1, LRS_RECOVERING)
    # The leader comes back: the only ISR member leads, still RECOVERING.
    c = _java_builder(p, lambda r: True, version_mv, elr=False).build()
    assert c.leader_recovery_state == LRS_UNCHANGED
    p = merge(p, c)
    assert (p.leader, p.isr[0], p.leader_recovery_state) == (1, 1, LRS_RECOVERING)


@pytest.mark.parametrize("is_leader_recovery_supported", [True, False])
def test_testUncleanSetsLeaderRecoveringState(is_leader_recovery_supported):
    version_mv = mv("3.2-IV0" if is_leader_recovery_supported else "3.1-IV0")
    dirs = ("uYpxts0pS4K4bk5XOoXB4g", "kS6fHEqwRYucduWkmvsevw", "De9RqRThQRGjKg3i3yzUxA")
    p = _recovering_registration((2, 3), NO_LEADER, LRS_RECOVERED, dirs)
    c = _java_builder(p, lambda r: r == 1, version_mv, elr=False).set_election(Election.UNCLEAN).build()
    assert c.leader_recovery_state == (LRS_RECOVERING if is_leader_recovery_supported else LRS_UNCHANGED)
    assert (c.leader, c.isr) == (1, (1,))
    p = merge(p, c)
    expected = LRS_RECOVERING if is_leader_recovery_supported else LRS_RECOVERED
    assert (p.leader, p.isr[0], p.leader_recovery_state) == (1, 1, expected)


def test_testStoppedLeaderIsDemotedAfterReassignmentCompletesEvenIfNoNewEligibleLeaders():
    """A reassignment from [0, 1] to [2, 3] completes while nobody may lead: the removed leader 0
    must not stay leader."""
    dirs = ("XCBQClkBSZyphD87QUXzDA", "Or2Rp9tTQOSVuy12hsfmTA", "pThsodMNSwGvljTfc1RNVQ", "d8CGoNJmS5mJdF20tc8P7g")
    part = _reg(FOO_ID, (2, 3, 0, 1), dirs, (0, 1), 0, removing=(0, 1), adding=(2, 3), epochs=(0, 0))
    b = _java_builder(part, lambda r: False, mv("3.1-IV0"), elr=False)
    assert part.leader == 0
    expected = record(part, 0, replicas=(2, 3), isr=(2, 3), removing_replicas=(), adding_replicas=(), leader=NO_LEADER)
    assert b.set_target_isr((0, 1, 2, 3)).build() == expected


def test_testKeepsDirectoriesAfterReassignment():
    dirs = ("v1PVrX6uS5m8CByXlLfmWg", "iU2znv45Q9yQkOpkTSy3jA", "fM5NKyWTQHqEihjIkUl99Q")
    p = _reg(FOO_ID, (2, 1, 3), dirs, (2, 1, 3), 1)
    built = (
        _java_builder(p, lambda r: True, mv("3.7-IV2"), elr=False)
        .set_target_replicas((3, 1, 5, 4))
        .set_directory(5, "RNJ5oFjjSSWMMFRwqdCfJg")
        .build()
    )
    new_dirs = ("fM5NKyWTQHqEihjIkUl99Q", "iU2znv45Q9yQkOpkTSy3jA", "RNJ5oFjjSSWMMFRwqdCfJg", UNASSIGNED)
    assignment = tuple(ReplicaDirectory(broker=b, directory=d) for b, d in zip((3, 1, 5, 4), new_dirs))
    assert built == record(p, 1, leader=1, replicas=(3, 1, 5, 4), assignment=assignment)


def test_testUpdateDirectories():
    dirs = ("S1zMYZczRjWmucidLqGA5g", "9eRNXTvFTsWUJObvW51V5A", "UpePYVBgRAi3c4ujQrf3Kg")
    p = _reg(FOO_ID, (2, 1, 3), dirs, (2, 1, 3), 2)
    built = (
        _java_builder(p, lambda r: True, MV_4_1_IV1, elr=False)  # MetadataVersion.latestTesting()
        .set_directory(3, "pN1VKs9zRzK4APflpegAVg")
        .set_directory(1, LOST)
        .build()
    )
    new_dirs = ("S1zMYZczRjWmucidLqGA5g", LOST, "pN1VKs9zRzK4APflpegAVg")
    assert built == record(
        p, 2, assignment=tuple(ReplicaDirectory(broker=b, directory=d) for b, d in zip((2, 1, 3), new_dirs))
    )


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


@pytest.mark.parametrize("election", list(Election))
def test_testEligibleLeaderReplicas_NotEligibleLastKnownLeader(election):
    """KAFKA-19522 (Kafka 4.1): a last known leader that is not acceptable is not elected, by
    any election (4.1 runs the case for each of them, with no replica acceptable)."""
    dirs = tuple(uid(d) for d in ("zANDdMukTEqefOvHpmniMg", "Ui2Eq8rbRiuW7m7uiPTRyg", "MhgJOZrrTsKNcGM0XKK4aA"))
    p = registration((1, 2, 3, 4), (), -1, last_known_elr=(1,), directories=(*dirs, uid("Y25PaCAmRfyGIKxAThhBAw")))
    b = builder(p, lambda r: False, 2, elr=True).set_election(election).set_target_isr(())
    # No change to the partition.
    assert b.build() is None


def test_testEligibleLeaderReplicas_lastKnownElrShouldBePopulatedWhenNoLeader():
    """Kafka 4.1: an election that finds no leader records the last leader as the last known
    ELR, even when the ISR is not changed (the record has no ISR)."""
    p = registration((1, 2, 3), (1,), 1, elr=(2,), directories=(UNASSIGNED,) * 3)
    # No replica is acceptable as leader, so the election yields no leader.
    b = builder(p, lambda r: False, 2)
    built = b.build()
    assert (built.leader, built.isr, built.last_known_elr) == (NO_LEADER, None, (1,))
    assert merge(p, built).last_known_elr == (1,)


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
