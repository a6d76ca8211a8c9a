"""Observations: facts a node reported, not decisions the controller made.

They are the ground truth the audits hold the controller's records against: a broker saw a log
directory fail, a heartbeat carried offline directories, a broker asked to move replicas to the
directories they really live in. Shapes follow the Kafka RPCs they come from
(BrokerHeartbeatRequest v1 ``OfflineLogDirs``, AssignReplicasToDirsRequest v0).
"""

from __future__ import annotations


from .base import Part, Record
from .types import BrokerId, Int64, PartitionIndex, Uuid, check_real_uuid


class ObservationRecord(Record, frozen=True, kw_only=True):
    FAMILY = "observation"
    KEY = "broker/{r.broker_id}"


class LogDirFailed(ObservationRecord, frozen=True, kw_only=True):
    """Broker ``broker_id`` saw its log directory ``directory`` fail (an I/O error on the disk)."""

    version: int = 0
    broker_id: BrokerId
    directory: Uuid

    def _validate(self) -> None:
        check_real_uuid("directory", self.directory)


class HeartbeatOfflineDirs(ObservationRecord, frozen=True, kw_only=True):
    """A broker heartbeat's ``OfflineLogDirs`` (tag 0, v1+): cumulative since the process started."""

    version: int = 0
    broker_id: BrokerId
    broker_epoch: Int64
    offline_log_dirs: tuple[Uuid, ...]

    def _validate(self) -> None:
        for d in self.offline_log_dirs:
            check_real_uuid("offline_log_dirs", d)


class TopicPartitions(Part, frozen=True, kw_only=True):
    topic_id: Uuid
    partitions: tuple[PartitionIndex, ...]


class DirectoryReplicas(Part, frozen=True, kw_only=True):
    id: Uuid
    """Any id, even LOST or one the controller does not know: Kafka accepts and treats it as offline."""
    topics: tuple[TopicPartitions, ...]


class AssignReplicasToDirsRequest(ObservationRecord, frozen=True, kw_only=True):
    """AssignReplicasToDirsRequest (apiKey 73, v0): where broker ``broker_id``'s replicas really live."""

    version: int = 0
    broker_id: BrokerId
    broker_epoch: Int64 = -1
    directories: tuple[DirectoryReplicas, ...]


OBSERVATION_RECORDS: tuple[type[Record], ...] = (
    LogDirFailed,
    HeartbeatOfflineDirs,
    AssignReplicasToDirsRequest,
)
