"""Commands to the BookKeeper state machines and their replies: what an auditor, a replication
worker, a ledger writer and an operator ask for. Time (``now_ms``) comes with the command; every
random choice (placement) is seeded from the log offset the decision will be written at."""

from __future__ import annotations

from typing import Any

from kraftlake.records.bookkeeper import BookieState

from .. import decision

# Every family's, named here too (``c.NONE``, ``c.Decision``):
from ..decision import NONE as NONE
from ..decision import Decision as Decision

# Error codes: the names of what BookKeeper throws or answers (most of what its lifecycle refuses
# has no number in BKException.Code); NONE (0), no error, is every family's.
OK = NONE
"""No error (BookKeeper's ``BKException.Code.OK`` is 0 too)."""
NO_SUCH_LEDGER = "NO_SUCH_LEDGER"
NO_SUCH_BOOKIE = "NO_SUCH_BOOKIE"
LEDGER_FENCED = "LEDGER_FENCED"
LEDGER_CLOSED = "LEDGER_CLOSED"
NOT_ENOUGH_BOOKIES = "NOT_ENOUGH_BOOKIES"
ILLEGAL_TRANSITION = "ILLEGAL_TRANSITION"
NOTHING_TO_DO = "NOTHING_TO_DO"
WAITING = "WAITING"
REPAIR_FAILED = "REPAIR_FAILED"
REPLICATION_DISABLED = "REPLICATION_DISABLED"
ILLEGAL_OP = "ILLEGAL_OP"
"""``BKException.Code.IllegalOpException``: a decommission of a bookie still writable or read-only."""
NO_AUDITOR = "NO_AUDITOR"
"""``triggerAudit`` finds no auditor elected (an ``UnavailableException``)."""

OPEN_LEDGER_GRACE_MS = 30_000
"""``openLedgerRereplicationGracePeriod`` (BookKeeper's default, ``ServerConfiguration``)."""
LOCK_RELEASE_OF_FAILED_LEDGER_MS = 300_000
"""``lockReleaseOfFailedLedgerGracePeriod``: after the n-th failure the lock is held
base / 32 x 2^n for n < 5, then base (9.375 s, 18.75 s, ... 300 s), as
``ReplicationWorker.deferLedgerLockReleaseOfFailedLedger`` holds it."""
PERIODIC_BOOKIE_CHECK_MS = 86_400_000
"""``auditorPeriodicBookieCheckInterval``."""
PERIODIC_CHECK_ALL_LEDGERS_MS = 604_800_000
"""``auditorPeriodicCheckInterval`` (checkAllLedgers, a week)."""


def lock_hold_ms(failures: int, base: int = LOCK_RELEASE_OF_FAILED_LEDGER_MS) -> int:
    """How long a worker keeps a ledger locked after its ``failures``-th failed repair
    (``ReplicationWorker.deferLedgerLockReleaseOfFailedLedger``)."""
    n = failures - 1
    return base // 32 * 2**n if n < 5 else base


class Command(decision.Command, frozen=True, kw_only=True):
    """Base of the BookKeeper commands."""


class CreateLedger(Command, frozen=True, kw_only=True):
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2


class WriteEntries(Command, frozen=True, kw_only=True):
    """The writer adds ``count`` entries; a failed bookie of its ensemble is replaced first."""

    ledger_id: int
    count: int = 1


class CloseLedger(Command, frozen=True, kw_only=True):
    ledger_id: int


class DeleteLedger(Command, frozen=True, kw_only=True):
    ledger_id: int


class AuditorTick(Command, frozen=True, kw_only=True):
    """The auditor's single thread runs: lost bookies whose audit fell due get their ledgers marked."""

    now_ms: int


class Replicate(Command, frozen=True, kw_only=True):
    """A replication worker takes the next under-replicated ledger nobody holds and repairs it."""

    worker: str
    now_ms: int
    read_fails: bool = False
    """The copy's reads fail (a transient ``BKException`` from a bookie): the repair fails."""
    grace_ms: int = OPEN_LEDGER_GRACE_MS
    lock_release_ms: int = LOCK_RELEASE_OF_FAILED_LEDGER_MS


class PeriodicCheck(Command, frozen=True, kw_only=True):
    """The auditor's periodic bookie check (``auditorPeriodicBookieCheckInterval``): every ledger
    naming a lost bookie is marked; skipped while a delayed audit is pending, as
    ``AuditorBookieCheckTask`` skips it while ``hasBookieCheckTask()``."""

    now_ms: int


class RunPeriodicChecks(Command, frozen=True, kw_only=True):
    """The auditor's scheduler at ``now_ms``: the checks that fall due fire (``schedule``)."""

    now_ms: int
    bookie_interval_ms: int = PERIODIC_BOOKIE_CHECK_MS
    all_ledgers_interval_ms: int = PERIODIC_CHECK_ALL_LEDGERS_MS


class ChangeBookieState(Command, frozen=True, kw_only=True):
    """An operator (or the HTTP admin API) moves a bookie through its lifecycle."""

    bookie_id: str
    state: BookieState


class CheckDrains(Command, frozen=True, kw_only=True):
    """Draining bookies that nothing references any more become DRAINED."""


class DecommissionBookie(Command, frozen=True, kw_only=True):
    """The classic decommission (``BookKeeperAdmin.decommissionBookie``): refused while the bookie
    is writable or read-only; else an audit is triggered and the bookie's ledgers are waited for."""

    bookie_id: str
    delete_cookie: bool = True


class CheckDecommissions(Command, frozen=True, kw_only=True):
    """Decommissions whose bookie nothing names or lists any more finish (the cookie goes)."""


class SetReplicationEnabled(Command, frozen=True, kw_only=True):
    """``BookKeeperAdmin``'s enable/disable of auto-recovery (``bookkeeper shell autorecovery``)."""

    enabled: bool


class SetRecoveryDelay(Command, frozen=True, kw_only=True):
    delay_ms: int


class ElectAuditor(Command, frozen=True, kw_only=True):
    auditor: str


class Reply(decision.Reply, frozen=True, kw_only=True):
    """The BookKeeper deciders' replies: ``error_code`` is ``OK`` or one of the names above."""

    ledger_id: int | None = None
    allowed: tuple[str, ...] = ()
    """ILLEGAL_TRANSITION: the states the bookie may move to from where it is."""


def fail(error_code: str, message: str | None = None, **kw: Any) -> Decision:
    """A decision that errs: no records, the reply ``error_code``."""
    return Decision(reply=Reply(error_code=error_code, message=message, **kw))
