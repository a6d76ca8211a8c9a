"""Observations: facts a node reported, not decisions the controller made.

They are the ground truth the audits hold the controller's records against: a broker saw a log
directory fail, a heartbeat carried offline directories, a broker asked to move replicas to the
directories they really live in, a broker started with these directories online and those
offline, a broker asked to be unfenced. Shapes follow the Kafka RPCs they come from
(BrokerHeartbeatRequest v1 ``OfflineLogDirs`` and ``WantFence``, AssignReplicasToDirsRequest v0)
and the KIP's start-up (``LogDirsLoaded``).
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta
from msgspec.structs import force_setattr

from .base import Part, Record
from .s3stream import StreamRanges, check_stream_ranges
from .types import BrokerId, Int32, Int64, PartitionIndex, Uuid, check_real_uuid


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


class LogDirsLoaded(ObservationRecord, frozen=True, kw_only=True):
    """Broker ``broker_id`` started (a new process): the directories its ``meta.properties`` files
    name online, those ``directory.ids`` lists but it could not read (offline), and the metadata
    log's directory when that is not one of the data directories (KIP-858 start-up; decided by
    ``statemachine.kraft.startup``). v1 adds ``paths``: where each directory is mounted, for
    reports (in the order of ``online_dirs`` then ``offline_dirs``; "" where the broker cannot
    tell which unreadable path an offline id was)."""

    version: int = 1
    SINCE = {"paths": 1}
    broker_id: BrokerId
    online_dirs: tuple[Uuid, ...]
    offline_dirs: tuple[Uuid, ...] = ()
    metadata_dir: Uuid | None = None
    paths: tuple[str, ...] = ()

    def _validate(self) -> None:
        for d in self.online_dirs:
            check_real_uuid("online_dirs", d)
        for d in self.offline_dirs:
            check_real_uuid("offline_dirs", d)
            if d in self.online_dirs:
                raise ValueError(f"`offline_dirs`: {d} is listed online too")
        if self.metadata_dir is not None:
            check_real_uuid("metadata_dir", self.metadata_dir)
        if len(set(self.online_dirs)) != len(self.online_dirs):
            raise ValueError("`online_dirs`: a directory id is listed twice")
        if self.paths and len(self.paths) != len(self.online_dirs) + len(self.offline_dirs):
            raise ValueError(
                f"`paths`: {len(self.paths)} paths for {len(self.online_dirs) + len(self.offline_dirs)} directories"
                " (one per online then offline directory, or none)"
            )


class UnfenceRequested(ObservationRecord, frozen=True, kw_only=True):
    """A heartbeat of fenced broker ``broker_id`` with ``WantFence`` false: it asks to serve.
    ``mismatched_replicas`` is what the broker counted (NumMismatchingReplicaToLogDirAssignments);
    the audit (K11) counts for itself from the metadata."""

    version: int = 0
    broker_id: BrokerId
    broker_epoch: Int64
    current_metadata_offset: Int64 = -1
    mismatched_replicas: Int32 = 0


class ObjectWritten(ObservationRecord, frozen=True, kw_only=True):
    """Node ``node_id`` uploaded object ``object_id`` to object storage; its index block lists these
    stream ranges. AutoMQ keeps a stream-set object's ranges in metadata only before V2 (inline
    ``Ranges``); from V2 readers fetch them from the object itself. This record is that index block
    as a fact in the log, so that reads and audits (S5, S6) can see what a V2+ object holds.

    v1 packs the ranges (``StreamRanges``: a compacted object lists hundreds); v0 listed them as
    ``StreamRange`` objects, which is what a v0 JSON record still gives (upcast on read)."""

    version: int = 1
    KEY = "object/{r.object_id}"
    node_id: BrokerId
    object_id: Annotated[int, Meta(ge=0, le=2**63 - 1)]
    object_size: Int64 = 0
    ranges: StreamRanges = StreamRanges()

    def __post_init__(self) -> None:
        if not isinstance(self.ranges, StreamRanges):  # a Python caller's StreamRanges or triplets
            force_setattr(self, "ranges", StreamRanges.of(self.ranges))
        super().__post_init__()

    def _validate(self) -> None:
        check_stream_ranges(self.ranges)


OBSERVATION_RECORDS: tuple[type[Record], ...] = (
    LogDirFailed,
    HeartbeatOfflineDirs,
    AssignReplicasToDirsRequest,
    LogDirsLoaded,
    UnfenceRequested,
    ObjectWritten,
)
