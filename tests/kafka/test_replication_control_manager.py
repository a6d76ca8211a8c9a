"""Kafka's ``ReplicationControlManagerTest`` (org.apache.kafka.controller), the eligible leader replica
cases, case by case through kraftlake's controller (deciders + reducer) at metadata.version 4.0-IV1
with ``eligible.leader.replicas.version`` 1 (Kafka's context ``setIsElrEnabled(true)``).

Kafka's test context maps onto commands: ``registerBrokers``/``unfenceBrokers`` onto registration
records and heartbeats, ``fenceBrokers`` onto session expiries in broker order,
``alterTopicConfig`` onto AlterConfig, ``handleBrokersUncleanShutdown`` onto
``brokers.shutdown_records`` with ``clean=False``, ``deleteTopic`` onto DeleteTopics."""

from __future__ import annotations

import pytest

from kraftlake.records.kraft import FeatureLevel
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.brokers import shutdown_records
from kraftlake.statemachine.kraft.replication import effective_min_isr, elr_partitions
from tests.helpers.kraft import controller_with_brokers, uid

MV_4_0_IV1 = 23


class Context:
    """Kafka's ``ReplicationControlTestContext`` with ELR on."""

    def __init__(self, *brokers: int, mv: int = MV_4_0_IV1, elr: bool = True) -> None:
        self.ctl = controller_with_brokers({b: [uid(f"rcm-{b}")] for b in brokers}, mv=mv)
        if elr:
            self.ctl.append([FeatureLevel(name="eligible.leader.replicas.version", feature_level=1)])

    @property
    def view(self):
        return self.ctl.view

    def create_test_topic(self, name: str, *replicas: tuple[int, ...]) -> str:
        d = self.ctl.handle(c.CreateTopic(name=name, assignments=tuple(replicas)))
        assert d.reply.error_code == c.NONE, d.reply
        return d.reply.topic_id

    def leader_and_isr(self, topic_id: str, partition: int) -> tuple[int, tuple[int, ...]]:
        p = self.view.partition(topic_id, partition)
        return p.leader, p.isr

    def alter_topic_config(self, name: str, key: str, value: str) -> None:
        assert self.ctl.handle(c.AlterConfig(resource_type=2, resource_name=name, name=key, value=value)).records

    def fence_brokers(self, *brokers: int) -> None:
        for b in sorted(brokers):
            self.ctl.handle(c.ExpireSession(broker_id=b))

    def unfence_brokers(self, *brokers: int) -> None:
        for b in brokers:
            reg = self.view.brokers[b]
            d = self.ctl.handle(
                c.Heartbeat(broker_id=b, broker_epoch=reg.epoch, current_metadata_offset=self.view.offset)
            )
            assert not d.reply.is_fenced

    def alter_isr(self, topic_id: str, isr: tuple[int, ...], partition: int = 0) -> int:
        p = self.view.partition(topic_id, partition)
        d = self.ctl.handle(
            c.AlterPartition(
                broker_id=p.leader,
                broker_epoch=self.view.brokers[p.leader].epoch,
                topic_id=topic_id,
                partition_id=partition,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                new_isr=isr,
            )
        )
        return d.reply.error_code

    def unclean_shutdown(self, broker: int) -> None:
        self.ctl.append(shutdown_records(self.view, broker, clean=False))


def test_testEligibleLeaderReplicas_ShrinkAndExpandIsr():
    ctx = Context(0, 1, 2)
    t = ctx.create_test_topic("foo", (0, 1, 2))
    assert ctx.view.partition(t, 0).leader == 0
    ctx.alter_topic_config("foo", "min.insync.replicas", "2")
    assert ctx.alter_isr(t, (0,)) == c.NONE
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((1, 2), ())
    assert ctx.alter_isr(t, (0, 1)) == c.NONE
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())


def test_testEligibleLeaderReplicas_BrokerFence():
    ctx = Context(0, 1, 2, 3)
    t = ctx.create_test_topic("foo", (0, 1, 2, 3))
    ctx.alter_topic_config("foo", "min.insync.replicas", "3")
    ctx.fence_brokers(2, 3)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((3,), ())
    ctx.fence_brokers(1, 2, 3)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((1, 3), ())
    ctx.unfence_brokers(0, 1, 2, 3)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((1, 3), ())


def test_testEligibleLeaderReplicas_DeleteTopic():
    ctx = Context(0, 1, 2)
    t = ctx.create_test_topic("foo", (0, 1, 2))
    ctx.alter_topic_config("foo", "min.insync.replicas", "2")
    assert ctx.alter_isr(t, (0,)) == c.NONE
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((1, 2), ())
    assert elr_partitions(ctx.view, 1)
    d = ctx.ctl.handle(c.DeleteTopics(topic_ids=(t, uid("nope"))))
    assert d.reply.errors == {t: c.NONE, uid("nope"): c.UNKNOWN_TOPIC_ID}
    assert not elr_partitions(ctx.view, 1)
    assert not ctx.view.isr_index.get(0)


def test_testEligibleLeaderReplicas_EffectiveMinIsr():
    ctx = Context(0, 1, 2)
    t = ctx.create_test_topic("foo", (0, 1, 2))
    ctx.alter_topic_config("foo", "min.insync.replicas", "5")
    assert effective_min_isr(ctx.view, t) == 3


def _three_of_four_fenced() -> tuple[Context, str]:
    """The start CleanElection and UncleanShutdown share: min ISR 3, brokers 1, 2, 3 fenced."""
    ctx = Context(0, 1, 2, 3)
    t = ctx.create_test_topic("foo", (0, 1, 2, 3))
    ctx.alter_topic_config("foo", "min.insync.replicas", "3")
    ctx.fence_brokers(1, 2, 3)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((2, 3), ())
    return ctx, t


def test_testEligibleLeaderReplicas_CleanElection():
    ctx, t = _three_of_four_fenced()
    ctx.unfence_brokers(2)
    ctx.fence_brokers(0, 1)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.isr, p.leader, p.last_known_elr) == ((0, 3), (2,), 2, ())


def test_testEligibleLeaderReplicas_UncleanShutdown():
    ctx, t = _three_of_four_fenced()
    # An unclean shutdown ELR member is kicked out of the ELR.
    ctx.unclean_shutdown(3)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((2,), ())
    # An unclean shutdown last ISR member is the last known leader.
    ctx.unclean_shutdown(0)
    p = ctx.view.partition(t, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr, p.isr, p.leader) == ((2,), (0,), (), -1)


@pytest.mark.parametrize("elect_all_partitions", [True, False])
def test_testElectUncleanLeaders_WithoutElr(elect_all_partitions):
    ctx = Context(0, 1, 2, 3, 4, mv=13, elr=False)  # 3.6-IV1
    t = ctx.create_test_topic("foo", (1, 2, 3), (2, 3, 4), (0, 2, 1))
    ctx.fence_brokers(2, 3)
    ctx.fence_brokers(1, 2, 3)
    assert [ctx.leader_and_isr(t, i) for i in range(3)] == [(-1, (1,)), (4, (4,)), (0, (0,))]
    request = c.ElectLeaders(
        election="unclean", partitions=None if elect_all_partitions else (("foo", 0), ("foo", 1), ("foo", 2))
    )
    # No election yet: no replica is available for partition 0.
    d = ctx.ctl.handle(request)
    assert d.records == ()
    expected = [
        ("foo", 0, c.ELIGIBLE_LEADERS_NOT_AVAILABLE),
        ("foo", 1, c.ELECTION_NOT_NEEDED),
        ("foo", 2, c.ELECTION_NOT_NEEDED),
    ]
    assert list(d.reply.results) == expected
    # Broker 2 back: partition 0 can be led uncleanly; 2 rejoins partition 1's ISR, which must not
    # trigger a preferred election.
    ctx.unfence_brokers(2)
    assert ctx.alter_isr(t, (2, 4), partition=1) == c.NONE
    d = ctx.ctl.handle(request)
    [record] = d.records
    assert (record.partition_id, record.leader, record.isr) == (0, 2, (2,))
    assert [ctx.leader_and_isr(t, i) for i in range(3)] == [(2, (2,)), (4, (2, 4)), (0, (0,))]
    assert list(d.reply.results) == [("foo", 0, c.NONE), *expected[1:]]


def test_testPreferredElectionDoesNotTriggerUncleanElection():
    ctx = Context(1, 2, 3, 4, mv=21, elr=False)
    t = ctx.create_test_topic("foo", (1, 2, 3))
    ctx.fence_brokers(2, 3)
    ctx.fence_brokers(1, 2, 3)
    ctx.unfence_brokers(2)
    assert ctx.leader_and_isr(t, 0) == (-1, (1,))
    assert ctx.ctl.handle(
        c.AlterConfig(resource_type=2, resource_name="foo", name="unclean.leader.election.enable", value="true")
    ).records
    d = ctx.ctl.handle(c.ElectLeaders(election="preferred", partitions=(("foo", 0),)))
    assert d.records == ()
    assert list(d.reply.results) == [("foo", 0, c.PREFERRED_LEADER_NOT_AVAILABLE)]
