"""The catalogue of invariants the audit checks: one place, each with id, severity, a one-line
definition and whether a grace applies (states Kafka passes through legitimately).

The checks themselves live beside their family (``statemachine/kraft/invariants.py``); the
engine (``replay.audit``) knows when to ask them.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR, WARNING = "error", "warning"
SEVERITIES = (WARNING, ERROR)


@dataclass(frozen=True)
class Invariant:
    id: str
    severity: str
    definition: str
    graced: bool = False
    """True: the state may be wrong for up to the grace (records and ms) before it counts."""


CATALOGUE: tuple[Invariant, ...] = (
    Invariant("L1", ERROR, "offsets are gapless and increasing"),
    Invariant("L3", ERROR, "records refer to existing entities (broker, topic, partition)"),
    Invariant("L4", ERROR, "broker epochs of registration changes, fences and unfences match the registration"),
    Invariant("L5", ERROR, "Kafka's other replay checks hold (transactions, directory ownership, producer ids)"),
    Invariant("K1", ERROR, "leader = -1 or leader in ISR; ISR non-empty and within the replicas"),
    Invariant("K2", ERROR, "one directory per replica (assignment length = replicas)"),
    Invariant(
        "K3",
        ERROR,
        "epochs move as Kafka's: a change that removes a replica (or, before 3.6-IV0, shrinks the ISR) bumps the leader epoch; a partition rewritten whole has higher epochs, the leader's if it moved",
    ),
    Invariant("K4", ERROR, "a leader is registered, unfenced and on an online directory", graced=True),
    Invariant("K5", ERROR, "no ISR member on an offline directory (except the last replica standing)", graced=True),
    Invariant(
        "K6", ERROR, "a directory a broker reports offline leaves its registration within the grace", graced=True
    ),
    Invariant(
        "K7", ERROR, "when a directory leaves a broker's LogDirs, no partition is led from it or keeps it in the ISR"
    ),
    Invariant(
        "K9",
        ERROR,
        "a replica directory its broker reports (AssignReplicasToDirs) is recorded within the grace",
        graced=True,
    ),
    Invariant(
        "K8",
        WARNING,
        "a multi-directory broker is not unfenced while replicas are UNASSIGNED (KIP-858 policy)",
        graced=True,
    ),
    Invariant(
        "K10",
        ERROR,
        "a live multi-directory broker (registered; unfenced, or not yet since it registered) leaves no replica UNASSIGNED beyond the grace: it reports where new replicas live",
        graced=True,
    ),
    Invariant(
        "K11",
        WARNING,
        "a multi-directory broker does not ask to be unfenced while its replicas' directories mismatch (UNASSIGNED in metadata, or by its own count; KIP-858 policy, the broker's side)",
    ),
    Invariant(
        "K12",
        ERROR,
        "a broker reports a directory that failed (LogDirFailed) in a heartbeat within the grace, unless it restarts",
        graced=True,
    ),
    Invariant(
        "S1",
        ERROR,
        "a stream's range starts do not decrease with the range index; a gap between remaining ranges is held by stream objects (AutoMQ I1)",
        graced=True,
    ),
    Invariant(
        "S2", ERROR, "a stream's current range is its last, and range epochs increase with the index (I2)", graced=True
    ),
    Invariant(
        "S3",
        ERROR,
        "a stream's start is not above its logical end, and no range but the current one lies below the start (I3)",
        graced=True,
    ),
    Invariant(
        "S4",
        ERROR,
        "a committed end offset above the stream's start is never below its logical end: the end never moves back (I4)",
    ),
    Invariant(
        "S5",
        ERROR,
        "no two objects (stream objects, stream-set objects' ranges) hold the same offset of a stream (I5)",
        graced=True,
    ),
    Invariant(
        "S6",
        ERROR,
        "every offset of a stream in [start, logical end) is held by an object, or by a node's active historical WAL duty (I6)",
        graced=True,
    ),
    Invariant("S7", ERROR, "every object a stream or node references is COMMITTED (I7)", graced=True),
    Invariant("S8", ERROR, "stream and object ids are below their assigned high-water marks and never used again (I8)"),
    Invariant(
        "S9", ERROR, "an active historical WAL duty matches exactly one sealed range of its node (I9)", graced=True
    ),
    Invariant(
        "S10",
        ERROR,
        "a stream never opened (epoch -1) has no range and is CLOSED; an OPENED stream has its current range (I10)",
        graced=True,
    ),
    Invariant("S11", ERROR, "no PREPARED object outlives its deadline by more than the check interval"),
    Invariant(
        "B1",
        ERROR,
        "a lost bookie's ledgers are marked under-replicated once its recovery delay ends: not before (unless a second bookie is lost or the delay is rewritten), and within the grace after (rules 1-3, 5)",
    ),
    Invariant(
        "B2",
        ERROR,
        "an ensemble keeps E distinct bookies; a repair changes only bad positions, each to a bookie outside the ensemble, under the same key (rules 7, 8)",
    ),
    Invariant(
        "B3",
        ERROR,
        "a ledger marked replicated has every entry on at least A available bookies of its write set (rule 13)",
    ),
    Invariant(
        "B4",
        ERROR,
        "a bookie becomes DRAINED only when no ensemble names it and no under-replication mark lists it (rule 17)",
    ),
    Invariant("B5", ERROR, "no entry is written to a ledger after it was closed or fenced"),
    Invariant("B6", ERROR, "a ledger's replication lock is held by at most one worker (rule 4)"),
    Invariant(
        "B7",
        ERROR,
        "placement follows the capped free-disk weights: over the history, no bookie is drawn more than 5 standard deviations away from its expected count (rule 15; checked from 100 draws)",
    ),
    Invariant(
        "B8",
        ERROR,
        "no entry loses every replica of its write set (data loss: the ledger and entry range are named; rule 13)",
    ),
    Invariant(
        "S12",
        ERROR,
        "data that moves a stream's logical end comes from the current owner of an OPENED stream and continues the end exactly",
    ),
)
BY_ID = {i.id: i for i in CATALOGUE}

REPLAY_RULE_TO_INVARIANT = {
    "R-REPLAY-ORDER": "L1",
    "R-REPLAY-BROKER": "L3",
    "R-REPLAY-TOPIC": "L3",
    "R-REPLAY-PARTITION": "L3",
    "R-REPLAY-BROKER-EPOCH": "L4",
    "R-REPLAY-DIRECTORIES": "K2",
    "R-REPLAY-DIR-OWNER": "L5",
    "R-REPLAY-TXN": "L5",
    "R-REPLAY-PRODUCER-IDS": "L5",
    "R-REPLAY-LEDGER": "L3",
    "R-REPLAY-BOOKIE": "L3",
}
"""A record the reducer refuses is a violation of this invariant (and is skipped)."""
