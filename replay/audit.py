"""The audit engine: one streaming pass over a log that replays it and checks the invariant
catalogue after every record, reporting violations as intervals (``replay.books``).

The engine owns what every record shares: offsets (L1), metadata transactions (an aborted one is
audited as NoOps, ``replay.transactions``), graces running out, and the report. Each family's
audit owns its view and its invariants, behind one interface (``replay.family.FamilyAudit``:
``feed(record, offset)``, ``finish()``, ``state_hash()``): KRaft's (``replay.kraft_audit``) from
the start, S3Stream's (``replay.s3stream_audit``) and BookKeeper's (``replay.bookkeeper_audit``)
from the log's first record of theirs. The engine chooses a record's audit once per record class
(``_route``). A record the reducer refuses (Kafka would have) is an instant violation and is
skipped. Memory is bounded by the size of the state, not the length of the history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kraftlake.records.base import Record, gc_paused
from kraftlake.records.kraft import BeginTransaction, FeatureLevel
from kraftlake.records.observations import ObjectWritten
from kraftlake.statemachine.invariants import say
from kraftlake.statemachine.kraft.view import ControllerView
from kraftlake.statemachine.s3stream.view import AUTOMQ_VERSION, StreamsView

from .bookkeeper_audit import BookiesAudit
from .books import AuditConfig, AuditReport, Books, Violation, assemble_report
from .family import FamilyAudit
from .incidents import IncidentTracker
from .kraft_audit import KraftAudit
from .s3stream_audit import StreamsAudit
from .transactions import Transactions

if TYPE_CHECKING:  # the store is the caller's: this engine reads the records it is given
    from kraftlake.records.store.log import LogSnapshot

__all__ = ["Audit", "AuditConfig", "AuditReport", "Violation", "audit_log"]

Feed = Callable[[Any, int], None]
"""``(record, offset)``: a family audit's ``feed`` (or the incident tracker's ``observe``)."""


def _family_of(cls: type) -> str:
    """The family whose audit takes a record of class ``cls``: its records' family; an object's
    index block (``ObjectWritten``) is read by S3Stream's; everything else (KRaft records, the
    brokers' observations) by KRaft's."""
    family = getattr(cls, "FAMILY", "")
    if family == "bookkeeper" or family == "s3stream":
        return family
    return "s3stream" if cls is ObjectWritten else "kraft"


class Audit:
    """Feed records in offset order (``feed``), then ``report()``. Starts from ``view`` (the
    state before the first record fed; empty by default) and ``streams`` (its S3Stream state)."""

    def __init__(
        self,
        config: AuditConfig | None = None,
        view: ControllerView | None = None,
        *,
        streams: StreamsView | None = None,
    ) -> None:
        self.config = config or AuditConfig()
        self.books = Books(self.config)
        self.kraft = KraftAudit(self.books, view)
        self.streams: StreamsAudit | None = None if streams is None else StreamsAudit(self.books, streams)
        self.bookies: BookiesAudit | None = None
        self._routes: dict[type, tuple[Feed, ...]] = {}
        """Record class -> who is fed its records, in order (``_route``); filled as classes come."""
        self.transactions: Transactions | None = Transactions()
        """Metadata transactions held until they end; None when the records come published."""
        self.tracker: IncidentTracker | None = IncidentTracker(self.kraft.view)
        """Incidents and availability, on the KRaft view, fed what the KRaft audit is (None for a
        subset: the caller runs ``replay.incidents.find_incidents`` over every record). Set before
        the first record is fed."""
        self.subset = False
        """Fed a subset of the log's records (``for_subset``): offsets may have gaps."""
        self.records = 0
        self.first_offset: int | None = None

    @classmethod
    def for_subset(cls, config: AuditConfig) -> Audit:
        """An audit fed a subset of a log's records, already published (transactions resolved),
        by a caller that audits the rest itself (the Spark plan feeds every record but the
        partitions'): gaps between offsets are no L1, graced states are reported whole for the
        caller to hold to the grace with the times of the records it alone saw, and K11 is left
        to the caller, which counts the UNASSIGNED replicas."""
        a = cls(config)
        a.books.hold_graces = False
        a.kraft.counts_unassigned = False
        a.transactions = None
        a.tracker = None
        a.subset = True
        return a

    def refused(self, offset: int) -> bool:
        """Whether the record at ``offset``, just fed, was refused by the reducer (an instant
        violation; the view unchanged)."""
        return self.kraft.refused == offset

    def unfenced_since_registered(self, broker: int) -> bool:
        """Whether ``broker`` was unfenced since it last registered (what K10 reads)."""
        return self.kraft.unfenced_since_registered.get(broker, False)

    @property
    def view(self) -> ControllerView:
        """The KRaft controller's view after the records fed so far."""
        return self.kraft.view

    def feed(self, records: Iterable[Record]) -> None:
        txns = self.transactions
        with gc_paused():
            if txns is None:
                for r in records:
                    self._one(r)
                return
            for r in records:
                if txns.held is None and type(r) is not BeginTransaction:
                    self._one(r)
                else:
                    for x in txns.push(r):
                        self._one(x)

    def _one(self, r: Record) -> None:
        view = self.kraft.view
        last = view.offset
        offset = r.offset
        if offset is None:
            offset = last + 1
        elif (
            offset != last + 1
            and not (last == -1 and self.first_offset is None and offset > 0)
            and (offset <= last or not self.subset)
        ):
            self.books.instant("L1", "log", offset, say("L1", "gap", offset=offset, last=last))
            if offset <= last:
                self.records += 1
                return
        if self.first_offset is None:
            self.first_offset = offset
        self.records += 1
        cls = type(r)
        if cls is FeatureLevel and r.name == AUTOMQ_VERSION:  # type: ignore[attr-defined]  # cls is FeatureLevel
            route = self._automq_version()
        else:
            route = self._routes.get(cls) or self._route(cls)
        for feed in route:
            feed(r, offset)
        # The log's offset, on the view that reports it: a record of another family moves it too.
        view.offset = offset
        if self.books.holding:
            self.books.promote(offset, r.ts_ms)

    def _route(self, cls: type) -> tuple[Feed, ...]:
        """Who is fed the records of class ``cls``: their family's audit (started at the first
        record of its), and for KRaft's the incident tracker after it."""
        family = _family_of(cls)
        if family == "bookkeeper":
            route: tuple[Feed, ...] = (self._bookies().feed,)
        elif family == "s3stream":
            route = (self._streams().feed,)
        else:
            route = (self.kraft.feed,) if self.tracker is None else (self.kraft.feed, self.tracker.observe)
        self._routes[cls] = route
        return route

    def _automq_version(self) -> tuple[Feed, ...]:
        """A FeatureLevel of ``automq.version``: a KRaft record that S3Stream's view holds too (it
        starts S3Stream's audit); not an incident tracker's concern."""
        return (self._streams().feed, self.kraft.feed)

    def _streams(self) -> StreamsAudit:
        if self.streams is None:
            self.streams = StreamsAudit(self.books)
            # automq.version is a KRaft feature: the controller view knows it from before.
            self.streams.view.automq_version = self.kraft.view.features.get(AUTOMQ_VERSION, 0)
        return self.streams

    def _bookies(self) -> BookiesAudit:
        if self.bookies is None:
            self.bookies = BookiesAudit(self.books)
        return self.bookies

    @property
    def families(self) -> list[FamilyAudit]:
        """The family audits started so far, KRaft's first."""
        return [f for f in (self.kraft, self.streams, self.bookies) if f is not None]

    def report(self) -> AuditReport:
        if self.transactions is not None:  # a transaction still open is not published
            for r in self.transactions.finish():
                self._one(r)
        for family in self.families:
            family.finish()
        self.books.checked["L1"] = self.records
        return assemble_report(
            self.config,
            self.books.violations(),
            self.books.checked,
            records=self.records,
            first_offset=self.first_offset,
            last_offset=None if self.first_offset is None else self.view.offset,
            state_hash=self.kraft.state_hash(),
            streams_state_hash=None if self.streams is None else self.streams.state_hash(),
            bookies_state_hash=None if self.bookies is None else self.bookies.state_hash(),
            incidents=None if self.tracker is None else self.tracker.result(),
        )


def audit_log(
    snapshot: LogSnapshot,
    *,
    config: AuditConfig | None = None,
    from_offset: int | None = None,
    to_offset: int | None = None,
    start: ControllerView | None = None,
    progress: Callable[[int], None] | None = None,
    streams_start: StreamsView | None = None,
) -> AuditReport:
    """Audit ``[from_offset, to_offset]`` of a log snapshot in one streaming pass. ``start`` is
    the state before ``from_offset`` (see ``replay.state.state_at``), ``streams_start`` its
    S3Stream state (``replay.state.streams_at``) when the log has S3Stream records before it."""
    a = Audit(config, start, streams=streams_start)
    for records in snapshot.iter_records(from_offset, to_offset):
        a.feed(records)
        if progress is not None:
            progress(len(records))
    return a.report()
