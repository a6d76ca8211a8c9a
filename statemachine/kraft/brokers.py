"""Broker lifecycle deciders: registration (``ClusterControlManager.registerBroker``), heartbeats
(``ReplicationControlManager.processBrokerHeartbeat``), session expiry, controlled shutdown and
unregistration, after Kafka's ClusterControlManager, BrokerHeartbeatManager and
ReplicationControlManager.
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftlake.records.kraft import (
    FENCE,
    UNASSIGNED,
    UNFENCE,
    BrokerFeature,
    BrokerRegistrationChange,
    FenceBroker,
    RegisterBroker,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.records.types import is_reserved

from . import commands as c
from .directory_deciders import offline_dirs_records
from .directory_ids import sorted_dirs
from .features import (
    METADATA_VERSION,
    MV_3_3_IV2,
    MV_3_3_IV3,
    MV_4_0_IV0,
    directories_supported,
    register_broker_version,
    software_features,
)
from .replication import bulk_update, elr_enabled, elr_partitions
from .view import BrokerRegistration, ControllerView


def register(view: ControllerView, cmd: c.RegisterBroker) -> c.Decision:
    """``ClusterControlManager.registerBroker``. The new epoch is the offset the registration's
    records start at (Kafka's ``QuorumController.registerBroker`` passes the next write offset)."""
    mv = view.metadata_version
    existing = view.brokers.get(cmd.broker_id)
    alive = existing is not None and (not existing.fenced if cmd.old_session_alive is None else cmd.old_session_alive)
    if alive and existing is not None and existing.incarnation_id != cmd.incarnation_id:
        # Kafka refuses while the old incarnation's session is alive, before it looks at the
        # request's directories. Sessions are clock state, not log state: unless the command
        # says, an unfenced registration stands for a live session here.
        return c.Decision(
            reply=c.RegisterBrokerReply(
                error_code=c.DUPLICATE_BROKER_REGISTRATION,
                message="Another broker is registered with that broker id.",
            )
        )
    if cmd.is_migrating_zk_broker:
        # Kafka 4.x has no ZooKeeper migration (3.9 took ZK brokers only with the migration
        # configured, a controller setting that is not in the log).
        return c.Decision(
            reply=c.RegisterBrokerReply(
                error_code=c.BROKER_ID_NOT_REGISTERED, message="Controller does not support registering ZK brokers."
            )
        )
    dirs: tuple[str, ...] = ()
    if directories_supported(mv):
        dirs = cmd.log_dirs
        problem = None
        if not dirs:
            problem = "No directories specified in request"
        elif any(is_reserved(d) for d in dirs):
            problem = "Reserved directory ID in request"
        elif len(set(dirs)) != len(dirs):
            problem = "Duplicate directory ID in request"
        else:
            for d in dirs:
                owner = view.dir_owner.get(d)
                if owner is not None and owner != cmd.broker_id:
                    problem = f"Broker {owner} is already registered with directory {d}"
                    break
        if problem:
            return c.Decision(reply=c.RegisterBrokerReply(error_code=c.INVALID_REGISTRATION, message=problem))
    epoch = view.offset + 1
    fenced, in_controlled_shutdown = True, False
    shutdown: list = []
    if existing is not None:
        if existing.incarnation_id == cmd.incarnation_id:
            # KAFKA-16952 (3.8+): the same incarnation keeps its epoch and state.
            epoch = existing.epoch
            fenced, in_controlled_shutdown = existing.fenced, existing.in_controlled_shutdown
    features, unsupported = registration_features(view, cmd.features)
    if unsupported:
        return c.Decision(reply=c.RegisterBrokerReply(error_code=c.UNSUPPORTED_VERSION, message=unsupported))
    if existing is None or existing.incarnation_id != cmd.incarnation_id:
        clean = existing is not None and cmd.previous_broker_epoch == existing.epoch
        shutdown = shutdown_records(view, cmd.broker_id, clean=clean)
    record = RegisterBroker(
        version=register_broker_version(mv),
        broker_id=cmd.broker_id,
        incarnation_id=cmd.incarnation_id,
        broker_epoch=epoch,
        end_points=cmd.end_points,
        features=features,
        rack=cmd.rack,
        fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown if mv >= MV_3_3_IV3 else False,
        log_dirs=sorted_dirs(dirs),
    )
    return c.Decision(records=(*shutdown, record), reply=c.RegisterBrokerReply(broker_epoch=epoch))


def registration_features(
    view: ControllerView, sent: Iterable[BrokerFeature]
) -> tuple[tuple[BrokerFeature, ...], str | None]:
    """``ClusterControlManager.processRegistrationFeature`` over a registration's features: each
    range must hold the finalized level (metadata.version defaults to 1, others to 0); a broker that
    sends no metadata.version range is taken to support only level 1 (and recorded so); every
    other finalized feature it does not name must be at 0. (features to record, refusal or None)."""
    finalized = dict(view.features)
    features = list(sent)

    def refuse(f: BrokerFeature) -> str | None:
        level = finalized.get(f.name, 1 if f.name == METADATA_VERSION else 0)
        if f.min_supported_version <= level <= f.max_supported_version:
            return None
        return (
            f"Unable to register because the broker does not support finalized version {level} of {f.name}."
            f" The broker wants a version between {f.min_supported_version} and {f.max_supported_version}, inclusive."
        )

    names = {f.name for f in sent}
    if METADATA_VERSION not in names:
        features.append(BrokerFeature(name=METADATA_VERSION, min_supported_version=1, max_supported_version=1))
    for f in features:
        why = refuse(f)
        if why:
            return (), why
    for name, level in sorted(finalized.items()):
        if level != 0 and name not in names and name != METADATA_VERSION:
            why = refuse(BrokerFeature(name=name, min_supported_version=0, max_supported_version=0))
            if why:
                return (), why
    return tuple(features), None


def supported_features(mv: int) -> tuple[BrokerFeature, ...]:
    """What a broker of the release writing ``mv`` sends (``features.software_features``)."""
    return tuple(
        BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in software_features(mv)
    )


def shutdown_records(view: ControllerView, broker: int, *, clean: bool) -> list:
    """Kafka 4.x ``ReplicationControlManager.handleBrokerShutdown``, for a new incarnation: with
    ELR on and an unclean shutdown (the previous epoch is not the registration's), the broker
    leaves every ISR and ELR; otherwise it leaves the ISRs as when fenced (KAFKA-18106). Kafka
    4.x does so at every level and 3.9 never; the log shows 4.x software only from 4.0-IV0, the
    first level 3.9 cannot write, so from there here."""
    if elr_enabled(view) and not clean:
        return [
            *bulk_update(view, view.isr_index.get(broker, ()), unclean_shutdown=broker),
            *bulk_update(view, elr_partitions(view, broker), unclean_shutdown=broker),
        ]
    if view.metadata_version >= MV_4_0_IV0:
        return bulk_update(view, view.isr_index.get(broker, ()), broker_to_remove=broker)
    return []


def _fence_record(view: ControllerView, reg: BrokerRegistration) -> FenceBroker | BrokerRegistrationChange:
    if view.metadata_version < MV_3_3_IV2:
        return FenceBroker(id=reg.id, epoch=reg.epoch)
    return BrokerRegistrationChange(version=0, broker_id=reg.id, broker_epoch=reg.epoch, fenced=FENCE)


def _unfence_record(view: ControllerView, reg: BrokerRegistration) -> UnfenceBroker | BrokerRegistrationChange:
    if view.metadata_version < MV_3_3_IV2:
        return UnfenceBroker(id=reg.id, epoch=reg.epoch)
    return BrokerRegistrationChange(version=0, broker_id=reg.id, broker_epoch=reg.epoch, fenced=UNFENCE)


def fence_records(view: ControllerView, reg: BrokerRegistration) -> list:
    """-> FENCED / SHUTDOWN_NOW (``ReplicationControlManager.handleBrokerFenced``): leave every ISR,
    then the fence record."""
    records: list = bulk_update(view, view.isr_index.get(reg.id, ()), broker_to_remove=reg.id)
    records.append(_fence_record(view, reg))
    return records


def unfence_records(view: ControllerView, reg: BrokerRegistration) -> list:
    """-> UNFENCED (``handleBrokerUnfenced``): the unfence record, then elect it where nobody
    leads."""
    return [_unfence_record(view, reg), *bulk_update(view, view.leaderless, broker_to_add=reg.id)]


def controlled_shutdown_records(view: ControllerView, reg: BrokerRegistration) -> list:
    """-> CONTROLLED_SHUTDOWN (``handleBrokerInControlledShutdown``): mark it once (MV >= 3.3-IV3),
    then leave every ISR."""
    records: list = []
    if view.metadata_version >= MV_3_3_IV3 and not reg.in_controlled_shutdown:
        records.append(
            BrokerRegistrationChange(version=1, broker_id=reg.id, broker_epoch=reg.epoch, in_controlled_shutdown=1)
        )
    records.extend(bulk_update(view, view.isr_index.get(reg.id, ()), broker_to_remove=reg.id))
    return records


def leads_partitions(view: ControllerView, broker: int) -> bool:
    for topic_id, partition_id in view.isr_index.get(broker, ()):
        p = view.partition(topic_id, partition_id)
        if p is not None and p.leader == broker:
            return True
    return False


def has_unassigned_replicas(view: ControllerView, broker: int) -> bool:
    return any(p.directory(broker) == UNASSIGNED for p in view.partitions_of(broker))


FENCED, UNFENCED, CONTROLLED_SHUTDOWN, SHUTDOWN_NOW = "FENCED", "UNFENCED", "CONTROLLED_SHUTDOWN", "SHUTDOWN_NOW"


def next_state(
    view: ControllerView, reg: BrokerRegistration, cmd: c.Heartbeat, config: c.ControllerConfig
) -> tuple[str, str]:
    """``BrokerHeartbeatManager.calculateNextBrokerState``: (current, next)."""
    current = FENCED if reg.fenced else CONTROLLED_SHUTDOWN if reg.in_controlled_shutdown else UNFENCED
    if current == FENCED:
        if cmd.want_shut_down:
            return current, SHUTDOWN_NOW
        if not cmd.want_fence and cmd.current_metadata_offset >= reg.registered_at:
            if config.stay_fenced_while_unassigned and len(reg.log_dirs) >= 2 and has_unassigned_replicas(view, reg.id):
                return current, FENCED
            return current, UNFENCED
        return current, FENCED
    if current == UNFENCED:
        if cmd.want_fence:
            return current, SHUTDOWN_NOW if cmd.want_shut_down else FENCED
        if cmd.want_shut_down:
            return current, CONTROLLED_SHUTDOWN if leads_partitions(view, reg.id) else SHUTDOWN_NOW
        return current, UNFENCED
    # CONTROLLED_SHUTDOWN: stays while it still leads partitions. (Kafka also waits for the other
    # brokers to catch up with its shutdown offset: clock state, not in the log.)
    return current, CONTROLLED_SHUTDOWN if leads_partitions(view, reg.id) else SHUTDOWN_NOW


def heartbeat(view: ControllerView, cmd: c.Heartbeat, config: c.ControllerConfig) -> c.Decision:
    reg = view.brokers.get(cmd.broker_id)
    if reg is None or reg.epoch != cmd.broker_epoch:
        why = "not registered" if reg is None else f"registered with epoch {reg.epoch}"
        return c.Decision(
            reply=c.HeartbeatReply(error_code=c.STALE_BROKER_EPOCH, message=f"broker {cmd.broker_id} is {why}")
        )
    current, nxt = next_state(view, reg, cmd, config)
    records: list = []
    if current != nxt:
        if nxt in (FENCED, SHUTDOWN_NOW):
            records = fence_records(view, reg)
        elif nxt == UNFENCED:
            records = unfence_records(view, reg)
        elif nxt == CONTROLLED_SHUTDOWN:
            records = controlled_shutdown_records(view, reg)
    if directories_supported(view.metadata_version):
        # Independent of the transition, and from the same pre-heartbeat state, as
        # ``processBrokerHeartbeat`` calls ``handleDirectoriesOffline``.
        records.extend(offline_dirs_records(view, reg, cmd.broker_epoch, cmd.offline_log_dirs))
    reply = c.HeartbeatReply(
        is_caught_up=cmd.current_metadata_offset >= reg.registered_at,
        is_fenced=nxt in (FENCED, SHUTDOWN_NOW),
        should_shut_down=nxt == SHUTDOWN_NOW,
    )
    return c.Decision(records=tuple(records), reply=reply)


def expire_session(view: ControllerView, cmd: c.ExpireSession) -> c.Decision:
    """The controller fences a broker whose session expired, one per event
    (``ReplicationControlManager.maybeFenceOneStaleBroker``)."""
    reg = view.brokers.get(cmd.broker_id)
    if reg is None:
        return c.Decision(reply=c.Reply(error_code=c.BROKER_ID_NOT_REGISTERED))
    if reg.fenced:
        return c.Decision()
    return c.Decision(records=tuple(fence_records(view, reg)))


def unregister(view: ControllerView, cmd: c.UnregisterBroker) -> c.Decision:
    """``ReplicationControlManager.handleBrokerUnregistered``: leave every ISR, then every ELR
    (none with ELR off), then the UnregisterBroker record."""
    reg = view.brokers.get(cmd.broker_id)
    if reg is None:
        return c.Decision(
            reply=c.Reply(error_code=c.BROKER_ID_NOT_REGISTERED, message=f"broker {cmd.broker_id} is not registered")
        )
    records: list = bulk_update(view, view.isr_index.get(reg.id, ()), broker_to_remove=reg.id)
    records.extend(bulk_update(view, elr_partitions(view, reg.id), broker_to_remove=reg.id))
    records.append(UnregisterBroker(broker_id=reg.id, broker_epoch=reg.epoch))
    return c.Decision(records=tuple(records))
