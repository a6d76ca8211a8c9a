"""A BookKeeper cluster for the ported tests: kraftlake's real view, decider and reducer on a
simulated clock (``statemachine.simulation.Simulation``), where BookKeeper's tests start bookies in
a JVM and watch ZooKeeper with latches."""

from __future__ import annotations

from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieInfo,
    BookieRegistered,
    LedgerClosed,
    LedgerCreated,
    LedgerEntriesWritten,
)
from kraftlake.statemachine.bookkeeper import BookiesView
from kraftlake.statemachine.bookkeeper import commands as c
from kraftlake.statemachine.bookkeeper.decider import decide
from kraftlake.statemachine.bookkeeper.reducer import apply
from kraftlake.statemachine.simulation import Simulation

GB = 1 << 30


class BkCluster(Simulation):
    def __init__(self, bookies: int = 5, *, delay_ms: int = 0, auditor: bool = True, decider=decide) -> None:
        super().__init__(BookiesView(), decider, apply, 1_000_000)
        for i in range(bookies):
            self.add_bookie(f"b{i}:3181", rack=f"r{i % 3}")
        self.run(c.SetRecoveryDelay(delay_ms=delay_ms))
        if auditor:
            self.run(c.ElectAuditor(auditor="auditor"))

    def add_bookie(self, bookie: str, rack: str | None = None) -> None:
        self.emit(
            [BookieRegistered(bookie_id=bookie, rack=rack), BookieInfo(bookie_id=bookie, free_bytes=GB, total_bytes=GB)]
        )

    def ledger(self, ensemble: tuple[str, ...] | None = None, *, entries: int = 10, close: bool = True) -> int:
        """A ledger E3/W2/A2 (BookKeeper's ``createLedger`` default) with ``entries`` entries."""
        if ensemble is None:
            d = self.run(c.CreateLedger(ensemble_size=3, write_quorum=2, ack_quorum=2))
            lid = d.reply.ledger_id
        else:
            lid = max(self.view.ledgers, default=-1) + 1
            self.emit([LedgerCreated(ledger_id=lid, ensemble_size=3, write_quorum=2, ack_quorum=2, ensemble=ensemble)])
        if entries:
            self.emit([LedgerEntriesWritten(ledger_id=lid, last_add_confirmed=entries - 1)])
        if close:
            self.emit([LedgerClosed(ledger_id=lid, last_entry_id=entries - 1, length=entries * 1024)])
        return lid

    def ensemble(self, lid: int) -> tuple[str, ...]:
        ledger = self.view.ledgers[lid]
        return ledger.ensembles[ledger.keys()[-1]]

    def set(self, bookie: str, availability: Availability) -> None:
        self.emit([BookieAvailability(bookie_id=bookie, availability=availability)])

    def stop(self, bookie: str) -> None:
        self.set(bookie, Availability.LOST)

    def audit(self, after_ms: int = 0) -> c.Decision:
        """``after_ms`` pass, then the auditor's thread runs."""
        self.now += after_ms
        return self.run(c.AuditorTick(now_ms=self.now))

    def marked(self) -> dict[int, tuple[str, ...]]:
        return {i: m.missing for i, m in sorted(self.view.under_replicated.items())}
