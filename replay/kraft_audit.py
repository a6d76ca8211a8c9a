"""The KRaft family's part of the audit: the controller's view and KIP-858's invariants (K1-K15,
the L invariants of KRaft records), checked on exactly the entities a record can have changed.

It replays KRaft records into a ``ControllerView`` and reports through the audit's ``Books``; the
engine (``replay.audit``) feeds it the records in offset order (``replay.family.FamilyAudit``),
and it hands each to the handler of its class (``_CHECKS``, as the reducer's ``_APPLY``). The
checks themselves are pure functions beside the family (``statemachine/kraft/invariants.py``);
this module knows when to ask them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kraftlake.records.base import Record
from kraftlake.records.errors import ReplayError
from kraftlake.records.kraft import (
    UNASSIGNED,
    BrokerRegistrationChange,
    ClearElr,
    FenceBroker,
    Partition,
    PartitionChange,
    RegisterBroker,
    RemoveTopic,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.records.observations import (
    AssignReplicasToDirsRequest,
    HeartbeatOfflineDirs,
    LogDirFailed,
    UnfenceRequested,
)
from kraftlake.statemachine.invariants import say
from kraftlake.statemachine.kraft import invariants as kinv
from kraftlake.statemachine.kraft.directory_ids import RESERVED_IDS
from kraftlake.statemachine.kraft.reducer import apply
from kraftlake.statemachine.kraft.view import ControllerView, move_key

from .books import Books


def _with_elr(view: ControllerView, topic_name: str) -> list:
    """The partitions a ClearElr of ``topic_name`` ("" = every topic) changes: those with an ELR
    or a LastKnownElr (``reducer._clear_elr``)."""
    if topic_name:
        topic_id = view.topic_ids.get(topic_name)
        parts = [] if topic_id is None else view.partitions.get(topic_id, {}).values()
    else:
        parts = view.iter_partitions()
    return [p for p in parts if p.eligible_leader_replicas or p.last_known_elr]


class KraftAudit:
    """K1-K15 over the KRaft records of one log. ``counts_unassigned`` False: the caller does
    not feed the partition records (the Spark plan counts UNASSIGNED replicas itself and asks K11
    with its counts)."""

    def __init__(self, books: Books, view: ControllerView | None = None, *, counts_unassigned: bool = True) -> None:
        self.books = books
        self.view = view or ControllerView()
        self.counts_unassigned = counts_unassigned
        self.refused: int | None = None
        """Offset of the last record the reducer refused."""
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
        self.elr_applies: set[tuple[str, int]] = set()
        """Partitions with a non-empty ELR whose last state was made with KIP-966 on (K15)."""
        # The audit's own indexes, moved only when a partition's replicas or directories do (rare):
        # the view's ISR index would move on nearly every change and cost more than the checks.
        self.by_replica: dict[int, set[tuple[str, int]]] = {}
        self.by_dir: dict[str, set[tuple[str, int]]] = {}
        for p in self.view.iter_partitions():
            self._index(p.key, None, p)

    # -- the family audit (``replay.family.FamilyAudit``) -------------------------------------------

    def feed(self, r: Any, offset: int) -> None:
        """Check and fold in one KRaft record (or observation) at ``offset``: its class's
        handler (``_CHECKS``), else the fold alone."""
        check = _CHECKS.get(type(r))
        if check is None:
            self._apply(r, offset)
        else:
            check(self, r, offset)

    def finish(self) -> None:
        """Nothing waits for the end: every KRaft check is judged at its record."""

    def state_hash(self) -> str:
        return self.view.state_hash()

    def _state(
        self,
        inv: str,
        entity: str,
        offset: int,
        ts: int | None,
        message: str | None,
        pkey: tuple | None = None,
        *,
        count: bool = True,
    ) -> None:
        """``Books.state``; ``pkey`` is the partition a K1/K4/K5 entity is, so that later records
        re-check it in full while a state of it is open. ``count``: whether ``checked`` counts
        it (the catalogue's ``counts``)."""
        if self.books.state(inv, entity, offset, ts, message, count=count) and pkey is not None:
            self.suspects.add(pkey)

    # -- checks --------------------------------------------------------------------------------

    def _partition(self, p, old, offset: int, ts: int | None) -> None:
        """K1, K4, K5 for a partition a record wrote; each only if a field it reads moved (the
        brokers' side is re-checked by ``_broker``). Each counts the state as checked either way
        (the catalogue's ``counts``: a partition state is one check of each, however often an
        engine looks at it)."""
        moved_dirs = old is None or p.directories is not old.directories
        moved_isr = old is None or p.isr is not old.isr
        moved_leader = old is None or p.leader != old.leader
        # An empty ISR is judged by the ELR feature in force at each record (KIP-966), so it is
        # re-checked at every record of the partition, as the plan does per state.
        k1 = moved_isr or moved_leader or old is None or p.replicas is not old.replicas or not p.isr
        k4 = moved_leader or moved_dirs
        k5 = moved_isr or moved_dirs or moved_leader
        pkey = (p.topic_id, p.partition_id)
        checked = self.books.checked
        checked["K1"] += 1
        checked["K4"] += 1
        checked["K5"] += 1
        if pkey not in self.suspects and kinv.partition_is_sound(self.view.brokers, p):
            return  # the common case: right before, right after
        entity = f"partition/{p.topic_id}/{p.partition_id}"
        elr = kinv.elr_enabled(self.view)
        if k1:
            self._state("K1", entity, offset, ts, kinv.leader_in_isr_in_replicas(p, elr), pkey, count=False)
        if k4:
            self._state("K4", entity, offset, ts, kinv.leader_is_healthy(self.view, p), pkey, count=False)
        if k5:
            self._state("K5", entity, offset, ts, kinv.isr_is_online(self.view, p), pkey, count=False)
        self._settle(pkey, entity)

    def _elr(self, p, offset: int, ts: int | None) -> None:
        """K13 and K15 of a state of a partition whose ELR is or was non-empty: judged with
        KIP-966 on at the record that made the state, right otherwise (what was open when the
        feature went off closes at the partition's next state). ``elr_applies`` keeps the
        answer for the broker records that re-check K15 until the partition's next state."""
        pkey = (p.topic_id, p.partition_id)
        applies = kinv.elr_enabled(self.view)
        if applies and p.eligible_leader_replicas:
            self.elr_applies.add(pkey)
        else:
            self.elr_applies.discard(pkey)
        entity = f"partition/{p.topic_id}/{p.partition_id}"
        # Counted only where judged (the catalogue's ``counts``): a state made with KIP-966 on.
        self._state("K13", entity, offset, ts, kinv.elr_is_sound(p) if applies else None, count=applies)
        self._state("K15", entity, offset, ts, kinv.elr_is_online(self.view, p) if applies else None, count=applies)

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
        wrong = self.books.is_wrong
        if not wrong("K1", entity) and not wrong("K4", entity) and not wrong("K5", entity):
            self.suspects.discard(pkey)

    def _broker(
        self, broker: int, offset: int, ts: int | None, scope: str, dirs: Iterable[str] = (), *, k8: bool = True
    ) -> None:
        """Re-check what a broker record can have changed: ``scope`` "all" (a registration comes
        or goes), "fencing" (leaders only: K4), "dirs" (partitions on ``dirs``: K4, K5); ``k8``
        False when the record's other call judged the broker itself (K8, K10) already. The
        partitions' re-checks are not counted: ``checked`` counts partition states."""
        view = self.view
        if scope == "all" or scope == "fencing":
            # Fencing moves K4 of the partitions the broker leads: a subset of its replicas'.
            keys = self.by_replica.get(broker, ())
        else:
            index = self.by_dir
            keys = set().union(*(index.get(d, ()) for d in dirs)) if dirs else ()
        suspects, brokers = self.suspects, view.brokers
        for pkey in sorted(keys):
            p = view.partition(*pkey)
            if p is None:
                continue
            if pkey in self.elr_applies:
                # K15: the broker's directories (or registration) moved under an ELR member.
                entity = f"partition/{pkey[0]}/{pkey[1]}"
                self._state("K15", entity, offset, ts, kinv.elr_is_online(view, p), count=False)
            if pkey not in suspects and kinv.partition_is_sound(brokers, p):
                continue
            entity = f"partition/{pkey[0]}/{pkey[1]}"
            self._state("K4", entity, offset, ts, kinv.leader_is_healthy(view, p), pkey, count=False)
            if scope != "fencing":
                self._state("K5", entity, offset, ts, kinv.isr_is_online(view, p), pkey, count=False)
            self._settle(pkey, entity)
        if k8:
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
                # Each replica directory an accepted request reports is one check (the catalogue's counts).
                self.books.checked["K9"] += len(tp.partitions)
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
                        say(
                            "K9",
                            "unrecorded",
                            broker=r.broker_id,
                            reported=directory.id,
                            recorded=p.directory(r.broker_id),
                        ),
                        count=False,
                    )

    def _recorded_assignments(self, p, offset: int, ts: int | None) -> None:
        pending = self.reported_dirs.get((p.topic_id, p.partition_id))
        if not pending:
            return
        for b, d in list(pending.items()):
            if b not in p.replicas or p.directory(b) == d:
                del pending[b]
                self._state("K9", f"replica/{p.topic_id}/{p.partition_id}/{b}", offset, ts, None, count=False)
        if not pending:
            del self.reported_dirs[(p.topic_id, p.partition_id)]

    def _count_unassigned(self, old, new, offset: int, ts: int | None) -> None:
        """Keep the per-broker UNASSIGNED counts; re-check K8 where one crosses zero (from before
        the record to after it: a replica moved between two UNASSIGNED slots crosses nothing)."""
        counts = self.unassigned
        before: dict[int, int] = {}
        for p, step in ((old, -1), (new, 1)):
            if p is None:
                continue
            for b, d in zip(p.replicas, p.directories):
                if d == UNASSIGNED:
                    n = counts.get(b, 0)
                    before.setdefault(b, n)
                    counts[b] = n + step
        for b, n in before.items():
            if (n == 0) != (counts[b] == 0):
                self._k8(b, offset, ts)

    def _k8(self, broker: int, offset: int, ts: int | None) -> None:
        """K8 (a warning; KIP-858's proposal, not Kafka's behaviour): a multi-directory broker
        is not unfenced while any of its replicas is UNASSIGNED. K10 (the broker's duty): a
        live multi-directory broker has no replica UNASSIGNED for longer than the grace."""
        reg = self.view.brokers.get(broker)
        n = self.unassigned.get(broker, 0)
        multi = reg is not None and len(reg.log_dirs) >= 2 and n > 0
        bad = None
        if multi and not reg.fenced:  # type: ignore[union-attr]  # multi: reg is set
            bad = say("K8", "unfenced", unassigned=n, dirs=len(reg.log_dirs))  # type: ignore[union-attr]  # multi: reg is set
        self._state("K8", f"broker/{broker}", offset, ts, bad)
        late = None
        if multi and kinv.k10_live(reg, self.unfenced_since_registered.get(broker, False)):
            late = say("K10", "unassigned", unassigned=n, dirs=len(reg.log_dirs))  # type: ignore[union-attr]  # multi: reg is set
        self._state("K10", f"broker/{broker}", offset, ts, late)

    def _unfence_requested(self, r: UnfenceRequested, offset: int) -> None:
        """K11 (a warning, KIP-858's policy): a fenced multi-directory broker asks to serve while
        replicas are UNASSIGNED, or while it counts mismatching ones itself."""
        reg = self.view.brokers.get(r.broker_id)
        self.books.checked["K11"] += 1
        if not self.counts_unassigned:
            return  # the partition records' UNASSIGNED counts are not here: the Spark plan asks
        if reg is None or not reg.fenced or reg.epoch != r.broker_epoch:
            return
        message = kinv.k11_message(len(reg.log_dirs), self.unassigned.get(r.broker_id, 0), r.mismatched_replicas)
        if message is not None:
            self.books.instant("K11", f"broker/{r.broker_id}", offset, message, count=False)

    def _dir_failed(self, r: LogDirFailed, offset: int, ts: int | None) -> None:
        key = (r.broker_id, r.directory)
        if key not in self.failed_unreported:
            self.failed_unreported.add(key)
            self._state(
                "K12",
                f"dir/{r.broker_id}/{r.directory}",
                offset,
                ts,
                say("K12", "unreported", broker=r.broker_id, directory=r.directory),
            )

    def _dir_reported(self, broker: int, dirs: Iterable[str], offset: int, ts: int | None) -> None:
        for d in dirs:
            if (broker, d) in self.failed_unreported:
                self.failed_unreported.discard((broker, d))
                self._state("K12", f"dir/{broker}/{d}", offset, ts, None)

    def _observed_offline(self, broker: int, dirs: Iterable[str], offset: int, ts: int | None) -> None:
        reg = self.view.brokers.get(broker)
        for d in dirs:
            if reg is not None and d in reg.log_dirs and (broker, d) not in self.reported_offline:
                self.reported_offline[(broker, d)] = offset
                self._state(
                    "K6",
                    f"dir/{broker}/{d}",
                    offset,
                    ts,
                    say("K6", "unhandled", broker=broker, directory=d),
                )

    def _apply(self, r: Record, offset: int) -> bool:
        """Fold ``r`` in; a record the reducer refuses is an instant violation, skipped."""
        view = self.view
        try:
            apply(view, r)
        except ReplayError as exc:
            self.books.refused(exc, offset)
            view.offset = offset
            self.refused = offset
            return False
        return True

    # -- the records: one handler per class the checks read (``_CHECKS``) --------------------------

    def _on_partition(self, r: Partition | PartitionChange, offset: int) -> None:
        """Partition, PartitionChange: the hot path (nine records in ten): apply, then re-check
        only what moved."""
        view = self.view
        parts = view.partitions.get(r.topic_id)
        old = None if parts is None else parts.get(r.partition_id)
        self.books.checked["K2"] += 1  # held to its replicas as it is applied, refused or not
        if not self._apply(r, offset):
            return
        p = parts[r.partition_id]  # type: ignore[index]  # applied: its topic holds it
        ts = r.ts_ms
        if old is None or old.replicas is not p.replicas or old.directories is not p.directories:
            self._index((p.topic_id, p.partition_id), old, p)
        self._partition(p, old, offset, ts)
        # K13-K15 judge KIP-966's state: only with the feature on, or to close what was open
        # when it was turned off.
        if p.eligible_leader_replicas or (old is not None and old.eligible_leader_replicas):
            self._elr(p, offset, ts)
        if (old is None or old.directories is not p.directories) and (
            UNASSIGNED in p.directories or (old is not None and UNASSIGNED in old.directories)
        ):
            self._count_unassigned(old, p, offset, ts)
        if old is not None:
            self.books.checked["K3"] += 1
            change = type(r) is PartitionChange
            if change:
                # Only a change that keeps the leader epoch can miss a leader-epoch bump.
                if p.leader_epoch == old.leader_epoch and (p.replicas is not old.replicas or p.isr is not old.isr):
                    bad = kinv.change_bumps_leader_epoch(view, old, p)
                else:
                    bad = None
            else:
                bad = kinv.replacement_bumps_epochs(view, old, p)
            if bad:
                self.books.instant("K3", f"partition/{p.topic_id}/{p.partition_id}", offset, bad, count=False)
            if change and p.leader != old.leader and kinv.elr_enabled(view):
                self.books.checked["K14"] += 1
                bad = kinv.leader_is_eligible(view, old, p)
                if bad:
                    self.books.instant("K14", f"partition/{p.topic_id}/{p.partition_id}", offset, bad, count=False)
        if self.reported_dirs:
            self._recorded_assignments(p, offset, ts)

    def _on_registration(self, r: RegisterBroker | UnregisterBroker, offset: int) -> None:
        """RegisterBroker, UnregisterBroker: a broker process comes or goes; every partition it
        hosts is re-checked."""
        if self._apply(r, offset):
            self._broker_lives(r.broker_id, type(r) is RegisterBroker, offset, r.ts_ms)
            self._broker(r.broker_id, offset, r.ts_ms, "all")

    def _on_fencing(self, r: FenceBroker | UnfenceBroker, offset: int) -> None:
        """FenceBroker, UnfenceBroker: the leaders' side (K4) of the partitions it hosts."""
        if self._apply(r, offset):
            self._broker_lives(r.id, False, offset, r.ts_ms)
            self._broker(r.id, offset, r.ts_ms, "fencing")

    def _on_registration_change(self, r: BrokerRegistrationChange, offset: int) -> None:
        """A change may fence or unfence the broker and move its directories: K7 for each
        directory it removes, then the partitions on what moved."""
        view, broker, ts = self.view, r.broker_id, r.ts_ms
        dirs_before = None
        if r.log_dirs:
            reg = view.brokers.get(broker)
            dirs_before = reg.log_dirs if reg is not None else ()
        if not self._apply(r, offset):
            return
        self._broker_lives(broker, False, offset, ts)
        changed_dirs: list[str] = []
        if dirs_before is not None:
            now = view.brokers[broker].log_dirs
            changed_dirs = [d for d in dirs_before if d not in now] + [d for d in now if d not in dirs_before]
            for d in dirs_before:
                if d not in now:
                    self.books.checked["K7"] += 1
                    for p, why in kinv.dir_removal_complete(view, broker, d, self.by_dir):
                        self.books.instant("K7", f"partition/{p.topic_id}/{p.partition_id}", offset, why, count=False)
        fencing = r.fenced != 0
        if fencing:
            self._broker(broker, offset, ts, "fencing")
        if changed_dirs:
            self._broker(broker, offset, ts, "dirs", changed_dirs, k8=not fencing)
        if not fencing and not changed_dirs:
            self._broker(broker, offset, ts, "dirs", ())

    def _broker_lives(self, broker: int, registered: bool, offset: int, ts: int | None) -> None:
        """After a broker record (``registered``: a RegisterBroker): whether the broker was
        unfenced since it registered (K10), and the failures a new process (or none) makes moot."""
        reg = self.view.brokers.get(broker)
        if registered or reg is None:
            self.unfenced_since_registered[broker] = reg is not None and not reg.fenced
            # A new process (or none): a failure the old one did not report is moot (K12).
            self._dir_reported(broker, sorted(d for b, d in self.failed_unreported if b == broker), offset, ts)
        elif not reg.fenced:
            self.unfenced_since_registered[broker] = True

    def _on_remove_topic(self, r: RemoveTopic, offset: int) -> None:
        """The topic's partitions leave the indexes, and their open states close with them."""
        ts = r.ts_ms
        gone = list(self.view.partitions.get(r.topic_id, {}).values())
        removed = [f"partition/{p.topic_id}/{p.partition_id}" for p in gone]
        for p in gone:
            self.suspects.discard((p.topic_id, p.partition_id))
            self.elr_applies.discard((p.topic_id, p.partition_id))
            self._index((p.topic_id, p.partition_id), p, None)
            self._count_unassigned(p, None, offset, ts)
        if not self._apply(r, offset):
            return
        for entity in removed:
            for inv in ("K1", "K4", "K5", "K13", "K15"):
                if self.books.is_wrong(inv, entity):  # closed with the topic: not a new state
                    self._state(inv, entity, offset, ts, None, count=False)

    def _on_clear_elr(self, r: ClearElr, offset: int) -> None:
        """Each partition the ClearElr changed has a new state: its ELR empty (K13 and K15
        close), an empty ISR judged by the feature in force now (K1)."""
        view, ts = self.view, r.ts_ms
        elr_before = _with_elr(view, r.topic_name)
        if not self._apply(r, offset):
            return
        on = kinv.elr_enabled(view)
        checked = self.books.checked
        for old in elr_before:
            p = view.partitions[old.topic_id][old.partition_id]
            entity = f"partition/{p.topic_id}/{p.partition_id}"
            self.elr_applies.discard((p.topic_id, p.partition_id))
            # A new state of the partition (its partition epoch moves): one check of each
            # partition invariant, of K13/K15 where an ELR was judged away with the feature on.
            for inv in ("K1", "K3", "K4", "K5"):
                checked[inv] += 1
            if on and old.eligible_leader_replicas:
                checked["K13"] += 1
                checked["K15"] += 1
            if not p.isr:
                pkey = (p.topic_id, p.partition_id)
                self._state("K1", entity, offset, ts, kinv.leader_in_isr_in_replicas(p, on), pkey, count=False)
            for inv in ("K13", "K15"):
                if self.books.is_wrong(inv, entity):
                    self._state(inv, entity, offset, ts, None, count=False)

    def _on_assign_replicas_to_dirs(self, r: AssignReplicasToDirsRequest, offset: int) -> None:
        if self._apply(r, offset):
            self._reported_assignments(r, offset, r.ts_ms)

    def _on_log_dir_failed(self, r: LogDirFailed, offset: int) -> None:
        if self._apply(r, offset):
            self._observed_offline(r.broker_id, (r.directory,), offset, r.ts_ms)
            self._dir_failed(r, offset, r.ts_ms)

    def _on_heartbeat_offline_dirs(self, r: HeartbeatOfflineDirs, offset: int) -> None:
        if self._apply(r, offset):
            self._observed_offline(r.broker_id, r.offline_log_dirs, offset, r.ts_ms)
            self._dir_reported(r.broker_id, r.offline_log_dirs, offset, r.ts_ms)

    def _on_unfence_requested(self, r: UnfenceRequested, offset: int) -> None:
        if self._apply(r, offset):
            self._unfence_requested(r, offset)


Check = Callable[[KraftAudit, Any, int], None]
"""``(audit, record, offset)``: checks what a record of its class can change and folds it in."""

_CHECKS: dict[type, Check] = {
    Partition: KraftAudit._on_partition,
    PartitionChange: KraftAudit._on_partition,
    RegisterBroker: KraftAudit._on_registration,
    UnregisterBroker: KraftAudit._on_registration,
    FenceBroker: KraftAudit._on_fencing,
    UnfenceBroker: KraftAudit._on_fencing,
    BrokerRegistrationChange: KraftAudit._on_registration_change,
    RemoveTopic: KraftAudit._on_remove_topic,
    ClearElr: KraftAudit._on_clear_elr,
    AssignReplicasToDirsRequest: KraftAudit._on_assign_replicas_to_dirs,
    LogDirFailed: KraftAudit._on_log_dir_failed,
    HeartbeatOfflineDirs: KraftAudit._on_heartbeat_offline_dirs,
    UnfenceRequested: KraftAudit._on_unfence_requested,
}
"""Record class -> its handler; every other record (features, topics, configs, transactions, the
brokers' other observations) is folded in with nothing to check."""
