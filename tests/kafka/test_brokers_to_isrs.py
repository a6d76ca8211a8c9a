"""Kafka's ``BrokersToIsrsTest`` (org.apache.kafka.controller), case by case against the view's
indexes (``ControllerView.isr_index`` and ``leaderless``, kept by replay), fed by the partition
records that Kafka's ``update`` calls stand for. Kafka's "leaders only" iterator is the ISR index
filtered on the leader (kraftlake keeps no separate leader index). All three methods are here.

Kafka's test of ``BrokersToElrs`` is named ``BrokerToElrsTest``: tests/kafka/test_brokers_to_elrs.py."""

from __future__ import annotations

from kraftlake.records.kraft import Partition, PartitionChange, Topic
from kraftlake.statemachine.kraft import reducer
from kraftlake.statemachine.kraft.view import ControllerView
from tests.helpers.kraft import uid

T0, T1 = uid("z5XgH_fQSAK3-RYoF2ymgw"), uid("U52uRe20RsGI0RvpcTx33Q")


def view_with(*records) -> ControllerView:
    view = reducer.replay([Topic(name="a", topic_id=T0), Topic(name="b", topic_id=T1)])
    view.isr_index  # build the indexes, so that replay keeps them up to date from here  # noqa: B018
    return reducer.replay(records, view)


def part(topic, pid, isr, leader):
    return Partition(topic_id=topic, partition_id=pid, replicas=tuple(sorted(isr)), isr=tuple(isr), leader=leader)


def on(view, broker, leaders_only=False) -> set:
    keys = set(view.isr_index.get(broker, ()))
    if leaders_only:
        keys = {k for k in keys if view.partition(*k).leader == broker}
    return keys


def test_testIterator():
    view = view_with()
    assert on(view, 1) == set()
    view = view_with(part(T0, 0, (1, 2, 3), 1), part(T1, 1, (2, 3, 4), 4))
    assert on(view, 1) == {(T0, 0)}
    assert on(view, 2) == {(T0, 0), (T1, 1)}
    assert on(view, 4) == {(T1, 1)}
    assert on(view, 5) == set()
    reducer.replay([part(T1, 2, (3, 2, 1), 3)], view)
    assert on(view, 2) == {(T0, 0), (T1, 1), (T1, 2)}


def test_testLeadersOnlyIterator():
    view = view_with(part(T0, 0, (1, 2, 3), 1), part(T1, 1, (2, 3, 4), 4))
    assert on(view, 1, True) == {(T0, 0)}
    assert on(view, 2, True) == set()
    assert on(view, 4, True) == {(T1, 1)}
    reducer.replay([PartitionChange(topic_id=T0, partition_id=0, leader=2)], view)
    assert on(view, 1, True) == set()
    assert on(view, 2, True) == {(T0, 0)}


def test_testNoLeader():
    view = view_with(part(T0, 2, (1, 2, 3), 3))
    assert on(view, 3, True) == {(T0, 2)}
    assert on(view, 2, True) == set()
    assert view.leaderless == set()
    reducer.replay([PartitionChange(topic_id=T0, partition_id=2, leader=-1)], view)
    assert view.leaderless == {(T0, 2)}
