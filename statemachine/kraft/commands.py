"""Commands to the KRaft controller and its replies: the request side of Kafka's broker RPCs.

A command carries everything a decision needs that is not in the log (a heartbeat's metadata
offset, a new broker's directories, free-disk weights for placement); time and randomness never
come from anywhere else. Replies carry Kafka's error codes
(``org.apache.kafka.common.protocol.Errors``); a command's ``Decision`` is every family's
(``statemachine.decision``).
"""

from __future__ import annotations

import msgspec

from kraftlake.records.kraft import BrokerEndpoint, BrokerFeature, FeatureLevel
from kraftlake.records.observations import AssignReplicasToDirsRequest

from .. import decision

# Every family's, named here too (``c.NONE``, ``c.Decision``):
from ..decision import NONE as NONE
from ..decision import Decision as Decision

# Kafka error codes used by the deciders (NONE = 0, no error, is every family's).
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
INVALID_CONFIG = 40
POLICY_VIOLATION = 44
OPERATION_NOT_ATTEMPTED = 55
FENCED_LEADER_EPOCH = 74
STALE_BROKER_EPOCH = 77
INVALID_UPDATE_VERSION = 95
NO_REASSIGNMENT_IN_PROGRESS = 85
UNKNOWN_TOPIC_ID = 100
DUPLICATE_BROKER_REGISTRATION = 101
BROKER_ID_NOT_REGISTERED = 102
INELIGIBLE_REPLICA = 107
NEW_LEADER_ELECTED = 108
INVALID_REGISTRATION = 119
UNKNOWN_SERVER_ERROR = -1


class Command(decision.Command, frozen=True, kw_only=True):
    """Base of the controller's commands."""


class RegisterBroker(Command, frozen=True, kw_only=True):
    """BrokerRegistrationRequest (apiKey 62)."""

    broker_id: int
    incarnation_id: str
    log_dirs: tuple[str, ...] = ()
    rack: str | None = None
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    is_migrating_zk_broker: bool = False
    previous_broker_epoch: int = -1
    """The epoch the broker's clean-shutdown file names (request v3+, KIP-966); -1 = none, which
    no registration has: the restart counts as unclean."""
    old_session_alive: bool | None = None
    """Whether the registered incarnation's session is still alive (the heartbeat manager's clock
    state, not in the log); None: taken from the log, an unfenced registration standing for a
    live session."""


class Activate(Command, frozen=True, kw_only=True):
    """The controller becomes active (``QuorumController``'s activation event). ``bootstrap`` is
    what ``bootstrap.checkpoint`` holds (the features the cluster was formatted with; SCRAM
    credentials a format may add are not modelled); ``default_min_insync_replicas`` is the
    controller's static ``min.insync.replicas``, which is not in the log."""

    bootstrap: tuple[FeatureLevel, ...] = ()
    default_min_insync_replicas: int = 1


class Heartbeat(Command, frozen=True, kw_only=True):
    """BrokerHeartbeatRequest (apiKey 63). ``offline_log_dirs`` is cumulative since the broker
    process started; ``want_shut_down`` asks for a controlled shutdown."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False
    offline_log_dirs: tuple[str, ...] = ()


class ExpireSession(Command, frozen=True, kw_only=True):
    """The broker's session timed out (no heartbeat for broker.session.timeout.ms): fence it."""

    broker_id: int


class UnregisterBroker(Command, frozen=True, kw_only=True):
    """UnregisterBrokerRequest (apiKey 64)."""

    broker_id: int


class CreateTopic(Command, frozen=True, kw_only=True):
    """CreateTopicsRequest for one topic: ``assignments`` (one replica list per partition) or
    ``partitions`` x ``replication_factor`` placed by free-disk weight (``broker_weights``, equal
    when absent); -1 for either takes the controller's default, as Kafka's request does.
    ``validate_only``: the reply as if created, and no records."""

    name: str
    partitions: int = 1
    replication_factor: int = 1
    assignments: tuple[tuple[int, ...], ...] | None = None
    configs: dict[str, str | None] = {}
    topic_id: str | None = None
    broker_weights: dict[int, int] | None = None
    validate_only: bool = False


class AlterConfig(Command, frozen=True, kw_only=True):
    """IncrementalAlterConfigsRequest (apiKey 44) for one key: SET ``value``, or DELETE (None).
    ``resource_type`` 2 TOPIC (by name) or 4 BROKER ("" = the cluster default)."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None = None


class ElectLeaders(Command, frozen=True, kw_only=True):
    """ElectLeadersRequest (apiKey 43): ``election`` "preferred" or "unclean", for ``partitions``
    ((topic name, partition), ...) or every partition when None."""

    election: str = "preferred"
    partitions: tuple[tuple[str, int], ...] | None = None


class CreatePartitions(Command, frozen=True, kw_only=True):
    """CreatePartitionsRequest for one topic: grow it to ``count`` partitions; ``assignments``
    gives one replica list per new partition (None: placed by the controller)."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


class DeleteTopics(Command, frozen=True, kw_only=True):
    """DeleteTopicsRequest by topic ids (``ReplicationControlManager.deleteTopics``)."""

    topic_ids: tuple[str, ...]


class AssignReplicasToDirs(Command, frozen=True, kw_only=True):
    """AssignReplicasToDirsRequest (apiKey 73), as the broker sent it."""

    request: AssignReplicasToDirsRequest


class ReassignPartition(Command, frozen=True, kw_only=True):
    """AlterPartitionReassignmentsRequest (apiKey 45) for one partition: move it to
    ``target_replicas`` (the new replicas join, catch up, and then the old ones leave); None
    cancels the running reassignment (Kafka's null replicas)."""

    topic_id: str
    partition_id: int
    target_replicas: tuple[int, ...] | None
    allow_replication_factor_change: bool = True
    """Request v1 (KIP-860, Kafka 4.1): False refuses a target whose size is not the partition's
    replication factor (INVALID_REPLICATION_FACTOR); a cancel is not checked."""


class AlterPartition(Command, frozen=True, kw_only=True):
    """AlterPartitionRequest (apiKey 56, up to v3) for one partition: the leader changes the ISR."""

    broker_id: int
    broker_epoch: int
    topic_id: str
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int = 0
    new_isr_broker_epochs: tuple[int, ...] = ()
    """Request v3 (KIP-903): the broker epoch of each ``new_isr`` member as the leader saw it,
    -1 = not checked; empty = an older request (no epochs)."""
    version: int = 3
    """The request's version: below 3 the broker epochs are not sent (not checked); below 2 an
    unknown topic answers UNKNOWN_TOPIC_OR_PARTITION, an ineligible ISR member
    OPERATION_NOT_ATTEMPTED and a leader change FENCED_LEADER_EPOCH (Kafka's answers to old
    brokers)."""


class Reply(decision.Reply, frozen=True, kw_only=True):
    """Base of the controller's replies: ``error_code`` is Kafka's (``Errors``)."""

    error_code: int = NONE


class RegisterBrokerReply(Reply, frozen=True, kw_only=True):
    broker_epoch: int = -1


class HeartbeatReply(Reply, frozen=True, kw_only=True):
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class CreateTopicReply(Reply, frozen=True, kw_only=True):
    topic_id: str | None = None
    assignments: tuple[tuple[int, ...], ...] = ()


class PartitionResult(msgspec.Struct, frozen=True, kw_only=True):
    topic_id: str
    partition_id: int
    error_code: int


class DirectoryResult(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    partitions: tuple[PartitionResult, ...]


class AssignReplicasToDirsReply(Reply, frozen=True, kw_only=True):
    directories: tuple[DirectoryResult, ...] = ()


class ElectLeadersReply(Reply, frozen=True, kw_only=True):
    results: tuple[tuple[str, int, int], ...] = ()
    """(topic name, partition, error code) per partition asked about; asked about every partition,
    none whose result is ELECTION_NOT_NEEDED (Kafka's reply leaves those out)."""


class DeleteTopicsReply(Reply, frozen=True, kw_only=True):
    errors: dict[str, int] = {}
    """Topic id -> error code (0 = deleted)."""


class ReassignPartitionReply(Reply, frozen=True, kw_only=True):
    allow_replication_factor_change: bool = True
    """The request's flag, echoed (the response's AllowReplicationFactorChange, v1): a controller
    that does not know the flag answers its default, True."""


class AlterPartitionReply(Reply, frozen=True, kw_only=True):
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


class ControllerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Controller policies that are not in the log."""

    stay_fenced_while_unassigned: bool = False
    """KIP-858's proposal (not in Kafka, whose ``BrokerHeartbeatManager.calculateNextBrokerState``
    unfences without looking at directories): a broker with two or more directories stays fenced
    while any of its replicas is UNASSIGNED. Off by default, like Kafka."""
    max_multiple: int = 3
    """Placement cap: no broker is chosen with more than this multiple of the median probability
    (BookKeeper's bookieMaxMultipleForWeightBasedPlacement); <= 0 disables it."""
    default_num_partitions: int = 1
    """``num.partitions``: what CreateTopic's -1 partitions means (Kafka's default, 1)."""
    default_replication_factor: int = 3
    """``default.replication.factor`` as the controller applies it (ReplicationControlManager's
    default, 3): what CreateTopic's -1 replication factor means."""


class ElectUncleanLeaders(Command, frozen=True, kw_only=True):
    """The controller's periodic task (``ReplicationControlManager.maybeElectUncleanLeaders``):
    unclean elections for the leaderless partitions of topics with unclean leader election on."""
