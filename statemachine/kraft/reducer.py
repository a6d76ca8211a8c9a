"""The KRaft reducer: ``apply(view, record)`` folds one record into a ``ControllerView``.

The shape and strictness rule of every family's reducer (``statemachine.reducer``): one dispatch
table keyed by record class, one small function per record type, as Kafka's
``MetadataDelta.replay`` switches once on the apiKey. Kafka refuses a record about a broker,
topic or partition it does not have, and its other preconditions on replay (its
``ClusterControlManager.replay`` and ``ReplicationControlManager.replay`` methods):
each is a ``ReplayError`` naming the offset, the record type, the entity and the rule. NoOps,
observation records (facts for the audits) and other families' records leave the controller
view unchanged. A Kafka metadata record kraftlake could not decode (``KafkaOpaque``: a type or
version newer than it knows) is not replayed: its effect is unknown, and Kafka's own loader
refuses a record it cannot read, so the reducer raises a ``RecordError`` naming it (unusable
input, not a violation). An unknown control record changes no metadata and passes.

Replay rules (``ReplayError.rule``):

========================  ===================================================================
R-REPLAY-ORDER            offsets must increase (every family's: ``statemachine.reducer``)
R-REPLAY-BROKER           broker record for an unregistered broker
R-REPLAY-BROKER-EPOCH     broker record whose epoch is not the registration's
R-REPLAY-DIR-OWNER        a registration lists a directory another broker has (Kafka: "BUG")
R-REPLAY-TOPIC            duplicate topic name or id; record for an unknown topic (by id, or by
                          name for ClearElr)
R-REPLAY-PARTITION        PartitionChange for an unknown partition
R-REPLAY-DIRECTORIES      directories that do not fit the replicas
R-REPLAY-TXN              Begin inside a transaction; End or Abort without Begin
R-REPLAY-PRODUCER-IDS     producer id blocks that do not increase
========================  ===================================================================
"""

from __future__ import annotations

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.errors import RecordError
from kraftlake.records.kraft import (
    FENCE,
    UNFENCE,
    AbortTransaction,
    BeginTransaction,
    BrokerRegistrationChange,
    ClearElr,
    Config,
    EndTransaction,
    FeatureLevel,
    FenceBroker,
    KafkaOpaque,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RegisterController,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    UnregisterBroker,
    ZkMigrationState,
)
from kraftlake.statemachine.invariant import say
from kraftlake.statemachine.reducer import Handler, Reducer, refusal

from .directory_ids import sorted_dirs
from .partitions import from_record, merge
from .view import (
    BrokerRegistration,
    ControllerRegistration,
    ControllerView,
    ProducerIdsBlock,
    TopicInfo,
    Transaction,
)

TOPIC_RESOURCE = 2


def _broker(view: ControllerView, r: Record, offset: int, broker_id: int, epoch: int) -> BrokerRegistration:
    reg = view.brokers.get(broker_id)
    if reg is None:
        raise refusal(r, offset, "R-REPLAY-BROKER", f"broker {broker_id} is not registered")
    if reg.epoch != epoch:
        raise refusal(
            r,
            offset,
            "R-REPLAY-BROKER-EPOCH",
            f"broker {broker_id} is registered with epoch {reg.epoch}, the record has epoch {epoch}",
        )
    return reg


def _register_broker(view: ControllerView, r: RegisterBroker, offset: int) -> None:
    dirs = sorted_dirs(r.log_dirs)
    for d in dirs:
        owner = view.dir_owner.get(d)
        if owner is not None and owner != r.broker_id:
            raise refusal(r, offset, "R-REPLAY-DIR-OWNER", f"directory {d} is registered to broker {owner}")
    old = view.brokers.get(r.broker_id)
    if old is not None:
        for d in old.log_dirs:
            view.dir_owner.pop(d, None)
    for d in dirs:
        view.dir_owner[d] = r.broker_id
    view.brokers[r.broker_id] = BrokerRegistration(
        id=r.broker_id,
        epoch=r.broker_epoch,
        incarnation_id=r.incarnation_id,
        registered_at=offset,
        fenced=r.fenced,
        in_controlled_shutdown=r.in_controlled_shutdown,
        log_dirs=dirs,
        rack=r.rack,
        is_migrating_zk_broker=r.is_migrating_zk_broker,
        end_points=r.end_points,
        features=r.features,
    )


def _unregister_broker(view: ControllerView, r: UnregisterBroker, offset: int) -> None:
    reg = _broker(view, r, offset, r.broker_id, r.broker_epoch)
    for d in reg.log_dirs:
        view.dir_owner.pop(d, None)
    del view.brokers[r.broker_id]


def _change_broker(
    view: ControllerView,
    reg: BrokerRegistration,
    *,
    fenced: int = 0,
    in_controlled_shutdown: int = 0,
    log_dirs: tuple[str, ...] = (),
) -> None:
    changes: dict[str, object] = {}
    if fenced == FENCE:
        changes["fenced"] = True
    elif fenced == UNFENCE:
        changes["fenced"] = False
    if in_controlled_shutdown:
        changes["in_controlled_shutdown"] = True
    # An empty list means "no change", as Kafka replays it: also when every directory went offline.
    if log_dirs:
        dirs = sorted_dirs(log_dirs)
        gone = [d for d in reg.log_dirs if d not in dirs]
        changes["log_dirs"] = dirs
        changes["removed_dirs"] = sorted_dirs(set(reg.removed_dirs).union(gone).difference(dirs))
        for d in gone:
            view.dir_owner.pop(d, None)
        for d in dirs:
            view.dir_owner[d] = reg.id
    if changes:
        view.brokers[reg.id] = msgspec.structs.replace(reg, **changes)


def _registration_change(view: ControllerView, r: BrokerRegistrationChange, offset: int) -> None:
    reg = _broker(view, r, offset, r.broker_id, r.broker_epoch)
    for d in r.log_dirs:
        owner = view.dir_owner.get(d)
        if owner is not None and owner != r.broker_id:
            raise refusal(r, offset, "R-REPLAY-DIR-OWNER", f"directory {d} is registered to broker {owner}")
    _change_broker(view, reg, fenced=r.fenced, in_controlled_shutdown=r.in_controlled_shutdown, log_dirs=r.log_dirs)


def _fence(view: ControllerView, r: FenceBroker, offset: int) -> None:
    _change_broker(view, _broker(view, r, offset, r.id, r.epoch), fenced=FENCE)


def _unfence(view: ControllerView, r: UnfenceBroker, offset: int) -> None:
    _change_broker(view, _broker(view, r, offset, r.id, r.epoch), fenced=UNFENCE)


def _topic(view: ControllerView, r: Topic, offset: int) -> None:
    if r.topic_id in view.topics:
        raise refusal(r, offset, "R-REPLAY-TOPIC", f"topic id {r.topic_id} already exists")
    if r.name in view.topic_ids:
        raise refusal(r, offset, "R-REPLAY-TOPIC", f"topic name {r.name!r} already exists")
    view.topics[r.topic_id] = TopicInfo(id=r.topic_id, name=r.name)
    view.topic_ids[r.name] = r.topic_id
    view.partitions[r.topic_id] = {}


def _remove_topic(view: ControllerView, r: RemoveTopic, offset: int) -> None:
    topic = view.topics.pop(r.topic_id, None)
    if topic is None:
        raise refusal(r, offset, "R-REPLAY-TOPIC", say("L3", "topic_missing", topic=r.topic_id))
    del view.topic_ids[topic.name]
    removed = view.partitions.pop(r.topic_id)
    if view.dirty is not None:
        view.dirty.update((r.topic_id, pid) for pid in removed)
    view.configs.pop((TOPIC_RESOURCE, topic.name), None)


def _partition(view: ControllerView, r: Partition, offset: int) -> None:
    parts = view.partitions.get(r.topic_id)
    if parts is None:
        raise refusal(r, offset, "R-REPLAY-TOPIC", say("L3", "topic_missing", topic=r.topic_id))
    parts[r.partition_id] = from_record(r)
    if view.dirty is not None:
        view.dirty.add((r.topic_id, r.partition_id))


def _partition_change(view: ControllerView, r: PartitionChange, offset: int) -> None:
    parts = view.partitions.get(r.topic_id)
    if parts is None:
        raise refusal(r, offset, "R-REPLAY-TOPIC", say("L3", "topic_missing", topic=r.topic_id))
    pid = r.partition_id
    old = parts.get(pid)
    if old is None:
        raise refusal(r, offset, "R-REPLAY-PARTITION", say("L3", "partition_missing", partition=pid))
    try:
        new = merge(old, r)
    except ValueError as exc:
        raise refusal(r, offset, "R-REPLAY-DIRECTORIES", str(exc)) from None
    parts[pid] = new
    dirty = view.dirty
    if dirty is not None:
        dirty.add((r.topic_id, pid))
    if new.eligible_leader_replicas and set(new.isr) & set(new.eligible_leader_replicas):
        # Kafka's replay logs this as an error and goes on. Logging is imported here,
        # on the anomaly only: the reducers load no I/O library.
        from kraftlake.logging import get_logger

        get_logger(__name__).error(
            "isr_and_elr_overlap", offset=offset, entity=r.entity_key(), isr=new.isr, elr=new.eligible_leader_replicas
        )


def _clear_elr(view: ControllerView, r: ClearElr, offset: int) -> None:
    """Kafka 4.0's ``ReplicationControlManager.replay(ClearElrRecord)``: every partition of the
    topic (of every topic when the name is "") that has an ELR or a LastKnownElr is merged with a
    change that empties both, so its partition epoch goes up by one (``removeTopicElrs``)."""
    if r.topic_name:
        topic_id = view.topic_ids.get(r.topic_name)
        if topic_id is None:
            raise refusal(r, offset, "R-REPLAY-TOPIC", say("L3", "topic_missing", topic=r.topic_name))
        topic_ids = [topic_id]
    else:
        topic_ids = list(view.partitions)
    dirty = view.dirty
    for topic_id in topic_ids:
        parts = view.partitions[topic_id]
        for pid, p in parts.items():
            if p.eligible_leader_replicas or p.last_known_elr:
                # What merge() makes of a change that sets only the two ELR fields.
                parts[pid] = msgspec.structs.replace(
                    p, eligible_leader_replicas=(), last_known_elr=(), partition_epoch=p.partition_epoch + 1
                )
                if dirty is not None:
                    dirty.add((topic_id, pid))


def _feature_level(view: ControllerView, r: FeatureLevel, offset: int) -> None:
    if r.feature_level == 0:
        view.features.pop(r.name, None)
    else:
        view.features[r.name] = r.feature_level


def _config(view: ControllerView, r: Config, offset: int) -> None:
    key = (r.resource_type, r.resource_name)
    if r.value is None:
        configs = view.configs.get(key)
        if configs is not None:
            configs.pop(r.name, None)
            if not configs:
                del view.configs[key]
    else:
        view.configs.setdefault(key, {})[r.name] = r.value


def _register_controller(view: ControllerView, r: RegisterController, offset: int) -> None:
    view.controllers[r.controller_id] = ControllerRegistration(
        id=r.controller_id,
        incarnation_id=r.incarnation_id,
        zk_migration_ready=r.zk_migration_ready,
        end_points=r.end_points,
        features=r.features,
    )


def _producer_ids(view: ControllerView, r: ProducerIds, offset: int) -> None:
    last = view.producer_ids
    if last is not None and r.next_producer_id <= last.next_producer_id:
        raise refusal(
            r,
            offset,
            "R-REPLAY-PRODUCER-IDS",
            f"next producer id {r.next_producer_id} is not above {last.next_producer_id}",
        )
    view.producer_ids = ProducerIdsBlock(
        broker_id=r.broker_id, broker_epoch=r.broker_epoch, next_producer_id=r.next_producer_id
    )


def _begin(view: ControllerView, r: BeginTransaction, offset: int) -> None:
    if view.transaction is not None:
        raise refusal(r, offset, "R-REPLAY-TXN", f"a transaction is open since offset {view.transaction.begin_offset}")
    view._before_transaction = view.copy()
    view.transaction = Transaction(begin_offset=offset, name=r.name)


def _end(view: ControllerView, r: EndTransaction, offset: int) -> None:
    if view.transaction is None:
        raise refusal(r, offset, "R-REPLAY-TXN", "no transaction is open")
    view.transaction = None
    view._before_transaction = None


def _abort(view: ControllerView, r: AbortTransaction, offset: int) -> None:
    """Kafka reverts the controller to the state before Begin (and brokers never see it)."""
    if view.transaction is None:
        raise refusal(r, offset, "R-REPLAY-TXN", "no transaction is open")
    before = view._before_transaction
    assert before is not None
    for slot in ControllerView.__slots__:
        setattr(view, slot, getattr(before, slot))
    view.transaction = None
    view._before_transaction = None


def _zk_migration_state(view: ControllerView, r: ZkMigrationState, offset: int) -> None:
    view.zk_migration_state = r.zk_migration_state


def _opaque(view: ControllerView, r: KafkaOpaque, offset: int) -> None:
    if r.control:
        return
    from kraftlake.records.kafka.metadata import describe_unknown  # only on the way out
    from kraftlake.records.metadata_versions import NEWEST_KNOWN

    where = "" if r.source_offset is None else f" at Kafka offset {r.source_offset}"
    mv = view.metadata_version
    why = (
        f"; the log's metadata.version is {mv}, newer than kraftlake knows ({NEWEST_KNOWN})"
        if mv > NEWEST_KNOWN
        else ""
    )
    raise RecordError(
        f"{describe_unknown(r.api_key, r.kafka_version)}{where}: kraftlake cannot replay a Kafka metadata"
        f" record it does not know, and Kafka's loader refuses one it cannot read{why}",
        line=offset,
        unit="offset",
        record_type="KafkaOpaque",
    )


_APPLY: dict[type, Handler] = {
    RegisterBroker: _register_broker,
    UnregisterBroker: _unregister_broker,
    BrokerRegistrationChange: _registration_change,
    FenceBroker: _fence,
    UnfenceBroker: _unfence,
    Topic: _topic,
    RemoveTopic: _remove_topic,
    Partition: _partition,
    PartitionChange: _partition_change,
    FeatureLevel: _feature_level,
    Config: _config,
    RegisterController: _register_controller,
    ProducerIds: _producer_ids,
    BeginTransaction: _begin,
    EndTransaction: _end,
    AbortTransaction: _abort,
    ZkMigrationState: _zk_migration_state,
    ClearElr: _clear_elr,
    KafkaOpaque: _opaque,
}
"""Record class -> its handler; every other record leaves the controller view alone."""

_REDUCER = Reducer(_APPLY, ControllerView)
apply = _REDUCER.apply
replay = _REDUCER.replay
