"""Kafka's ``BrokerToElrsTest`` (org.apache.kafka.controller; the class under test is
``BrokersToElrs``), case by case against ``replication.elr_partitions``, which finds the
partitions with a broker in their ELR from the view that replay keeps. Kafka's ``update`` calls
stand for the partition records that set those ELRs. Its one method, testIterator, is here."""

from __future__ import annotations

from kraftlake.records.kraft import Partition, Topic
from kraftlake.statemachine.kraft import reducer
from kraftlake.statemachine.kraft.replication import elr_partitions

T0, T1 = "z5XgH_fQSAK3-RYoF2ymgw", "U52uRe20RsGI0RvpcTx33Q"


def part(topic, pid, elr) -> Partition:
    """A leaderless partition with an empty ISR whose ELR is ``elr`` (as KIP-966 leaves one)."""
    return Partition(
        version=2,
        topic_id=topic,
        partition_id=pid,
        replicas=tuple(sorted(elr)),
        isr=(),
        leader=-1,
        eligible_leader_replicas=tuple(elr),
    )


def test_testIterator():
    view = reducer.replay([Topic(name="a", topic_id=T0), Topic(name="b", topic_id=T1)])
    assert elr_partitions(view, 1) == set()
    reducer.replay([part(T0, 0, (1, 2, 3)), part(T1, 1, (2, 3, 4))], view)
    assert elr_partitions(view, 1) == {(T0, 0)}
    assert elr_partitions(view, 2) == {(T0, 0), (T1, 1)}
    assert elr_partitions(view, 4) == {(T1, 1)}
    assert elr_partitions(view, 5) == set()
    reducer.replay([part(T1, 2, (3, 2, 1))], view)
    assert elr_partitions(view, 2) == {(T0, 0), (T1, 1), (T1, 2)}
