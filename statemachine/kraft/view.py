"""The KRaft controller's view of the cluster, built by ``reducer.apply`` from records alone.

``ControllerView`` is Kafka's controller state (ClusterControlManager + ReplicationControlManager +
FeatureControlManager + ...): features, broker and controller registrations, topics, partitions,
configs, producer ids, plus the indexes the controller keeps in replay (partitions by ISR member,
by directory, without a leader). Only the reducer mutates it; deciders read it.

``ControllerView.image()`` is the frozen, canonical form (everything sorted, ids in Kafka's base64):
what ``kraftlake view`` prints, what snapshots store and what ``state_hash`` hashes. Same records
in, byte-identical image out, in every process.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import msgspec

from kraftlake.records.kraft import BrokerEndpoint, BrokerFeature, ReplicaDirectory

from ..state_hash import spliced_state_hash, state_hash_of, streamed_state_hash
from .directory_ids import RESERVED_IDS, is_online
from .features import METADATA_VERSION, MV_3_0_IV1

IMAGE_FORMAT = 2
"""Version of the image's shape and of the reducer's semantics. Bump it when either changes:
stored snapshots of another format are ignored, never misread."""

PartitionKey = tuple[str, int]
"""(topic id, partition id)."""


class BrokerRegistration(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A broker's current registration (Kafka ``BrokerRegistration``)."""

    id: int
    epoch: int
    incarnation_id: str
    registered_at: int
    """Offset of the RegisterBroker record: the broker is caught up once its metadata offset
    reaches it (``BrokerHeartbeatManager.calculateNextBrokerState``)."""
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[str, ...] = ()
    """Online directories, in Kafka's uuid order; empty = registered before KIP-858."""
    removed_dirs: tuple[str, ...] = ()
    """Directories dropped from ``log_dirs`` by BrokerRegistrationChange since this registration."""
    rack: str | None = None
    is_migrating_zk_broker: bool = False
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()


class ControllerRegistration(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    id: int
    incarnation_id: str
    zk_migration_ready: bool = False
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()


class TopicInfo(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    id: str
    name: str


class PartitionRegistration(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One partition (Kafka ``PartitionRegistration``); ``directories`` runs parallel to
    ``replicas`` as in Kafka, ``assignment`` gives the (broker, directory) pairs. Fields are
    positional in this order (``merge`` builds one per replayed change) and encode as an array
    (snapshots store thousands of them)."""

    topic_id: str
    partition_id: int
    replicas: tuple[int, ...]
    directories: tuple[str, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_recovery_state: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def key(self) -> PartitionKey:
        return (self.topic_id, self.partition_id)

    def directory(self, broker: int) -> str:
        """The directory of ``broker``'s replica (Kafka ``PartitionRegistration.directory``)."""
        return self.directories[self.replicas.index(broker)]

    def assignment(self) -> tuple[ReplicaDirectory, ...]:
        return tuple(ReplicaDirectory(broker=b, directory=d) for b, d in zip(self.replicas, self.directories))


class ProducerIdsBlock(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    broker_id: int
    broker_epoch: int
    next_producer_id: int


class Transaction(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An open metadata transaction (BeginTransaction without End/Abort yet)."""

    begin_offset: int
    name: str | None = None


# -- the canonical image -------------------------------------------------------------------------


class BrokerImage(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    epoch: int
    incarnation_id: str
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: tuple[str, ...]
    registered_at: int
    removed_dirs: tuple[str, ...]
    rack: str | None
    is_migrating_zk_broker: bool
    end_points: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...]


class PartitionImage(msgspec.Struct, frozen=True, kw_only=True):
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int
    assignment: tuple[ReplicaDirectory, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    eligible_leader_replicas: tuple[int, ...]
    last_known_elr: tuple[int, ...]


class ConfigImage(msgspec.Struct, frozen=True, kw_only=True):
    resource_type: int
    resource_name: str
    configs: dict[str, str]


class ControllerImage(msgspec.Struct, frozen=True, kw_only=True):
    """The whole controller view, canonical: lists sorted by id, dicts by key."""

    offset: int
    state_hash: str
    features: dict[str, int]
    brokers: tuple[BrokerImage, ...]
    controllers: tuple[ControllerRegistration, ...]
    topics: tuple[TopicInfo, ...]
    partitions: tuple[PartitionImage, ...]
    configs: tuple[ConfigImage, ...]
    producer_ids: ProducerIdsBlock | None
    zk_migration_state: int
    transaction: Transaction | None


class ControllerState(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The view's own data, as snapshots store it: decoding gives the reducer's objects directly."""

    offset: int
    features: dict[str, int]
    brokers: tuple[BrokerRegistration, ...]
    controllers: tuple[ControllerRegistration, ...]
    topics: tuple[TopicInfo, ...]
    partitions: tuple[PartitionRegistration, ...]
    configs: tuple[ConfigImage, ...]
    producer_ids: ProducerIdsBlock | None
    zk_migration_state: int


def broker_image(b: BrokerRegistration) -> BrokerImage:
    """A broker's canonical form, as ``ControllerView.image()`` lists it."""
    return BrokerImage(
        id=b.id,
        epoch=b.epoch,
        incarnation_id=b.incarnation_id,
        fenced=b.fenced,
        in_controlled_shutdown=b.in_controlled_shutdown,
        log_dirs=b.log_dirs,
        registered_at=b.registered_at,
        removed_dirs=b.removed_dirs,
        rack=b.rack,
        is_migrating_zk_broker=b.is_migrating_zk_broker,
        end_points=b.end_points,
        features=b.features,
    )


def broker_hash(b: BrokerRegistration) -> str:
    """sha256 of one broker's canonical form (see ``partition_hash``)."""
    return state_hash_of(broker_image(b))


def partition_image(p: PartitionRegistration) -> PartitionImage:
    """A partition's canonical form, as ``ControllerView.image()`` lists it."""
    return PartitionImage(
        topic_id=p.topic_id,
        partition=p.partition_id,
        replicas=p.replicas,
        isr=p.isr,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        leader_recovery_state=p.leader_recovery_state,
        assignment=p.assignment(),
        removing_replicas=p.removing_replicas,
        adding_replicas=p.adding_replicas,
        eligible_leader_replicas=p.eligible_leader_replicas,
        last_known_elr=p.last_known_elr,
    )


def partition_hash(p: PartitionRegistration) -> str:
    """sha256 of one partition's canonical form: what engines that replay per entity (Spark)
    compare with the local reducer's."""
    return state_hash_of(partition_image(p))


# -- the mutable view the reducer folds into ------------------------------------------------------


class ControllerView:
    """Kafka's controller state at ``offset``. Mutated only by ``reducer.apply``."""

    __slots__ = (
        "offset",
        "features",
        "brokers",
        "controllers",
        "topics",
        "topic_ids",
        "partitions",
        "configs",
        "producer_ids",
        "zk_migration_state",
        "transaction",
        "_before_transaction",
        "dir_owner",
        "dirty",
        "_indexed",
        "_isr_index",
        "_dir_index",
        "_replica_index",
        "_leaderless",
    )

    def __init__(self) -> None:
        self.offset: int = -1
        self.features: dict[str, int] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controllers: dict[int, ControllerRegistration] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_ids: dict[str, str] = {}
        """Topic name -> id."""
        self.partitions: dict[str, dict[int, PartitionRegistration]] = {}
        """Topic id -> partition id -> registration."""
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.producer_ids: ProducerIdsBlock | None = None
        self.zk_migration_state: int = 0
        self.transaction: Transaction | None = None
        self._before_transaction: ControllerView | None = None
        self.dir_owner: dict[str, int] = {}
        # Indexes Kafka keeps in replay (BrokersToIsrs, directoriesToPartitions, ...). Only the
        # deciders read them: they are built on first read, and from then on replay notes which
        # partitions changed (``dirty``) so they catch up on the next read. Pure replays (audits,
        # time travel) never build them and track nothing (``dirty`` is None).
        self.dirty: set[PartitionKey] | None = None
        self._indexed: dict[PartitionKey, PartitionRegistration] = {}
        self._isr_index: dict[int, set[PartitionKey]] = {}
        self._dir_index: dict[str, set[PartitionKey]] = {}
        self._replica_index: dict[int, set[PartitionKey]] = {}
        self._leaderless: set[PartitionKey] = set()

    # -- reads -----------------------------------------------------------------------------------

    @property
    def metadata_version(self) -> int:
        return self.features.get(METADATA_VERSION, MV_3_0_IV1)

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        parts = self.partitions.get(topic_id)
        return None if parts is None else parts.get(partition_id)

    def partitions_of(self, broker: int) -> list[PartitionRegistration]:
        """The partitions ``broker`` is a replica of, in (topic id, partition id) order."""
        parts = self.partitions
        return [parts[t][p] for t, p in sorted(self.replica_index.get(broker, ()))]

    def iter_partitions(self):
        """Every partition, in (topic id, partition id) order."""
        for tid in sorted(self.partitions):
            parts = self.partitions[tid]
            for pid in sorted(parts):
                yield parts[pid]

    def partition_count(self) -> int:
        return sum(len(p) for p in self.partitions.values())

    def is_active(self, broker: int) -> bool:
        reg = self.brokers.get(broker)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    def has_online_dir(self, broker: int, directory: str) -> bool:
        """Kafka ``ClusterControlManager.hasOnlineDir``."""
        reg = self.brokers.get(broker)
        return reg is not None and is_online(directory, reg.log_dirs)

    def config(self, resource_type: int, resource_name: str, name: str) -> str | None:
        return self.configs.get((resource_type, resource_name), {}).get(name)

    # -- copies, images and hashes -----------------------------------------------------------------

    def copy(self) -> ControllerView:
        """An independent copy (values are frozen, so containers are all that is copied)."""
        other = ControllerView()
        other.offset = self.offset
        other.features = dict(self.features)
        other.brokers = dict(self.brokers)
        other.controllers = dict(self.controllers)
        other.topics = dict(self.topics)
        other.topic_ids = dict(self.topic_ids)
        other.partitions = {t: dict(p) for t, p in self.partitions.items()}
        other.configs = {k: dict(v) for k, v in self.configs.items()}
        other.producer_ids = self.producer_ids
        other.zk_migration_state = self.zk_migration_state
        other.transaction = self.transaction
        other._before_transaction = self._before_transaction
        other.dir_owner = dict(self.dir_owner)
        other.dirty = None if self.dirty is None else set(self.dirty)
        other._indexed = dict(self._indexed)
        other._isr_index = {b: set(s) for b, s in self._isr_index.items()}
        other._dir_index = {d: set(s) for d, s in self._dir_index.items()}
        other._replica_index = {b: set(s) for b, s in self._replica_index.items()}
        other._leaderless = set(self._leaderless)
        return other

    def published(self) -> ControllerView:
        """What Kafka publishes to brokers (``MetadataBatchLoader``): inside an open metadata
        transaction, the state before its Begin record (its ``offset`` is the one before Begin);
        otherwise this view itself."""
        if self.transaction is None:
            return self
        before = self._before_transaction
        assert before is not None
        return before

    def _image_fields(self, partitions: bool = True) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "features": dict(sorted(self.features.items())),
            "brokers": tuple(broker_image(b) for _, b in sorted(self.brokers.items())),
            "controllers": tuple(c for _, c in sorted(self.controllers.items())),
            "topics": tuple(t for _, t in sorted(self.topics.items())),
            "configs": tuple(
                ConfigImage(resource_type=t, resource_name=n, configs=dict(sorted(c.items())))
                for (t, n), c in sorted(self.configs.items())
            ),
            "producer_ids": self.producer_ids,
            "zk_migration_state": self.zk_migration_state,
            "transaction": self.transaction,
        }
        if partitions:
            fields["partitions"] = tuple(partition_image(p) for p in self.iter_partitions())
        return fields

    def image(self) -> ControllerImage:
        """The canonical, frozen form of this view, with its state hash."""
        fields = self._image_fields()
        return ControllerImage(offset=self.offset, state_hash=state_hash_of(fields), **fields)

    def state_hash(self, partitions: Iterable[PartitionRegistration] | None = None) -> str:
        """sha256 of the image without its offset. ``partitions``: the view's partitions given
        instead of its own, in (topic id, partition id) order, hashed as they come and not held
        (``streamed_state_hash``)."""
        if partitions is None:
            return state_hash_of(self._image_fields())
        return streamed_state_hash(self._image_fields(partitions=False), "partitions", map(partition_image, partitions))

    def state_hash_encoded(self, partitions: Iterable[Any]) -> str:
        """``state_hash`` with the view's partitions given already encoded: ``partitions`` (pieces
        of bytes) end to end are their canonical forms (``partition_image``, encoded as
        ``state_hash.CANONICAL`` does) in (topic id, partition id) order, a comma between two
        (``state_hash.spliced_state_hash``)."""
        return spliced_state_hash(self._image_fields(partitions=False), "partitions", partitions)

    def state(self) -> ControllerState:
        """The view's data, sorted (what a snapshot stores). Refused inside a transaction: the
        state before Begin, which an abort returns to, would be lost."""
        if self.transaction is not None:
            raise ValueError("a view inside a metadata transaction cannot be stored")
        return ControllerState(
            offset=self.offset,
            features=dict(sorted(self.features.items())),
            brokers=tuple(b for _, b in sorted(self.brokers.items())),
            controllers=tuple(c for _, c in sorted(self.controllers.items())),
            topics=tuple(t for _, t in sorted(self.topics.items())),
            partitions=tuple(self.iter_partitions()),
            configs=tuple(
                ConfigImage(resource_type=t, resource_name=n, configs=dict(sorted(c.items())))
                for (t, n), c in sorted(self.configs.items())
            ),
            producer_ids=self.producer_ids,
            zk_migration_state=self.zk_migration_state,
        )

    @classmethod
    def from_state(cls, state: ControllerState) -> ControllerView:
        """The view a snapshot stored (its indexes are rebuilt on first use)."""
        view = cls()
        view.offset = state.offset
        view.features = dict(state.features)
        view.brokers = {b.id: b for b in state.brokers}
        view.controllers = {c.id: c for c in state.controllers}
        view.topics = {t.id: t for t in state.topics}
        view.topic_ids = {t.name: t.id for t in state.topics}
        view.partitions = {t.id: {} for t in state.topics}
        parts = view.partitions
        for p in state.partitions:
            parts[p.topic_id][p.partition_id] = p
        view.configs = {(c.resource_type, c.resource_name): dict(c.configs) for c in state.configs}
        view.producer_ids = state.producer_ids
        view.zk_migration_state = state.zk_migration_state
        view.reindex()
        return view

    # -- indexes -------------------------------------------------------------------------------------

    def reindex(self) -> None:
        """Rebuild every index from the registrations and partitions."""
        self.dir_owner = {d: b.id for b in self.brokers.values() for d in b.log_dirs}
        self._indexed, self._isr_index, self._dir_index, self._replica_index = {}, {}, {}, {}
        self._leaderless = set()
        self.dirty = None

    def _sync(self) -> None:
        """Build the partition indexes, or bring them up to date with what replay changed."""
        dirty: Collection[PartitionKey] | None = self.dirty
        if dirty is None:
            dirty = [(t, p) for t, parts in self.partitions.items() for p in parts]
        elif not dirty:
            return
        indexed, parts = self._indexed, self.partitions
        for key in dirty:
            old = indexed.get(key)
            topic = parts.get(key[0])
            new = None if topic is None else topic.get(key[1])
            if old is new:
                continue
            # merge() reuses the tuples a change leaves alone: identity says what did not move.
            if old is None or new is None or old.isr is not new.isr:
                move_key(self._isr_index, key, () if old is None else old.isr, () if new is None else new.isr)
            if old is None or new is None or old.replicas is not new.replicas:
                move_key(
                    self._replica_index, key, () if old is None else old.replicas, () if new is None else new.replicas
                )
            if old is None or new is None or old.directories is not new.directories:
                move_key(
                    self._dir_index,
                    key,
                    () if old is None else [d for d in old.directories if d not in RESERVED_IDS],
                    () if new is None else [d for d in new.directories if d not in RESERVED_IDS],
                )  # Reserved ids are never indexed, as in Kafka's ``directoriesToPartitions``.
            if new is not None and new.leader == -1:
                self._leaderless.add(key)
            else:
                self._leaderless.discard(key)
            if new is None:
                del indexed[key]
            else:
                indexed[key] = new
        self.dirty = set()

    @property
    def isr_index(self) -> dict[int, set[PartitionKey]]:
        """Broker -> partitions whose ISR lists it (Kafka's BrokersToIsrs)."""
        self._sync()
        return self._isr_index

    @property
    def dir_index(self) -> dict[str, set[PartitionKey]]:
        """Real directory id -> partitions with a replica there (``directoriesToPartitions``)."""
        self._sync()
        return self._dir_index

    @property
    def replica_index(self) -> dict[int, set[PartitionKey]]:
        """Broker -> partitions it is a replica of."""
        self._sync()
        return self._replica_index

    @property
    def leaderless(self) -> set[PartitionKey]:
        """Partitions without a leader."""
        self._sync()
        return self._leaderless


def move_key(index: dict[Any, set[PartitionKey]], key: PartitionKey, old: Iterable[Any], new: Iterable[Any]) -> None:
    """Index ``key`` under the members of ``new`` instead of those of ``old``."""
    for m in old:
        if m not in new:
            s = index.get(m)
            if s is not None:
                s.discard(key)
                if not s:
                    del index[m]
    for m in new:
        if m not in old:
            s = index.get(m)
            if s is None:
                index[m] = {key}
            else:
                s.add(key)
