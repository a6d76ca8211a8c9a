"""The one place partition changes are made (``PartitionChangeBuilder``) and the one place they are
applied (``merge``), as in Kafka's ``PartitionChangeBuilder`` and ``PartitionRegistration.merge``.

Every decider that touches a partition configures a builder from the partition's current
registration and calls ``build()``, which returns a ``PartitionChange`` or ``None`` when nothing
would change; nothing else bumps epochs. Target semantics: Kafka 4.1, whose ELR logic (KIP-966)
is on only when the caller says the log's ``eligible.leader.replicas.version`` is >= 1; off, it
is Kafka 3.8/3.9's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TypedDict

from kraftlake.records.kraft import (
    LEADER_UNCHANGED,
    LRS_RECOVERING,
    LRS_UNCHANGED,
    MIGRATING,
    NO_LEADER,
    UNASSIGNED,
    Partition,
    PartitionChange,
    ReplicaDirectory,
)

from ..invariant import say
from .features import MV_3_2_IV0, MV_3_6_IV0, directories_supported, partition_record_version
from .reassignment import PartitionReassignmentReplicas
from .view import PartitionRegistration


class ChangeFields(TypedDict, total=False):
    """The fields of the PartitionChange a builder is putting together."""

    isr: tuple[int, ...]
    leader: int
    replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader_recovery_state: int
    eligible_leader_replicas: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    assignment: tuple[ReplicaDirectory, ...]


class Election(enum.Enum):
    """How the builder picks a leader (PartitionChangeBuilder.Election)."""

    ONLINE = "online"
    """Keep the leader if still valid, else the first valid ISR member in replica order."""
    PREFERRED = "preferred"
    """replicas[0] if valid, else as ONLINE."""
    UNCLEAN = "unclean"
    """As ONLINE; with no valid ISR member, any acceptable replica (ISR := [leader], RECOVERING)."""


# -- apply -----------------------------------------------------------------------------------------


def from_record(record: Partition) -> PartitionRegistration:
    """A PartitionRecord's registration (epochs verbatim, as Kafka's ``PartitionRegistration``). A
    record without directories (v0, or empty) puts every replica in MIGRATING, as Kafka reads it."""
    replicas = record.replicas
    if record.assignment:
        directories = tuple(a.directory for a in record.assignment)
    else:
        directories = (MIGRATING,) * len(replicas)
    return PartitionRegistration(
        topic_id=record.topic_id,
        partition_id=record.partition_id,
        replicas=replicas,
        directories=directories,
        isr=record.isr,
        removing_replicas=record.removing_replicas,
        adding_replicas=record.adding_replicas,
        leader=record.leader,
        leader_recovery_state=record.leader_recovery_state,
        leader_epoch=record.leader_epoch,
        partition_epoch=record.partition_epoch,
        eligible_leader_replicas=record.eligible_leader_replicas or (),
        last_known_elr=record.last_known_elr or (),
    )


def directories_from(
    replicas: tuple[int, ...], directories: tuple[str, ...], new_replicas: tuple[int, ...]
) -> tuple[str, ...]:
    """``DirectoryId.createDirectoriesFrom``: directories follow their replicas; new ones are
    UNASSIGNED."""
    where = dict(zip(replicas, directories))
    return tuple(where.get(r, UNASSIGNED) for r in new_replicas)


def all_migrating(directories: tuple[str, ...]) -> bool:
    """``PartitionRegistration.migratingDirectories``: every directory is MIGRATING (vacuously
    for none)."""
    return all(d == MIGRATING for d in directories)


def merge(p: PartitionRegistration, c: PartitionChange) -> PartitionRegistration:
    """Apply a PartitionChange exactly as ``PartitionRegistration.merge`` does: partition epoch +1,
    leader epoch +1 iff the change sets a leader, recovery state -1 kept.

    Raises ``ValueError`` when the change's directories do not fit the replicas.
    """
    # The hot path of every replay: locals, no helper calls unless replicas or directories move.
    new_replicas = c.replicas
    assignment = c.assignment
    if new_replicas is None:
        replicas = p.replicas
        directories = p.directories
    else:
        replicas = new_replicas
        if not assignment and all_migrating(p.directories):
            # Kafka 3.8+'s merge (KAFKA-16583, ``defaultToMigrating``): a change without
            # directories (v0, before 3.7-IV2) to a partition whose directories are all MIGRATING
            # leaves every replica MIGRATING, the new ones included (the plan's fold agrees:
            # ``replay/plan/sql.py``). Otherwise Kafka keeps the old list (whose length no longer
            # fits); kraftlake lets directories follow their replicas, new ones UNASSIGNED.
            directories = (MIGRATING,) * len(new_replicas)
        else:
            directories = directories_from(p.replicas, p.directories, new_replicas)
    if assignment:
        if len(assignment) != len(replicas):
            raise ValueError(
                say("K2", "assignment_length", entries=len(assignment), count=len(replicas), replicas=replicas)
            )
        directories = tuple([pair.directory for pair in assignment])
        for i, pair in enumerate(assignment):
            if pair.broker != replicas[i]:
                raise ValueError(say("K2", "assignment_order", index=i, broker=pair.broker, replica=replicas[i]))
    if not directories:
        # As the columnar plan: defaultToMigrating given the old replica count.
        directories = (MIGRATING,) * len(p.replicas)
    leader = c.leader
    if leader == LEADER_UNCHANGED:
        leader, leader_epoch = p.leader, p.leader_epoch
    else:
        leader_epoch = p.leader_epoch + 1
    lrs = c.leader_recovery_state
    isr = c.isr
    removing = c.removing_replicas
    adding = c.adding_replicas
    elr = c.eligible_leader_replicas
    last_known_elr = c.last_known_elr
    return PartitionRegistration(
        p.topic_id,
        p.partition_id,
        replicas,
        directories,
        p.isr if isr is None else isr,
        p.removing_replicas if removing is None else removing,
        p.adding_replicas if adding is None else adding,
        leader,
        p.leader_recovery_state if lrs == LRS_UNCHANGED else lrs,
        leader_epoch,
        p.partition_epoch + 1,
        p.eligible_leader_replicas if elr is None else elr,
        p.last_known_elr if last_known_elr is None else last_known_elr,
    )


# -- build -----------------------------------------------------------------------------------------


class _JavaHashSet:
    """The iteration order of a ``java.util.HashSet<Integer>``: Kafka builds ELR and LastKnownElr
    lists by streaming one, so their order is the hash table's (bucket = value mod capacity for
    broker ids below 65536, insertion order within a bucket, capacity doubling past 3/4 full)."""

    def __init__(self, initial: tuple[int, ...] | list[int]) -> None:
        # HashSet(Collection c): capacity max(c.size() / .75 + 1, 16), rounded up to a power of 2.
        want = max(int(len(initial) / 0.75) + 1, 16)
        self.capacity = 1 << (want - 1).bit_length()
        self.buckets: list[list[int]] = [[] for _ in range(self.capacity)]
        self.size = 0
        for v in initial:
            self.add(v)

    def _index(self, v: int, capacity: int) -> int:
        h = v & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    def add(self, v: int) -> None:
        bucket = self.buckets[self._index(v, self.capacity)]
        if v in bucket:
            return
        bucket.append(v)
        self.size += 1
        if self.size > self.capacity * 3 // 4:
            capacity = self.capacity * 2
            buckets: list[list[int]] = [[] for _ in range(capacity)]
            for old in self.buckets:
                for x in old:
                    buckets[self._index(x, capacity)].append(x)
            self.capacity, self.buckets = capacity, buckets

    def __iter__(self):
        for bucket in self.buckets:
            yield from bucket


class PartitionChangeBuilder:
    """Kafka's ``PartitionChangeBuilder`` (4.1): targets in, one change or None out.

    ``acceptor(r)`` says whether replica ``r`` may lead (Kafka's ``LeaderAcceptor``: the broker is
    acceptable *and* its replica's directory is online). ``default_dir(r)`` gives the directory of
    a replica that the partition does not have yet (Kafka's ``ClusterControlManager.defaultDir``).

    With ``elr_enabled`` (the log's ``eligible.leader.replicas.version`` >= 1, KIP-966) an ISR
    that shrinks below ``min_isr`` keeps its leavers as eligible leader replicas (ELR), the ISR
    may become empty, a leader is elected from the ELR when the ISR is empty, else the last known
    leader (kept in LastKnownElr) if it is acceptable (an unclean election); brokers in
    ``unclean_shutdown_replicas`` leave the ELR. Without it the ELR fields are emptied on the next
    change and the builder is Kafka 3.9's.

    Example::

        change = (
            PartitionChangeBuilder(p, acceptor=lambda r: r != 3, metadata_version=21)
            .set_target_isr((2, 1))
            .build()
        )  # PartitionChange(isr=(2, 1)): an ISR shrink does not bump the leader epoch
    """

    def __init__(
        self,
        partition: PartitionRegistration,
        *,
        acceptor: Callable[[int], bool],
        metadata_version: int,
        default_dir: Callable[[int], str] | None = None,
        min_isr: int = 1,
        elr_enabled: bool = False,
    ) -> None:
        self.partition = partition
        self.acceptor = acceptor
        self.metadata_version = metadata_version
        self.default_dir = default_dir or (lambda _r: UNASSIGNED)
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.target_isr: tuple[int, ...] = partition.isr
        self.target_replicas: tuple[int, ...] = partition.replicas
        self.target_removing: tuple[int, ...] = partition.removing_replicas
        self.target_adding: tuple[int, ...] = partition.adding_replicas
        self.target_elr: tuple[int, ...] = partition.eligible_leader_replicas
        self.target_last_known_elr: tuple[int, ...] = partition.last_known_elr
        self.target_lrs: int = partition.leader_recovery_state
        self.unclean_shutdown_replicas: tuple[int, ...] = ()
        self.use_last_known_leader = True
        """Kafka's ``useLastKnownLeaderInBalancedRecovery`` (true in every release): LastKnownElr
        holds the last known leader, not the last ELR members."""
        self.election = Election.ONLINE
        self.directory_overrides: dict[int, str] = {}

    def set_target_isr(self, isr: tuple[int, ...]) -> PartitionChangeBuilder:
        self.target_isr = tuple(isr)
        return self

    def set_target_replicas(self, replicas: tuple[int, ...]) -> PartitionChangeBuilder:
        self.target_replicas = tuple(replicas)
        return self

    def set_target_removing(self, removing: tuple[int, ...]) -> PartitionChangeBuilder:
        self.target_removing = tuple(removing)
        return self

    def set_target_adding(self, adding: tuple[int, ...]) -> PartitionChangeBuilder:
        self.target_adding = tuple(adding)
        return self

    def set_target_leader_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self.target_lrs = state
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self.election = election
        return self

    def set_eligible_leader_replicas_enabled(self, enabled: bool) -> PartitionChangeBuilder:
        self.elr_enabled = enabled
        return self

    def set_unclean_shutdown_replicas(self, replicas: tuple[int, ...]) -> PartitionChangeBuilder:
        self.unclean_shutdown_replicas = tuple(replicas)
        return self

    def set_use_last_known_leader_in_balanced_recovery(self, use: bool) -> PartitionChangeBuilder:
        self.use_last_known_leader = use
        return self

    def set_directory(self, broker: int, directory: str) -> PartitionChangeBuilder:
        self.directory_overrides[broker] = directory
        return self

    def set_directories(self, overrides: Mapping[int, str]) -> PartitionChangeBuilder:
        self.directory_overrides.update(overrides)
        return self

    # -- steps ---------------------------------------------------------------------------------

    def _complete_reassignment(self) -> None:
        """Step 1 (``completeReassignmentIfNeeded``): finish a reassignment once every replica
        that stays is in the target ISR (``PartitionReassignmentReplicas``)."""
        if not self.target_removing and not self.target_adding:
            return
        done = PartitionReassignmentReplicas(
            self.target_removing, self.target_adding, self.target_replicas
        ).maybe_complete(self.target_isr)
        if done is None:
            return
        self.target_replicas, self.target_isr = done
        self.target_removing, self.target_adding = (), ()

    def _populate_target_elr(self) -> None:
        """Step 2 (``maybePopulateTargetElr``): below min ISR, the ISR's leavers join the ELR."""
        if not self.elr_enabled:
            return
        isr = self.target_isr
        if len(isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = (), ()
            return
        candidates = _JavaHashSet(self.target_elr)
        for r in self.partition.isr:
            candidates.add(r)
        unclean = self.unclean_shutdown_replicas
        elr = tuple(r for r in candidates if r not in isr and r not in unclean)
        for r in self.target_last_known_elr:
            candidates.add(r)
        self.target_elr = elr
        self.target_last_known_elr = tuple(r for r in candidates if r not in isr and r not in elr)

    def _valid_leader(self, r: int) -> bool:
        isr = self.target_isr
        in_set = r in isr or (not isr and r in self.target_elr)
        return in_set and self.acceptor(r)

    def _can_elect_last_known_leader(self) -> bool:
        """``canElectLastKnownLeader``, with KAFKA-19522 (4.1): the last known leader must be
        acceptable."""
        if not self.elr_enabled or not self.use_last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        lke = self.partition.last_known_elr
        return len(lke) == 1 and self.acceptor(lke[0])

    def elect_leader(self) -> tuple[int, bool]:
        """Step 3's choice (Kafka's ``electLeader``): (leader, unclean), from the targets as they
        stand; ``build()`` calls it once the reassignment and the ELR targets are settled."""
        p, replicas = self.partition, self.target_replicas
        if self.election is Election.PREFERRED:
            if replicas and self._valid_leader(replicas[0]):
                return replicas[0], False
            if self._valid_leader(p.leader):
                return p.leader, False
            for r in replicas[1:]:
                if self._valid_leader(r):
                    return r, False
            if self._can_elect_last_known_leader():
                return p.last_known_elr[0], True
            return NO_LEADER, False
        if self._valid_leader(p.leader):
            return p.leader, False
        for r in replicas:
            if self._valid_leader(r):
                return r, False
        if self._can_elect_last_known_leader():
            return p.last_known_elr[0], True
        if self.election is Election.UNCLEAN:
            for r in replicas:
                if self.acceptor(r):
                    return r, True
        return NO_LEADER, False

    def _directories(self) -> tuple[str, ...]:
        """Step 9 (MV >= 3.7-IV2): override, else the replica's current dir, else the default."""
        p = self.partition
        current = dict(zip(p.replicas, p.directories))
        overrides = self.directory_overrides
        out = []
        for r in self.target_replicas:
            d = overrides.get(r)
            if d is None:
                d = current.get(r)
                if d is None:
                    d = self.default_dir(r)
            out.append(d)
        return tuple(out)

    def _update_elr(self, fields: ChangeFields) -> None:
        """Step 5 (``maybeUpdateRecordElr``): an unclean election or ELR off empties the ELR."""
        p = self.partition
        if "isr" in fields or not self.elr_enabled:
            self.target_elr, self.target_last_known_elr = (), ()
        if self.target_elr != p.eligible_leader_replicas:
            fields["eligible_leader_replicas"] = self.target_elr
        leader = fields.get("leader", LEADER_UNCHANGED)
        if (
            self.use_last_known_leader
            and len(p.last_known_elr) == 1
            and (leader == NO_LEADER or (leader == LEADER_UNCHANGED and p.leader == NO_LEADER))
        ):
            self.target_last_known_elr = p.last_known_elr
        if self.use_last_known_leader:
            return  # LastKnownElr is the last known leader: step 8 sets it.
        if self.target_last_known_elr != p.last_known_elr:
            fields["last_known_elr"] = self.target_last_known_elr

    def _update_last_known_leader(self, fields: ChangeFields) -> None:
        """Step 8 (``maybeUpdateLastKnownLeader``, as Kafka 4.1.1 simplified it): remember the
        leader the first time the partition becomes leaderless, whether or not its ISR changes;
        forget it once a change gives the partition a leader."""
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        leader = fields.get("leader", LEADER_UNCHANGED)
        if leader == NO_LEADER and not p.last_known_elr:
            fields["last_known_elr"] = (p.leader,)
        elif leader >= 0 and p.last_known_elr:
            fields["last_known_elr"] = ()

    def build(self) -> PartitionChange | None:
        """The change that takes the partition to the targets, or None if nothing changes."""
        p = self.partition
        mv = self.metadata_version
        fields: ChangeFields = {}

        self._complete_reassignment()
        self._populate_target_elr()

        # Step 3 (``tryElection``).
        leader, unclean = self.elect_leader()
        if leader != p.leader:
            if leader in self.target_elr:
                # Elected from the ELR: it is the whole ISR now.
                self.target_isr = (leader,)
                self.target_elr = tuple(r for r in self.target_elr if r != leader)
            fields["leader"] = leader
            if unclean:
                # Forcing the ISR to the new leader can lose data: this is what UNCLEAN means.
                fields["isr"] = (leader,)
                if p.leader_recovery_state != LRS_RECOVERING and mv >= MV_3_2_IV0:
                    fields["leader_recovery_state"] = LRS_RECOVERING

        # Step 4: a leader-epoch bump when a replica leaves (reassignment).
        if "leader" not in fields and not all(r in self.target_replicas for r in p.replicas):
            fields["leader"] = p.leader

        self._update_elr(fields)

        # Step 6: without ELR the ISR is never emptied ("last replica standing").
        if "isr" not in fields and (self.target_isr or self.elr_enabled) and self.target_isr != p.isr:
            fields["isr"] = self.target_isr

        # Step 7: before 3.6-IV0 (KAFKA-15021) a leader-epoch bump when the record's ISR drops a
        # member; it keys on the ISR the record sets, not on the target (KAFKA-16624).
        if mv < MV_3_6_IV0 and "leader" not in fields:
            isr = fields.get("isr")
            if isr is not None and not all(r in isr for r in p.isr):
                fields["leader"] = p.leader

        self._update_last_known_leader(fields)

        # Step 9: the assignment.
        replicas = self.target_replicas
        if replicas:
            if directories_supported(mv):
                directories = self._directories()
                if directories != p.directories:
                    fields["assignment"] = tuple(
                        ReplicaDirectory(broker=b, directory=d) for b, d in zip(replicas, directories)
                    )
            if replicas != p.replicas:
                fields["replicas"] = replicas
        if self.target_removing != p.removing_replicas:
            fields["removing_replicas"] = self.target_removing
        if self.target_adding != p.adding_replicas:
            fields["adding_replicas"] = self.target_adding

        # Step 10.
        if self.target_lrs != p.leader_recovery_state:
            fields["leader_recovery_state"] = self.target_lrs

        change = PartitionChange(
            version=partition_record_version(mv),
            topic_id=p.topic_id,
            partition_id=p.partition_id,
            **fields,
        )
        return None if change_record_is_no_op(change) else change


def change_record_is_no_op(c: PartitionChange) -> bool:
    """Kafka's ``PartitionChangeBuilder.changeRecordIsNoOp``: the change sets no field, so
    ``build()`` writes nothing (every field of a PartitionChange but its ids and version)."""
    return (
        c.isr is None
        and c.leader == LEADER_UNCHANGED
        and c.replicas is None
        and c.removing_replicas is None
        and c.adding_replicas is None
        and c.leader_recovery_state == LRS_UNCHANGED
        and c.eligible_leader_replicas is None
        and c.last_known_elr is None
        and not c.assignment  # empty = no directories in the record
    )


__all__ = [
    "Election",
    "PartitionChangeBuilder",
    "change_record_is_no_op",
    "directories_from",
    "from_record",
    "merge",
]
