"""A seeded S3Stream workload: AutoMQ nodes writing streams through their WALs into object
storage, decided by the real deciders (automq.version V6).

Nodes register (GetOpeningStreams), create and open streams, append to them and upload their
WAL as stream-set objects (prepare, write the object: ``ObjectWritten``, commit), compact
stream-set objects (splitting big streams out into stream objects) and stream objects, trim,
move streams between nodes with V6's fast close (the old owner keeps a historical WAL duty and
uploads it later), fail over a node (the failover barrier, a recovering node uploads its WAL, its
streams reopen elsewhere, the node comes back at a new epoch), delete and recreate streams, leak
uploads that never commit, and the controller expires and deletes objects.

``generate(config, records=n)`` yields one batch per operation, with offsets and times. Same
config, same records in every process: every choice comes from ``random.Random(config.seed)``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from kraftlake.records.base import Record
from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import StreamRanges, StreamState
from kraftlake.statemachine.simulation import Simulation, drive

from . import commands as c
from .bugs import BUGS
from .decider import decide
from .reducer import apply
from .snapshot import image_records, load
from .view import AUTOMQ_VERSION, LATEST, StreamsView

OPERATIONS = ("append", "upload", "compact", "compact-stream-objects", "trim", "reassign", "failover", "delete", "leak")


@dataclass(frozen=True)
class WorkloadConfig:
    nodes: int = 4
    streams: int = 40
    """Streams alive at any time (deleted ones are replaced)."""
    seed: int = 0
    bug: str | None = None
    """A faulty decider from ``statemachine.s3stream.bugs`` in place of the correct one."""
    automq_version: int = LATEST
    start_ms: int = 1_700_000_000_000
    step_ms: int = 200
    ttl_ms: int = 60_000
    """PREPARED objects' time to live (AutoMQ: 60 min for WAL uploads; shorter keeps histories small)."""
    retention_ms: int = 60_000
    """How long MARK_DESTROYED objects wait for physical deletion (AutoMQ: 10-20 min)."""
    split_at: int = 400
    """A stream with this many offsets in a stream-set compaction goes into a stream object of its own."""
    weights: dict[str, int] = field(
        default_factory=lambda: {
            "append": 40,
            "upload": 25,
            "compact": 6,
            "compact-stream-objects": 4,
            "trim": 6,
            "reassign": 5,
            "failover": 1,
            "delete": 2,
            "leak": 1,
        }
    )


class Cluster(Simulation):
    """The controller's view, the nodes' WALs and the log so far."""

    def __init__(self, config: WorkloadConfig) -> None:
        if config.bug is not None and config.bug not in BUGS:
            raise ValueError(f"unknown S3Stream bug {config.bug!r}: one of {', '.join(sorted(BUGS))}")
        if config.nodes < 2:
            raise ValueError("the S3Stream workload needs at least 2 nodes (streams move between them)")
        super().__init__(StreamsView(), BUGS[config.bug] if config.bug else decide, apply, config.start_ms)
        self.config = config
        self.rng = random.Random(config.seed)
        self.epochs = {n: 0 for n in range(config.nodes)}
        self.wal: dict[int, dict[int, int]] = {n: {} for n in range(config.nodes)}
        """Node -> stream -> end of the data the node has written (its WAL, not uploaded yet)."""
        self.written: dict[int, set[int]] = {n: set() for n in range(config.nodes)}
        """Node -> streams it has written to since its last upload."""
        self.stream_ids: list[int] = []
        """The streams alive, in creation order (what random choices pick from)."""

    def node_epoch(self, node: int) -> int:
        return self.epochs[node]

    def owned(self, node: int) -> list[int]:
        """The streams the node owns and has open (those its WAL writes to), by id."""
        streams = self.view.streams
        out = []
        for sid in self.wal[node]:
            s = streams.get(sid)
            if s is not None and s.state == StreamState.OPENED and s.owner() == node:
                out.append(sid)
        return sorted(out)

    def any_stream(self, opened: bool = False) -> int | None:
        """A random stream (in creation order, so the choice is deterministic)."""
        streams = self.view.streams
        if not self.stream_ids:
            return None
        sid = self.rng.choice(self.stream_ids)
        if sid not in streams:  # deleted by a command from outside the workload (tests drive it so)
            self.stream_ids.remove(sid)
            return None
        if opened and streams[sid].state != StreamState.OPENED:
            return None
        return sid

    # -- the operations --------------------------------------------------------------------------

    def bootstrap(self) -> None:
        self.emit([FeatureLevel(name=AUTOMQ_VERSION, feature_level=self.config.automq_version)])
        for n in range(self.config.nodes):
            self.register(n)
            self.run(c.GetOpeningStreams(node_id=n, node_epoch=self.epochs[n]))
        for _ in range(self.config.streams):
            self.new_stream()

    def register(self, node: int) -> None:
        """The node registers its metadata (``NodeControlManager.register``) at its epoch."""
        wal = f"0@s3://wal-bucket?region=us-east-1&node={node}"
        self.run(c.RegisterNode(node_id=node, node_epoch=self.epochs[node], wal_config=wal, tags=(("zone", "a"),)))

    def new_stream(self) -> None:
        node = self.rng.randrange(self.config.nodes)
        d = self.run(c.CreateStream(node_id=node, node_epoch=self.node_epoch(node)))
        if d.error_code:
            return
        self.stream_ids.append(d.reply.stream_id)
        self.open(d.reply.stream_id, node)

    def open(self, sid: int, node: int) -> bool:
        s = self.view.streams[sid]
        d = self.run(
            c.OpenStream(node_id=node, node_epoch=self.node_epoch(node), stream_id=sid, stream_epoch=s.epoch + 1)
        )
        if d.error_code:
            return False
        self.wal[node][sid] = d.reply.next_offset
        return True

    def append(self) -> None:
        """Producers write to a few streams: data lands in their owners' WALs (no record)."""
        for _ in range(self.rng.randint(1, 4)):
            sid = self.any_stream()
            if sid is None:
                return
            owner = self.view.streams[sid].owner()
            if owner is not None and self.view.streams[sid].state == StreamState.OPENED and sid in self.wal[owner]:
                self.wal[owner][sid] += self.rng.randint(1, 120)
                self.written[owner].add(sid)

    def prepare(self, node: int, count: int) -> list[int]:
        d = self.run(c.PrepareObjects(node_id=node, count=count, ttl_ms=self.config.ttl_ms, now_ms=self.now))
        return list(range(d.reply.first_object_id, d.reply.first_object_id + count))

    def upload(self, node: int | None = None, *, failover: bool = False, gap: bool = False) -> None:
        """A WAL upload: every stream the node owns with new data, and its historical duties."""
        view = self.view
        node = self.rng.randrange(self.config.nodes) if node is None else node
        ranges: list[tuple[int, int, int]] = []
        written, self.written[node] = self.written[node], set()
        for sid in sorted(written):
            end = self.wal[node].get(sid)
            s = view.streams.get(sid)
            if s is None or s.owner() != node or s.state != StreamState.OPENED:
                continue
            if end is not None and end > s.end_offset:
                start = s.end_offset + (self.rng.randint(1, 5) if gap and not ranges else 0)
                if start < end:
                    ranges.append((sid, start, end))
        if view.nodes.get(node) is not None:
            for sid in sorted(view.nodes[node].uncommitted):
                duty = view.active_duty(node, sid)
                if duty is not None:
                    s = view.streams[sid]
                    ranges.append((sid, max(s.start_offset, duty.start_offset), duty.end_offset))
        if not ranges:
            return
        ranges.sort()
        (oid,) = self.prepare(node, 1)
        self.emit(
            [
                ObjectWritten(
                    node_id=node,
                    object_id=oid,
                    object_size=64 * sum(b - a for _, a, b in ranges),
                    ranges=StreamRanges.of(ranges),
                )
            ]
        )
        d = self.run(
            c.CommitStreamSetObject(
                node_id=node,
                node_epoch=self.node_epoch(node),
                object_id=oid,
                order_id=oid,
                object_size=64 * sum(b - a for _, a, b in ranges),
                failover_mode=failover,
                now_ms=self.now,
                ranges=tuple(
                    c.CommitRange(stream_id=s, stream_epoch=view.streams[s].epoch, start_offset=a, end_offset=b)
                    for s, a, b in ranges
                ),
            )
        )
        if d.error_code:  # the data stays in the WAL, for the next upload
            self.written[node] |= {sid for sid, _, _ in ranges if sid in self.wal[node]}

    def compact(self) -> None:
        """Stream-set compaction of a node's oldest objects: big streams split out into stream
        objects, the rest merged into one object that keeps the oldest order id."""
        view = self.view
        node = self.rng.randrange(self.config.nodes)
        n = view.nodes.get(node)
        if n is None or len(n.stream_set_objects) < 3:
            return
        # The oldest objects, as many as half of them (AutoMQ's compaction keeps a node's count of
        # stream-set objects bounded; taking a few at a time would let it grow without end).
        ssos = sorted(n.stream_set_objects.values(), key=lambda o: (o.order_id, o.object_id))
        oldest = ssos[: max(2, min(self.rng.randint(2, 5), len(ssos)), len(ssos) // 2)]
        per_stream: dict[int, list[tuple[int, int]]] = {}
        for sso in oldest:
            for r in view.sso_ranges(node, sso):
                s = view.streams.get(r.stream_id)
                if s is not None and r.end_offset > s.start_offset:
                    per_stream.setdefault(r.stream_id, []).append((r.start_offset, r.end_offset))
        merged: list[tuple[int, int, int]] = []
        split: list[tuple[int, int, int]] = []
        for sid, spans in sorted(per_stream.items()):
            runs: list[list[int]] = []
            for a, b in sorted(spans):
                if runs and runs[-1][1] == a:
                    runs[-1][1] = b
                else:
                    runs.append([a, b])
            if len(runs) == 1 and runs[0][1] - runs[0][0] < self.config.split_at:
                merged.append((sid, runs[0][0], runs[0][1]))
            else:
                split += [(sid, a, b) for a, b in runs]
        ids = self.prepare(node, len(split) + (1 if merged else 0))
        oid = ids.pop() if merged else -1
        if merged:
            self.emit(
                [
                    ObjectWritten(
                        node_id=node,
                        object_id=oid,
                        object_size=64 * sum(b - a for _, a, b in merged),
                        ranges=StreamRanges.of(merged),
                    )
                ]
            )
        self.run(
            c.CommitStreamSetObject(
                node_id=node,
                node_epoch=self.node_epoch(node),
                object_id=oid,
                order_id=-1,
                now_ms=self.now,
                object_size=64 * sum(b - a for _, a, b in merged),
                compacted_object_ids=tuple(o.object_id for o in oldest),
                ranges=tuple(
                    c.CommitRange(stream_id=s, stream_epoch=-1, start_offset=a, end_offset=b) for s, a, b in merged
                ),
                stream_objects=tuple(
                    c.CommitStreamObjectPart(
                        object_id=i, object_size=64 * (b - a), stream_id=s, start_offset=a, end_offset=b
                    )
                    for i, (s, a, b) in zip(ids, split)
                ),
            )
        )

    def compact_stream_objects(self) -> None:
        """A stream's first run of contiguous stream objects becomes one; expired ones (below the
        start) are cleaned up first."""
        view = self.view
        sid = self.any_stream()
        if sid is None or len(view.streams[sid].objects) < 2:
            return
        s = view.streams[sid]
        node = s.owner() if s.owner() is not None else self.rng.randrange(self.config.nodes)
        expired = sorted(o.object_id for o in s.objects.values() if o.end_offset <= s.start_offset)
        if expired:
            self.run(
                c.CommitStreamObject(
                    node_id=node,
                    node_epoch=self.node_epoch(node),
                    object_id=-1,
                    stream_id=sid,
                    start_offset=-1,
                    end_offset=-1,
                    source_object_ids=tuple(expired[:1000]),
                    now_ms=self.now,
                )
            )
            return
        objs = sorted(s.objects.values(), key=lambda o: o.start_offset)
        run = [objs[0]]
        for o in objs[1:]:
            if o.start_offset != run[-1].end_offset:
                break
            run.append(o)
        if len(run) < 2:
            return
        (oid,) = self.prepare(node, 1)
        self.run(
            c.CommitStreamObject(
                node_id=node,
                node_epoch=self.node_epoch(node),
                object_id=oid,
                stream_id=sid,
                object_size=64 * (run[-1].end_offset - run[0].start_offset),
                start_offset=run[0].start_offset,
                end_offset=run[-1].end_offset,
                source_object_ids=tuple(o.object_id for o in run),
                now_ms=self.now,
            )
        )

    def trim(self) -> None:
        view = self.view
        sid = self.any_stream(opened=True)
        if sid is None:
            return
        s = view.streams[sid]
        owner = s.owner()
        if owner is None or s.end_offset <= s.start_offset:
            return
        new = self.rng.randint(s.start_offset + 1, s.end_offset + (5 if self.rng.random() < 0.1 else 0))
        self.run(
            c.TrimStream(
                node_id=owner,
                node_epoch=self.node_epoch(owner),
                stream_id=sid,
                stream_epoch=s.epoch,
                new_start_offset=new,
            )
        )

    def reassign(self, sid: int | None = None, target: int | None = None) -> None:
        """Move a stream: V6 fast close at the owner's WAL end, then another node opens it."""
        view = self.view
        if sid is None:
            sid = self.any_stream(opened=True)
            if sid is None:
                return
        s = view.streams[sid]
        owner = s.owner()
        if owner is None:
            return
        end = max(self.wal[owner].pop(sid, s.end_offset), s.end_offset)
        self.run(
            c.CloseStream(
                node_id=owner,
                node_epoch=self.node_epoch(owner),
                stream_id=sid,
                stream_epoch=s.epoch,
                end_offset=end if self.config.automq_version >= 7 else -1,
            )
        )
        others = [n for n in range(self.config.nodes) if n != owner]
        self.open(sid, self.rng.choice(others) if target is None else target)

    def failover(self) -> None:
        """A node fails: the barrier, a recovering node uploads its WAL, its streams reopen
        elsewhere, and it comes back at a new epoch. With ``stale-epoch-commit`` the failed node
        first tries one last normal upload, which only a faulty controller accepts."""
        failed = self.rng.randrange(self.config.nodes)
        epoch = self.node_epoch(failed)
        self.run(c.GetOpeningStreams(node_id=failed, node_epoch=epoch, failover_mode=True))
        if self.config.bug == "stale-epoch-commit":
            self.append()
        self.upload(failed, failover=True)
        for sid in self.owned(failed):
            s = self.view.streams[sid]
            self.run(c.CloseStream(node_id=failed, node_epoch=epoch, stream_id=sid, stream_epoch=s.epoch))
            self.wal[failed].pop(sid, None)
            self.open(sid, self.rng.choice([n for n in range(self.config.nodes) if n != failed]))
        if self.config.bug == "stale-epoch-commit":
            self.zombie_upload(failed)
        self.epochs[failed] = epoch + 1
        self.wal[failed] = {}
        self.register(failed)
        self.run(c.GetOpeningStreams(node_id=failed, node_epoch=epoch + 1))

    def zombie_upload(self, node: int) -> None:
        """The failed node, unaware, uploads data for a stream it no longer owns, at the end."""
        sid = self.any_stream(opened=True)
        if sid is None or self.view.streams[sid].owner() == node:
            return
        s = self.view.streams[sid]
        (oid,) = self.prepare(node, 1)
        rng = (sid, s.end_offset, s.end_offset + self.rng.randint(1, 50))
        self.emit([ObjectWritten(node_id=node, object_id=oid, ranges=StreamRanges.of([(sid, rng[1], rng[2])]))])
        self.run(
            c.CommitStreamSetObject(
                node_id=node,
                node_epoch=self.node_epoch(node),
                object_id=oid,
                order_id=oid,
                object_size=64,
                now_ms=self.now,
                ranges=(
                    c.CommitRange(stream_id=sid, stream_epoch=s.epoch - 1, start_offset=rng[1], end_offset=rng[2]),
                ),
            )
        )

    def delete(self) -> None:
        """A topic goes: its stream is closed, deleted, and another takes its place."""
        view = self.view
        sid = self.any_stream()
        if sid is None:
            return
        s = view.streams[sid]
        owner = s.owner()
        if owner is not None and s.state == StreamState.OPENED:
            self.upload(owner)
            s = view.streams[sid]
            end = max(self.wal[owner].pop(sid, s.end_offset), s.end_offset)
            if end > s.end_offset:
                return  # data still in the WAL: delete later
            self.run(
                c.CloseStream(node_id=owner, node_epoch=self.node_epoch(owner), stream_id=sid, stream_epoch=s.epoch)
            )
        if view.streams[sid].state == StreamState.CLOSED and not any(
            view.active_duty(n, sid) for n in sorted(view.nodes)
        ):
            if self.run(c.DeleteStream(stream_id=sid, now_ms=self.now)).error_code == c.NONE:
                self.stream_ids.remove(sid)
            self.new_stream()

    def leak(self) -> None:
        """An upload that fails after its object was prepared: the object stays PREPARED."""
        self.prepare(self.rng.randrange(self.config.nodes), self.rng.randint(1, 3))

    def tick(self) -> None:
        """The controller's periodic work: expire PREPARED objects, delete destroyed ones."""
        if self.op % 10 == 0:
            self.run(c.CheckObjectLifecycle(now_ms=self.now))
        if self.op % 50 == 0:
            self.run(c.DeleteMarkedObjects(now_ms=self.now, retention_ms=self.config.retention_ms))
            # Every node of the workload stays active: the clean-up finds no node scaled in.
            self.run(c.CleanupScaleInNodes(active_nodes=tuple(range(self.config.nodes)), now_ms=self.now))
        if self.op % 200 == 0:
            # The active controller changes: the new one loads the image from its snapshot records.
            offset = self.view.offset
            self.view = load(image_records(self.view))
            self.view.offset = offset

    def step(self) -> None:
        self.op += 1
        self.now = self.config.start_ms + self.op * self.config.step_ms
        ops = sorted(self.config.weights)
        name = self.rng.choices(ops, weights=[self.config.weights[o] for o in ops])[0]
        if name == "append":
            self.append()
        elif name == "upload":
            self.upload(gap=self.config.bug == "commit-gap" and self.rng.random() < 0.2)
        elif name == "compact":
            self.compact()
        elif name == "compact-stream-objects":
            self.compact_stream_objects()
        elif name == "trim":
            self.trim()
        elif name == "reassign":
            self.reassign()
        elif name == "failover":
            self.failover()
        elif name == "delete":
            self.delete()
        else:
            self.leak()
        self.tick()


def generate(config: WorkloadConfig, *, records: int) -> Iterator[list[Record]]:
    """Batches of records (with offsets), one per operation, until at least ``records`` were produced."""
    return drive(Cluster(config), records)
