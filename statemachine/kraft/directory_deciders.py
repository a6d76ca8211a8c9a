"""KIP-858 directory deciders, the controller's side: a heartbeat's offline directories
(Kafka's ``ReplicationControlManager.handleDirectoriesOffline``) and AssignReplicasToDirs
(``ReplicationControlManager.handleAssignReplicasToDirs``). The broker's side (which directory a replica
the controller left UNASSIGNED goes to, and the rest of its replica management) is
``replica_manager``.
"""

from __future__ import annotations

from kraftlake.records.kraft import BrokerRegistrationChange

from . import commands as c
from .directory_ids import is_online
from .features import directories_supported
from .replication import builder, bulk_update
from .view import BrokerRegistration, ControllerView, PartitionKey


def offline_dirs_records(view: ControllerView, reg: BrokerRegistration, epoch: int, offline: tuple[str, ...]) -> list:
    """``handleDirectoriesOffline``: for each newly offline directory of the broker (registration order), move every
    partition with a replica there off the broker; then one BrokerRegistrationChange v2 with the
    remaining directories. Ids the broker does not have are ignored; repeats give no records."""
    reported = set(offline)
    newly_offline = [d for d in reg.log_dirs if d in reported]
    if not newly_offline:
        return []
    records: list = []
    for d in newly_offline:
        records.extend(bulk_update(view, view.dir_index.get(d, ()), broker_to_remove=reg.id))
    # As Kafka: when every directory is offline this list is empty, which replay reads as
    # "no change"; the registration keeps its directories.
    remaining = tuple(d for d in reg.log_dirs if d not in reported)
    records.append(BrokerRegistrationChange(version=2, broker_id=reg.id, broker_epoch=epoch, log_dirs=remaining))
    return records


def assign_replicas_to_dirs(view: ControllerView, cmd: c.AssignReplicasToDirs) -> c.Decision:
    """``handleAssignReplicasToDirs``. Every entry gets an error code; valid ones a directory change if the directory
    differs, and replicas moved to a directory that is not online leave their ISR afterwards
    (computed from the pre-request state, so those changes carry no directories)."""
    req = cmd.request
    if not directories_supported(view.metadata_version):
        return c.Decision(reply=c.AssignReplicasToDirsReply(error_code=c.UNSUPPORTED_VERSION))
    reg = view.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return c.Decision(reply=c.AssignReplicasToDirsReply(error_code=c.STALE_BROKER_EPOCH))
    b = req.broker_id
    records: list = []
    # A set, as Kafka's: a partition listed under two offline dirs leaves its ISR once.
    offline: set[PartitionKey] = set()
    results = []
    for directory in req.directories:
        dir_online = is_online(directory.id, reg.log_dirs)
        entries = []
        for topic in directory.topics:
            for pid in topic.partitions:
                if topic.topic_id not in view.topics:
                    code = c.UNKNOWN_TOPIC_ID
                else:
                    p = view.partition(topic.topic_id, pid)
                    if p is None:
                        code = c.UNKNOWN_TOPIC_OR_PARTITION
                    elif b not in p.replicas:
                        code = c.NOT_LEADER_OR_FOLLOWER
                    else:
                        code = c.NONE
                        change = builder(view, p).set_directory(b, directory.id).build()
                        if change is not None:
                            records.append(change)
                        if not dir_online:
                            offline.add(p.key)
                entries.append(c.PartitionResult(topic_id=topic.topic_id, partition_id=pid, error_code=code))
        results.append(c.DirectoryResult(id=directory.id, partitions=tuple(entries)))
    if offline:
        records.extend(bulk_update(view, offline, broker_to_remove=b))
    return c.Decision(records=tuple(records), reply=c.AssignReplicasToDirsReply(directories=tuple(results)))
