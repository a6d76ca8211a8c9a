"""KRaft metadata records (Kafka >= 3.7 semantics), one Struct per Kafka record type.

Field names are Kafka's in snake_case; every Kafka version of a record maps onto one Struct whose
``version`` says which Kafka version it was (``SINCE`` says which version added a field). Source:
the record schemas, ``metadata/src/main/resources/common/metadata/*.json`` in apache/kafka.

The KIP-858 shape: ``Partition`` and ``PartitionChange`` carry ``assignment``, a list of
(broker, directory) pairs in replica order, in place of Kafka's ``Directories`` array that runs
parallel to ``Replicas``. Reserved directory ids and Kafka's sentinels are constants below.
"""

from __future__ import annotations

import math
from typing import Annotated

from msgspec import Meta

from .base import Part, Record
from .types import BrokerId, Int8, Int16, Int32, Int64, PartitionIndex, UInt16, Uuid, check_real_uuid

__all__ = [
    "MIGRATING",
    "UNASSIGNED",
    "LOST",
    "RESERVED_DIRECTORIES",
    "NO_LEADER",
    "LEADER_UNCHANGED",
    "LRS_RECOVERED",
    "LRS_RECOVERING",
    "LRS_UNCHANGED",
    "FENCE",
    "UNFENCE",
    "NO_CHANGE",
    "ReplicaDirectory",
    "BrokerEndpoint",
    "BrokerFeature",
    "KraftRecord",
    "RegisterBroker",
    "UnregisterBroker",
    "BrokerRegistrationChange",
    "FenceBroker",
    "UnfenceBroker",
    "Topic",
    "RemoveTopic",
    "Partition",
    "PartitionChange",
    "FeatureLevel",
    "Config",
    "RegisterController",
    "ProducerIds",
    "BeginTransaction",
    "EndTransaction",
    "AbortTransaction",
    "NoOp",
    "ZkMigrationState",
    "DelegationToken",
    "RemoveDelegationToken",
    "CredentialInfo",
    "UserScramCredential",
    "RemoveUserScramCredential",
    "EntityData",
    "ClientQuota",
    "AccessControlEntry",
    "RemoveAccessControlEntry",
    "ClearElr",
    "LeaderChange",
    "KRaftVersion",
    "VoterEndpoint",
    "Voter",
    "Voters",
    "KafkaOpaque",
    "KRAFT_RECORDS",
    "API_KEYS",
    "CONTROL_TYPES",
]

# Reserved directory ids: Kafka's ``DirectoryId.MIGRATING``, ``UNASSIGNED`` and ``LOST`` as shipped in
# 3.7.0 (before Kafka's bd18551, "DirectoryId.MIGRATING should be all zeros", they were in another
# order), online or not as ``DirectoryId.isOnline`` says.
MIGRATING = "AAAAAAAAAAAAAAAAAAAAAA"
"""(0, 0): the replica is in *some* directory nobody recorded (pre-3.7 data). Counts as online."""
UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAQ"
"""(0, 1): not placed yet; the broker will choose and report it. Counts as online."""
LOST = "AAAAAAAAAAAAAAAAAAAAAg"
"""(0, 2): in an offline directory whose id is unknown. Counts as offline."""
RESERVED_DIRECTORIES = {MIGRATING: "MIGRATING", UNASSIGNED: "UNASSIGNED", LOST: "LOST"}

# Sentinels (LeaderConstants.java, PartitionChangeRecord.json, BrokerRegistrationChangeRecord.json).
NO_LEADER = -1
LEADER_UNCHANGED = -2
LRS_RECOVERED = 0
LRS_RECOVERING = 1
LRS_UNCHANGED = -1
FENCE = 1
UNFENCE = -1
NO_CHANGE = 0

Leader = Annotated[int, Meta(ge=NO_LEADER, le=2**31 - 1, description="-1 = no leader")]
ChangedLeader = Annotated[int, Meta(ge=LEADER_UNCHANGED, le=2**31 - 1, description="-2 = unchanged, -1 = no leader")]
Brokers = tuple[BrokerId, ...]
LastKnownElr = tuple[Leader, ...]
"""Kafka's ``maybeUpdateLastKnownLeader`` writes the leader the partition had when its ISR
emptied, which is -1 when it had none: its schema takes any int32, so the record takes -1."""


class ReplicaDirectory(Part, frozen=True, kw_only=True):
    """One replica of a partition and the log directory it lives in (KIP-858)."""

    broker: BrokerId
    directory: Uuid
    """A real directory id, or MIGRATING / UNASSIGNED / LOST."""


Assignment = tuple[ReplicaDirectory, ...]


class BrokerEndpoint(Part, frozen=True, kw_only=True):
    name: str
    host: str
    port: UInt16
    security_protocol: Int16
    """0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL."""


class BrokerFeature(Part, frozen=True, kw_only=True):
    name: str
    min_supported_version: Int16
    max_supported_version: Int16


class KraftRecord(Record, frozen=True, kw_only=True):
    FAMILY = "kraft"


def _check_partition(record: Partition | PartitionChange) -> None:
    """The cross-field rules Kafka enforces when it reads a partition record."""
    check_real_uuid("topic_id", record.topic_id)
    _check_brokers("replicas", record.replicas)
    _check_brokers("isr", record.isr)
    _check_assignment(record)


def _check_assignment(record: Partition | PartitionChange) -> None:
    assignment, replicas = record.assignment, record.replicas
    # Empty means "no directories" (read as MIGRATING, or "unchanged" in a PartitionChange).
    if not assignment or replicas is None:
        return
    if len(assignment) != len(replicas):
        raise ValueError(
            f"`assignment`: has {len(assignment)} entries but `replicas` has {len(replicas)};"
            " there is one (broker, directory) per replica, in replica order"
        )
    for i, (pair, broker) in enumerate(zip(assignment, replicas)):
        if pair.broker != broker:
            raise ValueError(f"`assignment`: entry {i} is broker {pair.broker} but replicas[{i}] is {broker}")


def _check_brokers(field: str, brokers: tuple[int, ...] | None) -> None:
    if brokers is not None and len(set(brokers)) != len(brokers):
        raise ValueError(f"`{field}`: lists a broker twice: {list(brokers)}")


class RegisterBroker(KraftRecord, frozen=True, kw_only=True):
    """Kafka RegisterBrokerRecord, apiKey 0, versions 0-3.

    v1 adds in_controlled_shutdown, v2 is_migrating_zk_broker, v3 log_dirs (KIP-858).
    """

    version: int = 3
    KEY = "broker/{r.broker_id}"
    SINCE = {"in_controlled_shutdown": 1, "is_migrating_zk_broker": 2, "log_dirs": 3}

    broker_id: BrokerId
    is_migrating_zk_broker: bool = False
    incarnation_id: Uuid
    """Changes on every broker process start."""
    broker_epoch: Int64
    """Assigned by the controller: the offset of this record."""
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    """A fresh registration is fenced."""
    in_controlled_shutdown: bool = False
    log_dirs: tuple[Uuid, ...] = ()
    """Ids of the broker's *online* log directories; empty = registered before KIP-858."""

    def _validate(self) -> None:
        check_real_uuid("incarnation_id", self.incarnation_id)
        for d in self.log_dirs:
            check_real_uuid("log_dirs", d)
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError("`log_dirs`: lists a directory twice")


class UnregisterBroker(KraftRecord, frozen=True, kw_only=True):
    """Kafka UnregisterBrokerRecord, apiKey 1, version 0."""

    version: int = 0
    KEY = "broker/{r.broker_id}"

    broker_id: BrokerId
    broker_epoch: Int64


class BrokerRegistrationChange(KraftRecord, frozen=True, kw_only=True):
    """Kafka BrokerRegistrationChangeRecord (BRCR), apiKey 17, versions 0-2.

    v1 adds in_controlled_shutdown, v2 log_dirs (KIP-858).
    """

    version: int = 2
    KEY = "broker/{r.broker_id}"
    SINCE = {"in_controlled_shutdown": 1, "log_dirs": 2}

    broker_id: BrokerId
    broker_epoch: Int64
    """Must equal the broker's current registration epoch."""
    fenced: Annotated[int, Meta(ge=UNFENCE, le=FENCE)] = NO_CHANGE
    """-1 = unfence, 0 = no change, 1 = fence."""
    in_controlled_shutdown: Annotated[int, Meta(ge=0, le=1)] = NO_CHANGE
    """0 = no change, 1 = enter controlled shutdown (only a new registration leaves it)."""
    log_dirs: tuple[Uuid, ...] = ()
    """The broker's remaining *online* directories; empty = no change."""

    def _validate(self) -> None:
        for d in self.log_dirs:
            check_real_uuid("log_dirs", d)


class FenceBroker(KraftRecord, frozen=True, kw_only=True):
    """Kafka FenceBrokerRecord, apiKey 7, version 0 (only written when MV < 3.3-IV2)."""

    version: int = 0
    KEY = "broker/{r.id}"

    id: BrokerId
    epoch: Int64


class UnfenceBroker(KraftRecord, frozen=True, kw_only=True):
    """Kafka UnfenceBrokerRecord, apiKey 8, version 0 (only written when MV < 3.3-IV2)."""

    version: int = 0
    KEY = "broker/{r.id}"

    id: BrokerId
    epoch: Int64


class Topic(KraftRecord, frozen=True, kw_only=True):
    """Kafka TopicRecord, apiKey 2, version 0."""

    version: int = 0
    KEY = "topic/{r.topic_id}"

    name: Annotated[str, Meta(min_length=1, max_length=249)]
    topic_id: Uuid

    def _validate(self) -> None:
        check_real_uuid("topic_id", self.topic_id)


class RemoveTopic(KraftRecord, frozen=True, kw_only=True):
    """Kafka RemoveTopicRecord, apiKey 9, version 0: removes the topic, its partitions and configs."""

    version: int = 0
    KEY = "topic/{r.topic_id}"

    topic_id: Uuid

    def _validate(self) -> None:
        check_real_uuid("topic_id", self.topic_id)


class Partition(KraftRecord, frozen=True, kw_only=True):
    """Kafka PartitionRecord, apiKey 3, versions 0-2.

    v1 adds Directories (here ``assignment``, KIP-858), v2 the ELR fields (KIP-966). A v0 record
    is upcast with every replica in MIGRATING, as Kafka reads it.
    """

    version: int = 2
    KEY = "partition/{r.topic_id}/{r.partition_id}"
    SINCE = {"assignment": 1, "eligible_leader_replicas": 2, "last_known_elr": 2}

    partition_id: PartitionIndex
    topic_id: Uuid
    replicas: Brokers
    """Preferred order; replicas[0] is the preferred leader."""
    isr: Brokers
    removing_replicas: Brokers = ()
    adding_replicas: Brokers = ()
    leader: Leader
    """-1 = no leader."""
    leader_recovery_state: Annotated[int, Meta(ge=0, le=1)] = LRS_RECOVERED
    """0 RECOVERED, 1 RECOVERING (after an unclean election)."""
    leader_epoch: Int32 = -1
    partition_epoch: Int32 = -1
    assignment: Assignment = ()
    """(broker, directory) per replica, in replica order."""
    eligible_leader_replicas: Brokers | None = None
    last_known_elr: LastKnownElr | None = None

    def _validate(self) -> None:
        _check_partition(self)


class PartitionChange(KraftRecord, frozen=True, kw_only=True):
    """Kafka PartitionChangeRecord (PCR), apiKey 5, versions 0-2. Absent/None = unchanged.

    v1 adds Directories (here ``assignment``, KIP-858), v2 the ELR fields (KIP-966).
    """

    version: int = 2
    KEY = "partition/{r.topic_id}/{r.partition_id}"
    SINCE = {"assignment": 1, "eligible_leader_replicas": 2, "last_known_elr": 2}

    partition_id: PartitionIndex
    topic_id: Uuid
    isr: Brokers | None = None
    leader: ChangedLeader = LEADER_UNCHANGED
    """-2 = unchanged, -1 = no leader, else the new leader."""
    replicas: Brokers | None = None
    removing_replicas: Brokers | None = None
    adding_replicas: Brokers | None = None
    leader_recovery_state: Annotated[int, Meta(ge=LRS_UNCHANGED, le=1)] = LRS_UNCHANGED
    """-1 = unchanged, 0 RECOVERED, 1 RECOVERING."""
    eligible_leader_replicas: Brokers | None = None
    last_known_elr: LastKnownElr | None = None
    assignment: Assignment | None = None
    """The full new (broker, directory) list, in replica order; None = unchanged."""

    def _validate(self) -> None:
        _check_partition(self)


class FeatureLevel(KraftRecord, frozen=True, kw_only=True):
    """Kafka FeatureLevelRecord, apiKey 12, version 0 (frozen at 0 forever). Level 0 = disabled."""

    version: int = 0
    KEY = "feature/{r.name}"

    name: Annotated[str, Meta(min_length=1)]
    feature_level: Int16


class Config(KraftRecord, frozen=True, kw_only=True):
    """Kafka ConfigRecord, apiKey 4, version 0. ``value`` None deletes the key."""

    version: int = 0
    KEY = "config/{r.resource_type}/{r.resource_name}"

    resource_type: Int8
    """2 TOPIC, 4 BROKER, 8 BROKER_LOGGER, 16 CLIENT_METRICS, 32 GROUP."""
    resource_name: str
    """"" = the cluster default for BROKER."""
    name: str
    value: str | None = None


class RegisterController(KraftRecord, frozen=True, kw_only=True):
    """Kafka RegisterControllerRecord, apiKey 27, version 0."""

    version: int = 0
    KEY = "controller/{r.controller_id}"

    controller_id: BrokerId
    incarnation_id: Uuid
    zk_migration_ready: bool = False
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()


class ProducerIds(KraftRecord, frozen=True, kw_only=True):
    """Kafka ProducerIdsRecord, apiKey 15, version 0: a block of producer ids handed out."""

    version: int = 0
    KEY = "producer-ids"

    broker_id: Annotated[int, Meta(ge=-1, le=2**31 - 1)]
    """The broker the block went to; -1 in a snapshot, which keeps only the next id."""
    broker_epoch: Int64
    next_producer_id: Int64


class BeginTransaction(KraftRecord, frozen=True, kw_only=True):
    """Kafka BeginTransactionRecord, apiKey 23, version 0 (metadata transactions, MV >= 3.6-IV1)."""

    version: int = 0
    name: str | None = None


class EndTransaction(KraftRecord, frozen=True, kw_only=True):
    """Kafka EndTransactionRecord, apiKey 24, version 0: publishes the records since Begin."""

    version: int = 0


class AbortTransaction(KraftRecord, frozen=True, kw_only=True):
    """Kafka AbortTransactionRecord, apiKey 25, version 0: discards the records since Begin."""

    version: int = 0
    reason: str | None = None


class NoOp(KraftRecord, frozen=True, kw_only=True):
    """Kafka NoOpRecord, apiKey 20, version 0: the active controller's heartbeat."""

    version: int = 0


class ZkMigrationState(KraftRecord, frozen=True, kw_only=True):
    """Kafka ZkMigrationStateRecord, apiKey 21, version 0 (0 = none)."""

    version: int = 0
    zk_migration_state: Int8


class DelegationToken(KraftRecord, frozen=True, kw_only=True):
    """Kafka DelegationTokenRecord, apiKey 10, version 0 (the token's HMAC is not in the log)."""

    version: int = 0
    KEY = "token/{r.token_id}"

    owner: str
    requester: str
    renewers: tuple[str, ...] = ()
    issue_timestamp: Int64
    max_timestamp: Int64
    expiration_timestamp: Int64
    token_id: str


class RemoveDelegationToken(KraftRecord, frozen=True, kw_only=True):
    """Kafka RemoveDelegationTokenRecord, apiKey 26, version 0."""

    version: int = 0
    KEY = "token/{r.token_id}"

    token_id: str


class CredentialInfo(Part, frozen=True, kw_only=True):
    mechanism: Int8
    """1 SCRAM-SHA-256, 2 SCRAM-SHA-512."""
    salt: bytes
    salted_password: bytes
    iterations: Int32


class UserScramCredential(KraftRecord, frozen=True, kw_only=True):
    """Kafka UserScramCredentialRecord, apiKey 11, version 0 (salted hashes, never passwords)."""

    version: int = 0
    KEY = "user/{r.name}"

    name: str
    credential_infos: tuple[CredentialInfo, ...] = ()


class RemoveUserScramCredential(KraftRecord, frozen=True, kw_only=True):
    """Kafka RemoveUserScramCredentialRecord, apiKey 22, version 0."""

    version: int = 0
    KEY = "user/{r.name}"

    name: str
    mechanism: Int8


class EntityData(Part, frozen=True, kw_only=True):
    entity_type: str
    entity_name: str | None = None
    """None = the default entity."""


class ClientQuota(KraftRecord, frozen=True, kw_only=True):
    """Kafka ClientQuotaRecord, apiKey 14, version 0: set (or remove) one quota of an entity."""

    version: int = 0

    entity: tuple[EntityData, ...] = ()
    key: str
    value: float
    remove: bool = False

    def _validate(self) -> None:
        if not math.isfinite(self.value):
            # JSON (the fixtures' format) has no infinity or NaN; no quota needs one.
            raise ValueError(f"`value`: a quota is a finite number, got {self.value}")


class AccessControlEntry(KraftRecord, frozen=True, kw_only=True):
    """Kafka AccessControlEntryRecord, apiKey 18, version 0: one ACL."""

    version: int = 0
    KEY = "acl/{r.id}"

    id: Uuid
    resource_type: Int8
    resource_name: str
    pattern_type: Int8
    principal: str
    host: str
    operation: Int8
    permission_type: Int8


class RemoveAccessControlEntry(KraftRecord, frozen=True, kw_only=True):
    """Kafka RemoveAccessControlEntryRecord, apiKey 19, version 0."""

    version: int = 0
    KEY = "acl/{r.id}"

    id: Uuid


class ClearElr(KraftRecord, frozen=True, kw_only=True):
    """Kafka ClearElrRecord, apiKey 28, version 0 (Kafka 4.0, KIP-966): empties the eligible leader
    replicas and LastKnownElr of every partition of ``topic_name``, or of every topic when it is
    "". Kafka writes it when ``min.insync.replicas`` changes while ELR is on
    (``ConfigurationControlManager.createClearElrRecordsAsNeeded``)."""

    version: int = 0
    KEY = "elr/{r.topic_name}"

    topic_name: Annotated[str, Meta(max_length=249)] = ""
    """The topic by name (Kafka's ``entityType: topicName``); "" = all topics."""


# -- Raft control records (Kafka's ControlRecordType; clients/src/main/resources/common/message/) ---


class LeaderChange(KraftRecord, frozen=True, kw_only=True):
    """Raft LeaderChangeMessage (control type 2): written once at the start of every Raft epoch.

    ``epoch`` is the batch's PartitionLeaderEpoch, the epoch this leader starts; ``version`` is
    the message's own Version field."""

    version: int = 0
    KEY = "quorum"

    epoch: Int32
    leader_id: Int32
    voters: tuple[Int32, ...] = ()
    granting_voters: tuple[Int32, ...] = ()


class KRaftVersion(KraftRecord, frozen=True, kw_only=True):
    """Raft KRaftVersionRecord (control type 5): the kraft.version in force from here."""

    version: int = 0
    KEY = "quorum"

    kraft_version: Int16


class VoterEndpoint(Part, frozen=True, kw_only=True):
    name: str
    host: str
    port: UInt16


class Voter(Part, frozen=True, kw_only=True):
    voter_id: Int32
    voter_directory_id: Uuid
    endpoints: tuple[VoterEndpoint, ...] = ()
    min_supported_version: Int16 = 0
    max_supported_version: Int16 = 0
    """The voter's supported kraft.version range (Kafka's KRaftVersionFeature struct)."""


class Voters(KraftRecord, frozen=True, kw_only=True):
    """Raft VotersRecord (control type 6): the voter set in force from here (KIP-853)."""

    version: int = 0
    KEY = "quorum"

    voters: tuple[Voter, ...] = ()


class KafkaOpaque(KraftRecord, frozen=True, kw_only=True):
    """A record imported from Kafka that kraftlake cannot decode (an apiKey or version it does
    not know, or an unknown control type): kept as Kafka wrote it, never dropped, so that an
    export writes it back byte for byte. The import warns and counts it; the KRaft reducer refuses
    a metadata one (its effect is unknown) and lets a control one pass."""

    version: int = 0
    KEY = "kafka/{r.api_key}"

    api_key: Int16
    """Metadata apiKey, or the control type when ``control``."""
    kafka_version: Int16
    """The record's version as Kafka wrote it (the frame's version; the key version for control)."""
    control: bool = False
    value: bytes
    """The raw record value (with its frame header for metadata records)."""


KRAFT_RECORDS: tuple[type[Record], ...] = (
    RegisterBroker,
    UnregisterBroker,
    BrokerRegistrationChange,
    FenceBroker,
    UnfenceBroker,
    Topic,
    RemoveTopic,
    Partition,
    PartitionChange,
    FeatureLevel,
    Config,
    RegisterController,
    ProducerIds,
    BeginTransaction,
    EndTransaction,
    AbortTransaction,
    NoOp,
    ZkMigrationState,
    DelegationToken,
    RemoveDelegationToken,
    UserScramCredential,
    RemoveUserScramCredential,
    ClientQuota,
    AccessControlEntry,
    RemoveAccessControlEntry,
    ClearElr,
    LeaderChange,
    KRaftVersion,
    Voters,
    KafkaOpaque,
)
"""Every KRaft record type: first the ones kraftlake's design names, in its order
(tests/test_records.py holds it), then the other metadata records real Kafka logs carry, the Raft
control records and ``KafkaOpaque``."""

API_KEYS: dict[type[Record], int] = {
    RegisterBroker: 0,
    UnregisterBroker: 1,
    Topic: 2,
    Partition: 3,
    Config: 4,
    PartitionChange: 5,
    FenceBroker: 7,
    UnfenceBroker: 8,
    RemoveTopic: 9,
    FeatureLevel: 12,
    ProducerIds: 15,
    BrokerRegistrationChange: 17,
    NoOp: 20,
    ZkMigrationState: 21,
    BeginTransaction: 23,
    EndTransaction: 24,
    AbortTransaction: 25,
    RegisterController: 27,
    DelegationToken: 10,
    UserScramCredential: 11,
    ClientQuota: 14,
    AccessControlEntry: 18,
    RemoveAccessControlEntry: 19,
    RemoveUserScramCredential: 22,
    RemoveDelegationToken: 26,
    ClearElr: 28,
}
"""Kafka's apiKey of each metadata record type (each schema's ``apiKey``, Kafka's generated
``MetadataRecordType``)."""

CONTROL_TYPES: dict[type[Record], int] = {LeaderChange: 2, KRaftVersion: 5, Voters: 6}
"""Raft control record types kraftlake keeps, by their control type (Kafka's ``ControlRecordType``)."""
