"""Kafka behaviours the KRaft controller reproduces on purpose, pinned one example each.

The two Kafka-faithful exceptions to "a leader's directory is online" (K4), both because the
records of one controller operation are computed from the state before it (Kafka's
``ReplicationControlManager.processBrokerHeartbeat`` and ``handleAssignReplicasToDirs``); the
state machine of test_kraft_controller_invariants.py allows exactly these and nothing else. Then
divergences from Kafka that state machine once found (now fixed), kept as regression tests.
"""

from __future__ import annotations

import pytest

from kraftlake.records.kraft import LEADER_UNCHANGED, LOST, PartitionChange
from kraftlake.records.observations import AssignReplicasToDirsRequest, DirectoryReplicas, TopicPartitions
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.brokers import supported_features
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.directory_ids import is_online

from helpers.kraft import dir_id, incarnation_id, new_controller, uid


def _unfenced_brokers(n: int, dirs: int) -> tuple[Controller, dict[int, int]]:
    """A controller with brokers 1..n registered (first incarnation, ``dirs`` directories each)
    and unfenced by a heartbeat, one after the other; and their broker epochs."""
    ctl = new_controller()
    epochs = {}
    for b in range(1, n + 1):
        log_dirs = tuple(dir_id(b, slot, 1) for slot in range(dirs))
        epochs[b] = ctl.handle(
            c.RegisterBroker(
                broker_id=b,
                incarnation_id=incarnation_id(b, 1),
                log_dirs=log_dirs,
                features=supported_features(ctl.view.metadata_version),
            )
        ).reply.broker_epoch
        ctl.handle(c.Heartbeat(broker_id=b, broker_epoch=epochs[b], current_metadata_offset=ctl.view.offset))
    return ctl, epochs


def _isr_of_broker_1(ctl: Controller, epoch: int, tid: str, leader_epoch: int, partition_epoch: int) -> c.Decision:
    """Broker 1's AlterPartition of partition 0 of ``tid`` to ISR [1], at the given epochs."""
    return ctl.handle(
        c.AlterPartition(
            broker_id=1,
            broker_epoch=epoch,
            topic_id=tid,
            partition_id=0,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            new_isr=(1,),
        )
    )


# -- the documented Kafka-faithful exceptions, pinned -------------------------------------------


def _assign(ctl: Controller, b: int, epoch: int, directory: str, tid: str, pid: int = 0) -> c.Decision:
    return ctl.handle(
        c.AssignReplicasToDirs(
            request=AssignReplicasToDirsRequest(
                broker_id=b,
                broker_epoch=epoch,
                directories=(
                    DirectoryReplicas(id=directory, topics=(TopicPartitions(topic_id=tid, partitions=(pid,)),)),
                ),
            )
        )
    )


def test_assign_to_offline_dir_elects_on_old_dir():
    """AssignReplicasToDirs moving the only ISR member of a leaderless partition to a directory
    that is not online.

    Kafka (ReplicationControlManager.handleAssignReplicasToDirs) builds the directory change with
    a LeaderAcceptor over the *pre-request* partition, so its election sees the replica's old,
    online directory and elects it; the follow-up generateLeaderAndIsrUpdates for offline
    directories is also computed from the pre-request partition (leader -1, ISR [b]) and has
    nothing to change. Result: b leads on a directory it does not have (K4 does not hold).
    Getting there needs a leaderless partition whose ISR member is acceptable, which Kafka leaves
    behind when a replica comes back from LOST to an online directory (no election is run then).
    """
    ctl, epochs = _unfenced_brokers(1, dirs=2)
    d1 = dir_id(1, 0, 1)
    e1 = epochs[1]
    tid = ctl.handle(c.CreateTopic(name="t", assignments=((1,),))).reply.topic_id
    _assign(ctl, 1, e1, LOST, tid)  # leaves leadership: leader -1, ISR [1]
    _assign(ctl, 1, e1, d1, tid)  # back on an online dir: no election is run
    p = ctl.view.partition(tid, 0)
    assert (p.leader, p.isr, p.directory(1)) == (-1, (1,), d1)

    nowhere = uid("a directory nobody has")
    d = _assign(ctl, 1, e1, nowhere, tid)
    assert len(d.records) == 1 and d.records[0].leader == 1
    p = ctl.view.partition(tid, 0)
    assert p.leader == 1 and p.directory(1) == nowhere
    assert not is_online(nowhere, ctl.view.brokers[1].log_dirs)


def test_unfence_and_offline_dir_in_one_heartbeat():
    """A fenced broker's heartbeat that both unfences it and reports one of its directories offline.

    Kafka (ReplicationControlManager.processBrokerHeartbeat) computes the unfence election
    (handleBrokerUnfenced: generateLeaderAndIsrUpdates over partitionsWithNoLeader, brokerToAdd=b)
    and then handleDirectoriesOffline from the same pre-heartbeat state, where the directory is
    still online. The broker is elected leader of its leaderless partition on that directory; the
    offline-dir update, also computed from the pre-heartbeat state, sees a leaderless partition
    with ISR [b] and has nothing to change. The BRCR then drops the directory: the partition is
    led by b on a directory that is offline (K4 does not hold) until something else moves it.
    The controller reproduces this; the state machine (test_kraft_controller_invariants.py) allows
    exactly this case.
    """
    ctl, epochs = _unfenced_brokers(1, dirs=2)
    d1, d2 = dir_id(1, 0, 1), dir_id(1, 1, 1)
    e1 = epochs[1]
    tid = ctl.handle(c.CreateTopic(name="t", assignments=((1,),))).reply.topic_id
    _assign(ctl, 1, e1, d1, tid)
    ctl.handle(c.Heartbeat(broker_id=1, broker_epoch=e1, current_metadata_offset=ctl.view.offset, want_fence=True))
    p = ctl.view.partition(tid, 0)
    assert (p.leader, p.isr, p.directory(1)) == (-1, (1,), d1)

    d = ctl.handle(
        c.Heartbeat(broker_id=1, broker_epoch=e1, current_metadata_offset=ctl.view.offset, offline_log_dirs=(d1,))
    )
    kinds = [(type(r).__name__, getattr(r, "leader", None)) for r in d.records]
    assert kinds == [("BrokerRegistrationChange", None), ("PartitionChange", 1), ("BrokerRegistrationChange", None)]
    p, reg = ctl.view.partition(tid, 0), ctl.view.brokers[1]
    assert reg.log_dirs == (d2,) and not reg.fenced
    assert p.leader == 1 and not is_online(p.directory(1), reg.log_dirs)


@pytest.mark.parametrize("ahead", ["leader_epoch", "partition_epoch"])
def test_alter_partition_from_the_future_is_not_controller(ahead):
    ctl, epochs = _unfenced_brokers(2, dirs=1)
    tid = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2),))).reply.topic_id
    p = ctl.view.partition(tid, 0)
    le, pe = p.leader_epoch, p.partition_epoch
    if ahead == "leader_epoch":
        le += 1
    else:
        pe += 1
    d = _isr_of_broker_1(ctl, epochs[1], tid, le, pe)
    assert d.records == ()
    assert d.reply.error_code == 41  # NOT_CONTROLLER (ReplicationControlManager.validateAlterPartitionData)


def test_partition_listed_twice_under_offline_dirs_gets_one_isr_update():
    """Kafka's handleAssignReplicasToDirs gathers the partitions to move off the broker in a
    ``Set<TopicIdPartition>`` and runs generateLeaderAndIsrUpdates once over it."""
    ctl, ep = _unfenced_brokers(2, dirs=2)
    tid = ctl.handle(c.CreateTopic(name="t", assignments=((1, 2),))).reply.topic_id
    tp = (TopicPartitions(topic_id=tid, partitions=(0,)),)
    request = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=ep[1],
        directories=(DirectoryReplicas(id=LOST, topics=tp), DirectoryReplicas(id=uid("nowhere"), topics=tp)),
    )
    d = ctl.handle(c.AssignReplicasToDirs(request=request))
    leader_changes = [r for r in d.records if isinstance(r, PartitionChange) and r.leader != LEADER_UNCHANGED]
    assert len(leader_changes) == 1
    assert ctl.view.partition(tid, 0).leader_epoch == 1


def test_alter_partition_rejects_an_ineligible_member_already_in_the_isr():
    """A leader that entered controlled shutdown, was fenced by session expiry and then unfenced
    again (a heartbeat without WantShutDown; the unfence does not clear InControlledShutdown) is
    re-elected by the unfence update (brokerToAdd is acceptable even if not active) and leads
    while in controlled shutdown. Its AlterPartition lists itself, in controlled shutdown: Kafka
    answers INELIGIBLE_REPLICA and writes nothing; the decider accepts it and its builder, whose
    acceptor rejects the leader, writes a PartitionChange to leader -1 with error code NONE."""
    ctl, ep = _unfenced_brokers(2, dirs=1)
    tid = ctl.handle(c.CreateTopic(name="t", assignments=((1,),))).reply.topic_id
    ctl.handle(
        c.Heartbeat(broker_id=1, broker_epoch=ep[1], current_metadata_offset=ctl.view.offset, want_shut_down=True)
    )
    ctl.handle(c.ExpireSession(broker_id=1))
    ctl.handle(c.Heartbeat(broker_id=1, broker_epoch=ep[1], current_metadata_offset=ctl.view.offset))
    p, reg = ctl.view.partition(tid, 0), ctl.view.brokers[1]
    assert p.leader == 1 and not reg.fenced and reg.in_controlled_shutdown  # Kafka-faithful so far
    d = _isr_of_broker_1(ctl, ep[1], tid, p.leader_epoch, p.partition_epoch)
    assert d.reply.error_code == c.INELIGIBLE_REPLICA
    assert d.records == ()
