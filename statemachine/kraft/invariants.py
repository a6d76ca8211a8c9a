"""KRaft/JBOD invariants: what Kafka's controller (``ReplicationControlManager``,
``PartitionChangeBuilder``) keeps true of its view, checked on exactly the entities a record can
have changed. Their ids, definitions and words are their entries beside them (``catalogue``),
which ``statemachine.invariants`` assembles into the catalogue.

Each check is a pure function of the view (after the record) and returns a message when the
entity is wrong, None when it is right. The relational ones have their SQL beside them, in
``invariants_sql`` (one statement per invariant, the plan's registry of them). The audit engine (``replay.audit``) turns the answers
into intervals: a violation begins where an entity went wrong and ends where it was fixed,
after a grace for the states Kafka passes through legitimately.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from kraftlake.records.kraft import LRS_RECOVERING, NO_LEADER

from ..invariant import say
from .directory_ids import is_online
from .features import MV_3_2_IV0, MV_3_6_IV0
from .view import ControllerView, PartitionRegistration


def elr_enabled(view: ControllerView) -> bool:
    """The log's ``eligible.leader.replicas.version`` is >= 1 (KIP-966 on)."""
    return view.features.get("eligible.leader.replicas.version", 0) >= 1


def leader_in_isr_in_replicas(p: PartitionRegistration, elr: bool = False) -> str | None:
    """K1: leader = -1 or leader in ISR; ISR non-empty and within the replicas. With ``elr`` (the
    feature on) an empty ISR without a leader is KIP-966's leaderless state, not a fault."""
    if not p.isr:
        if elr and p.leader == NO_LEADER:
            return None
        return k1_message("empty_isr", p.isr, p.replicas, p.leader)
    if any(b not in p.replicas for b in p.isr):
        return k1_message("isr_outside_replicas", p.isr, p.replicas, p.leader)
    if p.leader != NO_LEADER and p.leader not in p.isr:
        return k1_message("leader_outside_isr", p.isr, p.replicas, p.leader)
    return None


# -- the words of each wrong state, from what it is: both engines word with these (the SQL plan's
# statements return the kind and the fields, ``invariants_sql``) ---------------------------------


def k1_message(kind: str, isr: Sequence[int], replicas: Sequence[int], leader: int) -> str:
    """K1's words for a state of ``kind`` (empty_isr, isr_outside_replicas, leader_outside_isr)."""
    if kind == "isr_outside_replicas":
        return say("K1", kind, isr=isr, outside=[b for b in isr if b not in replicas], replicas=replicas)
    if kind == "leader_outside_isr":
        return say("K1", kind, leader=leader, isr=isr)
    return say("K1", kind)


def k3_message(
    kind: str,
    old_replicas: Sequence[int],
    replicas: Sequence[int],
    old_isr: Sequence[int],
    isr: Sequence[int],
    old_leader: int,
    leader: int,
    le: int,
    pe: int,
    old_pe: int,
) -> str:
    """K3's words for a change of ``kind`` (replicas_left, isr_shrunk, partition_epoch_stuck,
    leader_epoch_stuck), from the partition before and after it."""
    if kind == "replicas_left":
        return say("K3", kind, lost=[b for b in old_replicas if b not in replicas])
    if kind == "isr_shrunk":
        return say("K3", kind, shrunk=[b for b in old_isr if b not in isr])
    if kind == "partition_epoch_stuck":
        return say("K3", kind, new=pe, old=old_pe)
    return say("K3", kind, old=old_leader, new=leader, epoch=le)


K4_RANKS = ("unregistered", "fenced", "offline_dir")
"""K4's reasons, worst first (the plan ranks them in SQL by this order)."""


def k4_message(reason: str, leader: int, directory: str | None) -> str:
    """K4's words for a leader that is ``reason`` (one of ``K4_RANKS``)."""
    if reason == "offline_dir":
        return say("K4", reason, leader=leader, directory=directory)
    return say("K4", reason, leader=leader)


def offline_members_message(inv: str, members: Iterable[tuple[int, str]]) -> str:
    """K5's or K15's words for the (broker, directory) members on offline directories."""
    return say(inv, "offline_members", members=", ".join(say(inv, "member", broker=b, directory=d) for b, d in members))


def k13_message(kind: str, elr: Sequence[int], replicas: Sequence[int], isr: Sequence[int]) -> str:
    """K13's words for an ELR of ``kind`` (elr_outside_replicas, elr_in_isr)."""
    if kind == "elr_outside_replicas":
        return say("K13", kind, elr=elr, outside=[b for b in elr if b not in replicas], replicas=replicas)
    return say("K13", kind, elr=elr, isr=isr, both=[b for b in elr if b in isr])


def k14_message(leader: int, isr: Sequence[int], elr: Sequence[int]) -> str:
    """K14's words for a ``leader`` elected from neither the ``isr`` nor the ``elr`` before."""
    return say("K14", "not_eligible", leader=leader, isr=isr, elr=elr)


class Registration(Protocol):
    """What K10 reads of a broker's registration (a ``BrokerRegistration``, or the plan's
    ``Registered``)."""

    @property
    def fenced(self) -> bool: ...
    @property
    def in_controlled_shutdown(self) -> bool: ...


def k10_live(reg: Registration | None, unfenced_since_registered: bool) -> bool:
    """K10's "live": registered, not shutting down, and either serving or starting (fenced but
    never unfenced since it registered); a broker fenced after serving is down."""
    return reg is not None and not reg.in_controlled_shutdown and (not reg.fenced or not unfenced_since_registered)


def k11_message(dirs: int, unassigned: int, counted: int) -> str | None:
    """K11: a multi-directory broker asking to be unfenced with replicas UNASSIGNED or directories
    that do not match (its own count, ``counted``); None when it may ask."""
    if dirs < 2 or (unassigned == 0 and counted == 0):
        return None
    return say("K11", "asked", unassigned=unassigned, counted=counted, dirs=dirs)


def elr_is_sound(p: PartitionRegistration) -> str | None:
    """K13: ELR within the replicas and disjoint from the ISR (Kafka's replay logs an overlap
    as an error; ``PartitionChangeBuilder`` never writes one)."""
    elr = p.eligible_leader_replicas
    if not elr:
        return None
    if any(b not in p.replicas for b in elr):
        return k13_message("elr_outside_replicas", elr, p.replicas, p.isr)
    if any(b in p.isr for b in elr):
        return k13_message("elr_in_isr", elr, p.replicas, p.isr)
    return None


def elr_is_online(view: ControllerView, p: PartitionRegistration) -> str | None:
    """K15: no ELR member whose replica is on a directory its broker no longer has online (it
    cannot lead from there, and a replaced disk would bring it back empty)."""
    if not p.eligible_leader_replicas:
        return None
    return _offline_members(view, p, p.eligible_leader_replicas, "K15")


def leader_is_eligible(view: ControllerView, old: PartitionRegistration, new: PartitionRegistration) -> str | None:
    """K14: a change that moves the leader to a broker picks it from the ISR before the change, or
    from the ELR (``PartitionChangeBuilder.isValidNewLeader``), or, when the change completes a
    reassignment, from the ISR it writes; unless the election is unclean:
    an unclean one (or the last known leader's) forces the ISR to the leader alone and leaves the
    partition RECOVERING (from 3.2-IV0, which has the recovery state)."""
    leader = new.leader
    if leader == NO_LEADER or leader == old.leader or leader not in new.replicas:
        return None  # (a leader that is no replica is K1's)
    if leader in old.isr or leader in old.eligible_leader_replicas:
        return None
    if leader in new.isr and (len(new.isr) > 1 or new.replicas != old.replicas):
        # An AlterPartition elects from the ISR it writes when the sender cannot lead any more
        # (NEW_LEADER_ELECTED), and so does a reassignment that completes in the change.
        return None
    if new.isr == (leader,) and (new.leader_recovery_state == LRS_RECOVERING or view.metadata_version < MV_3_2_IV0):
        # Unclean (also the last known leader's election): the ISR forced to the leader, which
        # recovers (a partition already RECOVERING stays so).
        return None
    return k14_message(leader, old.isr, old.eligible_leader_replicas)


def leader_is_healthy(view: ControllerView, p: PartitionRegistration) -> str | None:
    """K4: a leader is registered, not fenced, and its replica's directory is online."""
    if p.leader == NO_LEADER:
        return None
    reg = view.brokers.get(p.leader)
    if reg is None:
        return k4_message("unregistered", p.leader, None)
    if reg.fenced:
        return k4_message("fenced", p.leader, None)
    d = p.directory(p.leader) if p.leader in p.replicas else None
    if d is not None and not is_online(d, reg.log_dirs):
        return k4_message("offline_dir", p.leader, d)
    return None


def isr_is_online(view: ControllerView, p: PartitionRegistration) -> str | None:
    """K5: no ISR member on an offline directory, except the last replica standing: removing a
    partition's sole ISR member, Kafka's ``ReplicationControlManager.generateLeaderAndIsrUpdates``
    sets the leader to -1 and leaves the ISR as it was."""
    if len(p.isr) == 1 and p.leader == NO_LEADER:
        return None
    return _offline_members(view, p, p.isr, "K5")


def _offline_members(view: ControllerView, p: PartitionRegistration, members: Iterable[int], inv: str) -> str | None:
    """``inv``'s message listing the ``members`` whose replica of ``p`` is on a directory their
    broker does not have online (K5 for the ISR, K15 for the ELR), or None."""
    where = dict(zip(p.replicas, p.directories))
    bad = []
    for b in members:
        reg = view.brokers.get(b)
        d = where.get(b)
        if reg is not None and d is not None and not is_online(d, reg.log_dirs):
            bad.append((b, d))
    return offline_members_message(inv, bad) if bad else None


def partition_is_sound(brokers: dict, p: PartitionRegistration) -> bool:
    """A fast screen for K1, K4 and K5 together: True only when all three checks above would
    answer None. False means "ask them" (they say what is wrong). The audit runs this on every
    partition a record touches; a property test holds it to the three checks."""
    isr, replicas, leader = p.isr, p.replicas, p.leader
    if not isr:
        return False
    for b in isr:
        if b not in replicas:
            return False
    dirs = p.directories
    if leader != NO_LEADER:
        if leader not in isr:
            return False
        reg = brokers.get(leader)
        if reg is None or reg.fenced:
            return False
        d = dirs[replicas.index(leader)]
        if d not in reg.log_dirs and not is_online(d, reg.log_dirs):
            return False
    elif len(isr) == 1:
        return True  # K5's last replica standing
    for b in isr:
        reg = brokers.get(b)
        if reg is not None:
            d = dirs[replicas.index(b)]
            if d not in reg.log_dirs and not is_online(d, reg.log_dirs):
                return False
    return True


def change_bumps_leader_epoch(
    view: ControllerView, old: PartitionRegistration, new: PartitionRegistration
) -> str | None:
    """K3: a change that removes a replica, or before 3.6-IV0 shrinks the ISR, sets the leader (a
    leader-epoch bump), as Kafka's ``PartitionChangeBuilder`` does
    (``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``,
    ``triggerLeaderEpochBumpForIsrShrinkIfNeeded``); replay itself makes partition epochs +1 per
    change."""
    if new.leader_epoch != old.leader_epoch:
        return None
    if any(b not in new.replicas for b in old.replicas):
        return _k3(view, "replicas_left", old, new)
    if view.metadata_version < MV_3_6_IV0 and any(b not in new.isr for b in old.isr):
        return _k3(view, "isr_shrunk", old, new)
    return None


def _k3(view: ControllerView, kind: str, old: PartitionRegistration, new: PartitionRegistration) -> str:
    return k3_message(
        kind, old.replicas, new.replicas, old.isr, new.isr, old.leader, new.leader,
        new.leader_epoch, new.partition_epoch, old.partition_epoch,
    )  # fmt: skip


def replacement_bumps_epochs(
    view: ControllerView, old: PartitionRegistration, new: PartitionRegistration
) -> str | None:
    """K3 for a Partition record that rewrites an existing partition: the partition epoch goes
    up, and so does the leader epoch when the leader moved (replaying a PartitionRecord takes
    both epochs as they are written)."""
    if new.partition_epoch <= old.partition_epoch:
        return _k3(view, "partition_epoch_stuck", old, new)
    if new.leader != old.leader and new.leader_epoch <= old.leader_epoch:
        return _k3(view, "leader_epoch_stuck", old, new)
    return None


def dir_removal_complete(
    view: ControllerView, broker: int, directory: str, dir_index: dict | None = None
) -> list[tuple[PartitionRegistration, str]]:
    """K7: when ``directory`` leaves ``broker``'s LogDirs, every partition with the broker's replica
    there no longer has it as leader, nor in the ISR unless it is the last replica standing: Kafka's
    ``ReplicationControlManager.handleDirectoriesOffline`` writes those partition changes before
    the BrokerRegistrationChangeRecord that removes the directory. UNASSIGNED and MIGRATING replicas are exempt. ``dir_index``
    (directory -> partitions) replaces the view's own index where the caller keeps one."""
    out = []
    index = view.dir_index if dir_index is None else dir_index
    for topic_id, partition_id in sorted(index.get(directory, ())):
        p = view.partition(topic_id, partition_id)
        if p is None or broker not in p.replicas or p.directory(broker) != directory:
            continue
        if p.leader == broker:
            out.append((p, say("K7", "leads", broker=broker, directory=directory)))
        elif broker in p.isr and not (p.isr == (broker,) and p.leader == NO_LEADER):
            out.append((p, say("K7", "in_isr", broker=broker, directory=directory)))
    return out
