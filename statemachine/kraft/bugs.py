"""Faulty variants of the KRaft controller's decider, for proving the audits catch them.

Each bug is ``decide`` with one small, named mistake of the kind a controller could make; the
simulator runs one in place of the correct decider, and a test shows the named invariant
catches it for every seed. They are test equipment: nothing else uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.kraft import LEADER_UNCHANGED, NO_LEADER, BrokerRegistrationChange, Partition, PartitionChange

from . import commands as c
from .decider import decide
from .partitions import merge
from .view import ControllerView

Decide = Callable[[ControllerView, c.Command, c.ControllerConfig], c.Decision]


def _with(decision: c.Decision, records: Iterable[Record]) -> c.Decision:
    return msgspec.structs.replace(decision, records=tuple(records))


def _offline_heartbeat(view: ControllerView, cmd: c.Command) -> bool:
    if not isinstance(cmd, c.Heartbeat) or not cmd.offline_log_dirs:
        return False
    reg = view.brokers.get(cmd.broker_id)
    return reg is not None and any(d in reg.log_dirs for d in cmd.offline_log_dirs)


def ignore_offline_dirs(view, cmd, config):
    """Kafka before KIP-858: a heartbeat's offline log dirs are not looked at."""
    if isinstance(cmd, c.Heartbeat) and cmd.offline_log_dirs:
        cmd = msgspec.structs.replace(cmd, offline_log_dirs=())
    return decide(view, cmd, config)


def keep_offline_replica_in_isr(view, cmd, config):
    """Leadership moves off a failed dir, but the broker stays in the ISR."""
    d = decide(view, cmd, config)
    if not _offline_heartbeat(view, cmd):
        return d
    out = []
    for r in d.records:
        if isinstance(r, PartitionChange) and r.isr is not None and r.leader not in (LEADER_UNCHANGED, NO_LEADER):
            p = view.partition(r.topic_id, r.partition_id)
            r = msgspec.structs.replace(r, isr=(r.leader, *[b for b in p.isr if b != r.leader]))
        out.append(r)
    return _with(d, out)


def elect_offline_leader(view, cmd, config):
    """The failed dir leaves the registration, but no partition is moved off it."""
    d = decide(view, cmd, config)
    if not _offline_heartbeat(view, cmd):
        return d
    return _with(d, [r for r in d.records if not isinstance(r, PartitionChange)])


def leader_outside_isr(view, cmd, config):
    """A new leader is elected but left out of the ISR it is written with."""
    d = decide(view, cmd, config)
    out = []
    for r in d.records:
        if isinstance(r, PartitionChange) and r.leader >= 0 and r.isr is not None and len(r.isr) > 1:
            r = msgspec.structs.replace(r, isr=tuple(b for b in r.isr if b != r.leader))
        out.append(r)
    return _with(d, out)


def no_leader_epoch_bump(view, cmd, config):
    """A leader change is written as a whole Partition record that keeps the old leader epoch."""
    d = decide(view, cmd, config)
    out = []
    for r in d.records:
        if isinstance(r, PartitionChange) and r.leader >= 0:
            old = view.partition(r.topic_id, r.partition_id)
            if old is not None and r.leader != old.leader:
                p = merge(old, r)
                r = Partition(
                    version=r.version,
                    topic_id=p.topic_id,
                    partition_id=p.partition_id,
                    replicas=p.replicas,
                    isr=p.isr,
                    leader=p.leader,
                    leader_recovery_state=p.leader_recovery_state,
                    leader_epoch=old.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    assignment=p.assignment() if r.version >= 1 else (),
                )
        out.append(r)
    return _with(d, out)


def stale_broker_epoch(view, cmd, config):
    """The registration change that removes failed dirs carries the broker's previous epoch."""
    d = decide(view, cmd, config)
    return _with(
        d,
        [
            msgspec.structs.replace(r, broker_epoch=r.broker_epoch - 1)
            if isinstance(r, BrokerRegistrationChange) and r.log_dirs
            else r
            for r in d.records
        ],
    )


def skip_dir_assignment(view, cmd, config):
    """AssignReplicasToDirs is acknowledged but not recorded."""
    if isinstance(cmd, c.AssignReplicasToDirs):
        return c.Decision(reply=c.AssignReplicasToDirsReply())
    return decide(view, cmd, config)


def elr_overlaps_isr(view, cmd, config):
    """KIP-966: a change that writes an ELR also lists the ISR's first member in it."""
    d = decide(view, cmd, config)
    out = []
    for r in d.records:
        if isinstance(r, PartitionChange) and r.eligible_leader_replicas:
            p = view.partition(r.topic_id, r.partition_id)
            isr = p.isr if r.isr is None else r.isr
            if isr and isr[0] not in r.eligible_leader_replicas:
                r = msgspec.structs.replace(r, eligible_leader_replicas=(*r.eligible_leader_replicas, isr[0]))
        out.append(r)
    return _with(d, out)


def elect_outside_elr(view, cmd, config):
    """KIP-966: a new leader is taken from an active replica in neither the ISR nor the ELR, written
    as a clean election (no RECOVERING) with the ISR forced to it alone."""
    d = decide(view, cmd, config)
    out = []
    for r in d.records:
        if isinstance(r, PartitionChange) and r.leader >= 0:
            p = view.partition(r.topic_id, r.partition_id)
            if p is not None and r.leader != p.leader:
                others = [
                    b
                    for b in p.replicas
                    if b not in p.isr
                    and b not in p.eligible_leader_replicas
                    and view.is_active(b)
                    and view.has_online_dir(b, p.directory(b))
                ]
                if others:
                    # Clean whatever Kafka would have written: an unclean election (RECOVERING)
                    # may take any replica, and taking another one is no bug.
                    r = msgspec.structs.replace(r, leader=others[0], isr=(others[0],), leader_recovery_state=-1)
        out.append(r)
    return _with(d, out)


BUGS: dict[str, Decide] = {
    "ignore-offline-dirs": ignore_offline_dirs,
    "keep-offline-replica-in-isr": keep_offline_replica_in_isr,
    "elect-offline-leader": elect_offline_leader,
    "no-leader-epoch-bump": no_leader_epoch_bump,
    "leader-outside-isr": leader_outside_isr,
    "stale-broker-epoch": stale_broker_epoch,
    "skip-dir-assignment": skip_dir_assignment,
    "elr-overlaps-isr": elr_overlaps_isr,
    "elect-outside-elr": elect_outside_elr,
}
"""Bug name -> faulty decider."""
