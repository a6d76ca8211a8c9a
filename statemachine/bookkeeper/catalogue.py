"""The BookKeeper invariants' entries in the catalogue (B1-B10): id, severity, definition, grace,
message templates and what a check is. Their per-record rules are beside them
(``invariants.py``); ``statemachine.invariants`` assembles the catalogue from every family's
entries.
"""

from __future__ import annotations

from ..invariant import BOOKKEEPER, ERROR, Invariant

INVARIANTS: tuple[Invariant, ...] = (
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
        checks="marks and due audits",
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
        checks="ensemble changes",
    ),
    Invariant(
        "B3",
        BOOKKEEPER,
        ERROR,
        "a ledger marked replicated has every entry on at least A available bookies of its write set (fewer is what BookKeeper's AuditorReplicasCheckTask counts as less than AQ replicas of an entry)",
        messages={"below_ack": "marked replicated with entry {entry} on {copies} bookie(s), below A = {ack_quorum}"},
        counts="each LedgerReplicated record",
        checks="ledgers marked replicated",
    ),
    Invariant(
        "B4",
        BOOKKEEPER,
        ERROR,
        "a bookie becomes DRAINED only when no ensemble names it and no under-replication mark lists it (the completion test of BookKeeper's BookKeeperAdmin.decommissionBookie)",
        messages={"drained": "DRAINED while {reason}"},
        counts="each BookieStateChange to DRAINED",
        checks="bookies drained",
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
        checks="writes",
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
        checks="locks taken",
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
        checks="placement draws",
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
        checks="ledger states",
    ),
    # -- issue 35 (AutoMQ's and BookKeeper's own behaviours) ----------------------------------
    Invariant(
        "B9",
        BOOKKEEPER,
        ERROR,
        "a replication lock a worker keeps after a failed repair is released when its hold ends, within the grace (BookKeeper's ReplicationWorker.deferLedgerLockReleaseOfFailedLedger releases it on a timer)",
        messages={
            "held_past": "locked by {holder} past the end of its hold at {until} (after {failures} failed repair(s))"
        },
        counts="each hold (a lock a worker keeps after a failed repair), at each record with a time while it lasts; what was wrong of a hold gone closes with it, no check",
        checks="holds",
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
        checks="decommission steps",
    ),
)
"""By number; reports list the catalogue in ``statemachine.invariants.ORDER``."""
