"""Kafka's ``PartitionRegistrationTest`` (org.apache.kafka.metadata), case by case where kraftlake has
the behaviour: ``PartitionRegistration.merge`` is ``partitions.merge``, the PartitionRecord
constructor is ``partitions.from_record``. Of the class's 18 methods, 8 are here; 10 cannot apply:

- testToLeaderAndIsrPartitionState: LeaderAndIsr requests are not modelled (ZooKeeper-era RPC).
- testBuilderThrowsIllegalStateExceptionWhenMissing{Replicas,Isr,Leader,LeaderRecoveryState,
  LeaderEpoch,PartitionEpoch} and testBuilderSuccess (7): Kafka's Java builder; the registration
  is a frozen msgspec Struct whose constructor takes the fields (its defaults are checked by
  testBuilderSetsDefaultAddingAndRemovingReplicas).
- testPartitionRegistrationToRecord and testPartitionRegistrationToRecord_ElrShouldBeNullIfEmpty:
  kraftlake writes no Kafka records back from registrations (its snapshots are its own image), so
  it has no ``toRecord``.

testPartitionControlInfoMergeAndDiff checks the merge half: kraftlake has no ``diff``.

Known difference kept for now: Kafka's ``merge`` gives every replica MIGRATING when a change sets
replicas without directories on an all-MIGRATING partition (``defaultToMigrating`` with the new
count); kraftlake, like its columnar plan, gives the new replicas UNASSIGNED (``partitions.merge``)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlake.records.kraft import MIGRATING, UNASSIGNED, Partition, PartitionChange, ReplicaDirectory
from kraftlake.statemachine.kraft.invariants import leader_is_eligible
from kraftlake.statemachine.kraft.partitions import from_record, merge
from kraftlake.statemachine.kraft.view import ControllerView, PartitionRegistration
from tests.helpers.kraft import uid

TOPIC = uid("OGdAI5nxT_m-ds3rJMqPLA")


def reg(replicas, isr, leader, *, dirs=None, epochs=(0, 0), elr=(), lke=(), removing=(), adding=()):
    return PartitionRegistration(
        topic_id=TOPIC,
        partition_id=0,
        replicas=tuple(replicas),
        directories=tuple(dirs or (UNASSIGNED,) * len(replicas)),
        isr=tuple(isr),
        removing_replicas=tuple(removing),
        adding_replicas=tuple(adding),
        leader=leader,
        leader_recovery_state=0,
        leader_epoch=epochs[0],
        partition_epoch=epochs[1],
        eligible_leader_replicas=tuple(elr),
        last_known_elr=tuple(lke),
    )


def pcr(**fields) -> PartitionChange:
    return PartitionChange(topic_id=TOPIC, partition_id=0, **fields)


def test_testPartitionControlInfoMergeAndDiff():
    """The merge half (kraftlake has no ``diff``): a leader change bumps both epochs; an ELR change
    only the partition epoch."""
    a = reg((1, 2, 3), (1, 2), 1)
    b = reg((1, 2, 3), (3,), 3, epochs=(1, 1))
    c = reg((1, 2, 3), (1,), 1, epochs=(0, 1), elr=(2,), lke=(3,))
    assert merge(a, pcr(leader=3, isr=(3,))) == b
    assert merge(a, pcr(isr=(1,), eligible_leader_replicas=(2,), last_known_elr=(3,))) == c


def test_testRecordRoundTrip():
    a = reg((1, 2, 3), (1, 2), 1, dirs=(MIGRATING,) * 3, removing=(1,))
    record = Partition(
        version=0,
        topic_id=TOPIC,
        partition_id=0,
        replicas=a.replicas,
        isr=a.isr,
        removing_replicas=a.removing_replicas,
        leader=a.leader,
        leader_epoch=0,
        partition_epoch=0,
    )
    assert from_record(record) == a


def test_testMergePartitionChangeRecordWithReassignmentData():
    d1, d2, d3 = uid("FbRuu7CeQtq5YFreEzg16g"), uid("4rtHTelWSSStAFMODOg3cQ"), uid("Id1WXzHURROilVxZWJNZlw")
    p0 = reg((1, 2, 3), (1, 2, 3), 1, dirs=(d1, d2, d3), epochs=(100, 200))
    p1 = merge(
        p0,
        pcr(
            removing_replicas=(3,),
            adding_replicas=(4,),
            replicas=(1, 2, 3, 4),
            assignment=tuple(
                ReplicaDirectory(broker=b, directory=d) for b, d in zip((1, 2, 3, 4), (d1, d2, d3, UNASSIGNED))
            ),
        ),
    )
    assert p1 == reg(
        (1, 2, 3, 4), (1, 2, 3), 1, dirs=(d1, d2, d3, UNASSIGNED), epochs=(100, 201), removing=(3,), adding=(4,)
    )
    p2 = merge(
        p1,
        pcr(
            isr=(1, 2, 4),
            removing_replicas=(),
            adding_replicas=(),
            replicas=(1, 2, 4),
            assignment=tuple(ReplicaDirectory(broker=b, directory=d) for b, d in zip((1, 2, 4), (d1, d2, UNASSIGNED))),
        ),
    )
    assert p2 == reg((1, 2, 4), (1, 2, 4), 1, dirs=(d1, d2, UNASSIGNED), epochs=(100, 202))


def test_testDirectories():
    d1, d2, d3 = uid("FbRuu7CeQtq5YFreEzg16g"), uid("4rtHTelWSSStAFMODOg3cQ"), uid("Id1WXzHURROilVxZWJNZlw")
    p = reg((3, 2, 1), (1, 2, 3), 1, dirs=(d1, d2, d3), epochs=(100, 200))
    assert (p.directory(1), p.directory(2), p.directory(3)) == (d3, d2, d1)
    with pytest.raises(ValueError):
        p.directory(4)


def test_testMigratingRecordDirectories():
    record = Partition(version=0, topic_id=TOPIC, partition_id=0, replicas=(0, 1), isr=(0, 1), leader=0)
    assert from_record(record).directories == (MIGRATING, MIGRATING)


def test_testElectionWasClean():
    """Kafka's static ``electionWasClean`` (the unclean-election metric's test) is K14's question
    here (``invariants.leader_is_eligible``). The stored version's cases: a leader from the ISR
    before the change is clean, one from outside it, in a change that does not force the ISR to it
    (an unclean election does), is not. Kafka 4.0 counts an ELR member as clean (KAFKA-18940) and
    4.1 compares the two registrations, so that a reassignment completing with its new preferred
    leader is clean (KAFKA-19212, whose example is the last case)."""
    view = ControllerView()
    view.features["metadata.version"] = 21

    def clean(leader, isr, elr=()) -> bool:
        replicas = tuple(sorted({leader, *isr, *elr, 0}))
        old = reg(replicas, isr, -1, elr=elr)
        new = reg(replicas, isr or (leader,), leader)  # an election from an empty ISR makes it the ISR
        return leader_is_eligible(view, old, new) is None

    assert clean(1, (1, 2))
    assert not clean(1, (0, 2))
    assert not clean(1, ())
    assert clean(3, (1, 2, 3, 4, 5, 6))
    assert clean(1, (), elr=(1, 2))
    before = reg((2, 1, 0), (1, 0), 0, removing=(0,), adding=(2,))
    assert leader_is_eligible(view, before, reg((2, 1), (1, 2), 2)) is None


def test_testBuilderSetsDefaultAddingAndRemovingReplicas():
    p = PartitionRegistration(
        topic_id=TOPIC, partition_id=0, replicas=(0, 1), directories=(MIGRATING,) * 2, isr=(0, 1), leader=0
    )
    assert (p.removing_replicas, p.adding_replicas) == ((), ())


def _samples() -> list[PartitionRegistration]:
    """The nine distinct registrations of Kafka's ``uniqueSamples``: (replicas, ISR, leader, leader
    epoch, partition epoch, removing, adding, ELR, LastKnownElr, recovering)."""
    r3, r6, i3 = (1, 2, 3), (1, 2, 3, 4, 5, 6), (1, 2, 3)
    rows = [
        (r3, i3, 1, 100, 200, (), (), (1, 2, 3), (), 0),
        (r3, i3, 1, 101, 200, (), (), (), (1, 2), 0),
        (r3, i3, 1, 100, 201, (), (), (1, 2), (1, 2), 0),
        (r3, i3, 2, 100, 200, (), (), (), (1, 2), 0),
        (r3, (1,), 1, 100, 200, (), (), (), (), 1),
        (r6, i3, 1, 100, 200, (4, 5, 6), (1, 2, 3), (1, 2, 3), (), 0),
        (r6, i3, 1, 100, 200, (1, 2, 3), (4, 5, 6), (), (1, 2), 0),
        (r6, i3, 1, 100, 200, (1, 3), (), (1, 2, 3), (), 0),
        (r6, i3, 1, 100, 200, (), (4, 5, 6), (2, 3), (1, 2), 0),
    ]
    out = []
    for n, (replicas, isr, leader, le, pe, removing, adding, elr, lke, lrs) in enumerate(rows):
        dirs = tuple(uid(f"sample-{n}-{r}") for r in replicas)
        p = reg(replicas, isr, leader, dirs=dirs, epochs=(le, pe), removing=removing, adding=adding, elr=elr, lke=lke)
        out.append(msgspec.structs.replace(p, leader_recovery_state=lrs))
    return out


@given(st.sampled_from(range(9)), st.sampled_from(range(9)), st.booleans())
def test_testConsistentEqualsAndHashCode(i, j, copy):
    """Equal registrations hash alike; different hashes mean different registrations. ``copy``
    compares a rebuilt equal value, not only the same object."""
    samples = _samples()
    a = samples[i]
    b = _samples()[j] if copy else samples[j]
    if a == b:
        assert hash(a) == hash(b)
    if hash(a) != hash(b):
        assert a != b
    assert (a == b) == (i == j)
