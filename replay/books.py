"""The audit's books: what every engine and every family reports through.

A violation is an interval: it begins at the offset where an entity went wrong and ends at the
last offset where it still was (``last_offset`` None = still open at the end); ``evidence`` holds
the records that caused and fixed it. ``Books`` keeps the open wrong states, holds graced ones
(``statemachine.invariants``: ``graced``) to the grace — they only count once the wrong state has
lasted longer than ``grace_ms`` ms of record time (``ts_ms``; ``AuditConfig.past_grace`` is the
one rule every engine applies); a state fixed within the grace is not reported — and counts the
checks. ``assemble_report`` turns violations
and counts into the report, for the per-record engine and the Spark plan alike.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from kraftlake.records.errors import ReplayError
from kraftlake.replay.grace import GRACE_MS, UNTIMED_GRACE_RECORDS, past_grace
from kraftlake.replay.incidents import (
    Availability,
    Handling,
    Incident,
    IncidentBrief,
    IncidentsResult,
    link_violations,
)
from kraftlake.replay.violations import Violation, ViolationList
from kraftlake.statemachine.invariants import BY_ID, CATALOGUE, ERROR, REPLAY_RULE_TO_INVARIANT, SEVERITIES, say


@dataclass(frozen=True)
class AuditConfig:
    grace_ms: int = GRACE_MS
    """A graced wrong state counts once it has lasted more than this many ms of record time
    (``ts_ms``): a controller reacts within a heartbeat (2 s), whatever the number of records
    written meanwhile (a burst that creates 100 000 partitions is thousands of records in
    200 ms)."""
    grace_records: int | None = None
    """A grace in records besides (the state counts once it passes either), when asked for;
    where a record has no time, this many records (``grace.UNTIMED_GRACE_RECORDS`` when None) alone."""
    fail_on: str = ERROR
    fail_on_unavailable_ms: int | None = None
    """Fail the audit when partitions were unavailable (no leader, or the leader on an offline
    directory) for more than this many partition-milliseconds in total."""
    prepared_check_ms: int = 10_000
    """S11: how long after its deadline a PREPARED object may still be PREPARED (AutoMQ's
    controller checks every second and its timers fire at the deadline: ten checks' slack)."""
    object_retention_ms: int = 60_000
    """S13: how long a MARK_DESTROYED object stays before it is deleted, at least (AutoMQ's
    ``s3.object.delete.retention.minutes``, default 1)."""

    @property
    def untimed_grace_records(self) -> int:
        return UNTIMED_GRACE_RECORDS if self.grace_records is None else self.grace_records

    def past_grace(self, records: int, ms: int | None) -> bool:
        """``grace.past_grace`` with this audit's grace (the plan's SQL says the same: ``held``)."""
        return past_grace(self.grace_ms, self.grace_records, records, ms)


class InvariantResult(msgspec.Struct, kw_only=True):
    id: str
    severity: str
    definition: str
    checked: int
    violations: int


class Omitted(msgspec.Struct, kw_only=True):
    """What a bounded report (``replay.summary``) leaves out of each of its lists, and where
    the complete rows are (``replay.tables``)."""

    violations: dict[str, int] = {}
    """Invariant -> its violations not shown (the first ``summary.SAMPLE`` are)."""
    incidents: int = 0
    """Incidents not shown (the worst are)."""
    effects: int = 0
    """Effects of the incidents shown, beyond those shown of each."""
    partitions: int = 0
    """Partitions with time in a bad state whose availability is not shown (the worst is)."""
    outages: int = 0
    index: int = 0
    """Incidents in neither the shown ones nor the index (``AuditReport.incident_index``)."""
    tables: str | None = None
    """The directory of the complete tables (``kraftlake audit --tables``); None: not written."""


class AuditReport(msgspec.Struct, kw_only=True):
    verdict: str
    records: int
    first_offset: int | None
    last_offset: int | None
    state_hash: str
    fail_on: str
    grace_records: int | None
    """None: the grace is in record time alone (``grace_ms``), in records only where a record
    has no time (``UNTIMED_GRACE_RECORDS``)."""
    grace_ms: int
    invariants: list[InvariantResult]
    violations: Sequence[Violation]
    """In report order (first offset, invariant, entity); ``assemble_report`` holds them in a
    ``ViolationList`` (columns), a list where the report was decoded."""
    streams_state_hash: str | None = None
    """The S3Stream view's hash, when the log has S3Stream records."""
    bookies_state_hash: str | None = None
    """The BookKeeper view's hash, when the log has BookKeeper records."""
    incidents: list[Incident] | None = None
    """Directory failures, controlled shutdowns and broker crashes, with the partitions they hit
    and how fast each was moved (``replay.incidents``); None: not computed by this engine."""
    handling: Handling | None = None
    """p50/p99/max time to move leadership and ISR over the incidents."""
    availability: Availability | None = None
    """Per partition and summed: time without a leader, under min.insync.replicas, with the
    leader or an ISR member on an offline directory."""
    topics: dict[str, str] = {}
    """Topic id -> name, for every topic the audited records named."""
    dir_paths: dict[str, str] = {}
    """Directory id -> path, where the log says it."""
    fail_on_unavailable_ms: int | None = None
    """The audit fails when partitions were unavailable longer than this in total."""
    engine: str | None = None
    """Which engine audited what: ``python`` (every record by the per-record engine), or the
    plan's engine and the parts it ran (``replay.plan``); None where the caller did not say."""
    omitted: Omitted | None = None
    """None: every row is here. Else a summary (``replay.summary.bounded``): what its lists
    leave out, and where the tables with every row are."""
    incident_index: list[IncidentBrief] | None = None
    """A summary's index of its worst incidents beyond those it shows whole (``bounded(...,
    index=N)``: the HTML page's filter reads it); None: not asked."""

    @property
    def violation_count(self) -> int:
        """Every violation found, also where ``violations`` is a summary's sample."""
        return sum(i.violations for i in self.invariants)


def violation(inv: str, entity: str, first: int, last: int | None, message: str, evidence: list[int]) -> Violation:
    """A violation of ``inv`` with the catalogue's severity."""
    return Violation(
        invariant=inv,
        severity=BY_ID[inv].severity,
        entity=entity,
        first_offset=first,
        last_offset=last,
        message=message,
        evidence=evidence,
    )


class _Wrong:
    __slots__ = ("first_offset", "first_ts", "message", "evidence", "confirmed", "fixed")

    def __init__(self, offset: int, ts: int | None, message: str) -> None:
        self.first_offset, self.first_ts, self.message = offset, ts, message
        self.evidence = [offset]
        self.confirmed = False
        self.fixed = False

    def interval(self, inv: str, entity: str, last: int | None, fixed_by: int | None) -> Violation:
        """The violation this state became: ``last`` None while still open, ``fixed_by`` the
        record that fixed it."""
        evidence = self.evidence + ([] if fixed_by is None else [fixed_by])
        return violation(inv, entity, self.first_offset, last, self.message, evidence)


class Books:
    """Open wrong states, closed violations and check counts of one audit.

    ``hold_graces`` False: graced states are reported whole, as instants and intervals with no
    grace, for a caller that holds them to the grace itself with times it alone has (the Spark
    plan, which feeds the per-record engine a subset of the records)."""

    def __init__(self, config: AuditConfig, *, hold_graces: bool = True) -> None:
        self.config = config
        self.hold_graces = hold_graces
        self.checked: dict[str, int] = dict.fromkeys(BY_ID, 0)
        self.closed = ViolationList()
        """As columns: a dense-failure history's control plane alone closes hundreds of
        thousands (the plan's driver audits it), as Structs a few hundred bytes each."""
        self._wrong: dict[tuple[str, str], _Wrong] = {}
        self._in_grace: deque[_Wrong] = deque()
        """Wrong states not confirmed yet, oldest first: their grace runs out in this order."""

    def instant(self, inv: str, entity: str, offset: int, message: str, *, count: bool = True) -> None:
        """A violation that begins and ends at ``offset`` (no grace). ``count`` False: the caller
        counted the check itself (``checked``, as the catalogue defines it per invariant)."""
        self.checked[inv] += count
        self.closed.add(inv, entity, offset, offset, message, (offset,))

    def state(
        self, inv: str, entity: str, offset: int, ts: int | None, message: str | None, *, count: bool = True
    ) -> bool:
        """The entity is wrong (``message``) or right (None) after the record at ``offset``.
        True when this opened a wrong state. ``count`` False: a re-check that ``checked`` does
        not count (the catalogue's ``counts`` says what each invariant counts)."""
        self.checked[inv] += count
        key = (inv, entity)
        w = self._wrong.get(key)
        graced = self.hold_graces and BY_ID[inv].graced
        if message is None:
            if w is not None:
                w.fixed = True
                del self._wrong[key]
                if w.confirmed or not graced:
                    self.closed.append(w.interval(inv, entity, offset - 1, offset))
            return False
        if w is not None:
            return False
        w = self._wrong[key] = _Wrong(offset, ts, message)
        if graced:
            self._in_grace.append(w)
        else:
            w.confirmed = True
        return True

    def refused(self, exc: ReplayError, offset: int) -> None:
        """A record a family's reducer refused: an instant violation of the invariant its rule
        maps to, not a check of it (each rule's records are counted whether refused or not:
        ``assemble_report`` for L1-L5, the KRaft audit for K2). The caller moves its view past
        the record, unchanged."""
        inv = REPLAY_RULE_TO_INVARIANT.get(exc.rule, "L5")
        message = say(inv, "refused", rule=exc.rule, message=exc.message)
        self.instant(inv, exc.entity or "log", offset, message, count=False)

    def is_wrong(self, inv: str, entity: str) -> bool:
        return (inv, entity) in self._wrong

    def wrong_entities(self, inv: str) -> Iterator[str]:
        """Entities with an open wrong state of ``inv``."""
        return (e for (i, e) in self._wrong if i == inv)

    @property
    def holding(self) -> bool:
        """Whether some wrong state is still within its grace."""
        return bool(self._in_grace)

    def promote(self, offset: int, ts: int | None) -> None:
        """Confirm the wrong states whose grace ran out by the record at ``offset`` (time
        ``ts``). They entered the queue in offset (and so time) order: only the front can be due."""
        past = self.config.past_grace
        queue = self._in_grace
        while queue:
            w = queue[0]
            if w.fixed or w.confirmed:
                queue.popleft()
                continue
            # Records without a time (fresh from a decider) are held to the record grace alone.
            if past(offset - w.first_offset, None if ts is None or w.first_ts is None else ts - w.first_ts):
                w.confirmed = True
                queue.popleft()
            else:
                break

    def violations(self) -> ViolationList:
        """Every violation so far, the confirmed open ones included, in report order."""
        found = ViolationList()
        found.extend(self.closed)
        for (inv, e), w in self._wrong.items():
            if w.confirmed:
                found.append(w.interval(inv, e, None, None))
        found.sort()
        return found


def assemble_report(
    config: AuditConfig,
    violations: Sequence[Violation],
    checked: Mapping[str, int],
    *,
    records: int,
    first_offset: int | None,
    last_offset: int | None,
    state_hash: str,
    streams_state_hash: str | None = None,
    bookies_state_hash: str | None = None,
    incidents: IncidentsResult | None = None,
) -> AuditReport:
    """The report of an audit: the verdict (fail when a violation is at least ``fail_on``
    severe, or partitions were unavailable longer than ``fail_on_unavailable_ms``) and one row
    per catalogue invariant, whichever engine found the violations; ``incidents`` attached
    (``attach_incidents`` does it later for an engine that computes them in another pass)."""
    if not isinstance(violations, ViolationList):
        violations = ViolationList(violations)
    counts = dict.fromkeys(BY_ID, 0) | violations.counts()
    # L3-L5 are the replay's own rules: every record is held to them as it is applied (a record
    # refused is also a violation), so each counts the records audited, as L1 does.
    checked = {**checked, **dict.fromkeys(("L3", "L4", "L5"), records)}
    threshold = SEVERITIES.index(config.fail_on)
    failed = any(SEVERITIES.index(s) >= threshold for s in violations.severities())
    report = AuditReport(
        verdict="fail" if failed else "pass",
        records=records,
        first_offset=first_offset,
        last_offset=last_offset,
        state_hash=state_hash,
        fail_on=config.fail_on,
        grace_records=config.grace_records,
        grace_ms=config.grace_ms,
        invariants=[
            InvariantResult(
                id=i.id,
                severity=i.severity,
                definition=i.definition,
                checked=checked.get(i.id, 0),
                violations=counts[i.id],
            )
            for i in CATALOGUE
        ],
        violations=violations,
        streams_state_hash=streams_state_hash,
        bookies_state_hash=bookies_state_hash,
        fail_on_unavailable_ms=config.fail_on_unavailable_ms,
    )
    return report if incidents is None else attach_incidents(report, incidents)


def attach_incidents(report: AuditReport, found: IncidentsResult) -> AuditReport:
    """``report`` with the incidents and availability of the same records: violations tied to
    incidents, and the verdict failed when unavailability passed the configured limit."""
    from kraftlake.replay.attribution import attribute

    attribute(found)
    link_violations(found.incidents, report.violations)
    report.incidents = found.incidents
    report.handling = found.handling
    report.availability = found.availability
    report.topics = found.topics
    report.dir_paths = found.dir_paths
    limit = report.fail_on_unavailable_ms
    if limit is not None and found.availability.unavailable_ms > limit:
        report.verdict = "fail"
    return report
