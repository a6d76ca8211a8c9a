"""The control plane of a log on the driver: every record except partitions', replayed in offset
order by the local audit (``Audit.for_subset``) and the local reducer.

What it owns is small next to the partition records (brokers, topics, features, transactions,
observations: a few percent of a history) and is what the plan's partition invariants are joined
with (small tables the driver registers): broker segments (the registration in force between
two offsets, and its epoch), topic lifetimes, directory removals (K7), the metadata.version
timeline (K3). The AssignReplicasToDirs requests (most of a JBOD history's control records) are
not decoded: the plan reads what they report, and which the controller accepts (K9), from their
columns. Its own violations (L3/L4 of broker and topic records, L5, K6) come from the local
audit itself, graced ones reported whole for the caller to hold to the grace with the times of
every record.

S3Stream and BookKeeper records are control plane too: their audits (S1-S12, B1-B8) run here,
fed a window of offsets at a time (``replay.plan.run.control_records``), not per entity in the
plan's SQL as the partition records are. Their invariants cross entities at every record (a
stream-set object names many streams, an object's lifecycle is checked from every stream that
holds it, an ensemble names several bookies), so sharding by entity would copy each shared
record to every shard that needs it; on the driver they cost one pass, in bounded memory, at the
local audit's rate (bench/RESULTS.md has the S3Stream audit's, on a history where compactions have
grown each stream-set object to hundreds of ranges).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kraftlake.logging import get_logger
from kraftlake.records.kraft import (
    BrokerRegistrationChange,
    ClearElr,
    FenceBroker,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.records.observations import UnfenceRequested
from kraftlake.replay.audit import Audit
from kraftlake.replay.books import AuditConfig, Violation
from kraftlake.replay.transactions import Transactions, published
from kraftlake.statemachine.kraft.features import MV_3_0_IV1
from kraftlake.statemachine.kraft.invariants import elr_enabled
from kraftlake.statemachine.kraft.view import BrokerRegistration, ControllerView

log = get_logger(__name__)

_BROKER_RECORDS = (RegisterBroker, UnregisterBroker, BrokerRegistrationChange, FenceBroker, UnfenceBroker)


class Registered(NamedTuple):
    """What the plan reads of a broker's registration (``BrokerRegistration``): kept per segment,
    its directories shared with the broker's segment before where they did not change. A whole
    registration per segment (with the directories it dropped since it registered, its
    endpoints and features) held 27 MB per 10^6 records of a dense-failure history."""

    epoch: int
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BrokerSegment:
    """Broker ``broker``'s registration from ``start`` (the record that set it) until the next
    segment's start; ``registration`` None = not registered."""

    broker: int
    start: int
    registration: Registered | None
    unfenced_since_registered: bool = False
    """Whether the broker was unfenced since its RegisterBroker (K10's "live")."""


@dataclass
class ControlPlane:
    view: ControllerView
    """The state after the last record, without partitions."""
    violations: Sequence[Violation]
    """The partial audit's: L1 excluded; graced invariants (K6) not yet held to the grace."""
    checked: dict[str, int]
    segments: list[BrokerSegment] = field(default_factory=list)
    """In offset order; each broker's first segment starts at its first applied record."""
    broker_events: list[tuple[int, int]] = field(default_factory=list)
    """(offset, broker) of every broker record the reducer applied (where K8 is re-checked)."""
    topics: list[tuple[str, int, int | None]] = field(default_factory=list)
    """(topic id, created at, removed at or None) per lifetime."""
    dir_removals: list[tuple[int, int, str]] = field(default_factory=list)
    """(offset, broker, directory) per directory a BrokerRegistrationChange took away."""
    mv_levels: list[tuple[int, int]] = field(default_factory=list)
    """(offset, metadata.version in force after it) wherever it changed."""
    streams_state_hash: str | None = None
    """The S3Stream view's hash: S3Stream records are replayed and audited here, on the driver."""
    bookies_state_hash: str | None = None
    """The BookKeeper view's hash: BookKeeper records too."""
    unpublished: list[tuple[int, int]] = field(default_factory=list)
    """[first, last] offsets of aborted metadata transactions, audited as NoOps
    (``replay.transactions``): the partition timeline leaves them out too..."""
    unfinished: int | None = None
    """...and everything from this offset on: the Begin of a transaction still open at the end."""
    unfence_requests: list[tuple[int, int, int]] = field(default_factory=list)
    """(offset, broker, its own mismatch count) of each UnfenceRequested from a fenced
    multi-directory broker at its current epoch: K11 adds the UNASSIGNED count there."""
    elr_levels: list[tuple[int, bool]] = field(default_factory=list)
    """(offset, whether KIP-966 is on after it) wherever that changed (``replay.plan.elr``)."""
    clears: list[tuple[int, str | None]] = field(default_factory=list)
    """(offset, topic id; None = every topic) of each ClearElr the reducer applied."""


def _registered(reg: BrokerRegistration | None, dirs_of: dict[int, tuple[str, ...]]) -> Registered | None:
    if reg is None:
        return None
    dirs = dirs_of.get(reg.id)
    if dirs != reg.log_dirs:
        dirs = dirs_of[reg.id] = reg.log_dirs
    return Registered(reg.epoch, reg.fenced, reg.in_controlled_shutdown, dirs)


class Reports(NamedTuple):
    """The AssignReplicasToDirsRequests between two other control records, as the control plane
    reads them: where the last one is. A record that names the control record before it (a
    fencing's departures start there) may name one of them; what they report, and whether the
    controller accepts them (registered at their broker epoch), is the plan's (K9, in SQL).
    On a JBOD history they are most of the control records: neither decoded nor held here."""

    offset: int
    ts_ms: int | None


def replay_control_plane(records, config: AuditConfig, observe=None) -> ControlPlane:
    """Replay ``records`` (the log's non-partition records, in offset order; the
    AssignReplicasToDirsRequests as ``Reports``). ``observe(record, view)``,
    if given, sees each record after it was applied (refused ones too: the view unchanged)."""
    # Transactions are held here, so that each record below is looked at as it is applied.
    audit = Audit.for_subset(config)
    transactions = Transactions()
    view = audit.view
    plane = ControlPlane(view=view, violations=[], checked={})
    lives: dict[str, int] = {}
    dirs_of: dict[int, tuple[str, ...]] = {}
    """Broker -> the directories of its last segment (``_registered``)."""
    r: Any  # a record of any type, dispatched on its class below (or a ``Reports``)
    for r in published(records, transactions):
        cls = type(r)
        broker = None
        if cls in _BROKER_RECORDS:
            broker = r.id if cls in (FenceBroker, UnfenceBroker) else r.broker_id
        if cls is Reports:  # observations: the subset audit has nothing to check in them
            if observe is not None:
                observe(r, view)
            continue
        if cls is UnfenceRequested:
            reg = view.brokers.get(r.broker_id)
            if reg is not None and reg.fenced and reg.epoch == r.broker_epoch and len(reg.log_dirs) >= 2:
                plane.unfence_requests.append((r.offset, r.broker_id, r.mismatched_replicas))
        topics_before = set(view.topics) if cls is Topic or cls is RemoveTopic else None
        before = view.brokers.get(broker) if broker is not None else None
        audit.feed((r,))
        if observe is not None:
            observe(r, view)
        if audit.refused(r.offset):
            continue
        if cls is ClearElr:
            plane.clears.append((r.offset, view.topic_ids[r.topic_name] if r.topic_name else None))
        on = elr_enabled(view)
        if on != (plane.elr_levels[-1][1] if plane.elr_levels else False):
            plane.elr_levels.append((r.offset, on))
        mv = view.metadata_version
        if mv != (plane.mv_levels[-1][1] if plane.mv_levels else MV_3_0_IV1):
            plane.mv_levels.append((r.offset, mv))
        if broker is not None:
            after = view.brokers.get(broker)
            plane.broker_events.append((r.offset, broker))
            if after is not before:
                live = audit.unfenced_since_registered(broker)
                plane.segments.append(BrokerSegment(broker, r.offset, _registered(after, dirs_of), live))
            if cls is BrokerRegistrationChange and before is not None and after is not None:
                plane.dir_removals += [(r.offset, broker, d) for d in before.log_dirs if d not in after.log_dirs]
        if topics_before is not None:
            for t in sorted(set(view.topics) - topics_before):
                lives[t] = len(plane.topics)
                plane.topics.append((t, r.offset, None))
            for t in sorted(topics_before - set(view.topics)):
                i = lives.pop(t)
                plane.topics[i] = (t, plane.topics[i][1], r.offset)
    report = audit.report()
    plane.unpublished = transactions.ranges
    plane.unfinished = transactions.unfinished
    plane.streams_state_hash = report.streams_state_hash
    plane.bookies_state_hash = report.bookies_state_hash
    # As the report's columns (a ``ViolationList``): as Structs, a dense-failure history's graced
    # candidates held 21 MB per 10^6 records until the grace was applied.
    plane.violations = report.violations
    plane.checked = {i.id: i.checked for i in report.invariants}
    return plane
