"""Deciders beyond Kafka's own controller tests (test_kraft_scenarios.py): controlled shutdown as
Kafka 3.7 wrote it in fixtures/kafka/kafka37-jbod-dirs (test_s9), the KIP-858 stay-fenced policy,
unregistration, AlterPartition, the broker's directory choice, and the placement of new
partitions. Given records, when a command, then these records."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from kraftlake.records import UNASSIGNED, BrokerRegistrationChange, PartitionChange, UnregisterBroker
from kraftlake.statemachine import placement
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.broker_view import broker_view
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.replica_manager import LocalStorage, plan

from helpers.kraft import bootstrap, controller_with_brokers, registration, strip, uid


def choose_dirs(view, broker, free_bytes, *, seed):
    """The broker's replica management on a fresh broker (no local log yet): its request."""
    storage = LocalStorage(online=view.brokers[broker].log_dirs, free_bytes=free_bytes)
    return plan(view, broker, storage, seed=seed).request


def hb(ctl, b, **kw):
    return ctl.handle(
        c.Heartbeat(broker_id=b, broker_epoch=ctl.view.brokers[b].epoch, current_metadata_offset=ctl.view.offset, **kw)
    )


def test_s9_controlled_shutdown_of_a_single_broker_like_the_real_37_log():
    """kafka37-jbod-dirs offsets 4871-4926: BRCR v1 {InControlledShutdown=1}, one PCR {Leader=-1}
    per partition with the ISR untouched (last replica standing), then BRCR v0 {Fenced=1}."""
    ctl = controller_with_brokers({1: [uid("only")]})
    t = ctl.handle(c.CreateTopic(name="t", partitions=54, replication_factor=1)).reply.topic_id
    d = hb(ctl, 1, want_shut_down=True)
    assert not d.reply.should_shut_down
    assert strip(d.records) == [
        BrokerRegistrationChange(version=1, broker_id=1, broker_epoch=101, in_controlled_shutdown=1),
        *(PartitionChange(version=1, topic_id=t, partition_id=p, leader=-1) for p in range(54)),
    ]
    assert all(p.isr == (1,) and p.leader == -1 for p in ctl.view.iter_partitions())
    d = hb(ctl, 1, want_shut_down=True)
    assert d.reply.should_shut_down
    assert strip(d.records) == [BrokerRegistrationChange(version=0, broker_id=1, broker_epoch=101, fenced=1)]


def test_controlled_shutdown_moves_leadership_first():
    ctl = controller_with_brokers({1: [uid("c1")], 2: [uid("c2")], 3: [uid("c3")]})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2, 3), (2, 1, 3)))).reply.topic_id
    d = hb(ctl, 1, want_shut_down=True)
    assert d.reply.is_fenced is False and d.reply.should_shut_down is False
    assert strip(d.records) == [
        BrokerRegistrationChange(version=1, broker_id=1, broker_epoch=101, in_controlled_shutdown=1),
        PartitionChange(version=1, topic_id=t, partition_id=0, isr=(2, 3), leader=2),
        PartitionChange(version=1, topic_id=t, partition_id=1, isr=(2, 3)),
    ]
    assert hb(ctl, 1, want_shut_down=True).reply.should_shut_down  # leads nothing any more


def test_unfence_elects_the_broker_where_nobody_leads():
    ctl = controller_with_brokers({1: [uid("u1")], 2: [uid("u2")]})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1,),))).reply.topic_id
    ctl.handle(c.CreateTopic(name="u", assignments=((1, 2),)))
    ctl.handle(c.ExpireSession(broker_id=1))
    assert ctl.view.partition(t, 0).leader == -1
    d = hb(ctl, 1)
    assert strip(d.records) == [
        BrokerRegistrationChange(version=0, broker_id=1, broker_epoch=101, fenced=-1),
        PartitionChange(version=1, topic_id=t, partition_id=0, leader=1),
    ]  # u-0 keeps leader 2: only leaderless partitions are looked at


def test_a_broker_that_has_not_caught_up_stays_fenced():
    ctl = Controller(bootstrap() + [registration(1, [uid("f1")])])
    d = ctl.handle(c.Heartbeat(broker_id=1, broker_epoch=101, current_metadata_offset=0))
    assert d.reply.is_fenced and d.records == () and not d.reply.is_caught_up
    stale = ctl.handle(c.Heartbeat(broker_id=1, broker_epoch=7, current_metadata_offset=5))
    assert stale.reply.error_code == c.STALE_BROKER_EPOCH and stale.records == ()


@pytest.mark.parametrize("policy", [False, True])
def test_stay_fenced_while_unassigned_is_a_policy_off_by_default(policy):
    cfg = c.ControllerConfig(stay_fenced_while_unassigned=policy)
    ctl = Controller(
        bootstrap() + [registration(1, [uid("p1")]), registration(2, [uid("p2a"), uid("p2b")])], config=cfg
    )
    for b in (1, 2):
        hb(ctl, b)
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2),))).reply.topic_id
    assert ctl.view.partition(t, 0).directories == (uid("p1"), UNASSIGNED)
    ctl.handle(c.ExpireSession(broker_id=2))
    assert broker_view(ctl.view, 2).should_stay_fenced
    d = hb(ctl, 2)
    assert d.reply.is_fenced is policy
    if policy:
        request = choose_dirs(
            ctl.view, 2, {uid("p2a"): 10, uid("p2b"): 20}, seed=placement.seed_for(ctl.view.offset + 1)
        )
        ctl.handle(c.AssignReplicasToDirs(request=request))
        assert not broker_view(ctl.view, 2).should_stay_fenced
        assert hb(ctl, 2).reply.is_fenced is False


def test_unregister_leaves_every_isr_then_unregisters():
    ctl = controller_with_brokers({1: [uid("r1")], 2: [uid("r2")]})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2),))).reply.topic_id
    d = ctl.handle(c.UnregisterBroker(broker_id=1))
    assert strip(d.records) == [
        PartitionChange(version=1, topic_id=t, partition_id=0, isr=(2,), leader=2),
        UnregisterBroker(broker_id=1, broker_epoch=101),
    ]
    assert 1 not in ctl.view.brokers
    assert ctl.handle(c.UnregisterBroker(broker_id=1)).reply.error_code == c.BROKER_ID_NOT_REGISTERED


def test_alter_partition_shrinks_and_expands_the_isr_and_rejects_what_kafka_rejects():
    ctl = controller_with_brokers({1: [uid("a1")], 2: [uid("a2")], 3: [uid("a3")]})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2, 3),))).reply.topic_id

    def alter(isr, **kw):
        p = ctl.view.partition(t, 0)
        fields = dict(
            broker_id=1,
            broker_epoch=101,
            topic_id=t,
            partition_id=0,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
            new_isr=isr,
        )
        fields.update(kw)
        return ctl.handle(c.AlterPartition(**fields))

    d = alter((1, 2))
    assert strip(d.records) == [PartitionChange(version=1, topic_id=t, partition_id=0, isr=(1, 2))]
    assert (d.reply.isr, d.reply.leader_epoch, d.reply.partition_epoch) == ((1, 2), 0, 1)
    assert alter((1, 2, 3)).reply.isr == (1, 2, 3)
    assert alter((1, 2), partition_epoch=0).reply.error_code == c.INVALID_UPDATE_VERSION
    assert alter((1, 2), leader_epoch=5).reply.error_code == c.NOT_CONTROLLER  # ahead: this controller is behind
    assert alter((1, 2), partition_epoch=9).reply.error_code == c.NOT_CONTROLLER
    assert alter((1, 2), broker_id=2, broker_epoch=102).reply.error_code == c.INVALID_REQUEST
    assert alter((2, 3)).reply.error_code == c.INVALID_REQUEST  # the leader must stay in
    assert alter((1, 4)).reply.error_code == c.INVALID_REQUEST  # not a replica
    assert alter((1,), broker_epoch=5).reply.error_code == c.STALE_BROKER_EPOCH
    ctl.handle(c.ExpireSession(broker_id=3))
    alter((1, 2))
    assert alter((1, 2, 3)).reply.error_code == c.INELIGIBLE_REPLICA
    assert alter((1, 2), leader_recovery_state=1).reply.error_code == c.INVALID_REQUEST


def test_topic_creation_errors():
    ctl = controller_with_brokers({1: [uid("e1")], 2: [uid("e2")]})
    assert ctl.handle(c.CreateTopic(name="t", replication_factor=3)).reply.error_code == c.INVALID_REPLICATION_FACTOR
    assert ctl.handle(c.CreateTopic(name="t", assignments=((1, 1),))).reply.error_code == c.INVALID_REPLICA_ASSIGNMENT
    assert ctl.handle(c.CreateTopic(name="t", assignments=((1, 9),))).reply.error_code == c.INVALID_REPLICA_ASSIGNMENT
    assert ctl.handle(c.CreateTopic(name="t", partitions=0)).reply.error_code == c.INVALID_PARTITIONS
    assert ctl.handle(c.CreateTopic(name="t")).reply.error_code == 0
    assert ctl.handle(c.CreateTopic(name="t")).reply.error_code == c.TOPIC_ALREADY_EXISTS
    ctl.handle(c.ExpireSession(broker_id=1))
    assert ctl.handle(c.CreateTopic(name="u", assignments=((1,),))).reply.error_code == c.INVALID_REPLICA_ASSIGNMENT


def test_placement_of_new_partitions_follows_free_disk_with_the_median_cap():
    """Brokers with 10/20/30/1000 units of free disk: first replicas land 7.41/14.81/22.22/55.56 %
    of the time (BookKeeper's ``WeightedRandomSelectionImpl.updateMap`` with its default multiple 3:
    1000 is capped at 3 x the median 25), and the decision replays exactly (seeded from the offset)."""
    ctl = controller_with_brokers({b: [uid(f"w{b}")] for b in range(4)})
    weights = {0: 10, 1: 20, 2: 30, 3: 1000}
    # 10 000 partitions: Kafka 4.0's cap on one CreateTopics request.
    d = ctl.handle(c.CreateTopic(name="w", partitions=10000, replication_factor=1, broker_weights=weights))
    counts = Counter(a[0] for a in d.reply.assignments)
    expected = {0: 10 / 135, 1: 20 / 135, 2: 30 / 135, 3: 75 / 135}
    for b, p in expected.items():
        sigma = (p * (1 - p) / 10000) ** 0.5
        assert abs(counts[b] / 10000 - p) < 5 * sigma, (b, counts[b])
    again = controller_with_brokers({b: [uid(f"w{b}")] for b in range(4)})
    same = again.handle(c.CreateTopic(name="w", partitions=10000, replication_factor=1, broker_weights=weights))
    assert same.reply.assignments == d.reply.assignments
    rf3 = ctl.handle(c.CreateTopic(name="r", partitions=200, replication_factor=3, broker_weights=weights))
    assert all(len(set(a)) == 3 for a in rf3.reply.assignments)


def test_the_broker_chooses_dirs_for_unassigned_replicas_by_free_disk():
    ctl = controller_with_brokers({1: [uid("x1"), uid("x2")], 2: [uid("y")]})
    t = ctl.handle(c.CreateTopic(name="t", partitions=3000, replication_factor=2, assignments=None)).reply.topic_id
    request = choose_dirs(
        ctl.view, 1, {uid("x1"): 100, uid("x2"): 300}, seed=placement.seed_for(ctl.view.offset + 1, "dirs/1")
    )
    placed = {d.id: sum(len(tp.partitions) for tp in d.topics) for d in request.directories}
    assert sum(placed.values()) == 3000 and abs(placed[uid("x2")] / 3000 - 0.75) < 0.05
    ctl.handle(c.AssignReplicasToDirs(request=request))
    bv = broker_view(ctl.view, 1)
    assert bv.unassigned == () and bv.mismatched == () and all(r.online for r in bv.replicas)
    assert choose_dirs(ctl.view, 1, {uid("x1"): 1}, seed=1) is None  # nothing left to place
    assert ctl.view.partition(t, 0).directory(2) == uid("y")  # a single-dir broker's dir at once


def test_decide_does_not_change_the_view():
    ctl = controller_with_brokers({1: [uid("n1")], 2: [uid("n2")]})
    ctl.handle(c.CreateTopic(name="t", assignments=((1, 2),)))
    before = ctl.view.state_hash()
    from kraftlake.statemachine.kraft.decider import decide

    for cmd in (c.ExpireSession(broker_id=1), c.UnregisterBroker(broker_id=2), c.CreateTopic(name="u")):
        decide(ctl.view, cmd)
        assert ctl.view.state_hash() == before
    with pytest.raises(TypeError, match="not a KRaft controller command"):
        decide(ctl.view, msgspec.Struct())  # type: ignore[arg-type]


def test_reassignment_adds_then_completes_when_the_new_replica_joins_the_isr():
    """changePartitionReassignment then AlterPartition: replicas become target + leaving with
    adding/removing; once the new replica is in the ISR the builder completes the move, drops the
    leaving leader with a bump and answers NEW_LEADER_ELECTED."""
    ctl = controller_with_brokers({b: [uid(f"ra{b}")] for b in (1, 2, 3, 4)})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2, 3),))).reply.topic_id
    d = ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=(4, 2, 3)))
    [start] = strip(d.records)
    assert (start.replicas, start.adding_replicas, start.removing_replicas, start.leader) == (
        (4, 2, 3, 1),
        (4,),
        (1,),
        -2,
    )
    assert [a.directory for a in start.assignment] == [uid("ra4"), uid("ra2"), uid("ra3"), uid("ra1")]
    p = ctl.view.partition(t, 0)
    d = ctl.handle(
        c.AlterPartition(
            broker_id=1,
            broker_epoch=101,
            topic_id=t,
            partition_id=0,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
            new_isr=(1, 2, 3, 4),
        )
    )
    assert d.reply.error_code == c.NEW_LEADER_ELECTED
    [done] = strip(d.records)
    assert (done.replicas, done.adding_replicas, done.removing_replicas, done.isr, done.leader) == (
        (4, 2, 3),
        (),
        (),
        (2, 3, 4),
        4,
    )
    p = ctl.view.partition(t, 0)
    assert (p.leader_epoch, p.directories) == (1, (uid("ra4"), uid("ra2"), uid("ra3")))
    assert (
        ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=(4, 4))).reply.error_code
        == c.INVALID_REPLICA_ASSIGNMENT
    )


def test_a_new_reassignment_replaces_the_running_one_and_a_cancel_reverts():
    """Kafka's changePartitionReassignment works from the current replicas, so a second target
    replaces a running move (here (1, 2, 3) while (4, 2, 3) runs: 4 is removing, the running
    adding list stays, and the ISR already holds every remaining replica, so it completes at
    once); cancelPartitionReassignment goes back to the original replicas."""
    ctl = controller_with_brokers({b: [uid(f"rr{b}")] for b in (1, 2, 3, 4, 5)})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2, 3),))).reply.topic_id
    ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=(4, 2, 3)))
    [again] = strip(ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=(1, 2, 3))).records)
    assert (again.replicas, again.removing_replicas, again.adding_replicas, again.leader) == ((1, 2, 3), (), (), 1)
    # Sorted adding and removing lists (Kafka's TreeSet), target order first.
    [start] = strip(ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=(5, 4, 3))).records)
    assert (start.replicas, start.adding_replicas, start.removing_replicas) == ((5, 4, 3, 1, 2), (4, 5), (1, 2))
    [back] = strip(ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=None)).records)
    assert (back.replicas, back.adding_replicas, back.removing_replicas) == ((3, 1, 2), (), ())
    assert ctl.view.partition(t, 0).isr == (1, 2, 3)
    reply = ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=None)).reply
    assert reply.error_code == c.NO_REASSIGNMENT_IN_PROGRESS


def test_a_revert_below_min_isr_keeps_the_caught_up_new_replica_in_the_elr_as_kafka_does():
    """Kafka 4.x's PartitionChangeBuilder takes the ELR from the ISR, not the target replicas
    (``maybePopulateTargetElr``): cancelling a move whose new replica had joined the ISR, when
    the reverted ISR is below min.insync.replicas, leaves that replica, no longer a replica, in
    the ELR. K13 calls such a state an error (see the simulator's cancel-reassign)."""
    from kraftlake.records import FeatureLevel

    ctl = controller_with_brokers({b: [uid(f"rv{b}")] for b in (1, 2, 3, 4)}, mv=27)
    ctl.append([FeatureLevel(name="eligible.leader.replicas.version", feature_level=1)])
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2),), configs={"min.insync.replicas": "2"})).reply.topic_id
    ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=(3, 4)))
    p = ctl.view.partition(t, 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 4, 1, 2), (3, 4), (1, 2))
    # 2 leaves the ISR, 3 joins it: ISR (1, 3).
    for isr in ((1,), (1, 3)):
        p = ctl.view.partition(t, 0)
        d = ctl.handle(
            c.AlterPartition(
                broker_id=1,
                broker_epoch=ctl.view.brokers[1].epoch,
                topic_id=t,
                partition_id=0,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                new_isr=isr,
            )
        )
        assert d.reply.error_code == c.NONE
    [back] = strip(ctl.handle(c.ReassignPartition(topic_id=t, partition_id=0, target_replicas=None)).records)
    assert (back.replicas, back.isr, back.eligible_leader_replicas) == ((1, 2), (1,), (3,))


def test_alter_partition_checks_epochs_in_kafkas_order_and_v3_broker_epochs():
    """validateAlterPartitionData: a request both behind on the leader epoch and ahead on the
    partition epoch gets NOT_CONTROLLER (the partition epoch ahead is checked before the stale
    leader epoch); v3 NewIsrWithEpochs: a member whose broker epoch is not its registration's is
    INELIGIBLE_REPLICA, -1 skips the check."""
    ctl = controller_with_brokers({b: [uid(f"ap{b}")] for b in (1, 2, 3)})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2, 3),))).reply.topic_id
    ctl.handle(
        c.AlterPartition(
            broker_id=1, broker_epoch=101, topic_id=t, partition_id=0, leader_epoch=0, partition_epoch=0, new_isr=(1, 2)
        )
    )
    p = ctl.view.partition(t, 0)
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)

    def ask(**kw):
        base = dict(broker_id=1, broker_epoch=101, topic_id=t, partition_id=0, leader_epoch=0, partition_epoch=1)
        return ctl.handle(c.AlterPartition(**{**base, **kw})).reply.error_code

    assert ask(leader_epoch=-1, partition_epoch=2, new_isr=(1, 2, 3)) == c.NOT_CONTROLLER
    assert ask(leader_epoch=-1, partition_epoch=0, new_isr=(1, 2, 3)) == c.FENCED_LEADER_EPOCH
    epochs = tuple(ctl.view.brokers[b].epoch for b in (1, 2, 3))
    assert ask(new_isr=(1, 2, 3), new_isr_broker_epochs=(epochs[0], epochs[1], epochs[2] - 1)) == c.INELIGIBLE_REPLICA
    assert ask(new_isr=(1, 2, 3), new_isr_broker_epochs=(epochs[0], -1, epochs[2])) == c.NONE
    assert ctl.view.partition(t, 0).isr == (1, 2, 3)


def test_min_isr_changes_clear_the_elr_only_with_elr_on():
    """ConfigurationControlManager.createClearElrRecordsAsNeeded (Kafka 4.0): with ELR on, a
    topic's min.insync.replicas change is followed by ClearElr(topic), the cluster's by
    ClearElr(""); a topic created with the config gets one too, after its TopicRecord; deleting
    the cluster value is refused. With ELR off the Config record comes alone."""
    from kraftlake.records.kraft import ClearElr, Config, FeatureLevel

    ctl = controller_with_brokers({b: [uid(f"mi{b}")] for b in (1, 2, 3)})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2, 3),))).reply.topic_id
    off = ctl.handle(c.AlterConfig(resource_type=2, resource_name="t", name="min.insync.replicas", value="2"))
    assert [type(r) for r in off.records] == [Config]
    ctl.append([FeatureLevel(name="eligible.leader.replicas.version", feature_level=1)])
    on = ctl.handle(c.AlterConfig(resource_type=2, resource_name="t", name="min.insync.replicas", value="3"))
    assert [type(r) for r in on.records] == [Config, ClearElr] and on.records[1].topic_name == "t"
    cluster = ctl.handle(c.AlterConfig(resource_type=4, resource_name="", name="min.insync.replicas", value="2"))
    assert cluster.records[1] == ClearElr(
        topic_name="", offset=cluster.records[1].offset, ts_ms=cluster.records[1].ts_ms
    )
    refused = ctl.handle(c.AlterConfig(resource_type=4, resource_name="", name="min.insync.replicas", value=None))
    assert refused.reply.error_code == c.INVALID_CONFIG and not refused.records
    created = ctl.handle(c.CreateTopic(name="u", assignments=((1, 2),), configs={"min.insync.replicas": "2"}))
    assert [type(r).__name__ for r in created.records] == ["Topic", "Config", "ClearElr", "Partition"]
    unknown = ctl.handle(c.AlterConfig(resource_type=2, resource_name="nope", name="min.insync.replicas", value="1"))
    assert unknown.reply.error_code == c.UNKNOWN_TOPIC_OR_PARTITION
    assert t in ctl.view.topics


def test_topic_names_are_checked_as_kafka_does():
    """Topic.validate answers INVALID_TOPIC_EXCEPTION (17); a name that equals an existing one once
    '.' and '_' are unified collides (validateNewTopicNames), an identical one already exists."""
    ctl = controller_with_brokers({b: [uid(f"tn{b}")] for b in (1, 2)})
    assert ctl.handle(c.CreateTopic(name="a_b", assignments=((1, 2),))).reply.error_code == c.NONE
    for bad in ("", ".", "..", "x" * 250, "a b", "é"):
        assert ctl.handle(c.CreateTopic(name=bad, assignments=((1, 2),))).reply.error_code == c.INVALID_TOPIC_EXCEPTION
    collides = ctl.handle(c.CreateTopic(name="a.b", assignments=((1, 2),))).reply
    assert collides.error_code == c.INVALID_TOPIC_EXCEPTION and "collides with existing topic: a_b" in collides.message
    assert ctl.handle(c.CreateTopic(name="a_b", assignments=((1, 2),))).reply.error_code == c.TOPIC_ALREADY_EXISTS
    assert ctl.handle(c.CreateTopic(name="ab", assignments=((1, 2),))).reply.error_code == c.NONE


def test_placement_uses_fenced_brokers_with_an_unfenced_leader():
    """StripedReplicaPlacer: the replication factor is checked against registered brokers (not in
    controlled shutdown), fenced ones get replicas, each partition's first replica is unfenced;
    with every broker fenced, INVALID_REPLICATION_FACTOR."""
    ctl = controller_with_brokers({b: [uid(f"pf{b}")] for b in (1, 2, 3)})
    ctl.handle(c.ExpireSession(broker_id=3))
    assert ctl.view.brokers[3].fenced
    d = ctl.handle(c.CreateTopic(name="t", partitions=6, replication_factor=3))
    assert d.reply.error_code == c.NONE
    assert all(sorted(a) == [1, 2, 3] and a[0] != 3 for a in d.reply.assignments)
    assert ctl.handle(c.CreateTopic(name="u", replication_factor=4)).reply.error_code == c.INVALID_REPLICATION_FACTOR
    for b in (1, 2):
        ctl.handle(c.ExpireSession(broker_id=b))
    reply = ctl.handle(c.CreateTopic(name="v", replication_factor=1)).reply
    assert reply.error_code == c.INVALID_REPLICATION_FACTOR and "fenced" in reply.message


def test_create_partitions_as_kafka():
    """createPartitions: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS for no increase, the
    assignment count must match, new partitions get the topic's replication factor, active ISR."""
    ctl = controller_with_brokers({b: [uid(f"cp{b}")] for b in (1, 2, 3)})
    t = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2), (2, 3)))).reply.topic_id
    assert ctl.handle(c.CreatePartitions(name="nope", count=3)).reply.error_code == c.UNKNOWN_TOPIC_OR_PARTITION
    same = ctl.handle(c.CreatePartitions(name="t", count=2)).reply
    assert same.error_code == c.INVALID_PARTITIONS and same.message == "Topic already has 2 partition(s)."
    assert ctl.handle(c.CreatePartitions(name="t", count=1)).reply.error_code == c.INVALID_PARTITIONS
    wrong = ctl.handle(c.CreatePartitions(name="t", count=4, assignments=((1, 3),))).reply
    assert wrong.error_code == c.INVALID_REPLICA_ASSIGNMENT
    d = ctl.handle(c.CreatePartitions(name="t", count=4, assignments=((3, 1), (1, 2))))
    assert [(r.partition_id, r.replicas, r.isr, r.leader) for r in d.records] == [
        (2, (3, 1), (3, 1), 3),
        (3, (1, 2), (1, 2), 1),
    ]
    placed = ctl.handle(c.CreatePartitions(name="t", count=6))
    assert [r.partition_id for r in placed.records] == [4, 5]
    assert all(len(r.replicas) == 2 and r.leader == r.isr[0] for r in placed.records)
    assert sorted(ctl.view.partitions[t]) == [0, 1, 2, 3, 4, 5]
