"""The invariant catalogue: every invariant the audits check, defined once.

Each invariant has its id, family, severity, one-line definition, whether a grace applies (states
the cluster passes through legitimately may be wrong for up to the grace, in records or in
milliseconds of ``ts_ms``, before they count) and the templates of its messages. Every engine
takes them from here: the checks beside each family (``statemachine/<family>/invariants.py``) and
the per-record audit (``replay``) word a violation with ``say``; so does the SQL plan's driver
(``replay.plan.run``), from the kinds and fields its queries return. A rule's words change here
and nowhere else.

A template's fields are filled by ``words``: a sequence as ``[a, b]``, anything else as ``str``.

A report's ``checked`` says how many times each invariant was asked, on every engine alike: the
subjects it judges, each counted once, at the record that brings it (``counts`` names them where
a rule judges more than records), not how often an engine looks at a subject again (the Python
engine re-checks a partition at its brokers' records; the plan joins its states with intervals;
neither counts that). A check is one evaluation of the invariant's rule at one record for one
subject, counted whether it finds the subject right or wrong: a finding is not a second check,
and a wrong state that closes because its subject went (a stream, reference, duty, object,
ledger or topic removed, a hold or an audit over) is no check. Every record is held to the rules the replay enforces (L3, L4, L5)
as it is applied: a report counts the records audited for each, as for L1
(``books.assemble_report`` says it); K2 counts the partition records.
``CHECKED`` and ``FINDS`` say it in a few words, for a report's reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

ERROR, WARNING = "error", "warning"
SEVERITIES = (WARNING, ERROR)
LOG, KRAFT, S3STREAM, BOOKKEEPER = "log", "kraft", "s3stream", "bookkeeper"

REFUSED = "{rule}: {message} (record skipped)"
"""A record the reducer refuses (Kafka's replay would have): its rule and reason."""


def words(value: object) -> str:
    """How a template shows a value: a sequence as ``[a, b]`` (Python's list of ints), else str."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(x) for x in value) + "]"
    return str(value)


@dataclass(frozen=True)
class Invariant:
    id: str
    family: str
    severity: str
    definition: str
    graced: bool = False
    """True: the state may be wrong for up to the grace (records and ms) before it counts."""
    messages: Mapping[str, str] = field(default_factory=dict)
    """Message templates by kind (``say``)."""
    counts: str = ""
    """What one check is, for the report's ``checked``, where it is not one per record the rule
    applies to (the module's docstring)."""


def say(invariant: str, kind: str, **fields: object) -> str:
    """The message of kind ``kind`` of ``invariant``, its fields filled in (``words``). Kept to
    about a microsecond: an audit words every wrong state it re-checks, hundreds of thousands in
    a history with many violations."""
    for name, value in fields.items():
        if isinstance(value, (list, tuple)):
            fields[name] = words(value)
    return _TEMPLATES[invariant, kind].format_map(fields)


CATALOGUE: tuple[Invariant, ...] = (
    Invariant(
        "L1", LOG, ERROR, "offsets are gapless and increasing", messages={"gap": "offset {offset} follows {last}"}
    ),
    Invariant(
        "L3",
        LOG,
        ERROR,
        "records refer to existing entities (broker, topic, partition; bookie, ledger)",
        messages={
            "refused": REFUSED,
            "topic_missing": "topic {topic} does not exist",
            "partition_missing": "partition {partition} does not exist",
        },
    ),
    Invariant(
        "L4",
        LOG,
        ERROR,
        "broker epochs of registration changes, fences and unfences match the registration",
        messages={"refused": REFUSED},
    ),
    Invariant(
        "L5",
        LOG,
        ERROR,
        "Kafka's other replay checks hold (transactions, directory ownership, producer ids)",
        messages={"refused": REFUSED},
    ),
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
    ),
    Invariant(
        "K9",
        KRAFT,
        ERROR,
        "a replica directory its broker reports (AssignReplicasToDirs) is recorded within the grace",
        graced=True,
        messages={"unrecorded": "broker {broker} reported it in {reported}; recorded in {recorded}"},
        counts="each replica directory an accepted AssignReplicasToDirs request reports (its broker registered, at its epoch)",
    ),
    Invariant(
        "K8",
        KRAFT,
        WARNING,
        "a multi-directory broker is not unfenced while replicas are UNASSIGNED (KIP-858 policy)",
        graced=True,
        messages={"unfenced": "unfenced with {unassigned} UNASSIGNED replica(s) on {dirs} directories"},
        counts="each state of a broker: at each broker record applied, and at each record that takes the broker's UNASSIGNED replicas from none to some or back",
    ),
    Invariant(
        "K10",
        KRAFT,
        ERROR,
        "a live multi-directory broker (registered; unfenced, or not yet since it registered) leaves no replica UNASSIGNED beyond the grace: it reports where new replicas live",
        graced=True,
        messages={"unassigned": "{unassigned} replica(s) UNASSIGNED on a live broker with {dirs} directories"},
        counts="as K8: each broker record applied, and each record that takes the broker's UNASSIGNED replicas from none to some or back",
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
    ),
    # -- KIP-966, eligible leader replicas (issue 34): one block, for merging -------------------
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
    ),
    Invariant(
        "K14",
        KRAFT,
        ERROR,
        "with KIP-966 on, a new leader comes from the ISR, or from the ELR when the ISR is empty (from the new ISR when the change completes a reassignment), unless the election is unclean (the ISR forced to the leader alone, RECOVERING from 3.2-IV0)",
        messages={"not_eligible": "leader {leader} elected from outside ISR {isr} and ELR {elr} in a clean election"},
        counts="each PartitionChange record that moves the leader with KIP-966 on",
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
    ),
    Invariant(
        "S1",
        S3STREAM,
        ERROR,
        "a stream's range starts do not decrease with the range index; a gap between remaining ranges is held by stream objects (AutoMQ's openStream removes only ranges stream objects hold: StreamRuntimeMetadata.checkRemovableRanges)",
        graced=True,
        messages={
            "out_of_order": "range {range} starts at {start}, before range {previous} ({previous_start})",
            "gap": "offsets [{start}, {end}) between ranges {previous} and {range} are in no stream object",
        },
        counts="each stream there is, at each record that changes its ranges, epoch, state or stream objects (S3Stream, Range, RemoveRange, S3StreamObject, RemoveS3StreamObject); what was wrong of a stream removed closes with it, no check",
    ),
    Invariant(
        "S2",
        S3STREAM,
        ERROR,
        "a stream's current range is its last, and range epochs increase with the index (AutoMQ's StreamControlManager.openStream adds a range only for a higher epoch)",
        graced=True,
        messages={
            "not_last": "current range index {index} is not the last range {last}",
            "epoch_not_above": "range {range} has epoch {epoch}, not above range {previous}'s {previous_epoch}",
        },
        counts="as S1",
    ),
    Invariant(
        "S3",
        S3STREAM,
        ERROR,
        "a stream's start is not above its logical end, and no range but the current one lies below the start (as AutoMQ's StreamControlManager.trimStream keeps them)",
        graced=True,
        messages={
            "start_above_end": "start offset {start} is above the logical end {end}",
            "range_below_start": "range {range} ends at {end}, below the start offset {start}",
        },
        counts="as S1, and each stream there is at each record that moves its logical end (S3StreamEndOffsets, a stream-set object's inline ranges)",
    ),
    Invariant(
        "S4",
        S3STREAM,
        ERROR,
        "a committed end offset above the stream's start is never below its logical end: the end never moves back (AutoMQ's StreamRuntimeMetadata.endOffset only moves it forward)",
        messages={"end_moves_back": "end offset {end} is below the logical end {logical_end}"},
        counts="each end an S3StreamEndOffsets record commits",
    ),
    Invariant(
        "S5",
        S3STREAM,
        ERROR,
        "no two objects (stream objects, stream-set objects' ranges) hold the same offset of a stream (AutoMQ's read path, S3StreamsMetadataImage.getObjects, assumes it)",
        graced=True,
        messages={
            "overlap": "offsets [{start}, {end}) are held by {first} and {second}",
            "stream_object": "stream object {object}",
            "stream_set_object": "stream-set object {object} of node {node}",
        },
        counts="each stream there is whose objects, duties, start or end a batch (a run of records with one time) changed, once, at the batch's end; what was wrong of a stream removed closes with it, no check",
    ),
    Invariant(
        "S6",
        S3STREAM,
        ERROR,
        "every offset of a stream in [start, logical end) is held by an object, or by a node's active historical WAL duty (AutoMQ's read path, S3StreamsMetadataImage.getObjects, assumes it)",
        graced=True,
        messages={"gap": "offsets [{start}, {end}) are in no object"},
        counts="as S5",
    ),
    Invariant(
        "S7",
        S3STREAM,
        ERROR,
        "every object a stream or node references is COMMITTED (AutoMQ commits it, S3ObjectControlManager.commitObject, in the result that references it)",
        graced=True,
        messages={"gone": "object {object} is gone", "not_committed": "object {object} is {state}"},
        counts="each reference (a stream's stream object, a node's stream-set object) at each record that adds it or changes its object; what was wrong of a reference dropped closes with it, no check",
    ),
    Invariant(
        "S8",
        S3STREAM,
        ERROR,
        "stream and object ids are below their assigned high-water marks and never used again (AutoMQ's nextAssignedStreamId, nextAssignedObjectId)",
        messages={
            "unassigned": "{id_kind} id {id} was never assigned (next is {next})",
            "reused": "{id_kind} id {id} is used again",
            "prepared_again": "object id {object} is prepared again",
            "back_to_prepared": "object {object} goes back to PREPARED from {state}",
            "mark_moves_back": "the {id_kind} id high-water mark moves back from {old} to {new}",
        },
        counts="each id a record uses (a stream made, a stream object, a stream-set object, an object PREPARED: below its mark, a stream's not used before, an object prepared once) and each high-water mark a record assigns",
    ),
    Invariant(
        "S9",
        S3STREAM,
        ERROR,
        "an active historical WAL duty matches exactly one sealed range of its node (else AutoMQ's StreamControlManager.getOpeningStreams fails)",
        graced=True,
        messages={
            "unmatched": "duty [{start}, {end}) matches {count} sealed range(s) of node {node}",
            "reversed": "entry [{start}, {end}) has its start above its end (ignored)",
        },
        counts="each entry a NodeWALUncommittedOffsets record carries (its start not above its end), and each active duty at each record that changes it, its node's ranges or its stream; what was wrong of a duty gone closes with it, no check",
    ),
    Invariant(
        "S10",
        S3STREAM,
        ERROR,
        "a stream never opened (epoch -1) has no range and is CLOSED; an OPENED stream has its current range (as AutoMQ's StreamControlManager.createStream and openStream make them)",
        graced=True,
        messages={
            "ranges_unopened": "epoch -1 but {count} range(s)",
            "opened_unopened": "OPENED at epoch -1",
            "no_current_range": "OPENED without its current range {index}",
        },
        counts="as S1",
    ),
    Invariant(
        "S11",
        S3STREAM,
        ERROR,
        "no PREPARED object outlives its deadline by more than the check interval",
        messages={"overdue": "PREPARED past its deadline {deadline} by more than {interval} ms"},
        counts="each deadline of a PREPARED object, once the check interval past it has passed (at the first record after); what was wrong of an object no longer PREPARED closes, no check",
    ),
    Invariant(
        "B1",
        BOOKKEEPER,
        ERROR,
        "a lost bookie's ledgers are marked under-replicated once its recovery delay ends: not before (unless a second bookie is lost or the delay is rewritten), and within the grace after (as BookKeeper's Auditor.submitAuditTask schedules the audit); a delay rewritten to 0 or to its value, or a new auditor, audits at once every bookie an ensemble names that is not available, registered or not (AuditorBookieCheckTask)",
        messages={
            "early": "ledger {ledger} marked {early} ms before the recovery delay ends",
            "late": "lost, its audit fell due at {due}; {ledgers} ledger(s) naming it are not all marked",
        },
        counts="each bookie a LedgerUnderReplicated record lists (marked not before its audit falls due), and each bookie whose audit is due, at each record with a time (marked within the grace after); what was wrong of an audit no longer due closes, no check",
    ),
    Invariant(
        "B2",
        BOOKKEEPER,
        ERROR,
        "an ensemble keeps E distinct bookies; a repair changes only bad positions, each to a bookie outside the ensemble, under the same key (BookKeeper's LedgerMetadataBuilder; BookKeeperAdmin.replicateLedgerFragment with replaceBookie)",
        messages={
            "size": "ensemble at {key} has {count} bookies, E is {ensemble_size}",
            "repeated": "ensemble at {key} lists {bookies} twice",
            "key_below_last": "new ensemble key {key} is below the last key {last}",
            "replacement_in_ensemble": "position {position}: {was} replaced by {now}, already in the ensemble {ensemble}",
            "malformed": "ensemble at {key} is {ensemble}, E is {ensemble_size}",
        },
        counts="each LedgerEnsembleChange record",
    ),
    Invariant(
        "B3",
        BOOKKEEPER,
        ERROR,
        "a ledger marked replicated has every entry on at least A available bookies of its write set (fewer is what BookKeeper's AuditorReplicasCheckTask counts as less than AQ replicas of an entry)",
        messages={"below_ack": "marked replicated with entry {entry} on {copies} bookie(s), below A = {ack_quorum}"},
        counts="each LedgerReplicated record",
    ),
    Invariant(
        "B4",
        BOOKKEEPER,
        ERROR,
        "a bookie becomes DRAINED only when no ensemble names it and no under-replication mark lists it (the completion test of BookKeeper's BookKeeperAdmin.decommissionBookie)",
        messages={"drained": "DRAINED while {reason}"},
        counts="each BookieStateChange to DRAINED",
    ),
    Invariant(
        "B5",
        BOOKKEEPER,
        ERROR,
        "no entry is written to a ledger after it was closed or fenced",
        messages={
            "after_close": "entries up to {entry} written after the ledger was closed at {last}",
            "after_fence": "entries up to {entry} written after the ledger was fenced at {last}",
        },
        counts="each LedgerEntriesWritten record",
    ),
    Invariant(
        "B6",
        BOOKKEEPER,
        ERROR,
        "a ledger's replication lock is held by at most one worker (the lock BookKeeper's LedgerUnderreplicationManager.getLedgerToRereplicate takes)",
        messages={
            "taken": "worker {worker} takes the lock {holder} holds",
            "unmarked": "locked by {holder} without a mark",
        },
        counts="each LedgerReplicationLock record",
    ),
    Invariant(
        "B7",
        BOOKKEEPER,
        ERROR,
        "placement follows the capped free-disk weights: over the history, no bookie's count of draws is further from its expected count than 5 standard deviations would be (the one-sided tail probability of a Poisson law with the expected count as mean, beyond the normal law's at 5 sigma; BookKeeper's WeightedRandomSelectionImpl; checked from 100 draws)",
        messages={
            "skewed": "chosen {observed} times in {draws} draws; the capped weights expect {expected} ({z} sigma, tolerance {sigmas})"
        },
        counts="each placement draw (a new ensemble's first bookie, each replacement), judged together at the end",
    ),
    Invariant(
        "B8",
        BOOKKEEPER,
        ERROR,
        "no entry loses every replica of its write set (data loss: the ledger and entry range are named; what BookKeeper's AuditorReplicasCheckTask counts as no replica of an entry)",
        messages={
            "lost": "entries {entries} have no available replica (E/W/A {ensemble_size}/{write_quorum}/{ack_quorum})"
        },
        counts="each ledger there is, at each record that changes its ensembles or entries (LedgerCreated, LedgerEnsembleChange, LedgerEntriesWritten, LedgerClosed) and at each BookieAvailability of a bookie it names; what was wrong of a ledger deleted closes with it, no check",
    ),
    # -- issue 35 (AutoMQ's and BookKeeper's own behaviours): B9, B10, S13, S14 ---------------------
    Invariant(
        "B9",
        BOOKKEEPER,
        ERROR,
        "a replication lock a worker keeps after a failed repair is released when its hold ends, within the grace (BookKeeper's ReplicationWorker.deferLedgerLockReleaseOfFailedLedger releases it on a timer)",
        messages={
            "held_past": "locked by {holder} past the end of its hold at {until} (after {failures} failed repair(s))"
        },
        counts="each hold (a lock a worker keeps after a failed repair), at each record with a time while it lasts; what was wrong of a hold gone closes with it, no check",
    ),
    Invariant(
        "B10",
        BOOKKEEPER,
        ERROR,
        "a classic decommission starts only for a bookie that is neither writable nor read-only, and removes the bookie only once no ensemble names it and no mark lists it (BookKeeper's BookKeeperAdmin.decommissionBookie)",
        messages={
            "available": "decommissioned while {availability}",
            "still_named": "decommissioned while {reason}",
        },
        counts="each BookieDecommissionStarted and BookieDecommissioned record",
    ),
    Invariant(
        "S13",
        S3STREAM,
        ERROR,
        "a MARK_DESTROYED object is deleted no sooner than the object retention after it was marked (AutoMQ's S3ObjectControlManager deletes after one to two retention periods, s3.object.delete.retention.minutes)",
        messages={"early": "deleted {age} ms after it was marked destroyed, before the retention of {retention} ms"},
        counts="each RemoveS3Object of a MARK_DESTROYED object, at a record with a time",
    ),
    Invariant(
        "S14",
        S3STREAM,
        ERROR,
        "a node's registration never goes back to a lower node epoch (AutoMQ's NodeControlManager.register answers NODE_EPOCH_EXPIRED)",
        messages={"epoch_back": "registered at epoch {new}, below its epoch {old}"},
        counts="each node registration a KV record writes",
    ),
    Invariant(
        "S12",
        S3STREAM,
        ERROR,
        "data that moves a stream's logical end comes from the current owner of an OPENED stream and continues the end exactly",
        messages={
            "not_owner": "node {node} moves the logical end {logical_end} -> {end} but node {owner} owns the stream",
            "closed": "moves the logical end {logical_end} -> {end} of a CLOSED stream",
            "gap": "[{start}, {end}) leaves a gap at the logical end {logical_end}",
            "overlap": "[{start}, {end}) leaves an overlap at the logical end {logical_end}",
            "gap_at_start": "[{start}, {end}) leaves a gap at the start {stream_start} (the stream is trimmed to its end)",
            "stream_object": "stream object {object}: {problem}",
            "stream_set_object": "stream-set object {object} of node {node}: {problem}",
        },
        counts="each stream object, and each range of a stream-set object, that moves the logical end of a stream there is",
    ),
)
BY_ID = {i.id: i for i in CATALOGUE}

CHECKED = {
    "L1": "records",
    "L3": "records",
    "L4": "records",
    "L5": "records",
    "K1": "partition states",
    "K2": "partition records",
    "K3": "partition changes",
    "K4": "partition states",
    "K5": "partition states",
    "K6": "directory states",
    "K7": "directory removals",
    "K8": "broker states",
    "K9": "replica directories reported",
    "K10": "broker states",
    "K11": "unfence requests",
    "K12": "directory states",
    "K13": "partition states with an ELR",
    "K14": "leader moves",
    "K15": "partition states with an ELR",
    "S1": "stream states",
    "S2": "stream states",
    "S3": "stream states and ends",
    "S4": "committed ends",
    "S5": "stream coverages",
    "S6": "stream coverages",
    "S7": "references",
    "S8": "ids used and marks",
    "S9": "entries and duties",
    "S10": "stream states",
    "S11": "PREPARED deadlines",
    "S12": "data moving an end",
    "S13": "deletions",
    "S14": "registrations",
    "B1": "marks and due audits",
    "B2": "ensemble changes",
    "B3": "ledgers marked replicated",
    "B4": "bookies drained",
    "B5": "writes",
    "B6": "locks taken",
    "B7": "placement draws",
    "B8": "ledger states",
    "B9": "holds",
    "B10": "decommission steps",
}
"""What a report's ``checked`` counts of each invariant, in a few words (``counts`` says it
whole); "checks" where not said. L3-L5 hold every record as it is applied: they count records."""

FINDS = {
    "K7": "partitions left on a removed directory: one removal can leave several",
    "K3": "wrong epochs: one change can get both epochs wrong",
    "K6": "directories left registered: each is checked when reported and when handled",
    "K12": "failures left unreported: each is checked when it fails and when reported",
    "S8": "ids misused: the id a PREPARED object uses can be both beyond its mark and prepared again",
}
"""Where one check can find several violations, or one subject is checked more than once: what
a violation is, so that a reader can hold ``violations`` against ``checked``."""
_TEMPLATES = {(i.id, kind): template for i in CATALOGUE for kind, template in i.messages.items()}

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
