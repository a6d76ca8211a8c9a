"""The broker's half of KIP-858's replica management: given what the metadata says broker b hosts
(the controller view) and what b really has on its disks, decide what b does.

Pure, as the controller's deciders: the caller passes b's local state (``LocalStorage``: which
directories this process has online and offline, where each local log lives, the future replicas
of moves in progress, the moves an operator asked for) and a seed from the log for placement. The
answer, a ``ReplicaPlan``, lists the actions in the order b takes them and the one
AssignReplicasToDirsRequest that tells the controller where replicas really are. Cases
(S-REPL-n), for each partition b is a replica of:

- S-REPL-1 assigned to an online directory that holds its log: nothing to do.
- S-REPL-2 its log lives in another online directory than the one assigned (moved while the
  broker was down, or MIGRATING/LOST/UNASSIGNED in metadata): report the real one (the broker is
  the authority on placement).
- S-REPL-3 UNASSIGNED (or assigned to a directory no longer configured, taken out of the
  configuration) and no local log: create it in a directory chosen by the shared weighted
  placement (free bytes, median cap) and report it. While some directory is offline a replica
  that is not UNASSIGNED is not re-created: it may well live on the dead disk.
- S-REPL-4 assigned to an online directory with no log there yet (a new replica placed on a
  single-directory broker, a reassignment): create it there.
- S-REPL-5 its log lives on an offline directory while the metadata says otherwise (UNASSIGNED,
  MIGRATING, another directory): report it in the offline directory, first, so that the
  controller moves leadership away (the KIP's fallback: Kafka's ``handleDirectoriesOffline`` leaves
  such replicas alone, since ``directoriesToPartitions`` never indexes reserved ids).
- S-REPL-6 assigned to a directory that is offline here (or LOST): nothing, the replica is
  offline until the disk comes back or the operator acts.
- S-REPL-7 an operator's move (AlterReplicaLogDirs) to another online directory: start a future
  replica there; once it has caught up, report the target; once the metadata names the target,
  promote the future replica and drop the old log.
- S-REPL-8 a local log of a partition b no longer hosts (or whose topic is gone): delete it.
Before directories are supported (metadata.version < 3.7-IV2) nothing is reported.

``mismatched`` is Kafka's NumMismatchingReplicaToLogDirAssignments: replicas whose metadata
directory is not where the broker has (or is about to create) them. KIP-858's policy: a broker
with two or more directories asks to stay fenced while it is above zero (``stay_fenced``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.kraft import LOST, MIGRATING, UNASSIGNED
from kraftlake.records.observations import AssignReplicasToDirsRequest, DirectoryReplicas, TopicPartitions

from .. import placement
from .directory_ids import uuid_sort_key
from .features import directories_supported
from .view import ControllerView, PartitionKey


class LocalStorage(msgspec.Struct, frozen=True, kw_only=True):
    """What broker b's process has on disk (not in the metadata)."""

    online: tuple[str, ...]
    """Directory ids this process serves."""
    offline: tuple[str, ...] = ()
    """Directory ids it knows but cannot read (failed since start, or offline at start-up)."""
    logs: Mapping[PartitionKey, str] = msgspec.field(default_factory=dict)
    """Where each local log lives (logs found on directories that since failed included)."""
    futures: Mapping[PartitionKey, str] = msgspec.field(default_factory=dict)
    """Future replicas of moves in progress: partition -> target directory."""
    caught_up: frozenset[PartitionKey] = frozenset()
    """Future replicas that have caught up with their current replica."""
    moves: Mapping[PartitionKey, str] = msgspec.field(default_factory=dict)
    """Moves an operator asked for (AlterReplicaLogDirs) and that have not started."""
    free_bytes: Mapping[str, int] = msgspec.field(default_factory=dict)


class Action(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    """create, report, report-offline, start-move, promote, delete."""
    topic_id: str
    partition_id: int
    directory: str
    rule: str
    why: str


class ReplicaPlan(msgspec.Struct, frozen=True, kw_only=True):
    broker_id: int
    actions: tuple[Action, ...]
    """In the order the broker takes them: offline reports first, then partition order."""
    request: AssignReplicasToDirsRequest | None
    """Every report (report, report-offline) in one request; None when there is none."""
    waiting: tuple[Action, ...]
    """Replicas left alone on purpose (S-REPL-6, S-REPL-3's offline guard), with the reason."""
    mismatched: int
    stay_fenced: bool
    """KIP-858's policy: two or more directories and ``mismatched`` > 0."""


def _act(kind: str, key: PartitionKey, directory: str, rule: str, why: str) -> Action:
    return Action(kind=kind, topic_id=key[0], partition_id=key[1], directory=directory, rule=rule, why=why)


def plan(view: ControllerView, broker: int, local: LocalStorage, *, seed: int, max_multiple: int = 3) -> ReplicaPlan:
    """What ``broker`` does about its replicas now (see the module's rules)."""
    online, offline = set(local.online), set(local.offline)
    supported = directories_supported(view.metadata_version)
    reg = view.brokers.get(broker)
    epoch = reg.epoch if reg is not None else -1
    hosted = {p.key: p for p in view.partitions_of(broker)}
    first: list[Action] = []
    actions: list[Action] = []
    waiting: list[Action] = []
    to_place: list[PartitionKey] = []
    mismatched = 0
    for key in sorted(hosted):
        assigned = hosted[key].directory(broker)
        where = local.logs.get(key)
        if where is not None and where in offline:
            if supported and assigned != where:
                mismatched += 1
                first.append(
                    _act(
                        "report-offline",
                        key,
                        where,
                        "S-REPL-5",
                        f"its log is on offline directory {where}; metadata says {assigned}",
                    )
                )
            else:
                waiting.append(_act("wait", key, where, "S-REPL-6", f"its directory {where} is offline"))
            continue
        if where is not None:  # its log is on an online directory
            target = local.futures.get(key)
            if target is not None and assigned == target:
                actions.append(
                    _act(
                        "promote",
                        key,
                        target,
                        "S-REPL-7",
                        f"metadata names {target}: the future replica takes over from {where}",
                    )
                )
            elif target is not None and key in local.caught_up:
                mismatched += 1
                actions.append(_act("report", key, target, "S-REPL-7", f"the future replica in {target} caught up"))
            elif supported and assigned != where:
                mismatched += 1
                actions.append(
                    _act("report", key, where, "S-REPL-2", f"its log is in {where}; metadata says {assigned}")
                )
            elif target is None and key in local.moves and local.moves[key] != where and local.moves[key] in online:
                actions.append(_act("start-move", key, local.moves[key], "S-REPL-7", f"asked to move from {where}"))
            continue
        # No local log.
        if assigned in online:
            actions.append(_act("create", key, assigned, "S-REPL-4", "assigned here; no log yet"))
        elif assigned in offline or assigned == LOST:
            waiting.append(
                _act(
                    "wait",
                    key,
                    assigned,
                    "S-REPL-6",
                    f"assigned to {'LOST' if assigned == LOST else 'offline directory ' + assigned}",
                )
            )
        elif not supported:
            if assigned == MIGRATING and local.online:
                actions.append(
                    _act("create", key, MIGRATING, "S-REPL-4", "no directories in metadata yet: the log manager picks")
                )
        elif assigned == UNASSIGNED or not offline:
            to_place.append(key)
        else:
            waiting.append(
                _act(
                    "wait", key, assigned, "S-REPL-3", "not re-created while a directory is offline: it may live there"
                )
            )
    if to_place:
        weights = {d: max(0, int(local.free_bytes.get(d, 0))) for d in sorted(online, key=uuid_sort_key)}
        if sum(weights.values()) == 0:
            weights = dict.fromkeys(weights, 1)
        if weights:
            picks = placement.WeightedSelection(weights, max_multiple=max_multiple).draws(
                random.Random(seed), len(to_place)
            )
            for key, d in zip(to_place, picks):
                mismatched += 1
                was = hosted[key].directory(broker)
                why = {UNASSIGNED: "UNASSIGNED", MIGRATING: "MIGRATING and no local log"}.get(
                    was, f"its directory {was} is not configured any more"
                )
                actions.append(_act("create", key, d, "S-REPL-3", why))
                actions.append(_act("report", key, d, "S-REPL-3", f"created in {d}"))
        else:
            waiting += [
                _act("wait", k, hosted[k].directory(broker), "S-REPL-3", "no online directory") for k in to_place
            ]
    for key in sorted(local.logs):
        if key not in hosted and local.logs[key] in online:
            actions.append(_act("delete", key, local.logs[key], "S-REPL-8", "no longer a replica here"))
    ordered = tuple(first + actions)
    reports = [a for a in ordered if a.kind in ("report", "report-offline")]
    request = None
    if reports and reg is not None:
        by_dir: dict[str, dict[str, list[int]]] = {}
        for a in reports:
            by_dir.setdefault(a.directory, {}).setdefault(a.topic_id, []).append(a.partition_id)
        # Reports about offline directories go first (the KIP: they decide leadership).
        order = sorted(by_dir, key=lambda d: (d not in offline, uuid_sort_key(d)))
        request = AssignReplicasToDirsRequest(
            broker_id=broker,
            broker_epoch=epoch,
            directories=tuple(
                DirectoryReplicas(
                    id=d,
                    topics=tuple(
                        TopicPartitions(topic_id=t, partitions=tuple(sorted(ps))) for t, ps in sorted(by_dir[d].items())
                    ),
                )
                for d in order
            ),
        )
    dirs = len(online) + len(offline)
    return ReplicaPlan(
        broker_id=broker,
        actions=ordered,
        request=request,
        waiting=tuple(waiting),
        mismatched=mismatched,
        stay_fenced=dirs >= 2 and mismatched > 0,
    )


def disks_from_observations(
    view: ControllerView, broker: int, observations: Iterable[Record]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(online, offline) directories of ``broker``'s process, from its observations in log order:
    the last LogDirsLoaded (a start), then the failures it saw or reported since. Without any
    start on record, the registration's directories (online) and those the controller took
    away (offline)."""
    from kraftlake.records.observations import HeartbeatOfflineDirs, LogDirFailed, LogDirsLoaded

    reg = view.brokers.get(broker)
    online = list(reg.log_dirs) if reg is not None else []
    offline = list(reg.removed_dirs) if reg is not None else []
    for r in observations:
        if getattr(r, "broker_id", None) != broker:
            continue
        if isinstance(r, LogDirsLoaded):
            online, offline = list(r.online_dirs), list(r.offline_dirs)
            continue
        failed = (
            (r.directory,)
            if isinstance(r, LogDirFailed)
            else r.offline_log_dirs
            if isinstance(r, HeartbeatOfflineDirs)
            else ()
        )
        for d in failed:
            if d in online:
                online.remove(d)
            if d not in offline:
                offline.append(d)
    return tuple(sorted(online, key=uuid_sort_key)), tuple(sorted(offline, key=uuid_sort_key))


def storage_from_metadata(
    view: ControllerView,
    broker: int,
    online: tuple[str, ...],
    offline: tuple[str, ...] = (),
    free_bytes: Mapping[str, int] | None = None,
) -> LocalStorage:
    """A broker whose disks agree with the metadata: every replica assigned to one of its
    directories (online or offline) has its log there; UNASSIGNED ones have none yet. What the
    simulator's brokers have, and what ``kraftlake broker`` assumes when it knows no better."""
    known = set(online) | set(offline)
    logs = {p.key: p.directory(broker) for p in view.partitions_of(broker) if p.directory(broker) in known}
    return LocalStorage(online=online, offline=offline, logs=logs, free_bytes=dict(free_bytes or {}))
