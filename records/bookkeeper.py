"""BookKeeper records: bookies, ledgers and auto-recovery (auditor, under-replication marks,
replication locks) as immutable records, where BookKeeper keeps them as ZooKeeper znodes (ledger
metadata as ``LedgerMetadataImpl`` holds it, marks and locks as ``ZkLedgerUnderreplicationManager``
writes them, bookie registration and state as ``BookieStateManager`` keeps it).

Bookie ids are BookKeeper's (``host:port`` strings). A ledger's metadata is E (ensemble size), W
(write quorum) and A (ack quorum), and its ensembles keyed by the first entry id they serve; an
ensemble change under an existing key is a re-replication (positions keep their order), under a
new key a writer's change after a write failure. The lifecycle states ACTIVE, READ_ONLY,
DRAINING, DRAINING_FAILED, DRAINED are BP-4's proposal ("BookKeeper Lifecycle Management", never
implemented upstream), as kraftlake defines it.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from msgspec import Meta

from .base import Record
from .types import Int64, UInt63

__all__ = [
    "BookieState",
    "AuditorCheck",
    "Availability",
    "BookieId",
    "LedgerId",
    "BookKeeperRecord",
    "BookieRegistered",
    "BookieInfo",
    "BookieStateChange",
    "BookieAvailability",
    "LedgerCreated",
    "LedgerEnsembleChange",
    "LedgerClosed",
    "LedgerDeleted",
    "LedgerUnderReplicated",
    "LedgerReplicated",
    "LedgerReplicationLock",
    "LedgerReplicationUnlock",
    "AuditorElected",
    "RecoveryDelayChanged",
    "LedgerEntriesWritten",
    "BookieDecommissionStarted",
    "BookieDecommissioned",
    "LedgerReplicationToggled",
    "AuditorCheckRan",
    "BOOKKEEPER_RECORDS",
]


class BookieState(str, Enum):
    """A bookie's lifecycle (BP-4, kraftlake's design grounded in decommission)."""

    ACTIVE = "ACTIVE"
    READ_ONLY = "READ_ONLY"
    DRAINING = "DRAINING"
    DRAINING_FAILED = "DRAINING_FAILED"
    DRAINED = "DRAINED"


class AuditorCheck(str, Enum):
    """The auditor's periodic checks kraftlake schedules."""

    BOOKIE = "bookie"
    ALL_LEDGERS = "all_ledgers"


class Availability(str, Enum):
    """A bookie's registration: in the writable set, the read-only set, or neither (lost)."""

    WRITABLE = "WRITABLE"
    READ_ONLY = "READ_ONLY"
    LOST = "LOST"


BookieId = Annotated[str, Meta(min_length=1, max_length=255, description="a bookie id, host:port")]
LedgerId = Annotated[int, Meta(ge=0, le=2**63 - 1)]
EntryId = Annotated[int, Meta(ge=-1, le=2**63 - 1, description="-1: no entry")]
Quorum = Annotated[int, Meta(ge=1, le=1024)]


class BookKeeperRecord(Record, frozen=True, kw_only=True):
    FAMILY = "bookkeeper"


class BookieRegistered(BookKeeperRecord, frozen=True, kw_only=True):
    """A bookie joined the cluster (its cookie was written): ACTIVE, writable."""

    version: int = 0
    KEY = "bookie/{r.bookie_id}"
    bookie_id: BookieId
    rack: str | None = None


class BookieInfo(BookKeeperRecord, frozen=True, kw_only=True):
    """GET_BOOKIE_INFO: free and total bytes over the bookie's distinct ledger filesystems. The
    weight of weighted placement is ``free_bytes`` (BookKeeper's
    ``BookieInfoReader.BookieInfo.getWeight``)."""

    version: int = 0
    KEY = "bookie/{r.bookie_id}"
    bookie_id: BookieId
    free_bytes: Int64
    total_bytes: Int64

    def _validate(self) -> None:
        if not 0 <= self.free_bytes <= self.total_bytes:
            raise ValueError(f"`free_bytes`: {self.free_bytes} is not within 0..total_bytes {self.total_bytes}")


class BookieStateChange(BookKeeperRecord, frozen=True, kw_only=True):
    """A bookie's lifecycle state changed (an operator, or the drain's outcome)."""

    version: int = 0
    KEY = "bookie/{r.bookie_id}"
    bookie_id: BookieId
    state: BookieState
    reason: str | None = None


class BookieAvailability(BookKeeperRecord, frozen=True, kw_only=True):
    """The bookie's registration changed: writable, read-only (disks full, draining, an
    operator) or lost (its session is gone; its data is unreachable until it returns)."""

    version: int = 0
    KEY = "bookie/{r.bookie_id}"
    bookie_id: BookieId
    availability: Availability


class LedgerCreated(BookKeeperRecord, frozen=True, kw_only=True):
    """A writer created a ledger: E/W/A and its first ensemble (key 0)."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    ensemble_size: Quorum
    write_quorum: Quorum
    ack_quorum: Quorum
    ensemble: tuple[BookieId, ...]

    def _validate(self) -> None:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise ValueError(
                f"`write_quorum`: E >= W >= A does not hold: {self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}"
            )
        _ensemble(self.ensemble, self.ensemble_size)


class LedgerEnsembleChange(BookKeeperRecord, frozen=True, kw_only=True):
    """The ensemble serving entries from ``first_entry_id``: a new key (a writer replaced a failed
    bookie) or an existing one (re-replication replaced bookies at the same positions)."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    first_entry_id: LedgerId
    ensemble: tuple[BookieId, ...]

    def _validate(self) -> None:
        # A bookie listed twice is not refused here: it is what a faulty re-replication writes,
        # and the audit (B2) names it.
        if not self.ensemble:
            raise ValueError("`ensemble`: is empty")


class LedgerClosed(BookKeeperRecord, frozen=True, kw_only=True):
    """The ledger is sealed at ``last_entry_id`` (-1: empty): by its writer, or by recovery
    (``fenced``: a reader or a replication worker fenced it; the writer's adds now fail)."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    last_entry_id: EntryId
    length: Int64 = 0
    fenced: bool = False


class LedgerDeleted(BookKeeperRecord, frozen=True, kw_only=True):
    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId


class LedgerUnderReplicated(BookKeeperRecord, frozen=True, kw_only=True):
    """The auditor (or a drain) marked the ledger: ``missing`` bookies are added to its mark's
    set (a mark only grows until the ledger is marked replicated)."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    missing: tuple[BookieId, ...]


class LedgerReplicated(BookKeeperRecord, frozen=True, kw_only=True):
    """A worker repaired the ledger: its under-replication mark is gone."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    worker: str | None = None


class LedgerReplicationLock(BookKeeperRecord, frozen=True, kw_only=True):
    """A replication worker took the ledger's lock (``locks/urL<id>``), or, after a failed repair,
    keeps holding it until ``held_until_ms`` (the deferred release: the ledger's ``failures``-th
    failure on this worker, ``ReplicationWorker.deferLedgerLockReleaseOfFailedLedger``)."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    worker: str
    failures: UInt63 = 0
    held_until_ms: Int64 | None = None


class LedgerReplicationUnlock(BookKeeperRecord, frozen=True, kw_only=True):
    """The worker released the lock (done, failed, or its session died)."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    worker: str


class AuditorElected(BookKeeperRecord, frozen=True, kw_only=True):
    version: int = 0
    KEY = "auditor"
    auditor: str


class RecoveryDelayChanged(BookKeeperRecord, frozen=True, kw_only=True):
    """``lostBookieRecoveryDelay`` was written (rewriting the same value triggers an audit)."""

    version: int = 0
    KEY = "auditor"
    delay_ms: UInt63


class LedgerEntriesWritten(BookKeeperRecord, frozen=True, kw_only=True):
    """An observation from the ledger's writer: entries up to ``last_add_confirmed`` were
    acknowledged (by A bookies of each write set). What the loss and fencing audits hold the
    metadata against; BookKeeper itself keeps no such record."""

    version: int = 0
    KEY = "ledger/{r.ledger_id}"
    ledger_id: LedgerId
    last_add_confirmed: EntryId


class BookieDecommissionStarted(BookKeeperRecord, frozen=True, kw_only=True):
    """The classic decommission (``BookKeeperAdmin.decommissionBookie``) of a bookie that is stopped
    (neither writable nor read-only) began: it triggered an audit and waits for the bookie's
    ledgers to be re-replicated. Distinct from BP-4's drain of a live bookie (``BookieStateChange``
    to DRAINING)."""

    version: int = 0
    KEY = "bookie/{r.bookie_id}"
    bookie_id: BookieId
    delete_cookie: bool = True


class BookieDecommissioned(BookKeeperRecord, frozen=True, kw_only=True):
    """The decommission finished: no ensemble names the bookie and no mark lists it. With
    ``delete_cookie`` its cookie is deleted and the cluster forgets it (the CLI always deletes it,
    the HTTP call when asked, BP-68); an id registered again is a new bookie."""

    version: int = 0
    KEY = "bookie/{r.bookie_id}"
    bookie_id: BookieId
    delete_cookie: bool = True


class LedgerReplicationToggled(BookKeeperRecord, frozen=True, kw_only=True):
    """Ledger replication was disabled or enabled (``LedgerUnderreplicationManager``'s ``disable``
    znode): while disabled the auditor's audits and the replication workers wait
    (``waitIfLedgerReplicationDisabled``)."""

    version: int = 0
    KEY = "auditor"
    enabled: bool


class AuditorCheckRan(BookKeeperRecord, frozen=True, kw_only=True):
    """One of the auditor's periodic checks fired (``Auditor``'s fixed-rate schedules): ``check`` is
    ``bookie`` (``AuditorBookieCheckTask``; BookKeeper keeps when it ran in the auditor's memory, a
    new auditor starts its schedule again) or ``all_ledgers`` (``AuditorCheckAllLedgersTask``;
    ``completed`` is the ``checkallledgersctime`` znode written after a successful run). A run
    skipped while a delayed audit waits still fires: ``completed`` False."""

    version: int = 0
    KEY = "auditor"
    check: AuditorCheck
    completed: bool = True


def _ensemble(ensemble: tuple[str, ...], size: int) -> None:
    if len(ensemble) != size:
        raise ValueError(f"`ensemble`: has {len(ensemble)} bookies, the ensemble size is {size}")
    if len(set(ensemble)) != len(ensemble):
        raise ValueError(f"`ensemble`: lists a bookie twice: {list(ensemble)}")
    if not ensemble:
        raise ValueError("`ensemble`: is empty")


BOOKKEEPER_RECORDS: tuple[type[Record], ...] = (
    BookieRegistered,
    BookieInfo,
    BookieStateChange,
    BookieAvailability,
    LedgerCreated,
    LedgerEnsembleChange,
    LedgerClosed,
    LedgerDeleted,
    LedgerUnderReplicated,
    LedgerReplicated,
    LedgerReplicationLock,
    LedgerReplicationUnlock,
    AuditorElected,
    RecoveryDelayChanged,
    LedgerEntriesWritten,
    BookieDecommissionStarted,
    BookieDecommissioned,
    LedgerReplicationToggled,
    AuditorCheckRan,
)
"""Every BookKeeper record type: the issue's list, then the writer's observation, then the classic
decommission and the replication switch."""
