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


def builder(view: ControllerView, partition: PartitionRegistration, acceptable=None) -> PartitionChangeBuilder:
    """A change builder for ``partition`` with the controller's acceptor and default dirs."""
    return PartitionChangeBuilder(
        partition,
        acceptor=leader_acceptor(view, partition, acceptable),
        metadata_version=view.metadata_version,
        default_dir=default_dir_provider(view),
    )


def bulk_update(
    view: ControllerView,
    keys: Iterable[PartitionKey],
    *,
    broker_to_remove: int = NO_BROKER,
    broker_to_add: int = NO_BROKER,
) -> list[PartitionChange]:
    """``generateLeaderAndIsrUpdates`` over ``keys`` (in sorted order): target ISR = ISR without
    ``broker_to_remove``, acceptable leaders = not the removed broker, and either the added broker
    or active ones. Only non-empty changes are returned."""

    def acceptable(r: int) -> bool:
        return r != broker_to_remove and (r == broker_to_add or view.is_active(r))

    out = []
    for topic_id, partition_id in sorted(keys):
        p = view.partition(topic_id, partition_id)
        if p is None:
            continue
        b = builder(view, p, acceptable)
        b.set_election(Election.UNCLEAN if unclean_election_enabled(view, topic_id) else Election.ONLINE)
        if broker_to_remove != NO_BROKER:
            b.set_target_isr(tuple(r for r in p.isr if r != broker_to_remove))
        change = b.build()
        if change is not None:
            out.append(change)
    return out
