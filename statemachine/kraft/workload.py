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
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.kraft import FeatureLevel, NoOp
from kraftlake.records.observations import (
    AssignReplicasToDirsRequest,
    DirectoryReplicas,
    HeartbeatOfflineDirs,
    LogDirFailed,
    TopicPartitions,
)
from kraftlake.records.types import uuid_from_bytes

from .. import placement
from . import commands as c
from .controller import Controller
from .decider import decide
from .dirs import choose_dirs
from .directories import is_online
from .features import MV_3_9_IV0


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
    faults: tuple[str, ...] = ("dir-failure", "controlled-shutdown", "broker-crash")
    """Which faults the cluster lives through (see ``FAULTS``)."""
    bug: str | None = None
    """A faulty decider from ``statemachine.kraft.bugs`` in place of the correct one."""
    first_broker: int = 0
    """Broker ids are first_broker .. first_broker + brokers - 1 (shards of one history differ)."""
    topic_prefix: str = "topic"
    """Topics are named ``<topic_prefix>-<i>``."""
    start_ms: int = 1_700_000_000_000
    step_ms: int = 200
    """Simulated time: records of one controller operation share a time; each operation is
    ``step_ms`` after the previous one."""


FAULTS = ("dir-failure", "controlled-shutdown", "broker-crash", "reassign")


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
        decide_fn = decide
        if config.bug is not None:
            from .bugs import BUGS

            if config.bug not in BUGS:
                raise ValueError(f"unknown bug {config.bug!r}; known: {', '.join(BUGS)}")
            decide_fn = BUGS[config.bug]
        self.controller = Controller(decide_fn=decide_fn, strict=config.bug is None)
        self.controller.ts_ms = config.start_ms
        self.incarnation: dict[int, int] = {}
        self.dirs: dict[int, list[str]] = {}
        self.failed: dict[int, list[str]] = {}
        self.free: dict[str, int] = {}
        self.pending: list[Record] = []

    # -- plumbing --------------------------------------------------------------------------------

    def observe(self, *records: Record) -> None:
        self.pending.extend(records)

    def run(self, command: c.Command) -> c.Decision:
        """Append pending observations, then decide and append ``command``; the batch goes out."""
        self.flush()
        decision = self.controller.handle(command)
        self.controller.ts_ms += self.config.step_ms  # type: ignore[operator]
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

    def new_dir(self, b: int) -> str:
        d = _uuid("dir", self.config.seed, b, len(self.free))
        self.free[d] = self.rng.randrange(100, 4000) * 1_000_000_000
        return d

    # -- broker life ----------------------------------------------------------------------------

    def register(self, b: int) -> None:
        self.incarnation[b] = self.incarnation.get(b, -1) + 1
        d = self.run(
            c.RegisterBroker(
                broker_id=b,
                incarnation_id=_uuid("incarnation", self.config.seed, b, self.incarnation[b]),
                log_dirs=tuple(self.dirs[b]),
                rack=f"rack-{b % 3}",
            )
        )
        assert d.reply.error_code == 0, d.reply
        self.heartbeat(b)

    def heartbeat(self, b: int, **kw) -> c.Decision:
        return self.run(
            c.Heartbeat(
                broker_id=b,
                broker_epoch=self.epoch(b),
                current_metadata_offset=self.view.offset,
                offline_log_dirs=tuple(self.failed.get(b, ())),
                **kw,
            )
        )

    def assign_unassigned(self, b: int) -> None:
        """The broker picks a directory for each UNASSIGNED replica (free-disk weighted)."""
        seed = placement.seed_for(self.view.offset + 1, f"dirs/{b}")
        request = choose_dirs(self.view, b, self.free, seed=seed)
        if request is not None:
            self.observe(request)
            self.run(c.AssignReplicasToDirs(request=request))

    def relocate_offline(self, b: int) -> None:
        """After a disk replacement, the broker re-creates replicas of dead dirs on a live one."""
        reg = self.view.brokers[b]
        moved: dict[str, list[int]] = {}
        for p in self.view.partitions_of(b):
            if not is_online(p.directory(b), reg.log_dirs):
                moved.setdefault(p.topic_id, []).append(p.partition_id)
        if not moved:
            return
        target = self.rng.choice(reg.log_dirs)
        request = AssignReplicasToDirsRequest(
            broker_id=b,
            broker_epoch=reg.epoch,
            directories=(
                DirectoryReplicas(
                    id=target,
                    topics=tuple(TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in sorted(moved.items())),
                ),
            ),
        )
        self.observe(request)
        self.run(c.AssignReplicasToDirs(request=request))

    def catch_up(self, b: int) -> None:
        """Leaders add ``b`` back to the ISR of every partition it follows and is missing from."""
        reg = self.view.brokers.get(b)
        if reg is None or reg.fenced or reg.in_controlled_shutdown:
            return
        for p in self.view.partitions_of(b):
            p = self.view.partition(p.topic_id, p.partition_id)  # may have moved in this loop
            if b not in p.isr and p.leader not in (-1, b):
                if not is_online(p.directory(b), reg.log_dirs):
                    continue
                leader = self.view.brokers[p.leader]
                self.run(
                    c.AlterPartition(
                        broker_id=p.leader, broker_epoch=leader.epoch, topic_id=p.topic_id,
                        partition_id=p.partition_id, leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch, new_isr=(*p.isr, b),
                    )
                )  # fmt: skip

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
        self.observe(HeartbeatOfflineDirs(broker_id=b, broker_epoch=self.epoch(b), offline_log_dirs=tuple(self.failed[b])))
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
            if d.reply.should_shut_down:
                break
        self._come_back(b, replace_disks)

    def crash(self) -> None:
        live = [b for b, reg in sorted(self.view.brokers.items()) if not reg.fenced]
        if len(live) <= self.config.replication_factor:
            return
        b = self.rng.choice(live)
        self.run(c.ExpireSession(broker_id=b))
        self._come_back(b, replace_disks=True)

    def reassign(self) -> None:
        """Move one replica of a random partition to another live broker; the new replica picks
        its dir, catches up, and the leader's ISR expansion completes the move."""
        view = self.view
        live = [b for b, reg in sorted(view.brokers.items()) if not reg.fenced and not reg.in_controlled_shutdown]
        topics = sorted(view.partitions)
        if not topics:
            return
        parts = view.partitions[self.rng.choice(topics)]
        p = parts[self.rng.choice(sorted(parts))]
        spare = [b for b in live if b not in p.replicas]
        if not spare or p.adding_replicas or p.removing_replicas:
            return
        leaving = self.rng.choice(p.replicas)
        joining = self.rng.choice(spare)
        target = tuple(joining if b == leaving else b for b in p.replicas)
        d = self.run(c.ReassignPartition(topic_id=p.topic_id, partition_id=p.partition_id, target_replicas=target))
        if d.reply.error_code:
            return
        self.assign_unassigned(joining)
        self.catch_up(joining)

    def _come_back(self, b: int, replace_disks: bool) -> None:
        failed = self.failed.pop(b, [])
        if replace_disks:
            self.dirs[b] = [d for d in self.dirs[b] if d not in failed] + [self.new_dir(b) for _ in failed]
        self.register(b)
        self.relocate_offline(b)
        self.assign_unassigned(b)
        self.catch_up(b)

    # -- the whole life -------------------------------------------------------------------------

    def bootstrap(self) -> None:
        cfg = self.config
        self.controller.append([FeatureLevel(name="metadata.version", feature_level=cfg.metadata_version)])
        brokers = range(cfg.first_broker, cfg.first_broker + cfg.brokers)
        for b in brokers:
            self.dirs[b] = [self.new_dir(b) for _ in range(cfg.dirs_per_broker)]
            self.register(b)
        weights = {b: sum(self.free[d] for d in self.dirs[b]) // 1_000_000 for b in brokers}
        per_topic = max(1, cfg.partitions // cfg.topics)
        for t in range(cfg.topics):
            d = self.run(
                c.CreateTopic(name=f"{cfg.topic_prefix}-{t}", partitions=per_topic, replication_factor=cfg.replication_factor, broker_weights=weights)
            )
            assert d.reply.error_code == 0, d.reply
        for b in brokers:
            self.assign_unassigned(b)

    def step(self) -> None:
        weights = {"dir-failure": 5, "controlled-shutdown": 3, "broker-crash": 2, "reassign": 2}
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
        config, brokers=brokers, first_broker=config.first_broker + shard * brokers,
        partitions=max(1, config.partitions // shards), topics=max(1, config.topics // shards),
        topic_prefix=f"{config.topic_prefix}-s{shard}", seed=seed,
    )  # fmt: skip


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
