"""The audit engine: one streaming pass over a log that replays it and checks the invariant
catalogue after every record, reporting violations as intervals.

A violation begins at the offset where an entity went wrong and ends at the last offset where it
still was (``last_offset`` None = still open at the end); ``evidence`` holds the records that
caused and fixed it. Graced invariants only count once the wrong state has lasted longer than
the grace, in records or in milliseconds of ``ts_ms``; a state fixed within the grace is not
reported. A record the reducer refuses (Kafka would have) is an instant violation and is skipped.
Memory is bounded by the size of the state, not the length of the history.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import msgspec

from kraftlake.records.base import Record, gc_paused
from kraftlake.records.errors import ReplayError
from kraftlake.records.kraft import (
    UNASSIGNED,
    BeginTransaction,
    BrokerRegistrationChange,
    FeatureLevel,
    FenceBroker,
    Partition,
    PartitionChange,
    RegisterBroker,
    RemoveTopic,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.records.log import LogSnapshot
from kraftlake.records.observations import (
    AssignReplicasToDirsRequest,
    HeartbeatOfflineDirs,
    LogDirFailed,
    UnfenceRequested,
)
from kraftlake.statemachine.kraft import invariants as kinv
from kraftlake.statemachine.kraft.directory_ids import RESERVED_IDS
from kraftlake.statemachine.kraft.reducer import apply
from kraftlake.statemachine.kraft.view import ControllerView, move_key
from kraftlake.statemachine.reducer import View
from kraftlake.statemachine.s3stream.view import AUTOMQ_VERSION, StreamsView

from .bookkeeper_audit import BookiesAudit
from .invariants import BY_ID, CATALOGUE, ERROR, REPLAY_RULE_TO_INVARIANT, SEVERITIES
from .s3stream_audit import StreamsAudit, is_streams_record
from .transactions import Transactions


@dataclass(frozen=True)
class AuditConfig:
    grace_records: int = 1000
    """A graced wrong state counts once it has lasted more than this many records (a dir
    failure's whole batch of partition changes fits)..."""
    grace_ms: int = 5_000
    """...or more than this many ms of ts_ms (a controller reacts within a heartbeat, 2 s)."""
    fail_on: str = ERROR
    prepared_check_ms: int = 10_000
    """S11: how long after its deadline a PREPARED object may still be PREPARED (AutoMQ's
    controller checks every second and its timers fire at the deadline: ten checks' slack)."""


class Violation(msgspec.Struct, kw_only=True):
    invariant: str
    severity: str
    entity: str
    first_offset: int
    last_offset: int | None
    message: str
    evidence: list[int]


class InvariantResult(msgspec.Struct, kw_only=True):
    id: str
    severity: str
    definition: str
    checked: int
    violations: int


class AuditReport(msgspec.Struct, kw_only=True):
    verdict: str
    records: int
    first_offset: int | None
    last_offset: int | None
    state_hash: str
    fail_on: str
    grace_records: int
    grace_ms: int
    invariants: list[InvariantResult]
    violations: list[Violation]
    streams_state_hash: str | None = None
    """The S3Stream view's hash, when the log has S3Stream records."""
    bookies_state_hash: str | None = None
    """The BookKeeper view's hash, when the log has BookKeeper records."""


class _Wrong:
    __slots__ = ("first_offset", "first_ts", "message", "evidence", "confirmed", "fixed")

    def __init__(self, offset: int, ts: int | None, message: str) -> None:
        self.first_offset, self.first_ts, self.message = offset, ts, message
        self.evidence = [offset]
        self.confirmed = False
        self.fixed = False


def k10_live(reg, unfenced_since_registered: bool) -> bool:
    """K10's "live": registered, not shutting down, and either serving or starting (fenced but
    never unfenced since it registered); a broker fenced after serving is down."""
    return reg is not None and not reg.in_controlled_shutdown and (not reg.fenced or not unfenced_since_registered)


def k11_message(dirs: int, unassigned: int, counted: int) -> str | None:
    if dirs < 2 or (unassigned == 0 and counted == 0):
        return None
    return (
        f"asked to be unfenced with {unassigned} UNASSIGNED replica(s) and {counted} mismatching by its own count,"
        f" on {dirs} directories"
    )


def _violation(inv: str, entity: str, w: _Wrong, last: int | None, fixed_by: int | None) -> Violation:
    """The interval ``w`` became: ``last`` None while still open, ``fixed_by`` the fixing record."""
    return Violation(
        invariant=inv,
        severity=BY_ID[inv].severity,
        entity=entity,
        first_offset=w.first_offset,
        last_offset=last,
        message=w.message,
        evidence=w.evidence + ([] if fixed_by is None else [fixed_by]),
    )


class Audit:
    """Feed records in offset order (``feed``), then ``report()``. Starts from ``view`` (the
    state before the first record fed; empty by default)."""

    def __init__(
        self,
        config: AuditConfig | None = None,
        view: ControllerView | None = None,
        *,
        partial: bool = False,
        streams: StreamsView | None = None,
    ) -> None:
        self.config = config or AuditConfig()
        self.partial = partial
        """Fed a subset of the log (the Spark audit's records other than partitions'): offsets have
        gaps (no L1), and graced states are reported whole, for the caller to hold to the grace
        with the times of the records it did not see."""
        self.view = view or ControllerView()
        self.checked = dict.fromkeys(BY_ID, 0)
        self.closed: list[Violation] = []
        self.wrong: dict[tuple[str, str], _Wrong] = {}
        self.in_grace: deque[_Wrong] = deque()
        """Wrong states not confirmed yet, oldest first: their grace runs out in this order."""
        self.records = 0
        self.transactions: Transactions | None = Transactions()
        """Metadata transactions held until they end (``replay.transactions``: an aborted one is
        audited as NoOps); None when the caller feeds records already so (``spark.control``)."""
        self.streams: StreamsAudit | None = None if streams is None else StreamsAudit.from_view(self, streams)
        """The S3Stream family's checks, from the log's first S3Stream record (or ``streams``,
        the S3Stream state before the first record fed)."""
        self.refused: int | None = None
        """Offset of the last record the reducer refused."""
        self.bookies: BookiesAudit | None = None
        """The BookKeeper family's checks, from the log's first BookKeeper record."""
        self._finished = False
        self.first_offset: int | None = None
        self.reported_offline: dict[tuple[int, str], int] = {}
        self.reported_dirs: dict[tuple[str, int], dict[int, str]] = {}
        """(topic, partition) -> broker -> the directory the broker reported (K9)."""
        self.unassigned: dict[int, int] = {}
        """Broker -> replicas it has in UNASSIGNED (K8), kept from the partitions' changes."""
        self.unfenced_since_registered: dict[int, bool] = {}
        """Broker -> whether it was unfenced since its RegisterBroker: a broker fenced after that
        is down (crashed, shut down), one fenced before is starting (K10 holds it)."""
        self.failed_unreported: set[tuple[int, str]] = set()
        """(broker, directory) a LogDirFailed named and no heartbeat has reported yet (K12)."""
        self.suspects: set[tuple[str, int]] = set()
        """Partitions that may have an open K1/K4/K5 state: they skip the fast screen."""
        # The audit's own indexes, moved only when a partition's replicas or directories do (rare):
        # the view's ISR index would move on nearly every change and cost more than the checks.
        self.by_replica: dict[int, set[tuple[str, int]]] = {}
        self.by_dir: dict[str, set[tuple[str, int]]] = {}
        for p in self.view.iter_partitions():
            self._index(p.key, None, p)

    # -- bookkeeping ---------------------------------------------------------------------------

    def _instant(self, inv: str, entity: str, offset: int, message: str) -> None:
        self.checked[inv] += 1
        self.closed.append(
            Violation(
                invariant=inv,
                severity=BY_ID[inv].severity,
                entity=entity,
                first_offset=offset,
                last_offset=offset,
                message=message,
                evidence=[offset],
            )
        )

    def _state(
        self, inv: str, entity: str, offset: int, ts: int | None, message: str | None, pkey: tuple | None = None
    ) -> None:
        """The entity is wrong (message) or right (None) after the record at ``offset``. ``pkey``
        is the partition a K1/K4/K5 entity is, so later records re-check it in full."""
        self.checked[inv] += 1
        key = (inv, entity)
        w = self.wrong.get(key)
        graced = BY_ID[inv].graced and not self.partial
        if message is None:
            if w is not None:
                w.fixed = True
                del self.wrong[key]
                if w.confirmed or not graced:
                    self._close(inv, entity, w, offset - 1, fixed_by=offset)
            return
        if w is None:
            w = self.wrong[key] = _Wrong(offset, ts, message)
            if pkey is not None:
                self.suspects.add(pkey)
            if graced:
                self.in_grace.append(w)
            else:
                w.confirmed = True

    def _close(self, inv: str, entity: str, w: _Wrong, last: int | None, fixed_by: int | None) -> None:
        self.closed.append(_violation(inv, entity, w, last, fixed_by))

    def _promote(self, offset: int, ts: int | None) -> None:
        """Confirm the wrong states whose grace ran out. They entered the queue in offset (and
        so time) order: only the front can be due."""
        g_rec, g_ms = self.config.grace_records, self.config.grace_ms
        queue = self.in_grace
        while queue:
            w = queue[0]
            if w.fixed or w.confirmed:
                queue.popleft()
                continue
            # Records without a time (fresh from a decider) are held to the record grace alone.
            if offset - w.first_offset > g_rec or (
                ts is not None and w.first_ts is not None and ts - w.first_ts > g_ms
            ):
                w.confirmed = True
                queue.popleft()
            else:
                break

    # -- checks --------------------------------------------------------------------------------

    def _partition(self, p, old, offset: int, ts: int | None) -> None:
        """K1, K4, K5 for a partition a record wrote; each only if a field it reads moved (the
        brokers' side is re-checked by ``_broker``)."""
        moved_dirs = old is None or p.directories is not old.directories
        moved_isr = old is None or p.isr is not old.isr
        moved_leader = old is None or p.leader != old.leader
        k1 = moved_isr or moved_leader or old is None or p.replicas is not old.replicas
        k4 = moved_leader or moved_dirs
        k5 = moved_isr or moved_dirs or moved_leader
        pkey = (p.topic_id, p.partition_id)
        if pkey not in self.suspects and kinv.partition_is_sound(self.view.brokers, p):
            # The common case: right before, right after; only the counts move.
            checked = self.checked
            checked["K1"] += k1
            checked["K4"] += k4
            checked["K5"] += k5
            return
        entity = f"partition/{p.topic_id}/{p.partition_id}"
        if k1:
            self._state("K1", entity, offset, ts, kinv.leader_in_isr_in_replicas(p), pkey)
        if k4:
            self._state("K4", entity, offset, ts, kinv.leader_is_healthy(self.view, p), pkey)
        if k5:
            self._state("K5", entity, offset, ts, kinv.isr_is_online(self.view, p), pkey)
        self._settle(pkey, entity)

    def _index(self, key: tuple[str, int], old, new) -> None:
        """Keep ``by_replica`` and ``by_dir`` up to date for a partition that moved from ``old``
        to ``new`` (either None: created, removed). Reserved directory ids are not indexed."""
        if old is None or new is None or old.replicas is not new.replicas:
            move_key(self.by_replica, key, () if old is None else old.replicas, () if new is None else new.replicas)
        if old is None or new is None or old.directories is not new.directories:
            move_key(
                self.by_dir,
                key,
                () if old is None else [d for d in old.directories if d not in RESERVED_IDS],
                () if new is None else [d for d in new.directories if d not in RESERVED_IDS],
            )

    def _settle(self, pkey: tuple[str, int], entity: str) -> None:
        """Drop ``pkey`` from the suspects once none of its K1/K4/K5 states is open."""
        wrong = self.wrong
        if ("K1", entity) not in wrong and ("K4", entity) not in wrong and ("K5", entity) not in wrong:
            self.suspects.discard(pkey)

    def _broker(self, broker: int, offset: int, ts: int | None, scope: str, dirs: Iterable[str] = ()) -> None:
        """Re-check what a broker record can have changed: ``scope`` "all" (a registration comes
        or goes), "fencing" (leaders only: K4), "dirs" (partitions on ``dirs``: K4, K5)."""
        view = self.view
        if scope == "all" or scope == "fencing":
            # Fencing moves K4 of the partitions the broker leads: a subset of its replicas'.
            keys = self.by_replica.get(broker, ())
        else:
            index = self.by_dir
            keys = set().union(*(index.get(d, ()) for d in dirs)) if dirs else ()
        checked, suspects, brokers = self.checked, self.suspects, view.brokers
        for pkey in sorted(keys):
            p = view.partition(*pkey)
            if p is None:
                continue
            if pkey not in suspects and kinv.partition_is_sound(brokers, p):
                checked["K4"] += 1
                checked["K5"] += scope != "fencing"
                continue
            entity = f"partition/{pkey[0]}/{pkey[1]}"
            self._state("K4", entity, offset, ts, kinv.leader_is_healthy(view, p), pkey)
            if scope != "fencing":
                self._state("K5", entity, offset, ts, kinv.isr_is_online(view, p), pkey)
            self._settle(pkey, entity)
        self._k8(broker, offset, ts)
        reg = view.brokers.get(broker)
        # K6: reported-offline dirs are handled once they leave the registration (or it goes).
        for b, d in [k for k in self.reported_offline if k[0] == broker]:
            if reg is None or d not in reg.log_dirs:
                self._state("K6", f"dir/{b}/{d}", offset, ts, None)
                del self.reported_offline[(b, d)]

    def _reported_assignments(self, r: AssignReplicasToDirsRequest, offset: int, ts: int | None) -> None:
        """K9: a replica's directory that its broker reported is recorded within the grace."""
        view = self.view
        reg = view.brokers.get(r.broker_id)
        if reg is None or reg.epoch != r.broker_epoch:
            return  # the controller rightly refuses a stale request
        for directory in r.directories:
            for tp in directory.topics:
                for pid in tp.partitions:
                    p = view.partition(tp.topic_id, pid)
                    if p is None or r.broker_id not in p.replicas or p.directory(r.broker_id) == directory.id:
                        continue
                    self.reported_dirs.setdefault((tp.topic_id, pid), {})[r.broker_id] = directory.id
                    self._state(
                        "K9",
                        f"replica/{tp.topic_id}/{pid}/{r.broker_id}",
                        offset,
                        ts,
                        f"broker {r.broker_id} reported it in {directory.id}; recorded in {p.directory(r.broker_id)}",
                    )

    def _recorded_assignments(self, p, offset: int, ts: int | None) -> None:
        pending = self.reported_dirs.get((p.topic_id, p.partition_id))
        if not pending:
            return
        for b, d in list(pending.items()):
            if b not in p.replicas or p.directory(b) == d:
                del pending[b]
                self._state("K9", f"replica/{p.topic_id}/{p.partition_id}/{b}", offset, ts, None)
        if not pending:
            del self.reported_dirs[(p.topic_id, p.partition_id)]

    def _count_unassigned(self, old, new, offset: int, ts: int | None) -> None:
        """Keep the per-broker UNASSIGNED counts; re-check K8 where one crosses zero."""
        counts = self.unassigned
        changed = []
        for p, step in ((old, -1), (new, 1)):
            if p is None:
                continue
            for b, d in zip(p.replicas, p.directories):
                if d == UNASSIGNED:
                    before = counts.get(b, 0)
                    counts[b] = before + step
                    if (before == 0) != (counts[b] == 0):
                        changed.append(b)
        for b in changed:
            self._k8(b, offset, ts)

    def _k8(self, broker: int, offset: int, ts: int | None) -> None:
        """K8 (a warning; KIP-858's proposal, not Kafka's behaviour): a multi-directory broker
        is not unfenced while any of its replicas is UNASSIGNED. K10 (the broker's duty): a
        live multi-directory broker has no replica UNASSIGNED for longer than the grace."""
        reg = self.view.brokers.get(broker)
        n = self.unassigned.get(broker, 0)
        multi = reg is not None and len(reg.log_dirs) >= 2 and n > 0
        bad = None
        if multi and not reg.fenced:  # type: ignore[union-attr]
            bad = f"unfenced with {n} UNASSIGNED replica(s) on {len(reg.log_dirs)} directories"  # type: ignore[union-attr]
        self._state("K8", f"broker/{broker}", offset, ts, bad)
        late = None
        if multi and k10_live(reg, self.unfenced_since_registered.get(broker, False)):
            late = f"{n} replica(s) UNASSIGNED on a live broker with {len(reg.log_dirs)} directories"  # type: ignore[union-attr]
        self._state("K10", f"broker/{broker}", offset, ts, late)

    def _unfence_requested(self, r: UnfenceRequested, offset: int) -> None:
        """K11 (a warning, KIP-858's policy): a fenced multi-directory broker asks to serve while
        replicas are UNASSIGNED, or while it counts mismatching ones itself."""
        reg = self.view.brokers.get(r.broker_id)
        self.checked["K11"] += 1
        if self.partial:
            return  # the partition records' UNASSIGNED counts are not here: the Spark audit asks
        if reg is None or not reg.fenced or reg.epoch != r.broker_epoch:
            return
        message = k11_message(len(reg.log_dirs), self.unassigned.get(r.broker_id, 0), r.mismatched_replicas)
        if message is not None:
            self._instant("K11", f"broker/{r.broker_id}", offset, message)

    def _dir_failed(self, r: LogDirFailed, offset: int, ts: int | None) -> None:
        key = (r.broker_id, r.directory)
        if key not in self.failed_unreported:
            self.failed_unreported.add(key)
            self._state(
                "K12",
                f"dir/{r.broker_id}/{r.directory}",
                offset,
                ts,
                f"broker {r.broker_id} saw directory {r.directory} fail and has not reported it in a heartbeat",
            )

    def _dir_reported(self, broker: int, dirs: Iterable[str], offset: int, ts: int | None) -> None:
        for d in dirs:
            if (broker, d) in self.failed_unreported:
                self.failed_unreported.discard((broker, d))
                self._state("K12", f"dir/{broker}/{d}", offset, ts, None)

    def _observed_offline(self, broker: int, dirs: Iterable[str], offset: int, ts: int) -> None:
        reg = self.view.brokers.get(broker)
        for d in dirs:
            if reg is not None and d in reg.log_dirs and (broker, d) not in self.reported_offline:
                self.reported_offline[(broker, d)] = offset
                self._state(
                    "K6",
                    f"dir/{broker}/{d}",
                    offset,
                    ts,
                    f"broker {broker} reported directory {d} offline; the controller has not removed it",
                )

    def feed(self, records: Iterable[Record]) -> None:
        view, txns = self.view, self.transactions
        with gc_paused():
            if txns is None:
                for r in records:
                    self._one(view, r)
                return
            for r in records:
                if txns.held is None and type(r) is not BeginTransaction:
                    self._one(view, r)
                else:
                    for x in txns.push(r):
                        self._one(view, x)

    def _one(self, view: ControllerView, r: Record) -> None:
        last = view.offset
        offset = r.offset
        if offset is None:
            offset = last + 1
        elif (
            offset != last + 1
            and not (last == -1 and self.first_offset is None and offset > 0)
            and (offset <= last or not self.partial)
        ):
            self._instant("L1", "log", offset, f"offset {offset} follows {last}")
            if offset <= last:
                self.records += 1
                return
        if self.first_offset is None:
            self.first_offset = offset
        self.records += 1
        cls = type(r)
        if cls is PartitionChange or cls is Partition:
            self._partition_record(view, r, cls, offset)  # type: ignore[arg-type]
        else:
            self._other(view, r, cls, offset)
        if self.in_grace:
            self._promote(offset, r.ts_ms)

    def _partition_record(self, view: ControllerView, r: Partition | PartitionChange, cls: type, offset: int) -> None:
        """The hot path (nine records in ten): apply, then re-check only what moved."""
        parts = view.partitions.get(r.topic_id)
        old = None if parts is None else parts.get(r.partition_id)
        if not self._apply(view, r, offset):
            return
        p = parts[r.partition_id]  # type: ignore[index]
        ts = r.ts_ms
        if old is None or old.replicas is not p.replicas or old.directories is not p.directories:
            self._index((p.topic_id, p.partition_id), old, p)
        self._partition(p, old, offset, ts)
        if (old is None or old.directories is not p.directories) and (
            UNASSIGNED in p.directories or (old is not None and UNASSIGNED in old.directories)
        ):
            self._count_unassigned(old, p, offset, ts)
        if old is not None:
            self.checked["K3"] += 1
            if cls is PartitionChange:
                # Only a change that keeps the leader epoch can break R-EPOCH-4.
                if p.leader_epoch == old.leader_epoch and (p.replicas is not old.replicas or p.isr is not old.isr):
                    bad = kinv.change_bumps_leader_epoch(view, old, p)
                else:
                    bad = None
            else:
                bad = kinv.replacement_bumps_epochs(view, old, p)
            if bad:
                self._instant("K3", f"partition/{p.topic_id}/{p.partition_id}", offset, bad)
        if self.reported_dirs:
            self._recorded_assignments(p, offset, ts)

    def _apply(self, view: ControllerView, r: Record, offset: int) -> bool:
        """Fold ``r`` in; a record the reducer refuses is an instant violation, skipped."""
        try:
            apply(view, r)
        except ReplayError as exc:
            self._skip_refused(view, exc, offset)
            self.refused = offset
            return False
        return True

    def _skip_refused(self, view: View, exc: ReplayError, offset: int) -> None:
        """A record any family's reducer refuses is an instant violation of the invariant its rule
        maps to; the view moves past it unchanged."""
        inv = REPLAY_RULE_TO_INVARIANT.get(exc.rule, "L5")
        self._instant(inv, exc.entity or "log", offset, f"{exc.rule}: {exc.message} (record skipped)")
        view.offset = offset

    def _other(self, view: ControllerView, r: Record, cls: type, offset: int) -> None:
        if r.FAMILY == "bookkeeper":
            if self.bookies is None:
                self.bookies = BookiesAudit(self)
            self.bookies.one(r, offset)
            view.offset = offset
            return
        if is_streams_record(r):
            if self.streams is None:
                self.streams = StreamsAudit(self)
                # automq.version is a KRaft feature: the controller view knows it from before.
                self.streams.view.automq_version = view.features.get(AUTOMQ_VERSION, 0)
            self.streams.one(r, offset)
            if cls is not FeatureLevel:
                view.offset = offset
                return
        ts = r.ts_ms
        removed = None
        if cls is RemoveTopic:
            gone = list(view.partitions.get(r.topic_id, {}).values())  # type: ignore[attr-defined]
            removed = [f"partition/{p.topic_id}/{p.partition_id}" for p in gone]
            for p in gone:
                self.suspects.discard((p.topic_id, p.partition_id))
                self._index((p.topic_id, p.partition_id), p, None)
                self._count_unassigned(p, None, offset, ts)
        dirs_before = None
        if cls is BrokerRegistrationChange and r.log_dirs:  # type: ignore[attr-defined]
            reg = view.brokers.get(r.broker_id)  # type: ignore[attr-defined]
            dirs_before = reg.log_dirs if reg is not None else ()
        if not self._apply(view, r, offset):
            return
        if cls in (RegisterBroker, UnregisterBroker, BrokerRegistrationChange, FenceBroker, UnfenceBroker):
            broker = r.id if cls in (FenceBroker, UnfenceBroker) else r.broker_id  # type: ignore[attr-defined]
            reg = view.brokers.get(broker)
            if cls is RegisterBroker or reg is None:
                self.unfenced_since_registered[broker] = reg is not None and not reg.fenced
                # A new process (or none): a failure the old one did not report is moot (K12).
                self._dir_reported(broker, sorted(d for b, d in self.failed_unreported if b == broker), offset, ts)
            elif not reg.fenced:
                self.unfenced_since_registered[broker] = True
            changed_dirs: list[str] = []
            if dirs_before is not None:
                now = view.brokers[broker].log_dirs
                changed_dirs = [d for d in dirs_before if d not in now] + [d for d in now if d not in dirs_before]
                for d in dirs_before:
                    if d not in now:
                        self.checked["K7"] += 1
                        for p, why in kinv.dir_removal_complete(view, broker, d, self.by_dir):
                            self._instant("K7", f"partition/{p.topic_id}/{p.partition_id}", offset, why)
            if cls is RegisterBroker or cls is UnregisterBroker:
                self._broker(broker, offset, ts, "all")
            else:
                fencing = cls is not BrokerRegistrationChange or r.fenced != 0  # type: ignore[attr-defined]
                if fencing:
                    self._broker(broker, offset, ts, "fencing")
                if changed_dirs:
                    self._broker(broker, offset, ts, "dirs", changed_dirs)
                if not fencing and not changed_dirs:
                    self._broker(broker, offset, ts, "dirs", ())
        elif cls is RemoveTopic and removed:
            for entity in removed:
                for inv in ("K1", "K4", "K5"):
                    if (inv, entity) in self.wrong:
                        self._state(inv, entity, offset, ts, None)
        elif cls is AssignReplicasToDirsRequest:
            self._reported_assignments(r, offset, ts)  # type: ignore[arg-type]
        elif cls is LogDirFailed:
            self._observed_offline(r.broker_id, (r.directory,), offset, ts)  # type: ignore[attr-defined]
            self._dir_failed(r, offset, ts)  # type: ignore[arg-type]
        elif cls is HeartbeatOfflineDirs:
            self._observed_offline(r.broker_id, r.offline_log_dirs, offset, ts)  # type: ignore[attr-defined]
            self._dir_reported(r.broker_id, r.offline_log_dirs, offset, ts)  # type: ignore[attr-defined]
        elif cls is UnfenceRequested:
            self._unfence_requested(r, offset)  # type: ignore[arg-type]

    # -- the report ----------------------------------------------------------------------------

    def report(self) -> AuditReport:
        if self.transactions is not None:  # a transaction still open is not published
            for r in self.transactions.finish():
                self._one(self.view, r)
        if self.streams is not None:
            self.streams.flush()
        if self.bookies is not None and not self._finished:
            self._finished = True
            self.bookies.finish()
        violations = list(self.closed)
        violations += [_violation(inv, e, w, None, None) for (inv, e), w in self.wrong.items() if w.confirmed]
        violations.sort(key=lambda v: (v.first_offset, v.invariant, v.entity))
        counts = {i.id: 0 for i in CATALOGUE}
        for v in violations:
            counts[v.invariant] += 1
        self.checked["L1"] = self.records
        threshold = SEVERITIES.index(self.config.fail_on)
        failed = any(SEVERITIES.index(v.severity) >= threshold for v in violations)
        return AuditReport(
            verdict="fail" if failed else "pass",
            records=self.records,
            first_offset=self.first_offset,
            last_offset=None if self.first_offset is None else self.view.offset,
            state_hash=self.view.state_hash(),
            fail_on=self.config.fail_on,
            grace_records=self.config.grace_records,
            grace_ms=self.config.grace_ms,
            invariants=[
                InvariantResult(
                    id=i.id,
                    severity=i.severity,
                    definition=i.definition,
                    checked=self.checked[i.id],
                    violations=counts[i.id],
                )
                for i in CATALOGUE
            ],
            violations=violations,
            streams_state_hash=None if self.streams is None else self.streams.state_hash(),
            bookies_state_hash=None if self.bookies is None else self.bookies.state_hash(),
        )


def audit_log(
    snapshot: LogSnapshot,
    *,
    config: AuditConfig | None = None,
    from_offset: int | None = None,
    to_offset: int | None = None,
    start: ControllerView | None = None,
    progress: Callable[[int], None] | None = None,
    streams_start: StreamsView | None = None,
) -> AuditReport:
    """Audit ``[from_offset, to_offset]`` of a log snapshot in one streaming pass. ``start`` is
    the state before ``from_offset`` (see ``replay.state.state_at``), ``streams_start`` its
    S3Stream state (``replay.state.streams_at``) when the log has S3Stream records before it."""
    a = Audit(config, start, streams=streams_start)
    for records in snapshot.iter_records(from_offset, to_offset):
        a.feed(records)
        if progress is not None:
            progress(len(records))
    return a.report()
