"""``BookiesView``: the BookKeeper cluster as its metadata store holds it (ledger metadata as
``LedgerMetadataImpl``, marks and locks as ``LedgerUnderreplicationManager``, bookie states as
``BookieStateManager``), mutated only by ``reducer.apply``, with a canonical image and a state hash.

Bookies (lifecycle state, availability, rack, disk weights), ledgers (E/W/A, ensembles by first
entry id, state, last entry, the writer's last add confirmed, entries a repair could not copy),
under-replication marks (missing bookies, since when), replication locks, the auditor, its
recovery delay and the audits it owes: lost bookies and when their audit falls due
(``Auditor.submitAuditTask``).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import msgspec

from kraftlake.records.bookkeeper import Availability, BookieState

from ..state_hash import state_hash_of

OPEN, CLOSED = "OPEN", "CLOSED"


class Bookie(msgspec.Struct, kw_only=True, gc=False):
    bookie_id: str
    rack: str | None = None
    state: str = BookieState.ACTIVE.value
    availability: str = Availability.WRITABLE.value
    free_bytes: int = 0
    total_bytes: int = 0
    """0/0 until the first BookieInfo: weight 0, "unknown" (placement gives it the lightest weight)."""
    state_reason: str | None = None


class Ledger(msgspec.Struct, kw_only=True, gc=False):
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: dict[int, tuple[str, ...]]
    """First entry id -> the ensemble serving from it."""
    state: str = OPEN
    last_entry_id: int = -1
    """Set when CLOSED (-1: empty)."""
    length: int = 0
    last_add_confirmed: int = -1
    """What the writer said was acknowledged (``LedgerEntriesWritten``)."""
    fenced: bool = False
    lost: dict[str, tuple[int, ...]] = {}
    """Bookie -> entries it holds in metadata but never got: a repair found no copy to read."""

    def keys(self) -> list[int]:
        return sorted(self.ensembles)

    def ensemble_of(self, entry: int) -> tuple[str, ...]:
        keys = self.keys()
        return self.ensembles[keys[max(bisect_right(keys, entry) - 1, 0)]]

    def last_entry(self) -> int:
        """The last entry that exists: the closed end, else what the writer confirmed."""
        return self.last_entry_id if self.state == CLOSED else self.last_add_confirmed

    def bookies(self) -> set[str]:
        return {b for e in self.ensembles.values() for b in e}

    def write_set(self, entry: int) -> tuple[str, ...]:
        """Round-robin striping: positions (e + j) mod E, j < W, of the entry's ensemble
        (``RoundRobinDistributionSchedule``)."""
        ens = self.ensemble_of(entry)
        e = len(ens)
        return tuple(ens[(entry + j) % e] for j in range(self.write_quorum))

    def segments(self) -> list[tuple[int, int, tuple[str, ...]]]:
        """(first, last, ensemble) of each segment: the last one ends at ``last_entry()`` (last <
        first: the segment holds no entry yet)."""
        keys = self.keys()
        end = self.last_entry()
        return [(k, keys[i + 1] - 1 if i + 1 < len(keys) else end, self.ensembles[k]) for i, k in enumerate(keys)]

    def stored_on(self, first: int, last: int, position: int) -> list[int]:
        """Entries of [first, last] whose write set includes ``position`` of their ensemble."""
        e, w = self.ensemble_size, self.write_quorum
        return [x for x in range(first, last + 1) if (position - x) % e < w]


class Mark(msgspec.Struct, kw_only=True, gc=False):
    """An under-replication mark (``urL<id>``): missing bookies, when it was made, its version
    (bumped when the missing set grows; a worker's markReplicated holds to the one it saw)."""

    missing: tuple[str, ...]
    since_ms: int
    version: int = 0


class LedgerImage(msgspec.Struct, frozen=True, kw_only=True):
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    state: str
    last_entry_id: int
    length: int
    last_add_confirmed: int
    fenced: bool
    lost: dict[str, tuple[int, ...]]


class BookiesImage(msgspec.Struct, frozen=True, kw_only=True):
    offset: int
    state_hash: str
    auditor: str | None
    recovery_delay_ms: int
    bookies: tuple[Bookie, ...]
    ledgers: tuple[LedgerImage, ...]
    under_replicated: tuple[tuple[int, Mark], ...]
    locks: tuple[tuple[int, str], ...]
    held_until: tuple[tuple[int, int], ...]
    failures: dict[str, int]
    audit_due: tuple[tuple[str, int], ...]
    lost_at: tuple[tuple[str, int], ...]
    decommissioning: tuple[tuple[str, bool], ...] = ()
    replication_enabled: bool = True
    auditor_since: int | None = None
    check_fired: tuple[tuple[str, int], ...] = ()
    check_ctime: tuple[tuple[str, int], ...] = ()


def ledger_image(x: Ledger) -> LedgerImage:
    return LedgerImage(
        ledger_id=x.ledger_id,
        ensemble_size=x.ensemble_size,
        write_quorum=x.write_quorum,
        ack_quorum=x.ack_quorum,
        ensembles=tuple(sorted(x.ensembles.items())),
        state=x.state,
        last_entry_id=x.last_entry_id,
        length=x.length,
        last_add_confirmed=x.last_add_confirmed,
        fenced=x.fenced,
        lost=dict(sorted(x.lost.items())),
    )


class BookiesView:
    """The BookKeeper cluster's metadata at ``offset``. Mutated only by ``reducer.apply``."""

    __slots__ = (
        "offset",
        "auditor",
        "recovery_delay_ms",
        "bookies",
        "ledgers",
        "under_replicated",
        "locks",
        "audit_due",
        "lost_at",
        "refs",
        "held_until",
        "failures",
        "decommissioning",
        "replication_enabled",
        "auditor_since",
        "check_fired",
        "check_ctime",
    )

    def __init__(self) -> None:
        self.offset = -1
        self.auditor: str | None = None
        self.recovery_delay_ms = 0
        self.bookies: dict[str, Bookie] = {}
        self.ledgers: dict[int, Ledger] = {}
        self.under_replicated: dict[int, Mark] = {}
        self.locks: dict[int, str] = {}
        self.audit_due: dict[str, int] = {}
        """Lost bookie -> when the auditor must audit it (lost time + delay, or a delay rewrite)."""
        self.lost_at: dict[str, int] = {}
        """Lost bookie -> when it was lost."""
        self.refs: dict[str, set[int]] = {}
        """Bookie -> ledgers whose ensembles name it (derived, the auditor's BookieLedgerIndexer)."""
        self.held_until: dict[int, int] = {}
        """Locked ledger -> when its worker releases it after a failed repair."""
        self.failures: dict[str, int] = {}
        """"<worker> <ledger>" -> failed repairs of that ledger on that worker (the backoff's n)."""
        self.decommissioning: dict[str, bool] = {}
        """Bookie -> whether its classic decommission deletes the cookie (``BookieDecommissionStarted``)."""
        self.replication_enabled = True
        """Ledger replication on (``LedgerReplicationToggled``): off, the auditor and workers wait."""
        self.auditor_since: int | None = None
        """When the auditor in office was elected: its periodic schedules start there."""
        self.check_fired: dict[str, int] = {}
        """Periodic check -> when the auditor in office last fired it (``AuditorCheckRan``)."""
        self.check_ctime: dict[str, int] = {}
        """Periodic check -> when it last completed, kept across auditors (``checkallledgersctime``)."""

    # -- queries -------------------------------------------------------------------------------

    def available(self, bookie: str) -> bool:
        b = self.bookies.get(bookie)
        return b is not None and b.availability != Availability.LOST.value

    def writable(self) -> list[str]:
        """Writable bookies that take new data (not draining or drained), by id."""
        return sorted(
            b.bookie_id
            for b in self.bookies.values()
            if b.availability == Availability.WRITABLE.value and b.state == BookieState.ACTIVE.value
        )

    def weights(self, candidates: list[str]) -> dict[str, int]:
        return {b: self.bookies[b].free_bytes for b in candidates}

    def lost(self) -> list[str]:
        return sorted(b.bookie_id for b in self.bookies.values() if b.availability == Availability.LOST.value)

    def unavailable_named(self) -> list[str]:
        """Bookies some ensemble names that are neither writable nor read-only, registered or never
        seen: what ``AuditorBookieCheckTask.auditBookies`` counts as lost (the bookie-to-ledgers
        index's keys minus the available bookies)."""
        return sorted(b for b in self.refs if not self.available(b))

    def unmarked(self, bookie: str) -> list[int]:
        """Ledgers naming ``bookie`` whose mark does not list it (all of them, when unmarked)."""
        return sorted(
            i for i in self.refs.get(bookie, ()) if bookie not in getattr(self.under_replicated.get(i), "missing", ())
        )

    def copies(self, ledger: Ledger, entry: int) -> int:
        """Bookies of the entry's write set that are available and hold it."""
        n = 0
        for b in ledger.write_set(entry):
            if self.available(b) and entry not in ledger.lost.get(b, ()):
                n += 1
        return n

    def lost_entries(self, ledger: Ledger) -> list[tuple[int, int]]:
        """Ranges [first, last] of entries no available bookie of their write set holds."""
        out: list[tuple[int, int]] = []
        for e in range(ledger.last_entry() + 1):
            if self.copies(ledger, e) == 0:
                if out and out[-1][1] == e - 1:
                    out[-1] = (out[-1][0], e)
                else:
                    out.append((e, e))
        return out

    # -- image ---------------------------------------------------------------------------------

    def _image_fields(self) -> dict[str, Any]:
        return {
            "auditor": self.auditor,
            "recovery_delay_ms": self.recovery_delay_ms,
            "bookies": tuple(b for _, b in sorted(self.bookies.items())),
            "ledgers": tuple(ledger_image(x) for _, x in sorted(self.ledgers.items())),
            "under_replicated": tuple(sorted(self.under_replicated.items())),
            "locks": tuple(sorted(self.locks.items())),
            "held_until": tuple(sorted(self.held_until.items())),
            "failures": dict(sorted(self.failures.items())),
            "audit_due": tuple(sorted(self.audit_due.items())),
            "lost_at": tuple(sorted(self.lost_at.items())),
            "decommissioning": tuple(sorted(self.decommissioning.items())),
            "replication_enabled": self.replication_enabled,
            "auditor_since": self.auditor_since,
            "check_fired": tuple(sorted(self.check_fired.items())),
            "check_ctime": tuple(sorted(self.check_ctime.items())),
        }

    def image(self) -> BookiesImage:
        fields = self._image_fields()
        return BookiesImage(offset=self.offset, state_hash=state_hash_of(fields), **fields)

    def state_hash(self) -> str:
        return state_hash_of(self._image_fields())

    @classmethod
    def from_image(cls, image: BookiesImage) -> BookiesView:
        v = cls()
        v.offset, v.auditor, v.recovery_delay_ms = image.offset, image.auditor, image.recovery_delay_ms
        v.bookies = {b.bookie_id: msgspec.structs.replace(b) for b in image.bookies}
        for x in image.ledgers:
            v.ledgers[x.ledger_id] = Ledger(
                ledger_id=x.ledger_id,
                ensemble_size=x.ensemble_size,
                write_quorum=x.write_quorum,
                ack_quorum=x.ack_quorum,
                ensembles=dict(x.ensembles),
                state=x.state,
                last_entry_id=x.last_entry_id,
                length=x.length,
                last_add_confirmed=x.last_add_confirmed,
                fenced=x.fenced,
                lost=dict(x.lost),
            )
            for b in v.ledgers[x.ledger_id].bookies():
                v.refs.setdefault(b, set()).add(x.ledger_id)
        v.under_replicated = {i: msgspec.structs.replace(m) for i, m in image.under_replicated}
        v.locks = dict(image.locks)
        v.held_until = dict(image.held_until)
        v.failures = dict(image.failures)
        v.audit_due = dict(image.audit_due)
        v.lost_at = dict(image.lost_at)
        v.decommissioning = dict(image.decommissioning)
        v.replication_enabled = image.replication_enabled
        v.auditor_since = image.auditor_since
        v.check_fired = dict(image.check_fired)
        v.check_ctime = dict(image.check_ctime)
        return v
