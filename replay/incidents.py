"""Incidents and availability: what an SRE asks after a disk or a broker went away.

An **incident** is one failure as the log tells it, with the partitions it hit:

- ``dir-failure``: a broker's log directory failed. *Failed at* the first record that says so
  (``LogDirFailed``; else the heartbeat's ``OfflineLogDirs`` or the start-up's ``LogDirsLoaded``
  offline list), *reported at* the first heartbeat or start-up that told the controller, *removed
  at* the record after which the broker's registration no longer lists the directory.
- ``controlled-shutdown``: a broker entered controlled shutdown (failed = reported at that
  registration change; removed at its fencing).
- ``broker-fenced``: a serving broker was fenced or unregistered with no controlled shutdown
  in the log: a crash (its session expired), or a shutdown the controller fenced at once. The
  cause itself is not in the log: Kafka writes the partition changes that take the broker out
  *before* the fencing record, so the incident starts at the first of those changes.

Each incident lists its **effects**: per partition, the broker's leadership and its ISR
membership (on the failed directory, or anywhere for a broker), the record that caused and
the record that ended each (leader moved, replica left the ISR, replica moved or removed, the
directory or broker came back), and the time to move. An incident ends once every effect ended
and the directory left the registration (or came back) / the broker serves again.

**Availability** is measured per partition on the replayed state, in ``ts_ms`` (record time):
time without a leader, under ``min.insync.replicas``, with the leader on an offline directory,
with an ISR member on one; *unavailable* is no leader or a leader on an offline directory. A
directory is offline from the first record that says it failed until the broker starts again
with it online, and whenever the controller's registration does not list it (fenced and
unregistered brokers included).

The rules (which incidents a broker's or a directory's records open, report, remove and end,
and the effects they begin and end) are written once, ``IncidentRules``, for the two that follow
them: ``IncidentTracker`` here and the audit plan's driver (``replay.plan.incidents``).
``IncidentTracker.observe(record, offset)`` reads a ``ControllerView`` after the record was
applied: the per-record audit calls it on its own view (no second replay); ``find_incidents``
replays records itself, so that any engine's report can carry the same incidents
(``attach``). Violations are tied to incidents afterwards (``link_violations``): by entity and
by overlapping offsets, whichever engine found them.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.records.base import Record
from kraftlake.records.errors import ReplayError
from kraftlake.records.kraft import (
    NO_LEADER,
    BrokerRegistrationChange,
    Config,
    FenceBroker,
    Partition,
    PartitionChange,
    RegisterBroker,
    RemoveTopic,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.records.observations import HeartbeatOfflineDirs, LogDirFailed, LogDirsLoaded
from kraftlake.replay.columns import NONE_INT, NONE_STR, Strings, StructColumns, spill, unwrap, wrap
from kraftlake.replay.violations import ViolationList
from kraftlake.statemachine.kraft.directory_ids import ONLINE_RESERVED, is_online
from kraftlake.statemachine.kraft.reducer import apply
from kraftlake.statemachine.kraft.view import ControllerView

from .transactions import Transactions

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
MIN_ISR = "min.insync.replicas"
_BROKER_RECORDS = (RegisterBroker, UnregisterBroker, BrokerRegistrationChange, FenceBroker, UnfenceBroker)


class Effect(msgspec.Struct, kw_only=True):
    """What an incident did to one partition: the broker led it (``role`` "leader") or was in its
    ISR ("isr") from the failed directory (or from anywhere, for a broker incident)."""

    topic_id: str
    topic: str | None
    partition: int
    role: str
    caused_by: int
    """Offset of the record the effect began at (the incident's first)."""
    ended_by: int | None = None
    """Offset of the record that ended it; None: still open at the end of the audit."""
    outcome: str = "open"
    """leader moved | no leader | left the ISR | replica moved | replica removed | topic removed |
    directory back | broker back | open."""
    new_leader: int | None = None
    """The leader after ``ended_by`` (-1: none), for a leadership effect."""
    time_to_move_ms: int | None = None
    """``ts_ms`` of ``ended_by`` minus that of ``caused_by``."""


class EffectList(StructColumns[Effect]):
    """An incident's effects in columns (``replay.columns``): a long history's incidents hit
    tens of millions of partitions (bench/RESULTS.md)."""

    struct = Effect
    __slots__ = ()

    def end(self, i: int, ended_by: int, outcome: str, leads: bool, new_leader: int | None, took: int | None) -> None:
        """Row ``i`` ended by the record ``ended_by`` with ``outcome``; a leadership effect
        (``leads``) names the leader after it; the time to move is kept when known (the hot
        path of a long history's incidents: ``set`` without its per-field dispatch)."""
        cols = self._cols
        cols["ended_by"][i] = ended_by
        cols["outcome"][i] = self.strings.code(outcome)
        if leads:
            cols["new_leader"][i] = NONE_INT if new_leader is None else new_leader
        if took is not None:
            cols["time_to_move_ms"][i] = took

    def pairs(self) -> set[tuple[str, int]]:
        """The (topic id, partition) of every effect."""
        table = self.strings.table
        return {(table[t], p) for t, p in set(zip(self._cols["topic_id"], self._cols["partition"], strict=True))}

    def topic_names(self) -> Iterator[tuple[str, str]]:
        """(topic id, name) of the effects that name their topic."""
        table = self.strings.table
        for t, n in set(zip(self._cols["topic_id"], self._cols["topic"], strict=True)):
            if n != NONE_STR:
                yield table[t], table[n]

    def moves(self, into: dict[str, list]) -> None:
        """Add this list's effects to ``into``: role -> [moved, still open, the times to move of
        those moved with one (an ``array``: tens of millions at 10^8 records), left with no
        leader, ended otherwise]. A leadership counts as moved when a live leader followed it
        (``new_leader`` not -1: Kafka's election found none), an ISR membership when it ended."""
        table = self.strings.table
        cols = self._cols
        rows = zip(cols["role"], cols["ended_by"], cols["time_to_move_ms"], cols["new_leader"], strict=True)
        for role, ended, took, leader in rows:
            name = table[role]
            got = into.get(name)
            if got is None:
                continue
            if ended == NONE_INT:
                got[1] += 1
                continue
            if name == "leader" and leader == NO_LEADER:
                got[3] += 1
                continue
            if name == "leader" and leader == NONE_INT:
                got[4] += 1
                continue
            got[0] += 1
            if took != NONE_INT:
                got[2].append(took)


class EffectSlice(EffectList):
    """A closed incident's effects: rows ``lo..hi - 1`` of a chunk an ``EffectArena`` holds
    for many incidents. Read and ended in place as the incident's own ``EffectList`` (the
    columns are the chunk's, sliced as they are read); no row can be added.

    An incident's own list is nine arrays and a dict, about 1.5 kB however few its effects: a
    long history of dense failures closes hundreds of thousands of incidents (368 870 at 10^7
    records), whose lists alone held more than half a GB (bench/RESULTS.md)."""

    __slots__ = ("chunk", "lo", "hi")

    def __init__(self, chunk: EffectList, lo: int, hi: int) -> None:  # no columns of its own
        self.chunk, self.lo, self.hi, self.strings = chunk, lo, hi, chunk.strings

    @property
    def _cols(self) -> dict:  # type: ignore[override]  # the chunk's columns, sliced (copies where in memory: read only)
        lo, hi = self.lo, self.hi
        return {name: col[lo:hi] for name, col in self.chunk._cols.items()}  # noqa: SLF001 - the chunk is this list's storage

    @property
    def _ends(self) -> dict:  # type: ignore[override]  # an effect has no list field
        return {}

    def drop_pages(self) -> None:
        """The chunk's pages let go once its last rows were read: a pass over the incidents in
        order lets go of each chunk as it leaves it, at a few calls per chunk (a call per
        incident and column, 3.3 million at 10^7 records, cost more than the pass)."""
        if self.hi == len(self.chunk):
            self.chunk.drop_pages()

    @property
    def spilled(self) -> bool:
        return self.chunk.spilled

    def __len__(self) -> int:
        return self.hi - self.lo

    def _row(self, i: int) -> Effect:
        return self.chunk._row(self.lo + i)  # noqa: SLF001

    def get(self, i: int, name: str):
        return self.chunk.get(self.lo + i, name)

    def __iter__(self) -> Iterator[Effect]:
        return map(self.chunk._row, range(self.lo, self.hi))  # noqa: SLF001

    def set(self, i: int, **values) -> None:
        self.chunk.set(self.lo + i, **values)

    def end(self, i: int, ended_by: int, outcome: str, leads: bool, new_leader: int | None, took: int | None) -> None:
        self.chunk.end(self.lo + i, ended_by, outcome, leads, new_leader, took)

    def _closed(self, *values) -> None:
        raise TypeError("a closed incident's effects take no more rows")


# Set after the class: ``StructColumns.__init_subclass__`` gives each subclass its own ``add_row``.
EffectSlice.add_row = EffectSlice._closed  # noqa: SLF001


class EffectArena:
    """Where closed incidents' effects go (``seal``): appended to one chunk of columns, each
    incident keeping its rows as an ``EffectSlice``; a chunk of ``rows`` rows is spilled
    (``columns.spill``, under ``spill_dir``) and a new one begun. ``flush`` spills the last."""

    def __init__(self, strings: Strings, spill_dir=None, rows: int = 1 << 20) -> None:
        self.strings, self.spill_dir, self.rows = strings, spill_dir, rows
        self.chunk = EffectList(strings=strings)

    def seal(self, inc: Incident) -> None:
        """``inc`` closed: its effects (an ``EffectList`` of this arena's strings) into the chunk."""
        effects = inc.effects
        if type(effects) is not EffectList or not len(effects) or effects.spilled:
            return
        if effects.strings is not self.strings:
            raise ValueError(f"{inc.id}: its effects number their strings in another table")
        chunk = self.chunk
        lo = len(chunk)
        for name, col in effects._cols.items():  # noqa: SLF001 - one list's columns onto another's, in C
            chunk._cols[name].extend(col)  # noqa: SLF001
        inc.effects = EffectSlice(chunk, lo, len(chunk))
        if len(chunk) >= self.rows:
            self.flush()

    def flush(self) -> None:
        if len(self.chunk):
            spill([self.chunk], self.spill_dir)
            self.chunk = EffectList(strings=self.strings)


def _columns(effects: Sequence[Effect]) -> EffectList:
    """``effects`` as columns (a decoded incident's are a list)."""
    return effects if isinstance(effects, EffectList) else EffectList(effects)


def effect_pairs(effects: Sequence[Effect]) -> set[tuple[str, int]]:
    """The (topic id, partition) of every effect."""
    return _columns(effects).pairs()


def effect_topics(incidents: Iterable[Incident], topics: dict[str, str]) -> None:
    """Add to ``topics`` (topic id -> name) the names of the topics effects name."""
    for inc in incidents:
        effects = _columns(inc.effects)
        for topic_id, name in sorted(effects.topic_names()):
            topics.setdefault(topic_id, name)
        effects.drop_pages()  # spilled effects read are not held (``columns.spill``)


class Incident(msgspec.Struct, kw_only=True):
    id: str
    kind: str
    """dir-failure | controlled-shutdown | broker-fenced."""
    broker: int
    directory: str | None = None
    path: str | None = None
    """The directory's path, where the log says it (the broker's last ``LogDirsLoaded``)."""
    failed_at: int
    failed_at_ms: int | None = None
    reported_at: int | None = None
    reported_at_ms: int | None = None
    removed_at: int | None = None
    """The record after which the directory left the registration (the broker was fenced)."""
    removed_at_ms: int | None = None
    ended_at: int | None = None
    ended_at_ms: int | None = None
    effects: Sequence[Effect] = []
    """An ``EffectList`` where the incident rules made it; a list where it was decoded."""
    unavailable_ms: int = 0
    """Partition-milliseconds without a leader or with the leader on an offline directory that
    it caused (``replay.attribution``): the outages that began while the broker still led the
    partition from what failed (or that it left leaderless), each counted whole and once, also
    past the incident's end (``unavailable_after_ms``). Every incident's together and the
    outages no incident caused add up to the availability's total."""
    unavailable_after_ms: int = 0
    """Of ``unavailable_ms``, the part after ``ended_at``: partitions it left without a leader
    that got one only later."""
    leaderless: int = 0
    """Partitions whose leadership it ended with no leader at all (not moved to a live one)."""
    overlaps: list[str] = []
    """The ids of the other incidents that hit one of its partitions while both were open."""
    violations: list[int] = []
    """Indexes into the report's ``violations`` of those it caused: on its entities while it
    lasted, and not more plausibly caused by an overlapping incident (``link_violations``)."""
    invariants: dict[str, int] = {}
    """Invariant id -> violations of it this incident caused."""

    @property
    def own_entities(self) -> set[str]:
        """The incident's broker and directory as audit entities."""
        out = {f"broker/{self.broker}"}
        if self.directory is not None:
            out.add(f"dir/{self.broker}/{self.directory}")
        return out

    @property
    def entities(self) -> set[str]:
        """The audit entities this incident concerns (violations name them)."""
        out = self.own_entities
        for topic, p in effect_pairs(self.effects):
            out.add(f"partition/{topic}/{p}")
            out.add(f"replica/{topic}/{p}/{self.broker}")
        return out


class IncidentBrief(msgspec.Struct, kw_only=True):
    """One line of an incident for an index of many (``replay.summary``: the HTML page's, which
    a reader filters by broker, directory, topic and time): its facts, no effects."""

    id: str
    kind: str
    broker: int
    directory: str | None = None
    path: str | None = None
    failed_at: int
    failed_at_ms: int | None = None
    ended_at: int | None = None
    ended_at_ms: int | None = None
    unavailable_ms: int = 0
    leaderless: int = 0
    effects: int = 0
    violations: int = 0
    invariants: dict[str, int] = {}
    overlaps: int = 0
    topics: list[str] = []
    """The names of the topics it hit (the first ``summary.TOPICS``)."""
    more_topics: int = 0


class MoveStats(msgspec.Struct, kw_only=True):
    """How fast effects of one role were ended, over every incident (ms of ``ts_ms``): for
    leadership, moved to a live leader (a leadership left with no leader is ``Leaderless``)."""

    moved: int = 0
    open: int = 0
    """Never ended: still on what failed at the end of the audit."""
    p50_ms: int | None = None
    p99_ms: int | None = None
    max_ms: int | None = None
    timed: int = 0
    """Of ``moved``, those with a time to move (both records timed): what the times count."""
    total_ms: int = 0
    """Their times to move summed."""
    buckets: list[int] = []
    """How many of them took at most each bound of ``TIME_BUCKETS_MS`` (a histogram's
    cumulative buckets, ``replay.prometheus``)."""


class Leaderless(msgspec.Struct, kw_only=True):
    """Leaderships an incident ended with no leader (Kafka's election found no live replica in
    the ISR), and how long each partition then waited for one (ms of ``ts_ms``)."""

    partitions: int = 0
    still: int = 0
    """Of those, still without a leader at the end of the audit (their wait counts to it)."""
    total_ms: int = 0
    p50_ms: int | None = None
    p99_ms: int | None = None
    max_ms: int | None = None
    timed: int = 0
    """Of ``partitions``, those whose wait has a time (``total_ms`` sums those)."""
    buckets: list[int] = []
    """How many waited at most each bound of ``TIME_BUCKETS_MS``."""


class Handling(msgspec.Struct, kw_only=True):
    incidents: int = 0
    by_kind: dict[str, int] = {}
    leadership: MoveStats = msgspec.field(default_factory=MoveStats)
    """Leaderships moved to a live leader (ended with a leader other than none)."""
    isr: MoveStats = msgspec.field(default_factory=MoveStats)
    leaderless: Leaderless = msgspec.field(default_factory=Leaderless)
    """Leaderships ended with no leader, and for how long (``replay.attribution``)."""
    other: int = 0
    """Leaderships ended by neither (the topic was removed)."""


class PartitionAvailability(msgspec.Struct, kw_only=True):
    topic_id: str
    topic: str | None
    partition: int
    no_leader_ms: int = 0
    under_min_isr_ms: int = 0
    leader_offline_ms: int = 0
    isr_offline_ms: int = 0
    unavailable_ms: int = 0
    """No leader, or the leader on an offline directory (the sum of the two: they exclude each other)."""


class Outage(msgspec.Struct, kw_only=True, array_like=True):
    """One interval a partition was unavailable (``why``: no leader | leader offline)."""

    topic_id: str
    partition: int
    why: str
    first_offset: int
    last_offset: int | None
    """The last offset it was still unavailable after; None: still at the end."""
    from_ms: int | None
    to_ms: int | None


class OutageList(StructColumns[Outage]):
    """Outages in columns (``replay.columns``): a long history's are millions."""

    struct = Outage
    __slots__ = ()

    def spans(self, end_ms: int) -> Spans:
        """``Spans`` of these outages, held as a partition's rows in time order (a topic id's
        later life after its earlier), all timed; those still open at the end until ``end_ms``."""
        n = len(self)
        if not n:
            return Spans([], [], {})
        topics, parts = wrap(self._cols["topic_id"]), wrap(self._cols["partition"])
        # Grouped by partition, stably: each partition's rows keep their time order.
        order = pc.sort_indices(pa.table({"t": topics, "p": parts}), sort_keys=[("t", "ascending"), ("p", "ascending")])
        to = wrap(self._cols["to_ms"])
        froms = unwrap(pc.take(wrap(self._cols["from_ms"]), order), "q")
        tos = unwrap(pc.take(pc.if_else(pc.equal(to, NONE_INT), pa.scalar(end_ms, pa.int64()), to), order), "q")
        table = self.strings.table
        ranges = {
            (table[code], part): span
            for code, part, span in partition_runs(pc.take(topics, order), pc.take(parts, order))
        }
        return Spans(froms, tos, ranges)

    def sort(self, steps: array) -> None:
        """Into the order the tracker opens them, stably: by first offset, ``steps`` (each row's
        place among the directory failures its record brought), topic id, partition."""
        keys = pa.table(
            {
                "first": wrap(self._cols["first_offset"]),
                "step": wrap(steps),
                "topic": pc.take(self._string_ranks(), wrap(self._cols["topic_id"])),
                "partition": wrap(self._cols["partition"]),
            }
        )
        self.reorder(pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in keys.column_names]))


class Spans:
    """Per (topic id, partition), its outages' ``from_ms`` and ``to_ms`` in time order: rows
    ``lo..hi - 1`` (``ranges``) of two columns shared by all."""

    __slots__ = ("froms", "tos", "ranges")

    def __init__(
        self, froms: Sequence[int | None], tos: Sequence[int | None], ranges: dict[tuple[str, int], tuple[int, int]]
    ) -> None:
        self.froms, self.tos, self.ranges = froms, tos, ranges


def partition_runs(topics, parts) -> list[tuple[Any, int, tuple[int, int]]]:
    """(topic, partition, (lo, hi)) of each partition's rows ``lo..hi - 1`` in rows sorted by
    (topic, partition) (Arrow arrays, ``topics`` ids or their codes), read as Python values at
    each partition's first row only: a long history has millions of outages, and a Python value
    per outage held a gigabyte at 10^8 records (bench/RESULTS.md)."""
    n = len(topics)
    if not n:
        return []
    changed = pc.or_(pc.not_equal(topics[1:], topics[:-1]), pc.not_equal(parts[1:], parts[:-1]))
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist()), n]
    heads = pa.array(starts[:-1], pa.int64())
    return list(
        zip(
            pc.take(topics, heads).to_pylist(),
            pc.take(parts, heads).to_pylist(),
            itertools.pairwise(starts),
            strict=True,
        )
    )


def outage_spans(outages: Iterable[Outage]) -> Spans:
    """``Spans`` of ``outages`` (in time order per partition)."""
    rows: dict[tuple[str, int], list[Outage]] = {}
    for o in outages:
        rows.setdefault((o.topic_id, o.partition), []).append(o)
    froms: list[int | None] = []
    tos: list[int | None] = []
    ranges = {}
    for key, got in rows.items():
        ranges[key] = (len(froms), len(froms) + len(got))
        froms += [o.from_ms for o in got]
        tos += [o.to_ms for o in got]
    return Spans(froms, tos, ranges)


class Availability(msgspec.Struct, kw_only=True):
    """Availability over the audited records; totals are partition-milliseconds."""

    from_ms: int | None = None
    to_ms: int | None = None
    no_leader_ms: int = 0
    under_min_isr_ms: int = 0
    leader_offline_ms: int = 0
    isr_offline_ms: int = 0
    unavailable_ms: int = 0
    partitions: list[PartitionAvailability] = []
    """Partitions with any time in a bad state, worst (most unavailable) first."""
    unavailable_partitions: int = 0
    """Of ``partitions``, those with time unavailable (a bounded report keeps the count)."""
    outages: Sequence[Outage] = []
    """In the order they began (an ``OutageList`` where the audit plan found them)."""
    by_kind: dict[str, int] = {}
    """Incident kind -> the unavailable partition-ms its incidents caused (``Incident.unavailable_ms``)."""
    outside_incidents_ms: int = 0
    """The unavailable partition-ms no incident caused: with ``by_kind``, ``unavailable_ms``."""
    outage_incidents: list[int] = []
    """Per outage, the index in the report's incidents of the one that caused it to begin (-1:
    none; ``replay.attribution``)."""
    outage_splits: list[list[int]] = []
    """Where an outage went on under another incident (or none, -1): [outage, from offset,
    from ms, incident], in order: its leader moved to a replica another failure holds."""


class IncidentsResult(msgspec.Struct, kw_only=True):
    incidents: list[Incident]
    handling: Handling
    availability: Availability
    topics: dict[str, str]
    """Topic id -> name."""
    dir_paths: dict[str, str] = {}


# -- tracking ------------------------------------------------------------------------------------

_SERVING = (True, False, False)
_UNKNOWN = object()
_ANY_DIR = frozenset({"*"})
_FLAGS = ("no_leader", "under_min_isr", "leader_offline", "isr_offline")


class _Part:
    """Availability state of one partition: which bad states hold and since when."""

    __slots__ = ("avail", "flags", "since", "replicas", "outage", "leader", "isr", "dirs")

    def __init__(self, avail: PartitionAvailability, replicas: tuple[int, ...]) -> None:
        self.avail = avail
        self.leader = NO_LEADER
        self.isr: tuple[int, ...] = ()
        self.dirs: tuple[str, ...] | None = None
        self.flags = (False, False, False, False)
        self.since: list[int | None] = [None, None, None, None]
        self.replicas = replicas
        self.outage: Outage | None = None


class _OpenEffect:
    """An effect not ended yet: its incident and its row in the incident's effects, its role,
    its partition (``key``: whatever the follower names partitions by) and the directory it is
    on (None: anywhere on the broker)."""

    __slots__ = ("incident", "row", "role", "key", "directory", "topic", "ended")

    def __init__(self, incident: Incident, row: int, role: str, key, directory: str | None, topic: str) -> None:
        self.incident, self.row, self.role, self.key, self.directory = incident, row, role, key, directory
        self.topic = topic
        """The partition's topic id (``key``'s, kept: ending it looks up the topic's keys)."""
        self.ended = False
        """Ended (``IncidentRules._end``, the only writer of its row's end)."""


class IncidentRules:
    """The incident rules, written once: which incidents the broker and directory records open,
    report, remove and end, and the effects those records begin and end. Two followers feed it
    the same events in offset order: ``IncidentTracker`` (a ``ControllerView``, record by record:
    the reference) and the audit plan's driver (``replay.plan.incidents``: the control records,
    with the partitions each incident hits from SQL). They differ only in where partitions come
    from, the hooks:

    - ``_open_effects(inc, offset, broker, directory)``: open (``_open_all``) the effects of an
      incident that began at ``offset``: the partitions the broker leads or is in the ISR of (on
      ``directory``; None: anywhere);
    - ``_departures(broker, offset, prev)``: the partition changes (key, role, offset, ts, leader
      after) that took a serving broker out just before its fencing at ``offset`` (after the
      control record ``prev``): a crash's first records;
    - ``_leader(key, inc)``: the partition's leader now (an effect ended by its incident's end);
    - ``_partition_key(key)``: (topic id, partition); ``_name(topic_id)``: the topic's name;
    - ``_remeasure(broker, offset, ts)`` and ``_dir_down(broker, directory, offset, ts)``: a
      broker's availability may have changed (after each of its events; after each directory
      incident it opens).

    What ends an effect at a partition record (the replica left the directory or the replica
    set, the broker lost the role) is the follower's too: ``IncidentTracker._check_effects`` at
    each record, the plan's ``effects`` query in SQL; either calls ``_end``."""

    def __init__(self) -> None:
        self.incidents: list[Incident] = []
        self.failed: dict[tuple[int, str], Incident] = {}
        """(broker, directory) observed failed and not loaded online since -> its incident."""
        self.strings = Strings()
        """The strings of every incident's effects (``EffectList``), interned once."""
        self.failed_of: dict[int, dict[str, None]] = {}
        """Broker -> its directories in ``failed``, in the same order: an event reads its own
        broker's, not every failed directory of the cluster (a long history keeps many)."""
        self.open_dirs: dict[tuple[int, str], Incident] = {}
        self.open_dirs_of: dict[int, dict[str, Incident]] = {}
        """Broker -> its entries of ``open_dirs``."""
        self.open_brokers: dict[int, Incident] = {}
        self.effects: dict = {}
        """Partition key -> its open effects (``_OpenEffect``)."""
        self.effect_parts: dict[str, set] = {}
        """Incident id -> the partitions it has open effects on: ending an incident's effects
        reads those, not every partition with an open effect."""
        self.topic_keys: dict[str, set] = {}
        """Topic id -> its partitions with open effects."""
        self.unended: dict[str, int] = {}
        """Incident id -> its effects not ended yet."""
        self.brokers: dict[int, tuple[bool, bool, bool]] = {}
        """Broker -> (registered, fenced, in controlled shutdown) as last seen."""
        self.dir_paths: dict[str, str] = {}

    # -- hooks ---------------------------------------------------------------------------------

    def _open_effects(self, inc: Incident, offset: int, broker: int, directory: str | None) -> None:
        raise NotImplementedError

    def _departures(self, broker: int, offset: int, prev: int | None) -> list[tuple]:
        raise NotImplementedError

    def _leader(self, key, inc: Incident) -> int | None:
        raise NotImplementedError

    def _partition_key(self, key) -> tuple[str, int]:
        return key

    def _name(self, topic_id: str) -> str | None:
        raise NotImplementedError

    def _closed(self, inc: Incident) -> None:
        """``inc`` has just closed: its effects change only in place from here (``end``)."""

    def _remeasure(self, broker: int, offset: int, ts: int | None) -> None:
        pass

    def _dir_down(self, broker: int, directory: str, offset: int, ts: int | None) -> None:
        self._remeasure(broker, offset, ts)

    # -- directories ---------------------------------------------------------------------------

    def dir_failed(self, broker: int, d: str, offset: int, ts: int | None, reg_dirs, *, reported: bool) -> None:
        """Directory ``d`` of ``broker`` said failed at ``offset``; ``reg_dirs``: the broker's
        registered directories after the record (None: not registered)."""
        key = (broker, d)
        inc = self.open_dirs.get(key)
        if inc is None:
            if key in self.failed:
                return  # a heartbeat repeating a failure already handled
            inc = Incident(
                id=f"dir-failure/{broker}/{d}@{offset}",
                kind="dir-failure",
                broker=broker,
                directory=d,
                path=self.dir_paths.get(d),
                failed_at=offset,
                failed_at_ms=ts,
                effects=EffectList(strings=self.strings),
            )
            self.incidents.append(inc)
            self.open_dirs[key] = self.failed[key] = inc
            self.open_dirs_of.setdefault(broker, {})[d] = inc
            self.failed_of.setdefault(broker, {})[d] = None
            self._open_effects(inc, offset, broker, d)
            self._dir_down(broker, d, offset, ts)
            self._removed_check(broker, offset, ts, reg_dirs)
        if reported and inc.reported_at is None:
            inc.reported_at, inc.reported_at_ms = offset, ts

    def loaded(self, broker: int, online, offline, paths, reg_dirs, offset: int, ts: int | None) -> None:
        """A ``LogDirsLoaded``: the broker started with ``online`` and ``offline`` directories."""
        for d, path in zip((*online, *offline), paths):
            if path:
                self.dir_paths[d] = path
        for d in online:
            if (broker, d) in self.failed:
                del self.failed[(broker, d)]
                del self.failed_of[broker][d]
                inc = self.open_dirs.get((broker, d))
                if inc is not None:
                    self._end_effects(inc, offset, ts, "directory back")
                    self._close(inc, offset, ts)
        for d in offline:
            self.dir_failed(broker, d, offset, ts, reg_dirs, reported=True)
        self._remeasure(broker, offset, ts)

    def _removed_check(self, broker: int, offset: int, ts: int | None, reg_dirs) -> None:
        """Mark open directory incidents of ``broker`` removed once its registration (if any)
        no longer lists the directory; end those with nothing left open."""
        for d, inc in list(self.open_dirs_of.get(broker, {}).items()):
            if inc.removed_at is None and (reg_dirs is None or not is_online(d, reg_dirs)):
                inc.removed_at, inc.removed_at_ms = offset, ts
            if inc.removed_at is not None:
                self._maybe_close(inc, offset, ts)

    # -- brokers -------------------------------------------------------------------------------

    def broker(self, broker: int, offset: int, ts: int | None, reg_dirs, flags, prev: int | None) -> None:
        """A broker record at ``offset`` (the control record before it: ``prev``): after it the
        broker is registered with ``reg_dirs`` (None: not registered) and ``flags`` (fenced, in
        controlled shutdown)."""
        now = (False, False, False) if reg_dirs is None else (True, *flags)
        was = self.brokers.get(broker, (False, True, False))
        self.brokers[broker] = now
        inc = self.open_brokers.get(broker)
        if now[2] and not was[2] and inc is None and now[0]:
            inc = self._broker_incident("controlled-shutdown", broker, offset, ts)
            inc.reported_at, inc.reported_at_ms = offset, ts
            self._open_effects(inc, offset, broker, None)
        elif was[0] and not was[1] and (not now[0] or now[1]):
            if inc is None:
                gone = self._departures(broker, offset, prev) if was == _SERVING else []
                first, first_ts = (gone[0][2], gone[0][3]) if gone else (offset, ts)
                inc = self._broker_incident("broker-fenced", broker, first, first_ts)
                for key, role, at, at_ts, leader in gone:
                    topic, p = self._partition_key(key)
                    leads = role == "leader"
                    inc.effects.add_row(  # type: ignore[attr-defined]  # an EffectList here; an ``Effect``, fields in order
                        topic,
                        self._name(topic),
                        p,
                        role,
                        first,
                        at,
                        ("no leader" if leader == NO_LEADER else "leader moved") if leads else "left the ISR",
                        leader if leads else None,
                        None if at_ts is None or first_ts is None else at_ts - first_ts,
                    )
                # Whatever it still leads or is in the ISR of stays an effect until moved.
                self._open_effects(inc, offset, broker, None)
            if inc.removed_at is None:
                inc.removed_at, inc.removed_at_ms = offset, ts
            self._maybe_close(inc, offset, ts)
        elif inc is not None and now == _SERVING:
            # Serving again (unfenced): whatever is still open ended by its return.
            self._end_effects(inc, offset, ts, "broker back")
            self._close(inc, offset, ts)
        self._remeasure(broker, offset, ts)
        self._removed_check(broker, offset, ts, reg_dirs)

    def _broker_incident(self, kind: str, broker: int, offset: int, ts: int | None) -> Incident:
        inc = Incident(
            id=f"{kind}/{broker}@{offset}",
            kind=kind,
            broker=broker,
            failed_at=offset,
            failed_at_ms=ts,
            effects=EffectList(strings=self.strings),
        )
        self.incidents.append(inc)
        self.open_brokers[broker] = inc
        return inc

    def topic_removed(self, topic_id: str, offset: int, ts: int | None) -> None:
        """A ``RemoveTopic``: every effect still open on its partitions ended."""
        for key in sorted(self.topic_keys.pop(topic_id, ())):
            for oe in list(self.effects.get(key, ())):
                self._end(oe, offset, ts, "topic removed", None)
                self._maybe_close(oe.incident, offset, ts)

    # -- effects -------------------------------------------------------------------------------

    def _open_all(self, inc: Incident, opening: Iterable[tuple], directory: str | None) -> list[_OpenEffect]:
        """New effects of ``inc``, one per (partition key, role) of ``opening`` in that order,
        counted from the incident's start (a fenced broker's are found at its fencing, after it
        began). All of an incident's at once: a long history's incidents open tens of millions."""
        effects = inc.effects
        add, row, at = effects.add_row, len(effects), inc.failed_at  # type: ignore[attr-defined]  # the audit's incidents hold an EffectList
        key_of, name_of = self._partition_key, self._name
        by_key, topic_keys = self.effects, self.topic_keys
        opened: list[_OpenEffect] = []
        for key, role in opening:
            topic, p = key_of(key)
            add(topic, name_of(topic), p, role, at, None, "open", None, None)
            oe = _OpenEffect(inc, row, role, key, directory, topic)
            row += 1
            opened.append(oe)
            by_key.setdefault(key, []).append(oe)
            topic_keys.setdefault(topic, set()).add(key)
        if opened:
            self.effect_parts.setdefault(inc.id, set()).update(oe.key for oe in opened)
            self.unended[inc.id] = self.unended.get(inc.id, 0) + len(opened)
        return opened

    def _end(self, oe: _OpenEffect, offset: int, ts: int | None, outcome: str, leader: int | None) -> None:
        inc = oe.incident
        if not oe.ended:
            oe.ended = True
            self.unended[inc.id] -= 1
        inc.effects.end(  # type: ignore[attr-defined]  # the audit's incidents hold an EffectList
            oe.row,
            offset,
            outcome,
            oe.role == "leader",
            leader,
            None if ts is None or inc.failed_at_ms is None else ts - inc.failed_at_ms,
        )
        key = oe.key
        opened = self.effects.get(key)
        if opened is not None and oe in opened:
            opened.remove(oe)
            # The partition leaves the incident's and the topic's keys with its last open
            # effect of each: a long history's ended effects are not held to its end.
            if not opened:
                del self.effects[key]
                _discard(self.effect_parts, inc.id, key)
                _discard(self.topic_keys, oe.topic, key)
            elif not any(o.incident is inc for o in opened):
                _discard(self.effect_parts, inc.id, key)

    def _end_effects(self, inc: Incident, offset: int, ts: int | None, outcome: str) -> None:
        for key in sorted(self.effect_parts.pop(inc.id, ())):
            for oe in [oe for oe in self.effects.get(key, ()) if oe.incident is inc]:
                self._end(oe, offset, ts, outcome, self._leader(key, inc))

    def _maybe_close(self, inc: Incident, offset: int, ts: int | None) -> None:
        # A directory's incident ends once it left the registration, a broker's once it was
        # fenced (a shutdown not fenced yet is under way), and either once every effect ended.
        if inc.ended_at is not None or self.unended.get(inc.id, 0) or inc.removed_at is None:
            return
        self._close(inc, offset, ts)

    def _close(self, inc: Incident, offset: int, ts: int | None) -> None:
        if inc.ended_at is None:
            inc.ended_at, inc.ended_at_ms = offset, ts
            self._closed(inc)
        self.effect_parts.pop(inc.id, None)  # every effect of a closed incident ended
        if inc.directory is not None:
            if self.open_dirs.get((inc.broker, inc.directory)) is inc:
                del self.open_dirs[(inc.broker, inc.directory)]
                del self.open_dirs_of[inc.broker][inc.directory]
        elif self.open_brokers.get(inc.broker) is inc:
            del self.open_brokers[inc.broker]


def _discard(sets: dict, name, key) -> None:
    """``key`` out of ``sets[name]``, and the set out of ``sets`` once empty (a set keeps its
    size as it empties)."""
    keys = sets.get(name)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del sets[name]


class IncidentTracker(IncidentRules):
    """Follows a ``ControllerView`` record by record (``observe`` after each record is applied)
    and keeps incidents and availability; ``result()`` at the end."""

    def __init__(self, view: ControllerView) -> None:
        super().__init__()
        self.view = view
        self.departing: dict[int, list[tuple[tuple[str, int], str, int, int | None, int]]] = {}
        """Broker -> (partition, role, offset, ts, leader after) of the partition changes that
        just took it out: Kafka writes them before the fencing of a broker whose session expired."""
        self.parts: dict[tuple[str, int], _Part] = {}
        self.topic_parts: dict[str, dict[tuple[str, int], None]] = {}
        """Topic id -> its keys of ``parts``, in the same order (outages open in that order)."""
        self.by_broker: dict[int, set[tuple[str, int]]] = {}
        self.min_isr_cache: dict[str, int] = {}
        self.online: dict[int, object] = {}
        """Broker -> its online directories (None: down), cleared by its broker and dir records."""
        self.signature: dict[int, object] = {}
        """Broker -> what its availability depended on when its partitions were last measured."""
        self.outages: list[Outage] = []
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.last_offset = view.offset
        for reg in view.brokers.values():
            self.brokers[reg.id] = (True, reg.fenced, reg.in_controlled_shutdown)
        for p in view.iter_partitions():
            self._partition(p, view.offset, None)

    # -- the record stream -------------------------------------------------------------------

    def observe(self, r: Any, offset: int) -> None:  # Any: the fields of its class, read by the chain of `cls is` below
        ts = r.ts_ms
        if ts is not None:
            if self.first_ms is None:
                self.first_ms = ts
            self.last_ms = ts
        self.last_offset = offset
        cls = type(r)
        if cls is PartitionChange or cls is Partition:
            p = self.view.partition(r.topic_id, r.partition_id)
            if p is not None:
                self._partition(p, offset, ts)
            return
        if cls is LogDirFailed:
            self.dir_failed(r.broker_id, r.directory, offset, ts, self._dirs(r.broker_id), reported=False)
        elif cls is HeartbeatOfflineDirs:
            for d in r.offline_log_dirs:
                self.dir_failed(r.broker_id, d, offset, ts, self._dirs(r.broker_id), reported=True)
        elif cls is LogDirsLoaded:
            b = r.broker_id
            self.loaded(b, r.online_dirs, r.offline_dirs, r.paths, self._dirs(b), offset, ts)
        elif cls in _BROKER_RECORDS:
            broker = r.id if cls in (FenceBroker, UnfenceBroker) else r.broker_id
            reg = self.view.brokers.get(broker)
            flags = None if reg is None else (reg.fenced, reg.in_controlled_shutdown)
            self.broker(broker, offset, ts, None if reg is None else reg.log_dirs, flags, None)
        elif cls is RemoveTopic:
            self.topic_removed(r.topic_id, offset, ts)
        elif cls is Config:
            self.min_isr_cache.clear()
            if r.name == MIN_ISR:
                for key in list(self.parts):
                    p = self.view.partition(*key)
                    if p is not None:
                        self._measure(key, p, offset, ts)
        if self.departing:  # crash departures are the changes right before the fencing
            self.departing.clear()

    def _dirs(self, broker: int):
        reg = self.view.brokers.get(broker)
        return None if reg is None else reg.log_dirs

    # -- the rules' hooks: partitions from the view --------------------------------------------

    def _open_effects(self, inc: Incident, offset: int, broker: int, d: str | None) -> None:
        view = self.view
        opening = []
        for pkey in sorted(self.by_broker.get(broker, ())):
            p = view.partition(*pkey)
            if p is None or (d is not None and (broker not in p.replicas or p.directory(broker) != d)):
                continue
            if p.leader == broker:
                opening.append((pkey, "leader"))
            if broker in p.isr:
                opening.append((pkey, "isr"))
        self._open_all(inc, opening, d)

    def _departures(self, broker: int, offset: int, prev: int | None) -> list[tuple]:
        return self.departing.pop(broker, [])

    def _leader(self, key, inc: Incident) -> int | None:
        p = self.view.partition(*key)
        return None if p is None else p.leader

    def _name(self, topic_id: str) -> str | None:
        return self._topic(topic_id)

    def _check_effects(self, pkey: tuple[str, int], p, offset: int, ts: int | None) -> None:
        """End the open effects on ``p`` that its new state ends."""
        for oe in list(self.effects.get(pkey, ())):
            b = oe.incident.broker
            if b not in p.replicas:
                outcome = "replica removed"
            elif oe.directory is not None and p.directory(b) != oe.directory:
                outcome = "replica moved"
            elif oe.role == "leader" and p.leader != b:
                outcome = "no leader" if p.leader == NO_LEADER else "leader moved"
            elif oe.role == "isr" and b not in p.isr:
                outcome = "left the ISR"
            else:
                continue
            self._end(oe, offset, ts, outcome, p.leader)
            self._maybe_close(oe.incident, offset, ts)

    def topic_removed(self, topic_id: str, offset: int, ts: int | None) -> None:
        super().topic_removed(topic_id, offset, ts)
        for pkey in self.topic_parts.pop(topic_id, ()):
            part = self.parts.pop(pkey)
            self._set_flags(part, (False, False, False, False), offset, ts)
            for b in part.replicas:
                self.by_broker.get(b, set()).discard(pkey)

    # -- availability --------------------------------------------------------------------------

    def _partition(self, p, offset: int, ts: int | None) -> None:
        pkey = (p.topic_id, p.partition_id)
        part = self.parts.get(pkey)
        if part is None:
            part = self.parts[pkey] = _Part(
                PartitionAvailability(topic_id=p.topic_id, topic=self._topic(p.topic_id), partition=p.partition_id),
                (),
            )
            self.topic_parts.setdefault(p.topic_id, {})[pkey] = None
        if part.replicas is not p.replicas:
            for b in part.replicas:
                if b not in p.replicas:
                    self.by_broker.get(b, set()).discard(pkey)
            for b in p.replicas:
                self.by_broker.setdefault(b, set()).add(pkey)
            part.replicas = p.replicas
        if self.effects:
            self._check_effects(pkey, p, offset, ts)
        if part.isr is not p.isr or part.leader != p.leader or part.dirs is not p.directories:
            self._measure(pkey, p, offset, ts, part)
            part.dirs = p.directories
        # A change that takes a serving broker out: maybe a crash, confirmed by its fencing
        # right after (``_broker``).
        if part.isr is not p.isr or part.leader != p.leader:
            brokers = self.brokers
            if part.leader != NO_LEADER and part.leader != p.leader and brokers.get(part.leader) == _SERVING:
                self.departing.setdefault(part.leader, []).append((pkey, "leader", offset, ts, p.leader))
            for b in part.isr:
                if b not in p.isr and brokers.get(b) == _SERVING:
                    self.departing.setdefault(b, []).append((pkey, "isr", offset, ts, p.leader))
            part.leader, part.isr = p.leader, p.isr

    def _online_of(self, broker: int):
        """The broker's online directories (cached until its next broker or dir record): None
        when it is down, ``_ANY_DIR`` when registered without directories."""
        reg = self.view.brokers.get(broker)
        if reg is None or reg.fenced:
            online = None
        elif not reg.log_dirs:
            online = _ANY_DIR
        else:
            online = frozenset(x for x in reg.log_dirs if (broker, x) not in self.failed)
        self.online[broker] = online
        return online

    def _offline(self, broker: int, d: str) -> bool:
        online = self.online.get(broker, _UNKNOWN)
        if online is _UNKNOWN:
            online = self._online_of(broker)
        if online is None:
            return True
        if online is _ANY_DIR:
            return (broker, d) in self.failed or not is_online(d, ())
        return d not in online and d not in ONLINE_RESERVED  # type: ignore[operator]  # past the sentinels: a set of dirs

    def _min_isr(self, topic_id: str) -> int:
        got = self.min_isr_cache.get(topic_id)
        if got is None:
            got = self.min_isr_cache[topic_id] = min_isr(self.view, topic_id)
        return got

    def _measure(self, pkey, p, offset: int, ts: int | None, part: _Part | None = None) -> None:
        part = part or self.parts.get(pkey)
        if part is None:
            return
        leader, replicas, dirs, isr = p.leader, p.replicas, p.directories, p.isr
        offline, online = self._offline, self.online
        no_leader = leader == NO_LEADER
        leader_off = not no_leader and (leader not in replicas or offline(leader, dirs[replicas.index(leader)]))
        isr_off = False
        for i, b in enumerate(replicas):
            if b not in isr:
                continue
            o = online.get(b)
            d = dirs[i]
            # The common case inline: a serving broker with directories, this one among them.
            if o is not None and o is not _ANY_DIR and o is not _UNKNOWN and d in o:  # type: ignore[operator]  # past the sentinels: a set of dirs
                continue
            if offline(b, d):
                isr_off = True
                break
        min_isr = self.min_isr_cache.get(p.topic_id) or self._min_isr(p.topic_id)
        flags = (no_leader, len(isr) < min_isr, leader_off, isr_off)
        if flags != part.flags:
            self._set_flags(part, flags, offset, ts)

    def _set_flags(self, part: _Part, flags: tuple[bool, bool, bool, bool], offset: int, ts: int | None) -> None:
        before = part.flags
        if flags == before:
            return
        avail = part.avail
        for i, name in enumerate(_FLAGS):
            if flags[i] == before[i]:
                continue
            if flags[i]:
                part.since[i] = ts
            else:
                since = part.since[i]
                if since is not None and ts is not None:
                    setattr(avail, name + "_ms", getattr(avail, name + "_ms") + ts - since)
                part.since[i] = None
        down = flags[0] or flags[2]
        if part.outage is not None and (not down or (flags[0], flags[2]) != (before[0], before[2])):
            part.outage.last_offset, part.outage.to_ms = offset - 1, ts
            part.outage = None
        if down and part.outage is None:
            part.outage = Outage(
                topic_id=avail.topic_id,
                partition=avail.partition,
                why="no leader" if flags[0] else "leader offline",
                first_offset=offset,
                last_offset=None,
                from_ms=ts,
                to_ms=None,
            )
            self.outages.append(part.outage)
        part.flags = flags

    def _remeasure(self, broker: int, offset: int, ts: int | None) -> None:
        """Measure again the partitions with a replica on ``broker``, when what their
        availability reads of it (registration, fencing, online and failed dirs) changed."""
        self.online.pop(broker, None)
        reg = self.view.brokers.get(broker)
        sig = (
            None if reg is None else (reg.fenced, reg.log_dirs),
            tuple(self.failed_of.get(broker, ())),
        )
        if self.signature.get(broker) == sig:
            return
        self.signature[broker] = sig
        view, parts = self.view, self.parts
        for pkey in sorted(self.by_broker.get(broker, ())):
            part = parts.get(pkey)
            # Only a leader's or an ISR member's directories count.
            if part is not None and (part.leader == broker or broker in part.isr):
                p = view.partition(*pkey)
                if p is not None:
                    self._measure(pkey, p, offset, ts, part)

    def _topic(self, topic_id: str) -> str | None:
        info = self.view.topics.get(topic_id)
        return None if info is None else info.name

    # -- the result ----------------------------------------------------------------------------

    def result(self) -> IncidentsResult:
        """Incidents and availability at the end: states still open are counted to the last
        record's time."""
        end_ms = self.last_ms
        rows = []
        for part in self.parts.values():
            a = msgspec.structs.replace(part.avail)
            for i, name in enumerate(_FLAGS):
                since = part.since[i]
                if part.flags[i] and since is not None and end_ms is not None:
                    setattr(a, name + "_ms", getattr(a, name + "_ms") + end_ms - since)
            a.unavailable_ms = a.no_leader_ms + a.leader_offline_ms
            if a.no_leader_ms or a.under_min_isr_ms or a.leader_offline_ms or a.isr_offline_ms:
                a.topic = a.topic or self._topic(a.topic_id)
                rows.append(a)
        rows.sort(key=lambda a: (-a.unavailable_ms, -a.isr_offline_ms, a.topic or a.topic_id, a.partition))
        outages = self.outages
        incidents = self.incidents
        availability = Availability(
            from_ms=self.first_ms,
            to_ms=end_ms,
            no_leader_ms=sum(a.no_leader_ms for a in rows),
            under_min_isr_ms=sum(a.under_min_isr_ms for a in rows),
            leader_offline_ms=sum(a.leader_offline_ms for a in rows),
            isr_offline_ms=sum(a.isr_offline_ms for a in rows),
            unavailable_ms=sum(a.unavailable_ms for a in rows),
            partitions=rows,
            unavailable_partitions=sum(1 for a in rows if a.unavailable_ms),
            outages=outages,
        )
        topics = {t.id: t.name for t in self.view.topics.values()}
        effect_topics(incidents, topics)  # names of topics removed since
        return IncidentsResult(
            incidents=incidents,
            handling=handling(incidents),
            availability=availability,
            topics=dict(sorted(topics.items())),
            dir_paths=dict(sorted(self.dir_paths.items())),
        )


def min_isr(view, topic_id: str) -> int:
    """The min.insync.replicas in force for topic ``topic_id`` in ``view`` (a ``ControllerView``):
    the topic's config, else the cluster default, else 1 (also for a value that is not a number)."""
    info = view.topics.get(topic_id)
    value = None if info is None else view.config(TOPIC_RESOURCE, info.name, MIN_ISR)
    if value is None:
        value = view.config(BROKER_RESOURCE, "", MIN_ISR)
    try:
        return int(value) if value is not None else 1
    except ValueError:
        return 1


def _finished(inc: Incident, spans: Spans, end_ms: int | None) -> Incident:
    """``inc`` as the engines hand it on: what it caused (its outages, its unavailability, the
    leaderships it left with no leader) is tied to it over every incident at once, when the
    report is assembled (``replay.attribution``); ``_windowed`` is what its partitions'
    outages summed while it lasted, whoever caused them."""
    return inc


def percentile(sorted_values: Sequence[int], q: float) -> int | None:
    """The nearest-rank ``q`` percentile (0 < q <= 1) of ascending values."""
    if not sorted_values:
        return None
    rank = max(1, -(-int(q * 1000) * len(sorted_values) // 1000))
    return sorted_values[min(rank, len(sorted_values)) - 1]


TIME_BUCKETS_MS = (
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    1_800_000,
    3_600_000,
)
"""Upper bounds (ms of record time) of the histograms of times to move and of leaderless waits:
a controller moves leadership in milliseconds, a partition may wait hours for a leader."""


def buckets(sorted_times: array) -> list[int]:
    """How many of ``sorted_times`` (ascending) are at most each bound of ``TIME_BUCKETS_MS``."""
    if not sorted_times:
        return [0] * len(TIME_BUCKETS_MS)
    found = np.frombuffer(sorted_times, dtype=np.int64).searchsorted(TIME_BUCKETS_MS, side="right")
    return [int(n) for n in found]


def _stats(moved: int, still_open: int, times: array) -> MoveStats:
    values = np.frombuffer(times, dtype=np.int64)
    values.sort()  # in place: a sorted copy would double them
    return MoveStats(
        moved=moved,
        open=still_open,
        p50_ms=percentile(times, 0.5),
        p99_ms=percentile(times, 0.99),
        max_ms=times[-1] if times else None,
        timed=len(times),
        total_ms=int(values.sum()),
        buckets=buckets(times),
    )


def handling(incidents: list[Incident], leaderless: Leaderless | None = None) -> Handling:
    """How fast the incidents' effects were ended: leadership moved to a live leader and ISR,
    p50/p99/max; leaderships left with no leader counted apart (``leaderless``: how long they
    waited, ``replay.attribution``; else their count alone)."""
    moves: dict[str, list] = {"leader": [0, 0, array("q"), 0, 0], "isr": [0, 0, array("q"), 0, 0]}
    by_kind: dict[str, int] = {}
    for inc in incidents:
        by_kind[inc.kind] = by_kind.get(inc.kind, 0) + 1
        effects = _columns(inc.effects)
        effects.moves(moves)
        effects.drop_pages()
    lead = moves["leader"]
    return Handling(
        incidents=len(incidents),
        by_kind=dict(sorted(by_kind.items())),
        leadership=_stats(*lead[:3]),
        isr=_stats(*moves["isr"][:3]),
        leaderless=leaderless if leaderless is not None else Leaderless(partitions=lead[3]),
        other=lead[4],
    )


# -- standalone pass and the report ------------------------------------------------------------


def find_incidents(
    records: Iterable[Iterable[Record]] | Iterable[Record], start: ControllerView | None = None
) -> IncidentsResult:
    """Replay ``records`` (batches or single records, in offset order) from ``start`` and return
    their incidents and availability, each outage tied to the incident that caused it
    (``replay.attribution``): the pass any audit engine can run beside its own."""
    view = start.copy() if start is not None else ControllerView()
    tracker = IncidentTracker(view)
    txns = Transactions()

    def one(r: Record) -> None:
        offset = r.offset if r.offset is not None else view.offset + 1
        try:
            apply(view, r)
        except ReplayError:
            view.offset = offset  # refused: the audit reports it; the state is unchanged
        tracker.observe(r, offset)

    for item in records:
        batch = item if isinstance(item, list | tuple) else (item,)
        for r in batch:
            for x in txns.push(r):
                one(x)
    for x in txns.finish():
        one(x)
    from .attribution import attribute

    found = tracker.result()
    attribute(found)
    return found


def link_violations(incidents: list[Incident], violations: Sequence) -> None:
    """Tie each violation to the incident that caused it: among those during which one of its
    entities was wrong (same entity, offsets overlapping the incident's ``[failed_at,
    ended_at]``), the one it names (its broker or directory: ``_cause``), else the latest to
    fail at or before the violation began, else the first it overlaps. Overlapping incidents
    (``Incident.overlaps``) each list only what they caused."""
    if not incidents:
        return
    columns = violations if isinstance(violations, ViolationList) else None
    named = columns.entities() if columns is not None else {v.entity for v in violations}
    # An incident's partitions and replicas are many (every effect); they are named only when
    # some violation is of a partition or a replica.
    deep = any(e.startswith(("partition/", "replica/")) for e in named)
    by_entity: dict[str, list[Incident]] = {}
    for inc in incidents:
        inc.violations, inc.invariants = [], {}
        for ent in inc.entities if deep else inc.own_entities:
            if ent in named:
                by_entity.setdefault(ent, []).append(inc)
        if deep:
            _columns(inc.effects).drop_pages()
    # A columnar list builds only the violations of the incidents' entities.
    rows = (
        columns.of_entities(by_entity)
        if columns is not None
        else ((i, v.invariant, v.entity, v.first_offset, v.last_offset) for i, v in enumerate(violations))
    )
    for i, invariant, entity, first, v_end in rows:
        during = [
            inc
            for inc in by_entity.get(entity, ())
            if (inc.ended_at is None or first <= inc.ended_at) and (v_end is None or v_end >= inc.failed_at)
        ]
        if not during:
            continue
        inc = during[0] if len(during) == 1 else _cause(during, entity, first)
        inc.violations.append(i)
        inc.invariants[invariant] = inc.invariants.get(invariant, 0) + 1
    if columns is not None:
        columns.drop_pages()
    for inc in incidents:
        inc.invariants = dict(sorted(inc.invariants.items()))


def _cause(during: list[Incident], entity: str, first: int) -> Incident:
    """Of incidents overlapping a violation of ``entity`` that began at ``first``, the one that
    caused it: the one whose broker or directory it is (a replica's broker), else the latest to
    fail at or before ``first``, else the earliest."""
    parts = entity.split("/")
    if parts[0] in ("broker", "dir"):
        own = [inc for inc in during if entity in inc.own_entities]
        during = own or during
    elif parts[0] == "replica" and len(parts) > 3:
        own = [inc for inc in during if str(inc.broker) == parts[3]]
        during = own or during
    before = [inc for inc in during if inc.failed_at <= first]
    if before:
        return max(before, key=lambda inc: (inc.failed_at, inc.id))
    return min(during, key=lambda inc: (inc.failed_at, inc.id))
