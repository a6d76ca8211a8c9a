"""Topic creation (``ReplicationControlManager.createTopics``, new replicas in
``ClusterControlManager.defaultDir``) and AlterPartition, the leader's ISR change.

New partitions are placed on active brokers by free-disk weighted random choice with the median
cap (``statemachine.placement``), seeded from the offset the topic's records will start at, so a
replay of the log decides the same.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping

from kraftlake.records.kraft import (
    LRS_RECOVERED,
    LRS_RECOVERING,
    Config,
    Partition,
    PartitionChange,
    RemoveTopic,
    ReplicaDirectory,
    Topic,
)
from kraftlake.records.types import is_reserved, uuid_from_bytes

from .. import placement
from . import commands as c
from .configs import clear_elr_records
from .features import directories_supported, partition_record_version
from .partitions import Election, merge
from .reassignment import PartitionReassignmentReplicas, PartitionReassignmentRevert
from .replication import TOPIC_RESOURCE, builder, default_dir_provider, unclean_election_enabled
from .view import ControllerView, PartitionRegistration

MAX_TOPIC_NAME = 249


def derived_topic_id(name: str, offset: int) -> str:
    """A topic id made from the log position (Kafka draws a random one; here replay must agree)."""
    n = 0
    while True:
        tid = uuid_from_bytes(hashlib.sha256(f"topic:{name}:{offset}:{n}".encode()).digest()[:16])
        if not is_reserved(tid):
            return tid
        n += 1


def invalid_topic_name(name: str) -> str | None:
    """Why Kafka's ``Topic.validate`` refuses ``name``, or None."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    if not all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _error(code: int, message: str) -> c.Decision:
    return c.Decision(reply=c.CreateTopicReply(error_code=code, message=message))


MAX_PARTITIONS_PER_BATCH = 10_000
"""Kafka 4.0's cap on the partitions one CreateTopics request may create (KAFKA-17870)."""


def validate_manual_assignment(view: ControllerView, replicas: tuple[int, ...], rf: int | None) -> str | None:
    """Why Kafka's ``validateManualPartitionAssignment`` refuses a replica list (checked in broker
    id order), or None; ``rf`` is the replication factor of the partitions before it, if any."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    prev = None
    for b in sorted(replicas):
        if b not in view.brokers:
            return f"The manual partition assignment includes broker {b}, but no such broker is registered."
        if b == prev:
            return f"The manual partition assignment includes the broker {b} more than once."
        prev = b
    if rf is not None and len(replicas) != rf:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is"
            f" not consistent with previous partitions, which have {rf} replica(s)."
        )
    return None


def _invalid_manual_assignment(view: ControllerView, i: int, replicas: tuple[int, ...], rf: int | None) -> str | None:
    """Why partition ``i``'s manual replica list is refused (``validateManualPartitionAssignment``
    and the active-broker check of createTopic/createPartitions), or None."""
    invalid = validate_manual_assignment(view, replicas, rf)
    if invalid:
        return invalid
    if not any(view.is_active(b) for b in replicas):
        return (
            f"All brokers specified in the manual partition assignment for partition {i}"
            " are fenced or in controlled shutdown."
        )
    return None


NO_ACTIVE_REPLICA = "All brokers are currently fenced or in controlled shutdown."


def usable_brokers(view: ControllerView) -> list[tuple[int, bool]]:
    """(broker, fenced) of every broker the placer may use (``KRaftClusterDescriber.usableBrokers``):
    every registered broker as the log shows it. A controller that replays the log knows nothing
    of heartbeats, so a broker in controlled shutdown counts as unfenced, as after Kafka's
    ``ClusterControlManager.activate``."""
    return [(b, reg.fenced) for b, reg in sorted(view.brokers.items())]


def _place(
    view: ControllerView,
    config: c.ControllerConfig,
    weights_in: Mapping[int, int] | None,
    key: str,
    first: int,
    partition_ids: Iterable[int],
    rf: int,
) -> tuple[tuple[int, ...], ...] | str:
    """Replica lists for ``partition_ids`` (seeded from the operation's first offset and ``key``), or
    why not (the placer's words, without Kafka's "Unable to replicate" prefix). Kafka's
    StripedReplicaPlacer's broker set (``usable_brokers``) and checks: a positive replication
    factor, at least one unfenced broker, at least ``rf`` in all; every partition's first replica
    unfenced. Placement itself is kraftlake's free-disk weighting."""
    brokers = usable_brokers(view)
    usable = [b for b, _ in brokers]
    unfenced = [b for b, fenced in brokers if not fenced]
    if rf <= 0:
        return f"Invalid replication factor {rf}: the replication factor must be positive."
    if not unfenced:
        return "All brokers are currently fenced."
    if rf > len(usable):
        return (
            f"The target replication factor of {rf} cannot be reached because only {len(usable)} broker(s) are"
            " registered."
        )
    weights = {b: max(0, int((weights_in or {}).get(b, 0))) for b in usable}
    selection = placement.WeightedSelection(weights, max_multiple=config.max_multiple)
    if len(unfenced) == len(usable):
        return tuple(selection.pick(random.Random(placement.seed_for(first, f"{key}/{p}")), rf) for p in partition_ids)
    # As Kafka's placer, fenced brokers get replicas too, but every partition's first replica (its
    # leader) is an unfenced one.
    leaders = placement.WeightedSelection({b: weights[b] for b in unfenced}, max_multiple=config.max_multiple)
    picked = []
    for p in partition_ids:
        rng = random.Random(placement.seed_for(first, f"{key}/{p}"))
        lead = leaders.pick(rng, 1)
        picked.append(lead + selection.pick(rng, rf - 1, exclude=lead))
    return tuple(picked)


def _new_partitions(
    view: ControllerView, topic_id: str, start: int, assignments: Iterable[tuple[int, ...]]
) -> list[Partition]:
    """PartitionRecords for new partitions ``start``.. (``buildPartitionRegistration``): ISR = the
    active replicas, the first of them leads, replicas in their default directories."""
    mv = view.metadata_version
    version = partition_record_version(mv)
    default_dir = default_dir_provider(view)
    out = []
    for pid, replicas in enumerate(assignments, start):
        isr = tuple(b for b in replicas if view.is_active(b))
        assignment: tuple[ReplicaDirectory, ...] = ()
        if directories_supported(mv):
            assignment = tuple(ReplicaDirectory(broker=b, directory=default_dir(b)) for b in replicas)
        out.append(
            Partition(
                version=version,
                partition_id=pid,
                topic_id=topic_id,
                replicas=replicas,
                isr=isr,
                leader=isr[0],
                leader_epoch=0,
                partition_epoch=0,
                assignment=assignment,
                eligible_leader_replicas=None,
                last_known_elr=None,
            )
        )
    return out


def create_topic(view: ControllerView, cmd: c.CreateTopic, config: c.ControllerConfig) -> c.Decision:
    """``ReplicationControlManager.createTopics`` for one topic, in Kafka's order: the partition
    count cap, the name, an existing or colliding name, the configs, then the assignment (manual,
    or placed with the replication factor and partition count, -1 meaning the default)."""
    first = view.offset + 1
    name = cmd.name
    count = len(cmd.assignments) if cmd.assignments else cmd.partitions
    if count == -1:
        count = config.default_num_partitions
    if count > MAX_PARTITIONS_PER_BATCH:
        return _error(c.POLICY_VIOLATION, "Excessively large number of partitions per request.")
    invalid = invalid_topic_name(name)
    if invalid is not None:
        return _error(c.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {invalid}")
    if name in view.topic_ids:
        return _error(c.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if "_" in name or "." in name:
        unified = name.replace(".", "_")
        colliding = sorted(t for t in view.topic_ids if ("_" in t or "." in t) and t.replace(".", "_") == unified)
        if colliding:
            return _error(c.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {colliding[0]}")
    nulls = sorted(k for k, v in cmd.configs.items() if v is None)
    if nulls:
        return _error(c.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
    if cmd.assignments is not None:
        if not cmd.assignments:
            return _error(c.INVALID_REPLICA_ASSIGNMENT, "no partitions in the manual assignment")
        assignments = tuple(tuple(a) for a in cmd.assignments)
        rf = None
        for i, replicas in enumerate(assignments):
            invalid = _invalid_manual_assignment(view, i, replicas, rf)
            if invalid:
                return _error(c.INVALID_REPLICA_ASSIGNMENT, invalid)
            rf = len(replicas)
    else:
        if cmd.replication_factor < -1 or cmd.replication_factor == 0:
            return _error(
                c.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if cmd.partitions < -1 or cmd.partitions == 0:
            return _error(c.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        rf = config.default_replication_factor if cmd.replication_factor == -1 else cmd.replication_factor
        placed = _place(view, config, cmd.broker_weights, f"create-topic/{name}", first, range(count), rf)
        if isinstance(placed, str):
            return _error(c.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): {placed}")
        if any(not any(view.is_active(b) for b in replicas) for replicas in placed):
            # As Kafka: the placer used a broker in controlled shutdown as the unfenced one.
            return _error(
                c.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): {NO_ACTIVE_REPLICA}"
            )
        assignments = placed
    topic_id = cmd.topic_id or derived_topic_id(name, first)
    if topic_id in view.topics or is_reserved(topic_id):
        return _error(c.INVALID_REQUEST, f"topic id {topic_id} is taken or reserved")
    reply = c.CreateTopicReply(topic_id=topic_id, assignments=assignments)
    if cmd.validate_only:
        return c.Decision(reply=reply)
    records: list = [Topic(name=name, topic_id=topic_id)]
    config_records = [
        Config(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
        for k, v in sorted(cmd.configs.items())
    ]
    # Kafka's createTopic goes through incrementalAlterConfig: with ELR on, a topic created with
    # min.insync.replicas gets its ClearElr too (after the TopicRecord, so it clears nothing).
    records.extend([*config_records, *clear_elr_records(view, config_records)])
    records.extend(_new_partitions(view, topic_id, 0, assignments))
    return c.Decision(records=tuple(records), reply=reply)


def alter_partition(view: ControllerView, cmd: c.AlterPartition) -> c.Decision:
    """The leader expands or shrinks the ISR (ReplicationControlManager.alterPartition)."""

    def error(code: int, message: str) -> c.Decision:
        return c.Decision(reply=c.AlterPartitionReply(error_code=code, message=message))

    reg = view.brokers.get(cmd.broker_id)
    if reg is None or reg.epoch != cmd.broker_epoch:
        return error(c.STALE_BROKER_EPOCH, f"broker {cmd.broker_id} epoch {cmd.broker_epoch} is stale")
    if cmd.topic_id not in view.topics:
        # Requests before v2 name the topic: Kafka answers for an unknown name.
        return error(
            c.UNKNOWN_TOPIC_ID if cmd.version > 1 else c.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {cmd.topic_id}"
        )
    p = view.partition(cmd.topic_id, cmd.partition_id)
    if p is None:
        return error(c.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {cmd.partition_id}")
    # Kafka's order (validateAlterPartitionData): an epoch ahead of the controller's means this
    # controller is behind (NOT_CONTROLLER), then a stale leader epoch, then the sender, then a
    # stale partition epoch.
    if cmd.leader_epoch > p.leader_epoch:
        return error(c.NOT_CONTROLLER, f"leader epoch {cmd.leader_epoch} is ahead of {p.leader_epoch}")
    if cmd.partition_epoch > p.partition_epoch:
        return error(c.NOT_CONTROLLER, f"partition epoch {cmd.partition_epoch} is ahead of {p.partition_epoch}")
    if cmd.leader_epoch < p.leader_epoch:
        return error(c.FENCED_LEADER_EPOCH, f"leader epoch {cmd.leader_epoch}, current {p.leader_epoch}")
    if cmd.broker_id != p.leader:
        return error(c.INVALID_REQUEST, f"broker {cmd.broker_id} is not the leader ({p.leader})")
    if cmd.partition_epoch < p.partition_epoch:
        return error(c.INVALID_UPDATE_VERSION, f"partition epoch {cmd.partition_epoch}, current {p.partition_epoch}")
    new_isr = tuple(cmd.new_isr)
    if (
        not new_isr
        or len(set(new_isr)) != len(new_isr)
        or any(b not in p.replicas for b in new_isr)
        or p.leader not in new_isr
    ):
        return error(c.INVALID_REQUEST, f"invalid ISR {list(new_isr)} for replicas {list(p.replicas)}")
    lrs = cmd.leader_recovery_state
    if lrs == LRS_RECOVERING and len(new_isr) > 1:
        return error(c.INVALID_REQUEST, "a RECOVERING partition cannot have more than one ISR member")
    if p.leader_recovery_state == LRS_RECOVERED and lrs == LRS_RECOVERING:
        return error(c.INVALID_REQUEST, "leader recovery state cannot go from RECOVERED to RECOVERING")
    # Every member of the new ISR, the leader included (Kafka's ineligibleReplicasForIsr); from
    # request v3 each with the broker epoch the leader saw (-1: not checked).
    # Before v3 the request carries no epochs (Kafka's newIsrToSimpleNewIsrWithBrokerEpochs).
    epochs = (cmd.version >= 3 and cmd.new_isr_broker_epochs) or (-1,) * len(new_isr)
    if len(epochs) != len(new_isr):
        return error(c.INVALID_REQUEST, f"{len(epochs)} broker epochs for ISR {list(new_isr)}")
    ineligible = c.INELIGIBLE_REPLICA if cmd.version > 1 else c.OPERATION_NOT_ATTEMPTED
    for b, epoch in zip(new_isr, epochs):
        other = view.brokers.get(b)
        if other is None or other.fenced or other.in_controlled_shutdown:
            return error(ineligible, f"broker {b} is unregistered, fenced or shutting down")
        if epoch != -1 and epoch != other.epoch:
            return error(ineligible, f"broker {b}: broker epoch mismatch: requested={epoch} VS expected={other.epoch}")
    pcb = builder(view, p)
    if unclean_election_enabled(view, p.topic_id):
        pcb.set_election(Election.UNCLEAN)
    change = pcb.set_target_isr(new_isr).set_target_leader_recovery_state(lrs).build()
    merged = p if change is None else merge(p, change)
    # The builder may elect another leader (a completed reassignment removed the leader, or its
    # directory went offline): Kafka writes that change and answers NEW_LEADER_ELECTED
    # (FENCED_LEADER_EPOCH before v2).
    new_leader = c.NEW_LEADER_ELECTED if cmd.version > 1 else c.FENCED_LEADER_EPOCH
    code = new_leader if merged.leader != p.leader else c.NONE
    reply = c.AlterPartitionReply(
        error_code=code,
        leader=merged.leader,
        leader_epoch=merged.leader_epoch,
        partition_epoch=merged.partition_epoch,
        isr=merged.isr,
    )
    return c.Decision(records=() if change is None else (change,), reply=reply)


def reassign_partition(view: ControllerView, cmd: c.ReassignPartition) -> c.Decision:
    """``ReplicationControlManager.alterPartitionReassignment`` for one partition.

    A target (``changePartitionReassignment``): replicas become target + the ones leaving, both
    sorted (``PartitionReassignmentReplicas``), computed from the current replicas, so a new
    target replaces a running move; as Kafka, an empty adding or removing list leaves the
    running one's in place. New replicas start in their default dir. The builder completes the
    move once every remaining replica is in the ISR. With ``allow_replication_factor_change``
    False (KIP-860), a valid target whose size is not the replication factor is refused
    (``validatePartitionReplicationFactorUnchanged``). None (``cancelPartitionReassignment``): back
    to the original replicas, the ISR without the adding ones; when that empties it, the first
    original replica alone, refused unless unclean leader election is on for the topic. Every
    reply echoes the request's flag, as Kafka's response does."""
    allow_rf_change = cmd.allow_replication_factor_change

    def error(code: int, message: str) -> c.Decision:
        return c.Decision(
            reply=c.ReassignPartitionReply(
                error_code=code, message=message, allow_replication_factor_change=allow_rf_change
            )
        )

    def done(change: PartitionChange | None) -> c.Decision:
        return c.Decision(
            records=() if change is None else (change,),
            reply=c.ReassignPartitionReply(allow_replication_factor_change=allow_rf_change),
        )

    if cmd.topic_id not in view.topics:
        return error(c.UNKNOWN_TOPIC_ID, f"unknown topic {cmd.topic_id}")
    p = view.partition(cmd.topic_id, cmd.partition_id)
    if p is None:
        name = view.topics[cmd.topic_id].name
        return error(c.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{cmd.partition_id}.")
    if cmd.target_replicas is None:
        if not p.adding_replicas and not p.removing_replicas:
            return error(c.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
        revert = PartitionReassignmentRevert.of(p.replicas, p.isr, p.removing_replicas, p.adding_replicas)
        unclean = unclean_election_enabled(view, p.topic_id)
        if revert.unclean and not unclean:
            return error(
                c.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {view.topics[p.topic_id].name}:{p.partition_id}"
                " because it would require an unclean leader election.",
            )
        b = builder(view, p).set_election(Election.UNCLEAN if unclean else Election.ONLINE)
        change = b.set_target_isr(revert.isr).set_target_replicas(revert.replicas).set_target_removing(())
        return done(change.set_target_adding(()).build())
    target = tuple(cmd.target_replicas)
    invalid = validate_manual_assignment(view, target, None)
    if invalid:
        return error(c.INVALID_REPLICA_ASSIGNMENT, invalid)
    if not allow_rf_change:
        rf = _replication_factor(p)
        if rf != len(target):
            return error(c.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {rf} to {len(target)}")
    move = PartitionReassignmentReplicas.of(p.replicas, target)
    b = builder(view, p)
    if move.replicas != p.replicas:
        b.set_target_replicas(move.replicas)
    if move.removing:
        b.set_target_removing(move.removing)
    if move.adding:
        b.set_target_adding(move.adding)
    return done(b.build())


def _replication_factor(p: PartitionRegistration) -> int:
    """The partition's replication factor as ``validatePartitionReplicationFactorUnchanged``
    counts it: during a reassignment the target's (replicas and adding, without removing),
    else the replica count."""
    if p.adding_replicas or p.removing_replicas:
        return len((set(p.replicas) | set(p.adding_replicas)) - set(p.removing_replicas))
    return len(p.replicas)


def delete_topics(view: ControllerView, cmd: c.DeleteTopics) -> c.Decision:
    """``ReplicationControlManager.deleteTopics``: a RemoveTopicRecord per known topic id (replay
    drops its partitions and configs), UNKNOWN_TOPIC_ID for the others; an id named twice is
    removed once."""
    records: list = []
    errors: dict[str, int] = {}
    for topic_id in cmd.topic_ids:
        if topic_id in errors:
            continue
        if topic_id not in view.topics:
            errors[topic_id] = c.UNKNOWN_TOPIC_ID
            continue
        errors[topic_id] = c.NONE
        records.append(RemoveTopic(topic_id=topic_id))
    return c.Decision(records=tuple(records), reply=c.DeleteTopicsReply(errors=errors))


def elect_leaders(view: ControllerView, cmd: c.ElectLeaders) -> c.Decision:
    """``ReplicationControlManager.electLeaders``/``electLeader``: per partition (every one, in
    topic-name order, when none are named), ELECTION_NOT_NEEDED when the preferred replica
    already leads (preferred) or a leader exists (unclean); else the builder with that election,
    PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE when it changes nothing.
    Each change is computed from the state before the request, as Kafka's are. Electing every
    partition, the reply leaves out those whose result is ELECTION_NOT_NEEDED, as Kafka's does."""
    if cmd.election not in ("preferred", "unclean"):
        return c.Decision(reply=c.ElectLeadersReply(error_code=c.INVALID_REQUEST, message=f"election {cmd.election!r}"))
    wanted = cmd.partitions
    every = wanted is None
    if wanted is None:
        wanted = tuple(
            (name, pid) for name in sorted(view.topic_ids) for pid in sorted(view.partitions[view.topic_ids[name]])
        )
    records: list = []
    results = []
    for name, pid in wanted:
        topic_id = view.topic_ids.get(name)
        p = None if topic_id is None else view.partition(topic_id, pid)
        if p is None:
            results.append((name, pid, c.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        preferred = cmd.election == "preferred"
        if (preferred and p.replicas and p.leader == p.replicas[0]) or (not preferred and p.leader != -1):
            if not every:
                results.append((name, pid, c.ELECTION_NOT_NEEDED))
            continue
        change = builder(view, p).set_election(Election.PREFERRED if preferred else Election.UNCLEAN).build()
        if change is None:
            code = c.PREFERRED_LEADER_NOT_AVAILABLE if preferred else c.ELIGIBLE_LEADERS_NOT_AVAILABLE
            results.append((name, pid, code))
            continue
        records.append(change)
        results.append((name, pid, c.NONE))
    return c.Decision(records=tuple(records), reply=c.ElectLeadersReply(results=tuple(results)))


def create_partitions(view: ControllerView, cmd: c.CreatePartitions, config: c.ControllerConfig) -> c.Decision:
    """``ReplicationControlManager.createPartitions`` for one topic: grow it to ``count``
    partitions, placed like a new topic's with the replication factor of its partition 0, or as
    ``assignments`` says (one replica list per new partition, at least one active broker each)."""

    def error(code: int, message: str) -> c.Decision:
        return c.Decision(reply=c.Reply(error_code=code, message=message))

    topic_id = view.topic_ids.get(cmd.name)
    if topic_id is None:
        return error(c.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {cmd.name!r}")
    parts = view.partitions[topic_id]
    have = len(parts)
    if cmd.count == have:
        return error(c.INVALID_PARTITIONS, f"Topic already has {have} partition(s).")
    if cmd.count < have:
        return error(
            c.INVALID_PARTITIONS,
            f"The topic {cmd.name} currently has {have} partition(s); {cmd.count} would not be an increase.",
        )
    additional = cmd.count - have
    rf = len(parts[min(parts)].replicas)
    if cmd.assignments is not None:
        if len(cmd.assignments) != additional:
            return error(
                c.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(cmd.assignments)}"
                " assignment(s) were specified.",
            )
        assignments = tuple(tuple(a) for a in cmd.assignments)
        for i, replicas in enumerate(assignments, have):
            invalid = _invalid_manual_assignment(view, i, replicas, rf)
            if invalid:
                return error(c.INVALID_REPLICA_ASSIGNMENT, invalid)
    else:
        placed = _place(
            view, config, None, f"create-partitions/{cmd.name}", view.offset + 1, range(have, cmd.count), rf
        )
        if isinstance(placed, str):
            # The placer's own words: createPartitions adds no prefix to them.
            return error(c.INVALID_REPLICATION_FACTOR, placed)
        if any(not any(view.is_active(b) for b in replicas) for replicas in placed):
            return error(
                c.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): {NO_ACTIVE_REPLICA}"
            )
        assignments = placed
    return c.Decision(records=tuple(_new_partitions(view, topic_id, have, assignments)))


def elect_unclean_leaders(view: ControllerView) -> c.Decision:
    """``maybeElectUncleanLeaders``: each leaderless partition (in (topic id, partition) order) of
    a topic with ``unclean.leader.election.enable`` gets an unclean election, when one is
    possible; each change is computed from the state before the task."""
    records: list = []
    for topic_id, pid in sorted(view.leaderless):
        if not unclean_election_enabled(view, topic_id):
            continue
        p = view.partition(topic_id, pid)
        change = None if p is None else builder(view, p).set_election(Election.UNCLEAN).build()
        if change is not None:
            records.append(change)
    return c.Decision(records=tuple(records))
