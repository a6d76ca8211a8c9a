"""A seeded BookKeeper workload: writers creating, filling and closing ledgers on weighted
ensembles, bookies failing and coming back, disks filling (and turning bookies read-only), an
auditor with a recovery delay, replication workers, and operators draining bookies, all decided by
kraftlake's BookKeeper deciders.

``generate(config, records=n)`` yields one batch per operation, with offsets and times; every
choice comes from ``random.Random(config.seed)``, so the same config writes the same records.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from kraftlake.records.base import Record
from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieInfo,
    BookieRegistered,
    BookieState,
    LedgerClosed,
    LedgerCreated,
    LedgerDeleted,
    LedgerEntriesWritten,
)
from kraftlake.statemachine.simulation import Simulation, drive

from . import commands as c
from .bugs import BUGS
from .decider import decide
from .reducer import apply
from .view import CLOSED, BookiesView

GB = 1 << 30
QUORUMS = ((3, 2, 2), (3, 3, 2), (2, 2, 1), (4, 3, 2), (5, 3, 2))


@dataclass(frozen=True)
class WorkloadConfig:
    bookies: int = 8
    racks: int = 3
    seed: int = 0
    bug: str | None = None
    recovery_delay_ms: int = 5_000
    start_ms: int = 1_700_000_000_000
    step_ms: int = 500
    workers: int = 2
    careful_faults: bool = True
    """Fail a bookie only when every entry keeps an available replica (False: correlated
    failures may make data unreachable, which the audit reports as B8)."""
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "create": 10,
            "write": 40,
            "close": 8,
            "delete": 3,
            "fail": 2,
            "return": 3,
            "disk": 6,
            "drain": 1,
            "delay": 0.5,
            "decommission": 1,
            "replication": 0.3,
        }
    )
    legacy_ledgers: int = 2
    """Ledgers from before the log began whose ensembles name a retired bookie that never registered
    in it (what BookKeeper's audit counts as lost all the same); the auditor, elected after them,
    marks them at once."""
    bookie_check_ms: int = 20_000
    """The periodic bookie check's interval (BookKeeper: a day; scaled to the simulated minutes)."""
    all_ledgers_check_ms: int = 60_000
    """checkAllLedgers' interval (BookKeeper: a week)."""
    read_failure_rate: float = 0.03
    """How often a worker's copy fails with a transient read error (its lock release is deferred)."""


class Cluster(Simulation):
    def __init__(self, config: WorkloadConfig) -> None:
        if config.bug is not None and config.bug not in BUGS:
            raise ValueError(f"unknown BookKeeper bug {config.bug!r}: one of {', '.join(sorted(BUGS))}")
        if config.bookies < 4:
            raise ValueError("the BookKeeper workload needs at least 4 bookies (ensembles of 3 plus a replacement)")
        super().__init__(BookiesView(), BUGS[config.bug] if config.bug else decide, apply, config.start_ms)
        self.config = config
        self.rng = random.Random(config.seed)
        self.next_bookie = 0
        self.disabled_at: int | None = None

    def add_bookie(self) -> None:
        i = self.next_bookie
        self.next_bookie += 1
        bookie = f"bookie-{i}:3181"
        total = self.rng.choice((2, 4, 8, 16)) * GB
        self.emit(
            [
                BookieRegistered(bookie_id=bookie, rack=f"rack-{i % self.config.racks}"),
                BookieInfo(bookie_id=bookie, free_bytes=self.rng.randint(total // 10, total), total_bytes=total),
            ]
        )

    def bootstrap(self) -> None:
        self.run(c.SetRecoveryDelay(delay_ms=self.config.recovery_delay_ms))
        for _ in range(self.config.bookies):
            self.add_bookie()
        for n in range(self.config.legacy_ledgers):
            self.add_legacy_ledger(n)
        self.run(c.ElectAuditor(auditor="auditor-0"))

    def add_legacy_ledger(self, n: int) -> None:
        """A closed E3/W2/A2 ledger written before the log began, on the retired bookie (position 0,
        no placement draw) and two registered ones in other racks."""
        others = sorted(self.view.bookies)
        first = self.rng.choice(others)
        rack = self.view.bookies[first].rack
        second = self.rng.choice([b for b in others if self.view.bookies[b].rack != rack] or others)
        lid = max(self.view.ledgers, default=-1) + 1
        last = self.rng.randint(0, 50)
        ensemble = (f"bookie-retired-{n}:3181", first, second)
        self.emit(
            [
                LedgerCreated(ledger_id=lid, ensemble_size=3, write_quorum=2, ack_quorum=2, ensemble=ensemble),
                LedgerEntriesWritten(ledger_id=lid, last_add_confirmed=last),
                LedgerClosed(ledger_id=lid, last_entry_id=last, length=(last + 1) * 1024),
            ]
        )

    def _ledgers(self, state: str | None = None) -> list[int]:
        return sorted(i for i, x in self.view.ledgers.items() if state is None or x.state == state)

    def _bookies(self, *availability: str) -> list[str]:
        return sorted(
            b.bookie_id
            for b in self.view.bookies.values()
            if b.availability in availability and b.state not in (BookieState.DRAINED.value,)
        )

    def step(self) -> None:
        self.op += 1
        self.now = self.config.start_ms + self.op * self.config.step_ms
        ops = sorted(self.config.weights)
        name = self.rng.choices(ops, weights=[self.config.weights[o] for o in ops])[0]
        getattr(self, "do_" + name)()
        # The auditor and the workers run all the time; drains are checked after them.
        if self.disabled_at is not None and self.op - self.disabled_at >= 20:
            self.run(c.SetReplicationEnabled(enabled=True))
            self.disabled_at = None
        self.run(c.AuditorTick(now_ms=self.now))
        self.run(
            c.RunPeriodicChecks(
                now_ms=self.now,
                bookie_interval_ms=self.config.bookie_check_ms,
                all_ledgers_interval_ms=self.config.all_ledgers_check_ms,
            )
        )
        for w in range(self.config.workers):
            fails = self.rng.random() < self.config.read_failure_rate
            self.run(c.Replicate(worker=f"worker-{w}", now_ms=self.now, read_fails=fails))
        self.run(c.CheckDrains())
        self.run(c.CheckDecommissions())

    def do_create(self) -> None:
        e, w, a = self.rng.choice(QUORUMS)
        self.run(c.CreateLedger(ensemble_size=e, write_quorum=w, ack_quorum=a))

    def do_write(self) -> None:
        open_ = self._ledgers("OPEN")
        if open_:
            lid = self.rng.choice(open_)
            d = self.run(c.WriteEntries(ledger_id=lid, count=self.rng.randint(1, 20)))
            if d.error_code == c.OK:
                # Writing fills the disks of the write sets (a little).
                for b in self.view.ledgers[lid].ensembles[self.view.ledgers[lid].keys()[-1]]:
                    self._consume(b, self.rng.randint(1, 64) << 20)

    def do_close(self) -> None:
        open_ = self._ledgers("OPEN")
        if open_:
            self.run(c.CloseLedger(ledger_id=self.rng.choice(open_)))

    def do_delete(self) -> None:
        closed = self._ledgers(CLOSED)
        if len(closed) > 10:
            lid = closed[0]
            self.emit([LedgerDeleted(ledger_id=lid)])

    def do_fail(self) -> None:
        up = self._bookies(Availability.WRITABLE.value, Availability.READ_ONLY.value)
        if len(up) <= 5:
            return
        b = self.rng.choice(up)
        if self.config.careful_faults and not self._survivable(b):
            return
        self.emit([BookieAvailability(bookie_id=b, availability=Availability.LOST)])

    def _survivable(self, bookie: str) -> bool:
        view = self.view
        for lid in view.refs.get(bookie, ()):
            ledger = view.ledgers[lid]
            for e in range(ledger.last_entry() + 1):
                ws = ledger.write_set(e)
                if bookie in ws and not any(
                    b != bookie and view.available(b) and e not in ledger.lost.get(b, ()) for b in ws
                ):
                    return False
        return True

    def do_return(self) -> None:
        # A bookie being decommissioned stays stopped.
        down = [b for b in self._bookies(Availability.LOST.value) if b not in self.view.decommissioning]
        if down:
            b = self.rng.choice(down)
            state = self.view.bookies[b].state
            back = Availability.WRITABLE if state == BookieState.ACTIVE.value else Availability.READ_ONLY
            self.emit([BookieAvailability(bookie_id=b, availability=back)])

    def do_disk(self) -> None:
        """Disks fill or are cleaned: free space moves; a nearly full bookie turns read-only."""
        up = self._bookies(Availability.WRITABLE.value, Availability.READ_ONLY.value)
        if not up:
            return
        b = self.view.bookies[self.rng.choice(up)]
        free = min(b.total_bytes, max(0, b.free_bytes + self.rng.randint(-b.total_bytes // 4, b.total_bytes // 5)))
        self.emit([BookieInfo(bookie_id=b.bookie_id, free_bytes=free, total_bytes=b.total_bytes)])
        self._disk_mode(b.bookie_id)

    def _consume(self, bookie: str, nbytes: int) -> None:
        b = self.view.bookies.get(bookie)
        if b is None or b.availability == Availability.LOST.value:
            return
        self.emit([BookieInfo(bookie_id=bookie, free_bytes=max(0, b.free_bytes - nbytes), total_bytes=b.total_bytes)])
        self._disk_mode(bookie)

    def _disk_mode(self, bookie: str) -> None:
        b = self.view.bookies[bookie]
        if b.state != BookieState.ACTIVE.value:
            return
        full = b.free_bytes < b.total_bytes // 20  # diskUsageThreshold 0.95
        if full and b.availability == Availability.WRITABLE.value:
            self.emit([BookieAvailability(bookie_id=bookie, availability=Availability.READ_ONLY)])
        elif not full and b.availability == Availability.READ_ONLY.value:
            self.emit([BookieAvailability(bookie_id=bookie, availability=Availability.WRITABLE)])

    def do_drain(self) -> None:
        """An operator drains a bookie (and a new one joins to keep the cluster's size); a drain
        that failed is retried, or finished by the operator once its ledgers are gone."""
        failed = sorted(b.bookie_id for b in self.view.bookies.values() if b.state == BookieState.DRAINING_FAILED.value)
        if failed:
            b = failed[0]
            for lid in sorted(self.view.refs.get(b, ())):
                if self.view.lost_entries(self.view.ledgers[lid]):
                    self.emit([LedgerDeleted(ledger_id=lid)])  # the operator gives the lost ledger up
            self.run(c.ChangeBookieState(bookie_id=b, state=BookieState.DRAINING))
            return
        active = sorted(
            b.bookie_id
            for b in self.view.bookies.values()
            if b.state == BookieState.ACTIVE.value and b.availability != Availability.LOST.value
        )
        if len(active) > 6:
            self.run(c.ChangeBookieState(bookie_id=self.rng.choice(active), state=BookieState.DRAINING))
            self.add_bookie()

    def do_decommission(self) -> None:
        """An operator decommissions a stopped bookie (and a new one joins); half the time they name
        a running one by mistake, which BookKeeper refuses."""
        down = [b for b in self._bookies(Availability.LOST.value) if b not in self.view.decommissioning]
        up = self._bookies(Availability.WRITABLE.value, Availability.READ_ONLY.value)
        mistaken = self.rng.random() < 0.5
        pool = up if mistaken or not down else down
        if pool:
            d = self.run(c.DecommissionBookie(bookie_id=self.rng.choice(pool)))
            if d.error_code == c.OK:
                self.add_bookie()

    def do_replication(self) -> None:
        """An operator disables ledger replication for a while (maintenance); it is enabled again
        twenty operations later."""
        if self.disabled_at is None:
            self.run(c.SetReplicationEnabled(enabled=False))
            self.disabled_at = self.op

    def do_delay(self) -> None:
        self.run(c.SetRecoveryDelay(delay_ms=self.rng.choice((0, 2_000, 5_000, 5_000, 10_000))))


def generate(config: WorkloadConfig, *, records: int) -> Iterator[list[Record]]:
    """Batches of records (with offsets), one per operation, until at least ``records`` were produced."""
    return drive(Cluster(config), records)
