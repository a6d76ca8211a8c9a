"""What Kafka's ReplicationControlManager does to many partitions at once: the leader acceptor
and the bulk leader/ISR update (``generateLeaderAndIsrUpdates``).

Records of one controller operation are computed from the state *before* the operation, as in
Kafka (they are replayed only once the whole batch commits); callers never fold their own output
back in mid-operation, so one partition can get two changes in one batch, as Kafka's
``ReplicationControlManager.handleAssignReplicasToDirs`` writes a directory change and then a
leader/ISR change for a replica assigned to an offline directory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kraftlake.records.kraft import PartitionChange

from .directory_ids import default_dir, is_online
from .features import directories_supported
from .partitions import Election, PartitionChangeBuilder
from .view import ControllerView, PartitionKey, PartitionRegistration

NO_BROKER = -1
BROKER_RESOURCE = 4
TOPIC_RESOURCE = 2
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
DEFAULT_MIN_INSYNC_REPLICAS = 1
"""Kafka's static default of ``min.insync.replicas`` (the controller's own config; not in the log)."""
ELR_FEATURE = "eligible.leader.replicas.version"


def elr_enabled(view: ControllerView) -> bool:
    """Kafka 4.x ``FeatureControlManager.isElrFeatureEnabled``: the finalized
    ``eligible.leader.replicas.version`` is >= 1 (its level 1 needs metadata.version 4.0-IV1)."""
    return view.features.get(ELR_FEATURE, 0) >= 1


def effective_min_isr(view: ControllerView, topic_id: str) -> int:
    """``getTopicEffectiveMinIsr``: the topic's ``min.insync.replicas``, else the cluster's, else
    Kafka's default, capped at the replication factor of the topic's partition 0."""
    topic = view.topics.get(topic_id)
    value = None if topic is None else view.config(TOPIC_RESOURCE, topic.name, MIN_INSYNC_REPLICAS)
    if value is None:
        value = view.config(BROKER_RESOURCE, "", MIN_INSYNC_REPLICAS)
    min_isr = DEFAULT_MIN_INSYNC_REPLICAS if value is None else int(value)
    first = view.partition(topic_id, 0)
    return min_isr if first is None else min(min_isr, len(first.replicas))


def leader_acceptor(
    view: ControllerView, partition: PartitionRegistration, acceptable: Callable[[int], bool] | None = None
) -> Callable[[int], bool]:
    """Kafka's ``LeaderAcceptor``: ``acceptable(r)`` (default: the broker is active) and the
    directory of r's replica is online on r (``ClusterControlManager.hasOnlineDir``)."""
    brokers = view.brokers
    where = dict(zip(partition.replicas, partition.directories))
    ok = acceptable or view.is_active

    def accept(r: int) -> bool:
        if not ok(r):
            return False
        reg = brokers.get(r)
        if reg is None:
            return False
        return is_online(where.get(r, ""), reg.log_dirs) if r in where else True

    return accept


def default_dir_provider(view: ControllerView) -> Callable[[int], str]:
    supported = directories_supported(view.metadata_version)

    def provide(broker: int) -> str:
        reg = view.brokers.get(broker)
        return default_dir(None if reg is None else reg.log_dirs, directories_supported=supported)

    return provide


def unclean_election_enabled(view: ControllerView, topic_id: str) -> bool:
    """``unclean.leader.election.enable`` of the topic, else the cluster default, else false."""
    topic = view.topics.get(topic_id)
    value = None if topic is None else view.config(TOPIC_RESOURCE, topic.name, UNCLEAN_LEADER_ELECTION)
    if value is None:
        value = view.config(BROKER_RESOURCE, "", UNCLEAN_LEADER_ELECTION)
    return value is not None and value.strip().lower() == "true"


def builder(
    view: ControllerView, partition: PartitionRegistration, acceptable: Callable[[int], bool] | None = None
) -> PartitionChangeBuilder:
    """A change builder for ``partition`` with the controller's acceptor, default dirs, effective
    min ISR and ELR switch."""
    elr = elr_enabled(view)
    return PartitionChangeBuilder(
        partition,
        acceptor=leader_acceptor(view, partition, acceptable),
        metadata_version=view.metadata_version,
        default_dir=default_dir_provider(view),
        min_isr=effective_min_isr(view, partition.topic_id) if elr else DEFAULT_MIN_INSYNC_REPLICAS,
        elr_enabled=elr,
    )


def elr_partitions(view: ControllerView, broker: int) -> set[PartitionKey]:
    """Kafka's ``BrokersToElrs.partitionsWithBrokerInElr``."""
    return {p.key for p in view.iter_partitions() if broker in p.eligible_leader_replicas}


def bulk_update(
    view: ControllerView,
    keys: Iterable[PartitionKey],
    *,
    broker_to_remove: int = NO_BROKER,
    broker_to_add: int = NO_BROKER,
    unclean_shutdown: int = NO_BROKER,
) -> list[PartitionChange]:
    """``generateLeaderAndIsrUpdates`` over ``keys`` (in sorted order): target ISR = ISR without
    ``broker_to_remove`` and ``unclean_shutdown``, acceptable leaders = neither of them, and either
    the added broker or active ones; ``unclean_shutdown`` also leaves the ELR. Only non-empty
    changes are returned."""

    def acceptable(r: int) -> bool:
        return r != broker_to_remove and r != unclean_shutdown and (r == broker_to_add or view.is_active(r))

    out = []
    for topic_id, partition_id in sorted(keys):
        p = view.partition(topic_id, partition_id)
        if p is None:
            continue
        b = builder(view, p, acceptable)
        b.set_election(Election.UNCLEAN if unclean_election_enabled(view, topic_id) else Election.ONLINE)
        if unclean_shutdown != NO_BROKER:
            b.set_unclean_shutdown_replicas((unclean_shutdown,))
        if broker_to_remove != NO_BROKER or unclean_shutdown != NO_BROKER:
            b.set_target_isr(tuple(r for r in p.isr if r != broker_to_remove and r != unclean_shutdown))
        change = b.build()
        if change is not None:
            out.append(change)
    return out
