"""``BrokerView(b)``: what broker b serves, derived from the controller view (Kafka's
``TopicsDelta.localChanges`` target state plus the metadata cache's notion of offline replicas).

For each replica b hosts: the directory, whether b leads or follows, whether the replica is online
(b registered, not fenced, and its directory online on b, as Kafka's
``KRaftMetadataCache.getOfflineReplicas`` decides), and whether it is in the ISR.
Plus b's offline directories, its replicas still UNASSIGNED or assigned to a directory b does not
have (Kafka's NumMismatchingReplicaToLogDirAssignments, as far as metadata can tell), and whether
KIP-858's policy would keep b fenced (two or more directories and an UNASSIGNED replica).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kraftlake.records.kraft import LOST, UNASSIGNED

from ..state_hash import state_hash_of
from .directory_ids import ONLINE_RESERVED, is_online, sorted_dirs
from .view import ControllerView


class LocalReplica(msgspec.Struct, frozen=True, kw_only=True):
    topic_id: str
    topic: str
    partition: int
    directory: str
    role: str
    """"leader" or "follower"."""
    online: bool
    in_isr: bool
    leader: int
    leader_epoch: int
    partition_epoch: int


class BrokerView(msgspec.Struct, frozen=True, kw_only=True):
    offset: int
    state_hash: str
    broker_id: int
    registered: bool
    epoch: int | None
    fenced: bool | None
    in_controlled_shutdown: bool | None
    log_dirs: tuple[str, ...]
    offline_dirs: tuple[str, ...]
    replicas: tuple[LocalReplica, ...]
    unassigned: tuple[LocalReplica, ...]
    mismatched: tuple[LocalReplica, ...]
    """Replicas assigned to LOST or to a real directory the broker does not have online."""
    should_stay_fenced: bool
    """KIP-858's policy: two or more directories and at least one UNASSIGNED replica."""


def broker_view(view: ControllerView, broker: int) -> BrokerView:
    reg = view.brokers.get(broker)
    online_dirs = reg.log_dirs if reg is not None else ()
    serving = reg is not None and not reg.fenced
    replicas = []
    for p in view.partitions_of(broker):
        d = p.directory(broker)
        replicas.append(
            LocalReplica(
                topic_id=p.topic_id,
                topic=view.topics[p.topic_id].name,
                partition=p.partition_id,
                directory=d,
                role="leader" if p.leader == broker else "follower",
                online=serving and is_online(d, online_dirs),
                in_isr=broker in p.isr,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
            )
        )
    unassigned = tuple(r for r in replicas if r.directory == UNASSIGNED)
    mismatched = tuple(
        r
        for r in replicas
        if r.directory == LOST
        or (r.directory not in ONLINE_RESERVED and online_dirs and r.directory not in online_dirs)
    )
    offline = set(reg.removed_dirs) if reg is not None else set()
    offline.update(r.directory for r in mismatched if r.directory != LOST)
    fields: dict[str, Any] = {
        "broker_id": broker,
        "registered": reg is not None,
        "epoch": None if reg is None else reg.epoch,
        "fenced": None if reg is None else reg.fenced,
        "in_controlled_shutdown": None if reg is None else reg.in_controlled_shutdown,
        "log_dirs": online_dirs,
        "offline_dirs": sorted_dirs(offline),
        "replicas": tuple(replicas),
        "unassigned": unassigned,
        "mismatched": mismatched,
        "should_stay_fenced": len(online_dirs) >= 2 and bool(unassigned),
    }
    return BrokerView(offset=view.offset, state_hash=state_hash_of(fields), **fields)
