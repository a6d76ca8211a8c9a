"""The following audit: the per-record engine (``replay.audit.Audit``) fed each batch as it lands,
saying when a violation opens and when it closes, when an incident opens and when it closes, and
what holds now (``Now``: the partitions without a leader or on offline directories, the offline
directories, the open incidents) for live gauges.

It is the batch audit run in pieces, not a second engine: the same ``Audit`` object is fed every
record once, in offset order, so graces run in record time exactly as in the batch audit (a graced
wrong state is confirmed by the first record past its grace, whenever that record arrives). After
each batch the books are compared with what was already said:

- **open**: a wrong state newly confirmed (held past its grace, or one with no grace), or an
  instant violation (it opens and closes at one record: both events come together);
- **close**: a violation whose interval ended (the record that fixed it is its last evidence);
- **incident_open** / **incident_close**: a directory failed, a broker went away; it ended
  (``replay.incidents``).

Each violation event carries the violation's fields as the batch report has them (``Violation``),
the close with its final interval, and beside them what a person reads: the entity's name
(``orders/11``) and the record times (UTC, ISO 8601) of its offsets. What has been said (closed,
and still open) over some records is what the batch audit over the same records reports
(tests/test_live_audit.py holds the two to each other).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable

import msgspec

from kraftlake.records.base import Record
from kraftlake.records.kraft import NO_LEADER, RegisterBroker, UnregisterBroker
from kraftlake.records.times import format_ms
from kraftlake.statemachine.kraft.view import ControllerView
from kraftlake.statemachine.s3stream.view import StreamsView

from .audit import Audit
from .books import AuditConfig, Violation
from .incidents import _FLAGS, TIME_BUCKETS_MS, Incident, IncidentTracker
from .names import entity_name, incident_where

STATES = _FLAGS
"""A partition's bad states, as ``Now.states`` counts them: no_leader, under_min_isr,
leader_offline (its leader on an offline directory, or a fenced broker), isr_offline (an ISR member
on one)."""


class Event(msgspec.Struct, kw_only=True):
    """A violation opening or closing, said after the record at ``at_offset`` was audited."""

    event: str
    """``open`` or ``close``."""
    at_offset: int
    violation: Violation
    at_ms: int | None = None
    """Record time of the record at ``at_offset``."""
    at_time: str | None = None
    """``at_ms`` in ISO 8601, UTC."""
    name: str = ""
    """The violation's entity in words (``orders/11``, ``broker 3 /data/d1``)."""
    first_time: str | None = None
    """Record time of the violation's first offset, ISO 8601 UTC."""
    last_time: str | None = None
    """Record time of its last offset (a close), ISO 8601 UTC."""


class IncidentNote(msgspec.Struct, kw_only=True):
    """An incident as a follow event tells it (``replay.incidents.Incident``, what a person reads)."""

    id: str
    kind: str
    broker: int
    directory: str | None
    path: str | None
    where: str
    """What failed, in words: ``broker 3 /data/d1 (dir Ab12cd34…)``."""
    failed_at: int
    failed_time: str | None
    reported_at: int | None
    ended_at: int | None
    ended_time: str | None
    led: int
    """Partitions the broker led from what failed."""
    in_isr: int
    moved: int
    """Of ``led``, leaderships moved to a live leader."""
    leaderless: int
    """Of ``led``, leaderships left with no leader."""
    topics: list[str]


class IncidentEvent(msgspec.Struct, kw_only=True):
    """An incident opening (``incident_open``) or closing (``incident_close``) after the record
    at ``at_offset``."""

    event: str
    at_offset: int
    at_ms: int | None
    at_time: str | None
    incident: IncidentNote


class BadPartition(msgspec.Struct, kw_only=True, frozen=True):
    """A partition in a bad state now, and since when (record time)."""

    topic: str
    topic_id: str
    partition: int
    since_ms: int | None


class OfflineDir(msgspec.Struct, kw_only=True, frozen=True):
    """A directory its broker said failed, not back since."""

    broker: int
    directory: str
    path: str | None


class Histogram(msgspec.Struct, kw_only=True):
    """Times observed (ms of record time): how many at most each bound of
    ``incidents.TIME_BUCKETS_MS`` (cumulative), how many in all, their sum."""

    buckets: list[int] = msgspec.field(default_factory=lambda: [0] * len(TIME_BUCKETS_MS))
    count: int = 0
    total_ms: int = 0

    def observe(self, ms: int) -> None:
        for i in range(bisect.bisect_left(TIME_BUCKETS_MS, ms), len(TIME_BUCKETS_MS)):
            self.buckets[i] += 1
        self.count += 1
        self.total_ms += ms


class Now(msgspec.Struct, kw_only=True, frozen=True):
    """What holds after the last record audited, and what was counted since the following audit
    began: what an SRE alerts on (``replay.prometheus.live_families`` makes it metrics)."""

    last_offset: int
    records: int
    """Records audited since the following audit began."""
    last_ms: int | None
    """Record time of the last record audited that had one."""
    partitions: int
    """Partitions in the cluster."""
    states: dict[str, int]
    """State (``STATES``) -> partitions in it now."""
    bad: dict[str, list[BadPartition]]
    """State -> the ``SHOWN`` partitions longest in it (those whose state began first)."""
    offline_dirs: list[OfflineDir]
    """Directories said failed, not back (nor dropped by a new registration of their broker),
    by broker and directory."""
    open_incidents: dict[str, int]
    """Kind -> incidents open now (every kind, 0 included)."""
    incidents: dict[str, int]
    """Kind -> incidents opened (every kind, 0 included)."""
    violations: dict[str, int]
    """Invariant -> violations opened (confirmed), for every invariant checked so far."""
    open_violations: dict[str, int]
    """Invariant -> violations open now."""
    closed_violations: int
    time_to_move: dict[str, Histogram]
    """Role (leadership: moved to a live leader; isr: left the ISR) -> times from the incident's
    start."""
    leaderless: int
    """Leaderships an incident ended with no leader."""


SHOWN = 10
"""Partitions per bad state ``Now.bad`` names (the rest are counted)."""

KINDS = ("dir-failure", "broker-fenced", "controlled-shutdown")


def _key(v: Violation) -> tuple[str, str, int]:
    return (v.invariant, v.entity, v.first_offset)


class LiveTracker(IncidentTracker):
    """The incident tracker, keeping besides what the live gauges read: the partitions in each bad
    state now, the directories offline, the effects ended (times to move) and the incidents
    closed since asked."""

    def __init__(self, view: ControllerView) -> None:
        self.now: list[set[tuple[str, int]]] = [set() for _ in _FLAGS]
        self.moves: dict[str, Histogram] = {"leadership": Histogram(), "isr": Histogram()}
        self.leaderless = 0
        self.offline: dict[int, dict[str, None]] = {}
        """Broker -> directories said failed and not back: loaded online, or left out of a new
        registration of the broker (a replaced disk has a new id; an unregistered broker none)."""
        self.closed: list[Incident] = []
        super().__init__(view)

    def observe(self, r, offset: int) -> None:
        super().observe(r, offset)
        cls = type(r)
        if cls is RegisterBroker and r.broker_id in self.offline:
            listed = set(r.log_dirs)
            for d in [d for d in self.offline[r.broker_id] if d not in listed]:
                del self.offline[r.broker_id][d]
        elif cls is UnregisterBroker:
            self.offline.pop(r.broker_id, None)

    def dir_failed(self, broker: int, d: str, offset: int, ts: int | None, reg_dirs, *, reported: bool) -> None:
        super().dir_failed(broker, d, offset, ts, reg_dirs, reported=reported)
        self.offline.setdefault(broker, {})[d] = None

    def loaded(self, broker: int, online, offline, paths, reg_dirs, offset: int, ts: int | None) -> None:
        super().loaded(broker, online, offline, paths, reg_dirs, offset, ts)
        dirs = self.offline.get(broker, {})
        for d in online:
            dirs.pop(d, None)

    def _set_flags(self, part, flags, offset, ts) -> None:
        super()._set_flags(part, flags, offset, ts)
        key = (part.avail.topic_id, part.avail.partition)
        for bad, on in zip(self.now, part.flags, strict=True):
            if on:
                bad.add(key)
            else:
                bad.discard(key)

    def _moved(self, role: str, leader: int | None, took: int | None) -> None:
        """An effect ended (as ``replay.incidents.handling`` counts them): a leadership moved to a
        live leader or left with none, an ISR membership let go."""
        if role == "leader":
            if leader == NO_LEADER:
                self.leaderless += 1
                return
            if leader is None:
                return  # ended by neither (the topic went)
        if took is not None:
            self.moves["leadership" if role == "leader" else "isr"].observe(took)

    def _open_all(self, inc: Incident, opening, directory: str | None):
        # A fenced broker's incident begins with the changes that took it out, ended already.
        for e in inc.effects[: len(inc.effects)]:
            self._moved(e.role, e.new_leader, e.time_to_move_ms)
        return super()._open_all(inc, opening, directory)

    def _end(self, oe, offset, ts, outcome, leader) -> None:
        was = oe.ended
        super()._end(oe, offset, ts, outcome, leader)
        t0 = oe.incident.failed_at_ms
        if not was:
            self._moved(oe.role, leader, None if ts is None or t0 is None else ts - t0)

    def _closed(self, inc: Incident) -> None:
        super()._closed(inc)
        self.closed.append(inc)


class LiveAudit:
    """Feed batches in offset order (``feed``): the events each batch caused; ``open_violations``
    and ``now()`` now; ``said()`` everything reported so far (closed, then still open)."""

    def __init__(
        self,
        config: AuditConfig | None = None,
        view: ControllerView | None = None,
        *,
        streams: StreamsView | None = None,
    ) -> None:
        self.audit = Audit(config, view, streams=streams)
        self.tracker = self.audit.tracker = LiveTracker(self.audit.kraft.view)
        self._closed_seen = 0
        self._open: dict[tuple[str, str, int], Violation] = {}
        """Violations said to be open and not yet closed, by (invariant, entity, first offset)."""
        self._first_ms: dict[tuple[str, str, int], int | None] = {}
        """Record times of the first offsets of the books' open states after the last batch."""
        self.closed: list[Violation] = []
        self._incidents_seen = 0
        self._incident_counts = dict.fromkeys(KINDS, 0)
        """Kind -> incidents opened."""
        self._opened_counts: dict[str, int] = {}
        """Invariant -> violations opened."""
        self._times: dict[int, int | None] = {}
        """Record times of the last batch's offsets (and the record before it)."""
        self.last_ms: int | None = None
        self._topics: dict[str, str] | None = None
        """Topic names by id as of the last batch (built when an event needs them)."""

    @property
    def last_offset(self) -> int:
        """The offset of the last record audited (-1 before any)."""
        return self.audit.view.offset

    def feed(self, records: Iterable[Record]) -> list[Event | IncidentEvent]:
        records = list(records)
        before = self.audit.view.offset
        keep = {before: self._times.get(before)} if before in self._times else {}
        self.audit.feed(records)
        times = dict(keep)
        at = before
        for r in records:
            at = r.offset if r.offset is not None else at + 1
            times[at] = r.ts_ms
            if r.ts_ms is not None:
                self.last_ms = r.ts_ms
        self._times = times
        self._topics = None
        at = self.audit.view.offset
        opened, closed = self._incidents()
        # In record order: an incident at its failure and its end, a violation where it was said
        # (the batch's end), an incident's opening before what it caused.
        events: list[Event | IncidentEvent] = [*opened, *self._events(at), *closed]
        events.sort(key=lambda e: e.at_offset)
        return events

    def _ms(self, offset: int | None) -> int | None:
        return None if offset is None else self._times.get(offset)

    def topics(self) -> dict[str, str]:
        """Topic names by id, now."""
        if self._topics is None:
            self._topics = {t.id: t.name for t in self.audit.view.topics.values()}
        return self._topics

    def _named(self, event: str, at: int, v: Violation, first_ms: int | None) -> Event:
        if event == "open":
            self._opened_counts[v.invariant] = self._opened_counts.get(v.invariant, 0) + 1
        topics = self.topics()
        at_ms = self._ms(at)
        return Event(
            event=event,
            at_offset=at,
            violation=v,
            at_ms=at_ms,
            at_time=None if at_ms is None else format_ms(at_ms),
            name=entity_name(v.entity, topics, self.tracker.dir_paths),
            first_time=None if first_ms is None else format_ms(first_ms),
            last_time=None
            if v.last_offset is None or self._ms(v.last_offset) is None
            else format_ms(self._ms(v.last_offset)),
        )

    def _events(self, at: int) -> list[Event]:
        books = self.audit.books
        events: list[Event] = []
        fresh = books.closed[self._closed_seen :]
        self._closed_seen = len(books.closed)
        # A wrong state's first record may lie batches back (held in its grace, or open): its
        # time comes from the books' open states, as they stood after the last batch or now.
        first_ms = self._first_ms
        wrong = books._wrong  # noqa: SLF001 - the books' open states, read only
        now_ms = {(inv, entity, w.first_offset): w.first_ts for (inv, entity), w in wrong.items()}
        for (inv, entity), w in wrong.items():
            if w.confirmed:
                v = w.interval(inv, entity, None, None)
                if _key(v) not in self._open:
                    self._open[_key(v)] = v
                    events.append(self._named("open", at, v, w.first_ts))
        for v in fresh:
            key = _key(v)
            ms = first_ms[key] if key in first_ms else self._ms(v.first_offset)
            if self._open.pop(key, None) is None:
                events.append(self._named("open", at, _opened(v), ms))
            events.append(self._named("close", at, v, ms))
            self.closed.append(v)
        self._first_ms = now_ms
        return events

    def _incidents(self) -> tuple[list[IncidentEvent], list[IncidentEvent]]:
        tracker = self.tracker
        fresh = tracker.incidents[self._incidents_seen :]
        self._incidents_seen = len(tracker.incidents)
        for inc in fresh:
            self._incident_counts[inc.kind] = self._incident_counts.get(inc.kind, 0) + 1
        opened = [self._incident_event("incident_open", inc, inc.failed_at) for inc in fresh]
        closed = [
            self._incident_event("incident_close", inc, inc.ended_at)
            for inc in tracker.closed
            if inc.ended_at is not None  # always: it closed
        ]
        tracker.closed.clear()
        return opened, closed

    def _incident_event(self, event: str, inc: Incident, at: int) -> IncidentEvent:
        topics = self.topics()
        path = inc.path or (self.tracker.dir_paths.get(inc.directory) if inc.directory else None)
        leaders = [e for e in inc.effects if e.role == "leader"]
        at_ms = inc.failed_at_ms if event == "incident_open" else inc.ended_at_ms
        note = IncidentNote(
            id=inc.id,
            kind=inc.kind,
            broker=inc.broker,
            directory=inc.directory,
            path=path,
            where=incident_where(inc.kind, inc.broker, inc.directory, path),
            failed_at=inc.failed_at,
            failed_time=None if inc.failed_at_ms is None else format_ms(inc.failed_at_ms),
            reported_at=inc.reported_at,
            ended_at=inc.ended_at,
            ended_time=None if inc.ended_at is None or inc.ended_at_ms is None else format_ms(inc.ended_at_ms),
            led=len(leaders),
            in_isr=sum(e.role == "isr" for e in inc.effects),
            moved=sum(e.ended_by is not None and e.new_leader not in (-1, None) for e in leaders),
            leaderless=sum(e.ended_by is not None and e.new_leader == -1 for e in leaders),
            topics=sorted({e.topic or topics.get(e.topic_id, e.topic_id) for e in inc.effects})[:10],
        )
        return IncidentEvent(
            event=event,
            at_offset=at,
            at_ms=at_ms,
            at_time=None if at_ms is None else format_ms(at_ms),
            incident=note,
        )

    def now(self) -> Now:
        """The live state (``Now``)."""
        tracker = self.tracker
        names = self.topics()
        parts = tracker.parts
        bad: dict[str, list[BadPartition]] = {}
        for i, (state, keys) in enumerate(zip(STATES, tracker.now, strict=True)):

            def since(key, i=i) -> tuple[int, str, int]:
                ms = parts[key].since[i]
                return (ms if ms is not None else 2**63, *key)

            bad[state] = [
                BadPartition(topic=names.get(t, t), topic_id=t, partition=p, since_ms=parts[(t, p)].since[i])
                for t, p in heapq.nsmallest(SHOWN, keys, key=since)
            ]
        open_kinds = dict.fromkeys(KINDS, 0)
        for inc in (*tracker.open_dirs.values(), *tracker.open_brokers.values()):
            open_kinds[inc.kind] = open_kinds.get(inc.kind, 0) + 1
        open_now: dict[str, int] = {}
        for inv, _entity, _first in self._open:
            open_now[inv] = open_now.get(inv, 0) + 1
        return Now(
            last_offset=self.last_offset,
            records=self.audit.records,
            last_ms=self.last_ms,
            partitions=len(parts),
            states={state: len(keys) for state, keys in zip(STATES, tracker.now, strict=True)},
            bad=bad,
            offline_dirs=[
                OfflineDir(broker=b, directory=d, path=tracker.dir_paths.get(d))
                for b in sorted(tracker.offline)
                for d in sorted(tracker.offline[b])
            ],
            open_incidents=open_kinds,
            incidents=dict(self._incident_counts),
            # Every invariant checked so far, 0 included: a counter's first violation is a rise.
            violations={
                inv: self._opened_counts.get(inv, 0)
                for inv, n in self.audit.books.checked.items()
                if n or inv in self._opened_counts
            },
            open_violations=dict(sorted(open_now.items())),
            closed_violations=len(self.closed),
            time_to_move={
                role: msgspec.structs.replace(h, buckets=list(h.buckets)) for role, h in tracker.moves.items()
            },
            leaderless=tracker.leaderless,
        )

    @property
    def open_violations(self) -> list[Violation]:
        return sorted(self._open.values(), key=lambda v: (v.first_offset, v.invariant, v.entity))

    def said(self) -> list[Violation]:
        """Every violation reported: the closed ones with their intervals, the open ones still
        open (``last_offset`` None), in the batch report's order."""
        found = self.closed + list(self._open.values())
        found.sort(key=lambda v: (v.first_offset, v.invariant, v.entity))
        return found


def _opened(v: Violation) -> Violation:
    """A violation as it was when it opened: no end yet (an instant opens and ends at once)."""
    if v.last_offset == v.first_offset and v.evidence == [v.first_offset]:
        return v
    return msgspec.structs.replace(v, last_offset=None, evidence=v.evidence[:-1] or v.evidence)
