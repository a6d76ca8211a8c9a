"""The KRaft/JBOD invariants' entries in the catalogue (K1-K15): id, severity, definition, grace,
message templates and what a check is. Their per-record rules are beside them
(``invariants.py``), their SQL too (``invariants_sql.py``); ``statemachine.invariants`` assembles
the catalogue from every family's entries.
"""

from __future__ import annotations

from ..invariant import ERROR, KRAFT, REFUSED, WARNING, Invariant

INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "K1",
        KRAFT,
        ERROR,
        "leader = -1 or leader in ISR; ISR within the replicas and non-empty (empty only with eligible leader replicas on and no leader, KIP-966)",
        messages={
            "empty_isr": "the ISR is empty",
            "isr_outside_replicas": "ISR {isr} lists {outside}, not replicas {replicas}",
            "leader_outside_isr": "leader {leader} is not in the ISR {isr}",
        },
        counts="each partition state a record makes (an applied Partition or PartitionChange record, and each partition a ClearElr changes); a state re-judged at its brokers' records is not counted again",
        checks="partition states",
    ),
    Invariant(
        "K2",
        KRAFT,
        ERROR,
        "one directory per replica (assignment length = replicas)",
        messages={
            "refused": REFUSED,
            "assignment_length": "`assignment` has {entries} entries for {count} replicas {replicas}",
            "assignment_order": "`assignment` entry {index} is broker {broker}, replica {index} is {replica}",
        },
        counts="each published Partition or PartitionChange record, held to its replicas as it is applied: refused or not",
        checks="partition records",
    ),
    Invariant(
        "K3",
        KRAFT,
        ERROR,
        "epochs move as Kafka's: a change that removes a replica (or, before 3.6-IV0, shrinks the ISR) bumps the leader epoch; a partition rewritten whole has higher epochs, the leader's if it moved",
        messages={
            "replicas_left": "replicas {lost} left without a leader-epoch bump",
            "isr_shrunk": "ISR lost {shrunk} without a leader-epoch bump (metadata.version < 3.6-IV0)",
            "partition_epoch_stuck": "partition epoch {new} does not move past {old}",
            "leader_epoch_stuck": "leader {old} -> {new} keeps leader epoch {epoch}",
        },
        counts="each applied Partition or PartitionChange record of a partition that already exists, and each partition a ClearElr changes (a change of its state)",
        checks="partition changes",
        finds="wrong epochs: one change can get both epochs wrong",
    ),
    Invariant(
        "K4",
        KRAFT,
        ERROR,
        "a leader is registered, unfenced and on an online directory",
        graced=True,
        messages={
            "unregistered": "leader {leader} is not registered",
            "fenced": "leader {leader} is fenced",
            "offline_dir": "leader {leader} is on directory {directory}, which is offline",
        },
        counts="each partition state a record makes (an applied Partition or PartitionChange record, and each partition a ClearElr changes); a state re-judged at its brokers' records is not counted again",
        checks="partition states",
    ),
    Invariant(
        "K5",
        KRAFT,
        ERROR,
        "no ISR member on an offline directory (except the last replica standing)",
        graced=True,
        messages={
            "offline_members": "ISR members on offline directories: {members}",
            "member": "{broker} on {directory}",
        },
        counts="each partition state a record makes (an applied Partition or PartitionChange record, and each partition a ClearElr changes); a state re-judged at its brokers' records is not counted again",
        checks="partition states",
    ),
    Invariant(
        "K6",
        KRAFT,
        ERROR,
        "a directory a broker reports offline leaves its registration within the grace",
        graced=True,
        messages={
            "unhandled": "broker {broker} reported directory {directory} offline; the controller has not removed it"
        },
        checks="directory states",
        finds="directories left registered: each is checked when reported and when handled",
    ),
    Invariant(
        "K7",
        KRAFT,
        ERROR,
        "when a directory leaves a broker's LogDirs, no partition is led from it or keeps it in the ISR",
        messages={
            "leads": "broker {broker} still leads it on removed directory {directory}",
            "in_isr": "broker {broker} is still in its ISR on removed directory {directory}",
        },
        counts="each directory a BrokerRegistrationChange takes from a broker's LogDirs",
        checks="directory removals",
        finds="partitions left on a removed directory: one removal can leave several",
    ),
    Invariant(
        "K8",
        KRAFT,
        WARNING,
        "a multi-directory broker is not unfenced while replicas are UNASSIGNED (KIP-858 policy)",
        graced=True,
        messages={"unfenced": "unfenced with {unassigned} UNASSIGNED replica(s) on {dirs} directories"},
        counts="each state of a broker: at each broker record applied, and at each record that takes the broker's UNASSIGNED replicas from none to some or back",
        checks="broker states",
    ),
    Invariant(
        "K9",
        KRAFT,
        ERROR,
        "a replica directory its broker reports (AssignReplicasToDirs) is recorded within the grace",
        graced=True,
        messages={"unrecorded": "broker {broker} reported it in {reported}; recorded in {recorded}"},
        counts="each replica directory an accepted AssignReplicasToDirs request reports (its broker registered, at its epoch)",
        checks="replica directories reported",
    ),
    Invariant(
        "K10",
        KRAFT,
        ERROR,
        "a live multi-directory broker (registered; unfenced, or not yet since it registered) leaves no replica UNASSIGNED beyond the grace: it reports where new replicas live",
        graced=True,
        messages={"unassigned": "{unassigned} replica(s) UNASSIGNED on a live broker with {dirs} directories"},
        counts="as K8: each broker record applied, and each record that takes the broker's UNASSIGNED replicas from none to some or back",
        checks="broker states",
    ),
    Invariant(
        "K11",
        KRAFT,
        WARNING,
        "a multi-directory broker does not ask to be unfenced while its replicas' directories mismatch (UNASSIGNED in metadata, or by its own count; KIP-858 policy, the broker's side)",
        messages={
            "asked": "asked to be unfenced with {unassigned} UNASSIGNED replica(s) and {counted} mismatching by its own count, on {dirs} directories"
        },
        counts="each UnfenceRequested record",
        checks="unfence requests",
    ),
    Invariant(
        "K12",
        KRAFT,
        ERROR,
        "a broker reports a directory that failed (LogDirFailed) in a heartbeat within the grace, unless it restarts",
        graced=True,
        messages={
            "unreported": "broker {broker} saw directory {directory} fail and has not reported it in a heartbeat"
        },
        checks="directory states",
        finds="failures left unreported: each is checked when it fails and when reported",
    ),
    # -- KIP-966, eligible leader replicas (issue 34) ---------------------------------------
    Invariant(
        "K13",
        KRAFT,
        ERROR,
        "with KIP-966 on, the eligible leader replicas are replicas and not in the ISR",
        messages={
            "elr_outside_replicas": "ELR {elr} lists {outside}, not replicas {replicas}",
            "elr_in_isr": "ELR {elr} and ISR {isr} share {both}",
        },
        counts="each partition state made with KIP-966 on (by a Partition, PartitionChange or ClearElr record) whose ELR is non-empty or was just before; a state re-judged at its brokers' records is not counted again",
        checks="partition states with an ELR",
    ),
    Invariant(
        "K14",
        KRAFT,
        ERROR,
        "with KIP-966 on, a new leader comes from the ISR, or from the ELR when the ISR is empty (from the new ISR when the change completes a reassignment), unless the election is unclean (the ISR forced to the leader alone, RECOVERING from 3.2-IV0)",
        messages={"not_eligible": "leader {leader} elected from outside ISR {isr} and ELR {elr} in a clean election"},
        counts="each PartitionChange record that moves the leader with KIP-966 on",
        checks="leader moves",
    ),
    Invariant(
        "K15",
        KRAFT,
        WARNING,
        "with KIP-966 on, no eligible leader replica stays on an offline directory beyond the grace (KIP-858; a warning: Kafka 4.1 keeps such replicas in the ELR, and adds them when an offline directory shrinks the ISR below min.insync.replicas)",
        graced=True,
        messages={
            "offline_members": "ELR members on offline directories: {members}",
            "member": "{broker} on {directory}",
        },
        counts="as K13",
        checks="partition states with an ELR",
    ),
)
"""By number; reports list the catalogue in ``statemachine.invariants.ORDER``."""
