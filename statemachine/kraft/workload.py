"""A seeded KRaft workload: a JBOD cluster that lives through directory failures, disk
replacements, controlled shutdowns, crashes and ISR recovery, decided by the real deciders.

``generate(config)`` yields one batch of records per controller operation (observations first,
then the controller's records), with offsets, exactly as a controller would append them. Same
config, same records, in every process: every choice comes from ``random.Random(config.seed)``
and the placement seeds from the log offsets. The benchmark and the simulator drive it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.kraft import Config, FeatureLevel, NoOp, Partition
from kraftlake.records.meta_properties import MetaProperties
from kraftlake.records.observations import HeartbeatOfflineDirs, LogDirFailed, UnfenceRequested
from kraftlake.records.types import uuid_from_bytes

from .. import placement
from . import commands as c
from . import replica_manager, startup
from .brokers import supported_features
from .controller import Controller, Decide
from .decider import decide
from .directory_ids import is_online
from .features import MV_3_9_IV0, MV_4_1_IV0
from .replication import BROKER_RESOURCE, ELR_FEATURE, MIN_INSYNC_REPLICAS, elr_enabled


@dataclass(frozen=True)
class WorkloadConfig:
    brokers: int = 12
    dirs_per_broker: int = 4
    topics: int = 10
    partitions: int = 120
    """Partitions in total, spread evenly over the topics."""
    replication_factor: int = 3
    seed: int = 0
    noop_every: int = 0
    """Append a NoOp (the active controller's heartbeat) after every N records; 0 = never."""
    metadata_version: int = MV_3_9_IV0
    """From 4.1-IV0 the cluster bootstraps as a new Kafka 4.1 cluster does: eligible leader
    replicas on (``eligible.leader.replicas.version`` 1) and a cluster-wide ``min.insync.replicas``
    of ``min_insync_replicas``."""
    min_insync_replicas: int = 2
    faults: tuple[str, ...] = ("dir-failure", "controlled-shutdown", "broker-crash")
    """Which faults the cluster lives through (see ``FAULTS``)."""
    bug: str | None = None
    """A faulty decider from ``statemachine.kraft.bugs`` in place of the correct one, or one of
    ``BROKER_BUGS``: brokers that misbehave."""
    fence_policy: bool = True
    """KIP-858's policy on the brokers: one with two or more directories asks to be unfenced
    only once no replica's directory mismatches (False: Kafka as shipped, unfence at once)."""
    first_broker: int = 0
    """Broker ids are first_broker .. first_broker + brokers - 1 (shards of one history differ)."""
    topic_prefix: str = "topic"
    """Topics are named ``<topic_prefix>-<i>``."""
    start_ms: int = 1_700_000_000_000
    step_ms: int = 200
    """Simulated time: records of one controller operation share a time; each operation is
    ``step_ms`` after the previous one."""


FAULTS = (
    "dir-failure",
    "controlled-shutdown",
    "broker-crash",
    "reassign",
    "alter-min-isr",
    "elect-leaders",
    "cancel-reassign",
    "create-partitions",
    "delete-topic",
)
"""Every operation the cluster can live through. The defaults (``WorkloadConfig.faults``) are the
first three; the others are opt-in (``--faults``), so that the histories of the defaults, the
committed fixtures among them, stay as they are."""

BROKER_BUGS = {
    "broker-skip-assign": "K10",
    "broker-early-unfence": "K11",
    "broker-silent-dir-failure": "K12",
}
"""Brokers' mistakes the simulator can make, and the invariant that catches each: never saying
where new replicas live; asking to be unfenced before the directories match; never reporting a
failed directory in a heartbeat."""


def _uuid(*parts: object) -> str:
    return uuid_from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:16])


class Cluster:
    """The brokers' side of the workload: incarnations, directories (online, failed), free disk."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        unknown = set(config.faults) - set(FAULTS)
        if unknown or not config.faults:
            raise ValueError(f"faults must be some of {', '.join(FAULTS)}; got {sorted(unknown) or 'none'}")
        decide_fn: Decide = decide
        self.broker_bug = config.bug if config.bug in BROKER_BUGS else None
        if config.bug is not None and self.broker_bug is None:
            from .bugs import BUGS

            if config.bug not in BUGS:
                raise ValueError(f"unknown bug {config.bug!r}; known: {', '.join([*BUGS, *BROKER_BUGS])}")
            decide_fn = BUGS[config.bug]
        self.controller = Controller(decide_fn=decide_fn, strict=config.bug is None)
        self.controller.ts_ms = config.start_ms
        self.incarnation: dict[int, int] = {}
        self.disks: dict[int, dict[str, MetaProperties | None]] = {}
        """Broker -> its log directories' paths -> what their meta.properties say (None: a new disk)."""
        self.dirs: dict[int, list[str]] = {}
        self.failed: dict[int, list[str]] = {}
        self.free: dict[str, int] = {}
        self.ids_made = 0
        self.pending: list[Record] = []
        self.topics_made = 0

    # -- plumbing --------------------------------------------------------------------------------

    def observe(self, *records: Record) -> None:
        self.pending.extend(records)

    def run(self, command: c.Command, *, advance: bool = True) -> c.Decision:
        """Append pending observations, then decide and append ``command``; the batch goes out.
        ``advance`` False: the next operation happens at the same time (brokers acting at once)."""
        self.flush()
        decision = self.controller.handle(command)
        if advance:
            self.controller.ts_ms += self.config.step_ms  # type: ignore[operator]  # set to start_ms in __init__
        return decision

    def flush(self) -> None:
        if self.pending:
            self.controller.append(self.pending)
            self.pending = []

    @property
    def view(self):
        return self.controller.view

    def epoch(self, b: int) -> int:
        return self.view.brokers[b].epoch

    def new_id(self, b: int) -> str:
        self.ids_made += 1
        return _uuid("dir", self.config.seed, b, self.ids_made)

    # -- broker life ----------------------------------------------------------------------------

    def start(self, b: int, previous_epoch: int = -1) -> None:
        """The broker process starts: it loads its directories (the start-up decider), says so
        (LogDirsLoaded), registers, puts its replicas where they belong, then asks to serve.
        ``previous_epoch``: the epoch its clean-shutdown file names (-1 after a crash)."""
        loaded = startup.load_dirs(sorted(self.disks[b]), self.disks[b], lambda: self.new_id(b), node_id=b)
        if isinstance(loaded, startup.Refused):
            raise AssertionError(f"broker {b} refused to start: {loaded.reason}")
        for path, meta in loaded.writes:
            self.disks[b][path] = meta
        for online in loaded.online:
            self.free.setdefault(online, self.rng.randrange(100, 4000) * 1_000_000_000)
        self.dirs[b] = list(loaded.online)
        self.observe(loaded.record(b))
        self.incarnation[b] = self.incarnation.get(b, -1) + 1
        d = self.run(
            c.RegisterBroker(
                broker_id=b,
                incarnation_id=_uuid("incarnation", self.config.seed, b, self.incarnation[b]),
                log_dirs=tuple(self.dirs[b]),
                rack=f"rack-{b % 3}",
                previous_broker_epoch=previous_epoch,
                features=supported_features(self.config.metadata_version),
            )
        )
        assert d.reply.error_code == 0, d.reply
        if not self.config.fence_policy or self.broker_bug == "broker-early-unfence":
            # Kafka as shipped: serve first, the directory assignments follow asynchronously.
            self.ask_to_serve(b, self.mismatched(b))
            self.manage(b)
            return
        mismatched = self.manage(b)
        if mismatched:
            # KIP-858's policy: stay fenced and try again; a controller that never records the
            # directories (a bug) gets a broker that gives up waiting.
            mismatched = self.manage(b)
        self.ask_to_serve(b, mismatched)

    def ask_to_serve(self, b: int, mismatched: int) -> None:
        self.observe(
            UnfenceRequested(
                broker_id=b,
                broker_epoch=self.epoch(b),
                current_metadata_offset=self.view.offset,
                mismatched_replicas=mismatched,
            )
        )
        self.heartbeat(b)

    def mismatched(self, b: int) -> int:
        storage = replica_manager.storage_from_metadata(self.view, b, tuple(self.dirs[b]), free_bytes=self.free)
        return replica_manager.plan(self.view, b, storage, seed=0).mismatched

    def manage(self, b: int, *, advance: bool = True) -> int:
        """The broker's replica management (``replica_manager.plan``) on disks that agree with
        the metadata: new replicas get a directory, replicas of replaced disks are re-created.
        Returns how many replicas still mismatch after the controller answered."""
        reg = self.view.brokers.get(b)
        if reg is None:
            return 0
        storage = replica_manager.storage_from_metadata(self.view, b, tuple(self.dirs[b]), free_bytes=self.free)
        seed = placement.seed_for(self.view.offset + 1, f"dirs/{b}")
        plan = replica_manager.plan(self.view, b, storage, seed=seed)
        if plan.request is None or self.broker_bug == "broker-skip-assign":
            return plan.mismatched
        self.observe(plan.request)
        self.run(c.AssignReplicasToDirs(request=plan.request), advance=advance)
        return self.mismatched(b)

    def heartbeat(self, b: int, **kw: Any) -> c.Decision:
        return self.run(
            c.Heartbeat(
                broker_id=b,
                broker_epoch=self.epoch(b),
                current_metadata_offset=self.view.offset,
                offline_log_dirs=tuple(self.failed.get(b, ())),
                **kw,
            )
        )

    def catch_up(self, b: int) -> None:
        """Leaders add ``b`` back to the ISR of every partition it follows and is missing from."""
        reg = self.view.brokers.get(b)
        if reg is None or reg.fenced or reg.in_controlled_shutdown:
            return
        for p in self.view.partitions_of(b):
            self._catch_up_one(p.topic_id, p.partition_id, b)

    def _catch_up_one(self, topic_id: str, partition_id: int, b: int) -> None:
        """The leader adds ``b`` to the ISR of one partition, if ``b`` is active, out of it and on
        an online directory."""
        p = self.view.partition(topic_id, partition_id)  # as it is now: it may have moved
        reg = self.view.brokers.get(b)
        if p is None or reg is None or p.leader in (-1, b) or b in p.isr or not self.view.is_active(b):
            return
        if not is_online(p.directory(b), reg.log_dirs):
            return
        isr = (*p.isr, b)
        self.run(
            c.AlterPartition(
                broker_id=p.leader,
                broker_epoch=self.view.brokers[p.leader].epoch,
                topic_id=topic_id,
                partition_id=partition_id,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                new_isr=isr,
                # v3 (KIP-903): the epochs the leader saw, checked by the controller.
                new_isr_broker_epochs=tuple(self.view.brokers[x].epoch for x in isr),
            )
        )

    # -- events ---------------------------------------------------------------------------------

    def dir_failure(self) -> None:
        candidates = [b for b, reg in sorted(self.view.brokers.items()) if not reg.fenced and len(reg.log_dirs) >= 2]
        if not candidates:
            # Every live broker is down to its last directory: an operator replaces the failed
            # disks of one (a restart), or dir failures alone would end the history here.
            if self.failed:
                b = self.rng.choice(sorted(self.failed))
                if not self.view.brokers[b].fenced:
                    self._restart(b, replace_disks=True)
            return
        b = self.rng.choice(candidates)
        d = self.rng.choice(self.view.brokers[b].log_dirs)
        self.failed.setdefault(b, []).append(d)
        self.observe(LogDirFailed(broker_id=b, directory=d))
        if self.broker_bug == "broker-silent-dir-failure":
            return
        self.observe(
            HeartbeatOfflineDirs(broker_id=b, broker_epoch=self.epoch(b), offline_log_dirs=tuple(self.failed[b]))
        )
        self.heartbeat(b)

    def restart(self, *, replace_disks: bool) -> None:
        """Controlled shutdown, then a new incarnation (failed disks replaced), unfence, recovery."""
        live = [b for b, reg in sorted(self.view.brokers.items()) if not reg.fenced]
        if not live:
            return
        self._restart(self.rng.choice(live), replace_disks=replace_disks)

    def _restart(self, b: int, *, replace_disks: bool) -> None:
        for _ in range(3):
            d = self.heartbeat(b, want_shut_down=True)
            assert isinstance(d.reply, c.HeartbeatReply)
            if d.reply.should_shut_down:
                break
        # A controlled shutdown leaves a clean-shutdown file naming the broker's epoch.
        self._come_back(b, replace_disks, previous_epoch=self.epoch(b))

    def crash(self) -> None:
        live = [b for b, reg in sorted(self.view.brokers.items()) if not reg.fenced]
        if len(live) <= self.config.replication_factor:
            return
        b = self.rng.choice(live)
        self.run(c.ExpireSession(broker_id=b))
        self._come_back(b, replace_disks=True)

    def _pick_partition(self):
        """A random partition and the live brokers that are not its replicas, or None."""
        view = self.view
        live = [b for b, reg in sorted(view.brokers.items()) if not reg.fenced and not reg.in_controlled_shutdown]
        topics = sorted(view.partitions)
        if not topics:
            return None
        parts = view.partitions[self.rng.choice(topics)]
        p = parts[self.rng.choice(sorted(parts))]
        return p, [b for b in live if b not in p.replicas]

    def reassign(self) -> None:
        """Move one replica of a random partition to another live broker; the new replica picks
        its dir, catches up, and the leader's ISR expansion completes the move."""
        picked = self._pick_partition()
        if picked is None:
            return
        p, spare = picked
        if not spare or p.adding_replicas or p.removing_replicas:
            return
        leaving = self.rng.choice(p.replicas)
        joining = self.rng.choice(spare)
        target = tuple(joining if b == leaving else b for b in p.replicas)
        d = self.run(c.ReassignPartition(topic_id=p.topic_id, partition_id=p.partition_id, target_replicas=target))
        if d.reply.error_code:
            return
        self.manage(joining)
        self.catch_up(joining)

    def cancel_reassign(self) -> None:
        """An operator starts moving one or two replicas of a random partition and cancels
        before the move completes (AlterPartitionReassignments with null replicas): the new
        replicas get a directory; with eligible leader replicas off, one in two times one of them
        has caught up first, so the revert takes it out of the ISR again. (With them on, Kafka's
        builder would keep that replica, no longer a replica, in the ELR when the revert leaves
        the ISR below min.insync.replicas, which K13 calls an error; the operator does not do
        that here.)"""
        picked = self._pick_partition()
        if picked is None:
            return
        p, spare = picked
        if len(spare) < 2 or p.adding_replicas or p.removing_replicas or p.leader == -1:
            return
        joining = self.rng.sample(spare, 2 if len(p.replicas) >= 2 and self.rng.random() < 0.5 else 1)
        leaving = self.rng.sample(list(p.replicas), len(joining))
        target = tuple(joining[leaving.index(b)] if b in leaving else b for b in p.replicas)
        d = self.run(c.ReassignPartition(topic_id=p.topic_id, partition_id=p.partition_id, target_replicas=target))
        if d.reply.error_code:
            return
        for b in joining:
            self.manage(b)
        if len(joining) == 2 and self.rng.random() < 0.5 and not elr_enabled(self.view):
            self._catch_up_one(p.topic_id, p.partition_id, joining[0])
        self.run(c.ReassignPartition(topic_id=p.topic_id, partition_id=p.partition_id, target_replicas=None))

    def create_partitions(self) -> None:
        """An operator grows a random topic by one or two partitions, placed by the controller;
        the brokers place the new replicas in their directories."""
        names = sorted(self.view.topic_ids)
        if not names:
            return
        name = self.rng.choice(names)
        count = len(self.view.partitions[self.view.topic_ids[name]]) + self.rng.randint(1, 2)
        d = self.run(c.CreatePartitions(name=name, count=count))
        self._place_new_replicas(d.records)

    def delete_topic(self) -> None:
        """An operator deletes a random topic (DeleteTopics) and creates a new one of the same
        size in its place, so the cluster keeps its size."""
        names = sorted(self.view.topic_ids)
        if len(names) < 2:
            return
        topic_id = self.view.topic_ids[self.rng.choice(names)]
        size = len(self.view.partitions[topic_id])
        self.run(c.DeleteTopics(topic_ids=(topic_id,)))
        self.create_topic(size)

    def create_topic(self, partitions: int, weights: dict[int, int] | None = None) -> c.Decision:
        cfg = self.config
        name = f"{cfg.topic_prefix}-{self.topics_made}"
        self.topics_made += 1
        d = self.run(
            c.CreateTopic(
                name=name, partitions=partitions, replication_factor=cfg.replication_factor, broker_weights=weights
            )
        )
        self._place_new_replicas(d.records)
        return d

    def _place_new_replicas(self, records: Iterable[Record]) -> None:
        """The brokers learn of new partitions together and place their replicas at once."""
        hosts = sorted({b for r in records if isinstance(r, Partition) for b in r.replicas})
        for b in hosts:
            self.manage(b, advance=False)

    def elect_leaders(self) -> None:
        """An operator asks for preferred leaders everywhere, or, one time in four, for unclean
        elections of the leaderless partitions (ElectLeaders)."""
        election = "unclean" if self.rng.random() < 0.25 else "preferred"
        self.run(c.ElectLeaders(election=election))

    def alter_min_isr(self) -> None:
        """An operator sets ``min.insync.replicas`` of a topic, or of the cluster one time in
        four (with ELR on, the controller clears the ELRs it governs)."""
        topics = sorted(self.view.topic_ids)
        value = str(self.rng.randint(1, self.config.replication_factor))
        if not topics or self.rng.random() < 0.25:
            self.run(c.AlterConfig(resource_type=4, resource_name="", name="min.insync.replicas", value=value))
        else:
            name = self.rng.choice(topics)
            self.run(c.AlterConfig(resource_type=2, resource_name=name, name="min.insync.replicas", value=value))

    def _come_back(self, b: int, replace_disks: bool, previous_epoch: int = -1) -> None:
        failed = self.failed.pop(b, [])
        if replace_disks:  # the new disks are empty: the start-up gives them new ids
            for path, meta in self.disks[b].items():
                if meta is not None and meta.directory_id in failed:
                    self.disks[b][path] = None
        self.start(b, previous_epoch)
        self.catch_up(b)

    # -- the whole life -------------------------------------------------------------------------

    def bootstrap(self) -> None:
        cfg = self.config
        self.controller.append([FeatureLevel(name="metadata.version", feature_level=cfg.metadata_version)])
        if cfg.metadata_version >= MV_4_1_IV0:
            self.controller.append(
                [
                    FeatureLevel(name=ELR_FEATURE, feature_level=1),
                    Config(
                        resource_type=BROKER_RESOURCE,
                        resource_name="",
                        name=MIN_INSYNC_REPLICAS,
                        value=str(cfg.min_insync_replicas),
                    ),
                ]
            )
        brokers = range(cfg.first_broker, cfg.first_broker + cfg.brokers)
        for b in brokers:
            self.disks[b] = dict.fromkeys((f"/b{b}/d{i}" for i in range(cfg.dirs_per_broker)), None)
            self.start(b)
        weights = {b: sum(self.free[d] for d in self.dirs[b]) // 1_000_000 for b in brokers}
        per_topic = max(1, cfg.partitions // cfg.topics)
        for _ in range(cfg.topics):
            d = self.create_topic(per_topic, weights)
            assert d.reply.error_code == 0, d.reply

    def step(self) -> None:
        weights = {
            "dir-failure": 5,
            "controlled-shutdown": 3,
            "broker-crash": 2,
            "reassign": 2,
            "alter-min-isr": 1,
            "elect-leaders": 1,
            "cancel-reassign": 1,
            "create-partitions": 1,
            "delete-topic": 1,
        }
        faults = [f for f in FAULTS if f in self.config.faults]
        roll = self.rng.random() * sum(weights[f] for f in faults)
        for fault in faults:
            roll -= weights[fault]
            if roll < 0:
                break
        if fault == "dir-failure":
            self.dir_failure()
        elif fault == "reassign":
            self.reassign()
        elif fault == "alter-min-isr":
            self.alter_min_isr()
        elif fault == "elect-leaders":
            self.elect_leaders()
        elif fault == "cancel-reassign":
            self.cancel_reassign()
        elif fault == "create-partitions":
            self.create_partitions()
        elif fault == "delete-topic":
            self.delete_topic()
        elif fault == "controlled-shutdown":
            self.restart(replace_disks=True)
        else:
            self.crash()


def generate(config: WorkloadConfig, *, records: int) -> Iterator[list[Record]]:
    """Batches of records (with offsets) until at least ``records`` records were produced."""
    cluster = Cluster(config)
    ctl = cluster.controller
    produced = 0

    def drain() -> list[Record]:
        nonlocal produced
        cluster.flush()
        out, ctl.records = ctl.records, []
        produced += len(out)
        return out

    cluster.bootstrap()
    yield drain()
    idle = 0
    while produced < records:
        cluster.step()
        idle = 0 if ctl.records else idle + 1
        if idle > 10_000:
            raise ValueError(
                f"the cluster stopped changing after {produced} records (faults {list(config.faults)}):"
                " add faults that bring brokers back (controlled-shutdown, broker-crash)"
            )
        if config.noop_every:
            # The active controller's NoOp timer, interleaved after the fact.
            ctl.append([NoOp() for _ in range(max(1, len(ctl.records) // config.noop_every))])
        batch = drain()
        if batch:
            yield batch


def shard_config(config: WorkloadConfig, shard: int, shards: int) -> WorkloadConfig:
    """Shard ``shard`` of ``shards`` of a history too long for one process: its own part of the
    cluster (``config.brokers // shards`` brokers with ids of their own, ``partitions // shards``
    partitions on topics of their own) and its own seed, drawn from the history's."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard must be in 0..{shards - 1}, not {shard}")
    brokers = max(config.replication_factor, config.brokers // shards)
    seed = int.from_bytes(hashlib.sha256(f"shard:{config.seed}:{shard}:{shards}".encode()).digest()[:8], "big")
    return dataclasses.replace(
        config,
        brokers=brokers,
        first_broker=config.first_broker + shard * brokers,
        partitions=max(1, config.partitions // shards),
        topics=max(1, config.topics // shards),
        topic_prefix=f"{config.topic_prefix}-s{shard}",
        seed=seed,
    )


def sharded(shards: Iterator[list[Record]], *, start_ms: int, step_ms: int) -> Iterator[list[Record]]:
    """One history from shards generated apart (each from offset 0, in ``shard_config``), laid
    end to end: offsets follow on, and times are redrawn so that they never go back (each
    shard's operations keep their order and their shared times)."""
    offset, op, last_ts = 0, -1, None
    replace = msgspec.structs.replace
    for batch in shards:
        out = []
        for r in batch:
            if r.ts_ms != last_ts or r.offset == 0:
                op += 1
                last_ts = r.ts_ms
            out.append(replace(r, offset=offset, ts_ms=start_ms + op * step_ms))
            offset += 1
        yield out
