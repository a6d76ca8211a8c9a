"""Incidents and availability from the plan: the ``IncidentsResult`` that
``replay.incidents.find_incidents`` gives for the same records, without a pass over every record.

``find_incidents`` follows a ``ControllerView`` record by record (``IncidentTracker``). Here the
same answer is split along the plan's own line:

- **The broker side** (which incidents exist; failed, reported, removed, ended; the intervals
  where a broker is down or a directory offline; min.insync.replicas per topic) is read off the
  broker and observation records, a few percent of a history, as the driver replays the control
  plane (``Observer``, called by ``plan.control.replay_control_plane``), and replayed here
  (``_Incidents``) by the tracker's own rules (``replay.incidents.IncidentRules``, written once
  for both), the effects an incident opens read from the engine as columns (``effect_rows``).
- **The partition side** is SQL over the plan's partition timeline (``timeline``: pk, off,
  end_, removed, leader, isr, replicas, dirs, old_leader, old_isr), read by column name:
  ``effects`` (the partitions a failed broker leads or is in the ISR of at the incident's start,
  on the failed directory, and the record that ends each), ``departures`` (the changes just
  before a crashed broker's fencing that took it out: Kafka writes them first), and
  ``availability_changes`` (where a partition's four availability flags change: no leader,
  under min.insync.replicas, leader on an offline directory, ISR member on one; the flags are a
  function of the partition's state and the brokers' at each point, so they are evaluated at
  each state and at each edge of an offline interval or a min.insync.replicas change inside
  it). Both engines of the plan run the same text. States meet the few offsets they are
  joined with (requests, offline intervals) through rank tables the driver builds
  (``ranks``), not range joins: a partition state can span most of a history.

Which incidents exist can hang on the partition side (a directory's incident that ended takes no
more reports; a shutdown begun while the last incident is still open is part of it), so the
broker side is replayed until the effects it asks for are all known (``incidents``): first with
none, then with those asked, which ends in one or two rounds.

Metadata transactions need nothing more: a committed one's records are looked at in offset order
(at its end, with nothing between), an aborted one's are NoOps, which the timeline leaves out and
the control plane sees as NoOps. Not relational, and so still the per-record pass
(``find_incidents`` over the plan's records, ``FALLBACK``): a log with a record without a time
(``ts_ms`` null), where the tracker's durations skip that record in a way that does not add up
per interval; and an empty log.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.logging import get_logger
from kraftlake.records.kraft import (
    LOST,
    MIGRATING,
    UNASSIGNED,
    BrokerRegistrationChange,
    Config,
    FenceBroker,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.records.observations import HeartbeatOfflineDirs, LogDirFailed, LogDirsLoaded
from kraftlake.replay.columns import spill, unwrap
from kraftlake.replay.incidents import (
    _SERVING,
    MIN_ISR,
    Availability,
    EffectArena,
    EffectList,
    Incident,
    IncidentRules,
    IncidentsResult,
    OutageList,
    PartitionAvailability,
    Spans,
    _columns,
    _finished,
    effect_topics,
    find_incidents,
    handling,
    min_isr,
)
from kraftlake.statemachine.sql_dialect import Dialect

from .driver import Offline, offline_runs, partition_of
from .ranks import lookup, register
from .sql import in_partition_order

log = get_logger(__name__)

FALLBACK = "records without a time: incidents by the per-record pass"
"""Why a log's incidents came from ``find_incidents`` (logged)."""
SPILL_ROWS = 1 << 20
"""Closed incidents' effects held in memory before they are spilled together (``EffectArena``: a
file per field for the lot, a long history's tens of millions make a few dozen files, not one
per incident)."""

_BROKER_RECORDS = (RegisterBroker, UnregisterBroker, BrokerRegistrationChange, FenceBroker, UnfenceBroker)
_DOWN = None
_ANY = "*"
"""A broker registered without directories (any directory online but the failed ones), and in
the ``inc_off`` table a whole broker down (never a directory id)."""
_RANK_KEY = [("b", "INT"), ("dir", "STRING")]
"""The rank tables' key (``ranks.register``): broker, directory or ``_ANY``."""
_NL, _UM, _LO, _IO = 8, 4, 2, 1
"""The availability flags as bits of one code (no leader, under min ISR, leader offline, ISR
member offline)."""


# -- the driver: what the broker and observation records say ----------------------------------------


class Events:
    """The broker side's events in record order, as columns: a long history has millions, and
    kept as tuples they were the control plane's largest holding (each with its own offsets,
    times and flags, pinning the arenas the records were decoded in). A broker's registered
    directories repeat from one of its events to the next and are kept once. Iterated, they are
    the tuples the incidents' replay reads (``_Incidents.run``):

    - ``("dir", offset, ts, broker, offline, reported, reg)``: a failure or a heartbeat's offline
      directories (``reported``: the heartbeat);
    - ``("loaded", offset, ts, broker, online, offline, paths, reg)``: a ``LogDirsLoaded``;
    - ``("broker", offset, ts, broker, prev, reg)``: a broker record (``prev``: the control
      record before it);
    - ``("remove", offset, ts, topic_id)``: a ``RemoveTopic``;

    where ``reg`` is the broker's (log_dirs, (fenced, in controlled shutdown)) after the record,
    (None, None) when it is not registered."""

    _KINDS = ("dir", "loaded", "broker", "remove")
    _NO_TS = -(1 << 63)
    """A record without a time (``ts`` None): incidents are then computed record by record, but
    the events are kept all the same."""

    def __init__(self) -> None:
        self.kind, self.offset, self.ts = array("b"), array("q"), array("q")
        self.subject = array("q")
        """The broker; for a removed topic, its id's place in ``values``."""
        self.detail = array("q")
        """A broker record's ``prev``; otherwise the place of the event's directories in ``values``."""
        self.dirs = array("q")
        """The place of the broker's registered directories in ``values``; -1: not registered
        (or a removed topic)."""
        self.flags = array("b")
        """The broker's (fenced, in controlled shutdown) as two bits."""
        self.values: list = []
        self._last_dirs: dict[int, tuple[tuple, int]] = {}
        """Broker -> its last registered directories and their place in ``values``."""

    def _keep(self, value) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def add(self, kind: str, offset: int, ts: int | None, subject, detail, reg) -> None:
        self.kind.append(self._KINDS.index(kind))
        self.offset.append(offset)
        self.ts.append(self._NO_TS if ts is None else ts)
        if kind == "remove":
            self.subject.append(self._keep(subject))
            self.detail.append(0)
            self.dirs.append(-1)
            self.flags.append(0)
            return
        self.subject.append(subject)
        self.detail.append(detail if kind == "broker" else self._keep(detail))
        dirs, flags = reg
        if dirs is None:
            self.dirs.append(-1)
            self.flags.append(0)
            return
        last = self._last_dirs.get(subject)
        if last is None or last[0] != dirs:
            last = self._last_dirs[subject] = (dirs, self._keep(dirs))
        self.dirs.append(last[1])
        self.flags.append(2 * flags[0] + flags[1])

    def __len__(self) -> int:
        return len(self.kind)

    def __iter__(self):
        values, kinds, no_ts = self.values, self._KINDS, self._NO_TS
        flagged = [(False, False), (False, True), (True, False), (True, True)]
        for k, offset, ts, subject, detail, dirs, flags in zip(
            self.kind, self.offset, self.ts, self.subject, self.detail, self.dirs, self.flags
        ):
            kind, ts = kinds[k], None if ts == no_ts else ts
            if kind == "remove":
                yield (kind, offset, ts, values[subject])
                continue
            reg = (None, None) if dirs < 0 else (values[dirs], flagged[flags])
            if kind == "broker":
                yield (kind, offset, ts, subject, detail, reg)
            else:
                yield (kind, offset, ts, subject, *values[detail], reg)


class Observer:
    """Called by the control-plane replay with each control record after it was applied (and
    with each AssignReplicasToDirs report): keeps the events the incidents replay reads, the
    brokers' states for the offline intervals, topic names and min.insync.replicas per topic."""

    def __init__(self) -> None:
        self.events = Events()
        self.names: dict[str, str] = {}
        self.min_isr: dict[str, list[tuple[int, int]]] = {}
        """Topic id -> (offset, min.insync.replicas from then on), from its creation."""
        self.states: dict[int, list[tuple[int, object]]] = {}
        """Broker -> (offset, state after it) wherever its state changed: None down, ``_ANY``
        (registered without directories) with the failed ones, or its online directories."""
        self.failed: dict[int, set[str]] = {}
        """Broker -> its directories reported failed and not loaded online since (by broker: a
        long history keeps many, and a broker's state reads only its own)."""
        self.ever: dict[int, set[str]] = {}
        """Broker -> every directory it registered or reported: offline intervals are cut for those."""
        self.prev = -1
        """The last control record's offset: a crash's departures are the partition changes after it."""

    def __call__(self, r, view) -> None:
        offset, ts, cls = r.offset, r.ts_ms, type(r)
        prev, self.prev = self.prev, offset
        detail: object  # what the event carries beside its broker (``Events.add``)
        if cls is LogDirFailed or cls is HeartbeatOfflineDirs or cls is LogDirsLoaded:
            b = r.broker_id
            if cls is LogDirsLoaded:
                online, offline = tuple(r.online_dirs), tuple(r.offline_dirs)
                self.failed.setdefault(b, set()).difference_update(online)
                kind, detail = "loaded", (online, offline, tuple(r.paths))
            else:
                offline = (r.directory,) if cls is LogDirFailed else tuple(r.offline_log_dirs)
                kind, detail = "dir", (offline, cls is HeartbeatOfflineDirs)
            self.failed.setdefault(b, set()).update(offline)
            self.ever.setdefault(b, set()).update((*offline, *getattr(r, "online_dirs", ())))
            self._state(view, b, offset)
        elif cls in _BROKER_RECORDS:
            b = r.id if cls in (FenceBroker, UnfenceBroker) else r.broker_id
            kind, detail = "broker", prev
            self._state(view, b, offset)
        elif cls is RemoveTopic:
            self.events.add("remove", offset, ts, r.topic_id, None, None)
            return
        else:
            if cls is Topic:
                self.names[r.topic_id] = r.name
                self._min_isr(view, offset, [r.topic_id])
            elif cls is Config and r.name == MIN_ISR:
                self._min_isr(view, offset, list(view.topics))
            return
        reg = view.brokers.get(b)
        registered = (None, None) if reg is None else (reg.log_dirs, (reg.fenced, reg.in_controlled_shutdown))
        self.events.add(kind, offset, ts, b, detail, registered)

    def _state(self, view, b: int, offset: int) -> None:
        reg = view.brokers.get(b)
        # A broker's failed directories pile up (each failure gives it new ones): looked up
        # from its registered few, not copied, but for a broker registered without directories.
        failed = self.failed.get(b, ())
        if reg is None or reg.fenced:
            state = _DOWN
        elif not reg.log_dirs:
            state = (_ANY, frozenset(failed))
        else:
            self.ever.setdefault(b, set()).update(reg.log_dirs)
            state = ("dirs", frozenset(d for d in reg.log_dirs if d not in failed))
        states = self.states.setdefault(b, [])
        if not states or states[-1][1] != state:
            states.append((offset, state))

    def _min_isr(self, view, offset: int, topics: list[str]) -> None:
        for t in topics:
            n = min_isr(view, t)
            changes = self.min_isr.setdefault(t, [])
            if not changes or changes[-1][1] != n:
                changes.append((offset, n))

    def offline_rows(self, referenced: dict[int, set[str]]) -> list[tuple[int, str, int, int | None]]:
        """(broker, directory, start, stop): the state after record ``start`` until before
        ``stop`` (None: the end) where the broker is down (directory ``_ANY``), or where the
        directory is offline on it (up without it, as the tracker's ``_offline`` says, or down:
        the broker's own interval covers those states anyway, and so a directory the broker
        left is one run, not one per time it came back), for every directory a partition may
        name on it (those it registered or reported, those partition records name, the
        reserved ones); in start order per (broker, directory)."""
        rows: list[tuple[int, str, int, int | None]] = []
        for b in sorted(self.states):
            marks = [(-1, _DOWN), *self.states[b]]
            spans = [(s, marks[i + 1][0] if i + 1 < len(marks) else None, st) for i, (s, st) in enumerate(marks)]
            for start, stop, st in spans:
                if st is _DOWN:
                    if rows and rows[-1][:2] == (b, _ANY) and rows[-1][3] == start:
                        rows[-1] = (b, _ANY, rows[-1][2], stop)
                    else:
                        rows.append((b, _ANY, start, stop))
            candidates = self.ever.get(b, set()) | referenced.get(b, set()) | {MIGRATING, UNASSIGNED, LOST}
            runs = offline_runs(((s, _offline_dirs(st)) for s, st in marks), candidates)
            rows += [(b, d, start, stop) for d, start, stop in runs]
        return rows

    def min_isr_rows(self, lives: list[tuple[str, int, int | None]]) -> list[tuple[int, int, int | None, int]]:
        """(topic life, start, stop, min.insync.replicas) per topic lifetime."""
        rows = []
        for i, (t, created, removed) in enumerate(lives):
            changes = [(o, n) for o, n in self.min_isr.get(t, []) if o >= created and (removed is None or o < removed)]
            for j, (o, n) in enumerate(changes):
                rows.append((i, o, changes[j + 1][0] if j + 1 < len(changes) else None, n))
        return rows


_ALL_OFFLINE: Offline = (True, frozenset())
_RESERVED_ONLINE = frozenset({MIGRATING, UNASSIGNED})


def _offline_dirs(state) -> Offline:
    """A broker's offline directories in ``state``: all when it is down (its ``_ANY`` interval
    says so too); registered without directories, the failed ones and LOST (``is_online``);
    else all but its online ones and the reserved online ids."""
    if state is _DOWN:
        return _ALL_OFFLINE
    if state[0] == _ANY:
        return (False, state[1] | {LOST})
    return (True, state[1] | _RESERVED_ONLINE)


# -- the partition side, in SQL ------------------------------------------------------------------


def members(d: Dialect) -> str:
    """Per partition state, its leader and ISR members among its replicas, each with its
    directory (``dir``) and whether it leads (``is_l``) or is in the ISR (``is_i``)."""
    return f"""
    WITH m0 AS (SELECT pk, off, end_, leader, isr, dirs, {d.posexplode("replicas", "pos", "b")} FROM timeline)
    SELECT pk, off, end_, b, {d.at("dirs", "pos + 1")} AS dir, b = leader AS is_l, {d.contains("isr", "b")} AS is_i
    FROM m0 WHERE b = leader OR {d.contains("isr", "b")}
    """


def _ranked(
    d: Dialect, table: str, last: int, lo_lists: list[str], hi_lists: list[str], probe: str | None = None
) -> str:
    """``inc_members``, each under its directory and ``*`` (its whole broker), or as ``probe``
    gives them (a relation of ``inc_members``' columns and ``probe``, the key of ``table``),
    with the rank of each state's start among ``table``'s offsets of each list of ``lo_lists``
    (``x_lo``: at most ``off``) and of its last offset among each of ``hi_lists`` (``x_hi``: at
    most ``end_ - 1``) (``ranks.lookup``), keys without offsets left out."""
    end = f"coalesce(m.end_, {last + 1}) - 1"
    if probe is None:
        probe = f"""(SELECT *, {d.explode(d.array("dir", "'*'"), "probe")} FROM inc_members)"""
    on = "{r}.b = m.b AND {r}.dir = m.probe"
    return f"SELECT * FROM {lookup(d, table, probe, 'm', on, 'm.off', end, lo_lists, hi_lists)}"


def effect_hits(d: Dialect, last: int) -> str:
    """Per request (``inc_qi``: b, dir, idx, req, mode: at the ``idx``-th offset of ``inc_qb``'s
    (b, dir) list; a broker's request under dir and mode ``*``), the partitions whose state at
    its offset has the broker among its replicas (on the request's directory), leading it
    (``is_l``) or in its ISR (``is_i``): (req, mode, pk, off, b, is_l, is_i). A state holds the
    requests ranked after its start and up to its end (``ranks``): no range join."""
    return f"""
    WITH c AS ({_ranked(d, "inc_qb", last, ["q"], ["q"])}),
    hits AS (
      SELECT pk, off, b, probe, is_l, is_i, {d.explode(d.seq("q_lo", "q_hi - 1"), "idx")} FROM c WHERE q_hi > q_lo
    )
    SELECT qi.req, qi.mode, h.pk, h.off, h.b, h.is_l, h.is_i
    FROM hits h JOIN inc_qi qi ON qi.b = h.b AND qi.dir = h.probe AND qi.idx = h.idx
    """


def effects(d: Dialect) -> str:
    """The effects of the requests' hits (``inc_eff``: ``effect_hits``), role L where the broker
    led the partition and I where it was in its ISR, with the record that ends each:
    the first later state where the broker is no replica, its replica left the directory, or
    lost the role (null: none; the topic's removal is the driver's), what that state says (why,
    new leader) and its time.

    An effect ends at the first later break point of its (partition, broker) of its kind: a
    state whose state before had the broker leading (in the ISR) and which has it no longer, or
    on another directory (for a directory's request). The break points are read off each
    state and the one before it (the timeline's ``old_*``: no window, no join with later
    states), listed in order per (partition, broker), and each effect takes the first one after
    its state from that list. Only the break points an effect can take are listed: those of a
    partition with an effect, after its first effect's state (a break at or before it is after
    no effect there)."""
    gone = "(NOT inr OR (x.mode <> '*' AND NOT (bdir IS NOT DISTINCT FROM x.mode)))"
    o = d.q("offset")
    now_in = d.contains("replicas", "b")
    same_dir = f"(CASE WHEN {now_in} THEN {d.at('dirs', d.position('replicas', 'b'))} END) IS NOT DISTINCT FROM old_dir"

    return f"""
    WITH eff AS (SELECT * FROM inc_eff),
    -- Per partition with an effect, its first effect's state: every state of every partition
    -- hit was exploded, broken and windowed (at 10^6 records of a large cluster, 11x the
    -- effects), where an effect takes a break after its own state. Narrowed per partition,
    -- not per (partition, broker): the break filter below, pushed under such a join, already
    -- leaves few breaks of brokers without an effect (11 % at 10^7 records of a large cluster),
    -- and the join on (partition, broker) cost DuckDB more CPU than it saved.
    firsts AS (SELECT pk, min(off) AS first_ FROM eff GROUP BY pk),
    was AS (
      -- Per state after a first effect, each broker that led the partition or was in its ISR
      -- in the state before.
      SELECT pk, off, leader, isr, replicas, dirs, old_leader, old_isr, b, {d.at("old_dirs", "pos + 1")} AS old_dir
      FROM (SELECT t.pk, t.off, leader, isr, replicas, dirs, old_leader, old_isr, old_dirs,
              {d.posexplode("old_replicas", "pos", "b")}
            FROM timeline t JOIN firsts f ON f.pk = t.pk AND t.off > f.first_
            WHERE old_replicas IS NOT NULL) w
      WHERE b = old_leader OR {d.contains("old_isr", "b")}
    ),
    brk AS (
      -- Where such a broker's role breaks: it no longer leads (``bl``) or is in the ISR (``bi``)
      -- as a replica, or (``bld``, ``bid``) does on another directory.
      SELECT pk, off, b, hl AND NOT nl AS bl, hl AND NOT (nl AND nd) AS bld, hi AND NOT ni AS bi,
        hi AND NOT (ni AND nd) AS bid
      FROM (
        SELECT pk, off, b, b = old_leader AS hl, {d.contains("old_isr", "b")} AS hi,
          b = leader AND {now_in} AS nl, {d.contains("isr", "b")} AND {now_in} AS ni, {same_dir} AS nd
        FROM was
      ) x
      WHERE (hl AND NOT (nl AND nd)) OR (hi AND NOT (ni AND nd))
    ),
    marks AS (
      -- Per (partition, broker), its effects and its break points in one order, latest first:
      -- an effect's end is the nearest break of its kind after its state (also when the broker
      -- comes back later), the last break offset among the rows before it (the least of them:
      -- the order is latest first). At one offset the effects come before the breaks: a break
      -- at an effect's own state is not after it.
      SELECT pk, b, off, 0 AS eff, CAST(NULL AS BIGINT) AS req, CAST(NULL AS STRING) AS mode,
        CAST(NULL AS BOOLEAN) AS is_l, CAST(NULL AS BOOLEAN) AS is_i,
        CASE WHEN bl THEN off END AS l, CASE WHEN bld THEN off END AS ld,
        CASE WHEN bi THEN off END AS i, CASE WHEN bid THEN off END AS id
      FROM brk
      UNION ALL
      SELECT pk, b, off, 1 AS eff, req, mode, is_l, is_i, NULL, NULL, NULL, NULL FROM eff
    ),
    -- A forward fill, not a running min: DuckDB's min over a growing frame walks a segment tree
    -- of the whole (partition, broker), 4x the CPU on a few thousand rows each (bench/RESULTS.md).
    -- An effect row has no break of its own, so its frame may end at itself.
    nearest AS (
      SELECT *, {", ".join(f"{d.last(k)} OVER w AS n_{k}" for k in ("l", "ld", "i", "id"))}
      FROM marks
      WINDOW w AS (PARTITION BY pk, b ORDER BY off DESC, eff DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    ),
    ranked AS (
      SELECT req, pk, b, mode, is_l, is_i,
        CASE WHEN mode = '*' THEN n_l ELSE n_ld END AS end_l,
        CASE WHEN mode = '*' THEN n_i ELSE n_id END AS end_i
      FROM nearest WHERE eff = 1
    ),
    ended AS (
      SELECT req, pk, b, mode, 'L' AS role, end_l AS ended_by FROM ranked WHERE is_l
      UNION ALL SELECT req, pk, b, mode, 'I' AS role, end_i FROM ranked WHERE is_i
    ),
    -- The states and times at the effects' ends alone (semi joins built on the ends): joined
    -- with the whole timeline or log, the hash table could be built on every state or record.
    zs AS (SELECT pk, off, leader, replicas, dirs FROM timeline WHERE off IN (SELECT ended_by FROM ended)),
    zt AS (SELECT {o} AS off, ts_ms FROM log WHERE {o} IN (SELECT ended_by FROM ended)),
    x AS (
      SELECT x0.*, z.leader, {d.contains("z.replicas", "x0.b")} AS inr,
        CASE WHEN {d.contains("z.replicas", "x0.b")} THEN {d.at("z.dirs", d.position("z.replicas", "x0.b"))} END AS bdir
      FROM ended x0 LEFT JOIN zs z ON z.pk = x0.pk AND z.off = x0.ended_by
    )
    SELECT x.req, x.pk, x.role, CASE WHEN x.leader IS NOT NULL THEN x.ended_by END AS ended_by,
      CASE WHEN {gone} AND NOT inr THEN 'replica removed' WHEN {gone} THEN 'replica moved'
        WHEN x.role = 'I' THEN 'left the ISR' WHEN x.leader = -1 THEN 'no leader' ELSE 'leader moved' END AS why,
      x.leader, l.ts_ms
    FROM x LEFT JOIN zt l ON l.off = x.ended_by AND x.leader IS NOT NULL
    """


def departures(d: Dialect) -> str:
    """Per fencing (``inc_dep``: req, at_, broker, lo), the partition changes after the control
    record ``lo`` and before ``at_`` that took the broker out: it led before and not after
    (``led``), or was in the ISR before and not after (``was_in``); with the leader after and
    the time. Between two control records there are only partition records: each fencing is
    exploded into the offsets between them (each offset in one such pair at most: as many rows
    as partition records at most) and joined on the offset, not a range join (which grew with
    the square of the history)."""
    return f"""
    WITH q AS (SELECT req, at_, broker, {d.explode(d.seq("lo + 1", "at_ - 1"), "off")} FROM inc_dep WHERE at_ > lo + 1),
    t AS (
      SELECT pk, off, leader, isr, old_leader, old_isr FROM timeline
      WHERE old_isr IS NOT NULL AND (
        (old_leader <> leader AND old_leader <> -1) OR NOT ({d.size(d.filter("old_isr", lambda v: d.contains("isr", v)))}
          = {d.size("old_isr")}))
    ),
    hit AS (
      SELECT q.req, q.at_, q.broker, t.pk, t.off, t.leader,
        (t.old_leader = q.broker AND t.leader <> q.broker) AS led,
        ({d.contains("t.old_isr", "q.broker")} AND NOT {d.contains("t.isr", "q.broker")}) AS was_in
      FROM q JOIN t ON t.off = q.off
    )
    SELECT h.req, h.at_, h.broker, h.pk, h.off, h.leader, h.led, h.was_in, l.ts_ms
    FROM hit h LEFT JOIN log l ON l.{d.q("offset")} = h.off
    WHERE h.led OR h.was_in
    """


def availability_changes(d: Dialect, last: int) -> str:
    """Where each partition's availability flags change (``code``: bits ``_NL``, ``_UM``,
    ``_LO``, ``_IO``; from all clear before its first state), until the next change (``nxt``;
    the topic's removal; null: the end), with the leader's directory there and the times.

    The flags at a point are a function of the state in force and of the directories'
    (``inc_off``: broker, dir, start_, stop_, numbered per key ``idx``; ranked by ``inc_ob``)
    and topics' (``inc_min_isr``: life, start_, stop_, min_isr) intervals: evaluated at each
    state and at each edge of such an interval inside it. A member's offline intervals are those
    ranked from the last stop at most its start to the last start before its end
    (``ranks.lookup``), under its directory alone: a directory's intervals hold every span its
    broker is down (``Observer.offline_rows``: a down broker's directories are all offline), so
    the broker's own (``*``) add no point where a flag changes, and are looked up only for a
    directory without intervals of its own (one the driver cut none for, or never offline: then
    neither was the broker). Looking up both was twice the probes of the statement's costliest
    part. A member on a broker the driver never saw (not in ``inc_known``) is offline throughout:
    an anti join, where a list of every broker in the text cost each row a comparison per
    broker."""
    o = d.q("offset")
    probe = f"""(SELECT m.*, CASE WHEN k.b IS NULL THEN '{_ANY}' ELSE m.dir END AS probe
      FROM inc_members m LEFT JOIN inc_ob_keys k ON k.b = m.b AND k.dir = m.dir)"""
    return f"""
    WITH c AS ({_ranked(d, "inc_ob", last, ["sp"], ["st"], probe)}),
    hits AS (
      SELECT pk, off, end_, b, probe, is_l, is_i, {d.explode(d.seq("sp_lo", "st_hi - 1"), "idx")}
      FROM c WHERE st_hi > sp_lo
    ),
    ov AS (
      SELECT h.pk, h.off, h.end_, h.is_l, h.is_i, greatest(h.off, o.start_) AS s, least(h.end_, o.stop_) AS e
      FROM hits h JOIN inc_off o ON o.broker = h.b AND o.dir = h.probe AND o.idx = h.idx
      UNION ALL SELECT pk, off, end_, is_l, is_i, off AS s, end_ AS e FROM inc_members m
        WHERE NOT EXISTS (SELECT 1 FROM inc_known k WHERE k.b = m.b)
    ),
    edges AS (
      SELECT DISTINCT pk, t, row_off FROM (
        SELECT pk, s AS t, off AS row_off FROM ov WHERE s > off
        UNION ALL SELECT pk, e AS t, off AS row_off FROM ov WHERE e IS NOT NULL AND (end_ IS NULL OR e < end_)
        UNION ALL SELECT tl.pk, mi.start_ AS t, tl.off AS row_off FROM timeline tl JOIN inc_min_isr mi
          ON mi.life = {d.idiv("tl.pk", 4294967296)} AND mi.start_ > tl.off AND (tl.end_ IS NULL OR mi.start_ < tl.end_)
      ) x
    ),
    pts AS (
      SELECT pk, off AS t, off AS row_off, removed, leader, isr, replicas, dirs FROM timeline
      UNION ALL SELECT x.pk, x.t, x.row_off, tl.removed, tl.leader, tl.isr, tl.replicas, tl.dirs
      FROM edges x JOIN timeline tl ON tl.pk = x.pk AND tl.off = x.row_off
    ),
    cov AS (
      SELECT p.pk, p.t, max(CASE WHEN ov.is_l THEN 1 ELSE 0 END) AS lo, max(CASE WHEN ov.is_i THEN 1 ELSE 0 END) AS io
      FROM (SELECT DISTINCT pk, off FROM ov) r
      JOIN pts p ON p.pk = r.pk AND p.row_off = r.off
      JOIN ov ON ov.pk = p.pk AND ov.off = p.row_off AND ov.s <= p.t AND (ov.e IS NULL OR p.t < ov.e)
      GROUP BY p.pk, p.t
    ),
    fl AS (
      SELECT p.pk, p.t, p.removed, p.leader,
        CASE WHEN p.leader <> -1 AND {d.contains("p.replicas", "p.leader")}
          THEN {d.at("p.dirs", d.position("p.replicas", "p.leader"))} END AS ldir,
        (CASE WHEN p.leader = -1 THEN {_NL} ELSE 0 END)
        + (CASE WHEN {d.size("p.isr")} < coalesce(mi.min_isr, 1) THEN {_UM} ELSE 0 END)
        + (CASE WHEN p.leader <> -1 AND (NOT {d.contains("p.replicas", "p.leader")} OR coalesce(c.lo, 0) = 1)
             THEN {_LO} ELSE 0 END)
        + (CASE WHEN coalesce(c.io, 0) = 1 THEN {_IO} ELSE 0 END) AS code
      FROM pts p
        LEFT JOIN cov c ON c.pk = p.pk AND c.t = p.t
        LEFT JOIN inc_min_isr mi ON mi.life = {d.idiv("p.pk", 4294967296)} AND mi.start_ <= p.t
          AND (mi.stop_ IS NULL OR p.t < mi.stop_)
    ),
    ch AS (
      SELECT * FROM (SELECT *, coalesce(lag(code) OVER (PARTITION BY pk ORDER BY t), 0) AS before FROM fl) x
      WHERE code <> before
    ),
    nx AS (SELECT *, coalesce(lead(t) OVER (PARTITION BY pk ORDER BY t), removed) AS nxt FROM ch),
    -- The times of the change points alone: joined with the whole log, the join's hash table
    -- could be built on the log's offsets (every record) instead of the points.
    tt AS (
      SELECT {o} AS off, ts_ms FROM log WHERE {o} IN (SELECT t FROM nx UNION ALL SELECT nxt FROM nx)
    )
    SELECT nx.pk, nx.t, nx.code, nx.nxt, nx.removed, nx.leader, nx.ldir, l0.ts_ms AS t_ms, l1.ts_ms AS nxt_ms
    FROM nx LEFT JOIN tt l0 ON l0.off = nx.t LEFT JOIN tt l1 ON l1.off = nx.nxt
    """


# -- the broker side, replayed with the partition side's answers ----------------------------------


class _Incidents(IncidentRules):
    """The incident rules (``IncidentRules``) over the broker side's events, with the partitions
    (named by the plan's ``pk``) each incident hits (``found_effects``: (at, broker, dir) -> rows
    of ``effects``) and the changes before a fencing (``found_departures``: (at, broker) -> its
    rows of ``departure_rows``) from the plan; what it needs and was not given, it asks for
    (``ask_effects``, ``ask_departures``) and goes on as if it were nothing."""

    def __init__(
        self, lives, names: dict[str, str], found_effects: dict | _Streamed, found_departures: dict, spill_dir=None
    ) -> None:
        super().__init__()
        self.lives, self.names = lives, names
        self.arena = EffectArena(self.strings, spill_dir, SPILL_ROWS)
        """Closed incidents' effects (``_closed``), spilled under ``spill_dir`` (``columns.spill``;
        None: the system's temporary directory)."""
        self.found_effects, self.found_departures = found_effects, found_departures
        self.ask_effects: set[tuple[int, int, str | None]] = set()
        self.ask_departures: set[tuple[int, int, int | None]] = set()
        self.seq = 0
        self.ends: list[tuple] = []
        """A heap of the partition records that end open effects (``effects``' ended_by)."""
        self.steps: dict[tuple[int, str], int] = {}
        """(offset, directory) -> the place of its failure among those one record brought: the
        tracker measures the partitions again after each, so outages begin in that order."""
        self.step_count: dict[int, int] = {}
        """Offset -> its keys in ``steps``."""

    def run(self, events: Iterable[tuple]) -> None:
        for ev in events:
            kind, offset, ts = ev[0], ev[1], ev[2]
            self._partition_ends(offset)
            if kind == "dir":
                _, _, _, b, dirs, reported, reg = ev
                for d in dirs:
                    self.dir_failed(b, d, offset, ts, reg[0], reported=reported)
            elif kind == "loaded":
                _, _, _, b, online, offline, paths, reg = ev
                self.loaded(b, online, offline, paths, reg[0], offset, ts)
            elif kind == "broker":
                _, _, _, b, prev, (reg_dirs, flags) = ev
                self.broker(b, offset, ts, reg_dirs, flags, prev)
            else:
                self.topic_removed(ev[3], offset, ts)
        self._partition_ends(None)

    def _partition_ends(self, before: int | None) -> None:
        """End the open effects whose end (``effects``' ended_by) comes before offset ``before``."""
        ends = self.ends
        while ends and (before is None or ends[0][0] < before):
            at, _seq, oe, why, leader, ts = heapq.heappop(ends)
            if not oe.ended:
                self._end(oe, at, ts, why, leader)
                self._maybe_close(oe.incident, at, ts)

    def _closed(self, inc: Incident) -> None:
        # A closed incident's effects only change in place (``end``) from here: into the
        # arena's columns, spilled a chunk at a time, not held to the replay's end.
        self.arena.seal(inc)

    # -- the rules' hooks: partitions from the plan ----------------------------------------------

    def _partition_key(self, pk: int) -> tuple[str, int]:
        # Computed each time: a cache would hold every partition any incident touched.
        return partition_of(self.lives, pk)

    def _name(self, topic_id: str) -> str | None:
        return self.names.get(topic_id)

    def _leader(self, key, inc: Incident) -> int | None:
        return inc.broker  # an effect still open at its incident's end: its broker still leads

    def _dir_down(self, broker: int, d: str, offset: int, ts: int | None) -> None:
        n = self.step_count.get(offset, 0)
        if (offset, d) not in self.steps:
            self.step_count[offset] = n + 1
        self.steps[(offset, d)] = n

    def _open_effects(self, inc: Incident, offset: int, b: int, d: str | None) -> None:
        key = (offset, b, d)
        got = self.found_effects.get(key)
        if got is None:
            self.ask_effects.add(key)
            return
        pks, roles, ended, whys, leaders, times = got.columns()
        # In partition order, leadership first (``effect_rows``).
        opened = self._open_all(inc, zip(pks, ["leader" if r == "L" else "isr" for r in roles]), d)
        ends, seq = self.ends, self.seq
        for oe, at, why, leader, ts in zip(opened, ended, whys, leaders, times, strict=True):
            if at is not None:
                seq += 1
                heapq.heappush(ends, (at, seq, oe, why, leader, ts))
        self.seq = seq

    def _departures(self, b: int, offset: int, prev: int | None) -> list[tuple]:
        rows = self.found_departures.get((offset, b))
        if rows is None:
            self.ask_departures.add((offset, b, prev))
            return []
        pks, offs, leaders, led, was_in, times = rows.columns()
        gone = []
        for i in range(len(pks)):  # by offset (``departure_rows``)
            if led[i]:
                gone.append((pks[i], "leader", offs[i], times[i], leaders[i]))
            if was_in[i]:
                gone.append((pks[i], "isr", offs[i], times[i], leaders[i]))
        return gone


# -- the whole ------------------------------------------------------------------------------------


def incidents(engine, plane, observer: Observer, *, first, last, referenced: dict[int, set[str]]) -> IncidentsResult:
    """The incidents and availability of the log ``engine`` reads (offsets ``first..last``),
    whose control plane the driver replayed (``plane``) with ``observer``; ``referenced``: the
    directories partition records name per broker."""
    d = engine.dialect
    o = d.q("offset")
    ((untimed,),) = engine.rows("SELECT count(CASE WHEN ts_ms IS NULL THEN 1 END) FROM log")
    if first is None or untimed:
        return _per_record(engine)
    ((first_ms,),) = engine.rows(f"SELECT ts_ms FROM log WHERE {o} = {first}")
    ((end_ms,),) = engine.rows(f"SELECT ts_ms FROM log WHERE {o} = {last}")
    lives = plane.topics
    engine.keep("inc_members", members(d))

    # What the replay will ask for, read off the events: every incident the rules could open
    # (what opens a directory's does not hang on the partitions; a broker's may join an incident
    # still open, so a few more are asked than used). One round replays it all; a second runs
    # only should the rules ask for something else.
    asked_effects, asked_departures = candidate_asks(observer.events)
    found_departures: dict = departure_rows(engine, sorted(asked_departures)) if asked_departures else {}
    found_effects: dict | _Streamed = {}
    if asked_effects:
        asked = sorted(asked_effects, key=lambda k: (k[0], k[1], k[2] or ""))
        _register_requests(engine, asked)
        found_effects = effect_rows(engine, asked, last)
    while True:
        replay = _Incidents(lives, observer.names, found_effects, found_departures, engine.spill)
        replay.run(observer.events)
        if isinstance(found_effects, _Streamed):
            found_effects.close()  # before any other statement: this round has read its rows
        if not replay.ask_effects and not replay.ask_departures:
            break
        if replay.ask_departures:
            found_departures.update(departure_rows(engine, sorted(replay.ask_departures)))
        if replay.ask_effects:
            # Read again from the first request in the next round: a stream gives rows once.
            asked_effects |= replay.ask_effects
            asked = sorted(asked_effects, key=lambda k: (k[0], k[1], k[2] or ""))
            _register_requests(engine, asked)
            found_effects = effect_rows(engine, asked, last)
    # The partition side's rows are all in the incidents now: not held through availability,
    # and the effects (tens of millions at 10^8 records) are spilled out of memory.
    del found_effects, found_departures
    replay.found_effects = replay.found_departures = {}
    engine.drop("inc_eff", "inc_effects", "inc_qi", "inc_qb", "inc_qb_keys", "inc_dep")
    held = [e for e in (_columns(inc.effects) for inc in replay.incidents) if type(e) is EffectList and not e.spilled]
    if (
        len(replay.arena.chunk) + sum(map(len, held)) > SPILL_ROWS
    ):  # below it, read in place: a spilled list pays per read
        replay.arena.flush()
        spill(held, engine.spill)

    offline = observer.offline_rows(referenced)
    by_key: dict[tuple[int, str], list[tuple[int, int | None]]] = {}
    for b, dd, start, stop in offline:
        by_key.setdefault((b, dd), []).append((start, stop))
    engine.table(
        "inc_off",
        [(b, dd, i, start, stop) for (b, dd), spans in by_key.items() for i, (start, stop) in enumerate(spans)],
        [("broker", "INT"), ("dir", "STRING"), ("idx", "BIGINT"), ("start_", "BIGINT"), ("stop_", "BIGINT")],
    )
    marks = {k: [[stop for _s, stop in v if stop is not None], [start for start, _e in v]] for k, v in by_key.items()}
    register(engine, "inc_ob", marks, _RANK_KEY, ["sp", "st"])
    engine.table(
        "inc_min_isr",
        observer.min_isr_rows(lives),
        [("life", "BIGINT"), ("start_", "BIGINT"), ("stop_", "BIGINT"), ("min_isr", "INT")],
    )
    engine.table("inc_known", [(b,) for b in sorted(observer.states)], [("b", "INT")])
    # Kept by the engine (spilled beyond its memory limit) and summed and cut there: a long
    # history of dense failures has millions of change points (6.1 million at 10^7 records).
    engine.keep("inc_avail", availability_changes(d, last))
    partitions, outages, spans = _availability(engine, lives, observer.names, end_ms, replay.steps)
    engine.drop("inc_avail", "inc_steps", "inc_off", "inc_ob", "inc_ob_keys", "inc_min_isr", "inc_known")
    found = [_finished(inc, spans, end_ms) for inc in replay.incidents]
    topics = {t.id: t.name for t in plane.view.topics.values()}
    effect_topics(found, topics)
    return IncidentsResult(
        incidents=found,
        handling=handling(found),
        availability=Availability(
            from_ms=first_ms,
            to_ms=end_ms,
            no_leader_ms=sum(a.no_leader_ms for a in partitions),
            under_min_isr_ms=sum(a.under_min_isr_ms for a in partitions),
            leader_offline_ms=sum(a.leader_offline_ms for a in partitions),
            isr_offline_ms=sum(a.isr_offline_ms for a in partitions),
            unavailable_ms=sum(a.unavailable_ms for a in partitions),
            partitions=partitions,
            unavailable_partitions=sum(1 for a in partitions if a.unavailable_ms),
            outages=outages,
        ),
        topics=dict(sorted(topics.items())),
        dir_paths=dict(sorted(replay.dir_paths.items())),
    )


def candidate_asks(events: Iterable[tuple]) -> tuple[set[tuple[int, int, str | None]], set[tuple[int, int, int]]]:
    """The effects (offset, broker, directory or None) and departures (offset, broker, the
    control record before) the incident rules can ask for over ``events`` (``Events``): each
    directory's first failure since it was last loaded online, each controlled shutdown begun
    and each fencing of a registered broker (of a serving one, its departures). The rules
    (``IncidentRules``) ask for a subset of these."""
    failed: set[tuple[int, str]] = set()
    state: dict[int, tuple[bool, bool, bool]] = {}
    effects: set[tuple[int, int, str | None]] = set()
    departures: set[tuple[int, int, int]] = set()
    for ev in events:
        kind, offset = ev[0], ev[1]
        if kind == "dir" or kind == "loaded":
            b = ev[3]
            if kind == "loaded":
                failed.difference_update((b, d) for d in ev[4])
            for d in ev[4] if kind == "dir" else ev[5]:
                if (b, d) not in failed:
                    failed.add((b, d))
                    effects.add((offset, b, d))
        elif kind == "broker":
            _, _, _, b, prev, (reg_dirs, flags) = ev
            now = (False, False, False) if reg_dirs is None else (True, *flags)
            was = state.get(b, (False, True, False))
            state[b] = now
            if now[2] and not was[2] and now[0]:
                effects.add((offset, b, None))
            elif was[0] and not was[1] and (not now[0] or now[1]):
                effects.add((offset, b, None))
                if was == _SERVING:
                    departures.add((offset, b, prev))
    return effects, departures


def effect_rows(engine, asked: list[tuple[int, int, str | None]], last: int) -> _Streamed:
    """Request ``asked[i]`` -> the rows (pk, role, ended_by, why, leader, ts_ms) of the
    ``effects`` it opens, as the tracker opens them (by topic id and partition, leadership
    first): sorted by the engine and read a batch at a time as the replay asks for them
    (``_Streamed``), one Python object per value the replay reads."""
    d = engine.dialect
    join, order = in_partition_order(d, "e.pk")
    # Kept apart, the hits, the effects and their sort each spill on their own: as one
    # statement, their joins and the sort held more than DuckDB's limit at once.
    engine.keep("inc_eff", effect_hits(d, last))
    engine.keep("inc_effects", effects(d))
    return _Streamed(
        asked,
        lambda: engine.arrow_batches(
            f"SELECT e.req, e.pk, e.role, e.ended_by, e.why, e.leader, e.ts_ms FROM inc_effects e {join}"
            f" ORDER BY e.req, {order}, e.role DESC"
        ),
    )


def departure_rows(engine, asked: list[tuple[int, int, int | None]]) -> dict:
    """Fencing (at, broker) of ``asked[i]`` (at, broker, lo) -> (columns, lo, hi): the rows of
    the columns (pk, off, leader, led, was_in, ts_ms) of its ``departures``, by offset; fetched
    a column at a time, as ``effect_rows`` (at 10^7 records, 850 000 rows as tuples held
    0.7 GB)."""
    engine.table(
        "inc_dep",
        [(i, at, b, lo) for i, (at, b, lo) in enumerate(asked)],
        [("req", "BIGINT"), ("at_", "BIGINT"), ("broker", "INT"), ("lo", "BIGINT")],
    )
    table = engine.arrow(
        f"SELECT req, pk, off, leader, led, was_in, ts_ms FROM ({departures(engine.dialect)}) x ORDER BY req, off, pk"
    )
    return _by_request(table, [(at, b) for at, b, _lo in asked])


class _Rows:
    """One request's rows of a table the engine returned: Arrow until the replay reads them. At
    10^8 records the incidents' effects are tens of millions of rows; as Python lists all at
    once they held more than the machine (bench/RESULTS.md)."""

    __slots__ = ("table", "lo", "hi")

    def __init__(self, table, lo: int, hi: int) -> None:
        self.table, self.lo, self.hi = table, lo, hi

    def columns(self) -> tuple[list, ...]:
        """The rows' columns after the first (the request's number), as Python lists."""
        part = self.table.slice(self.lo, self.hi - self.lo)
        return tuple(part.column(i).to_pylist() for i in range(1, part.num_columns))


def _by_request(table, keys: list) -> dict:
    """``keys[i]`` -> ``_Rows``: ``table``'s rows of request ``i`` (its first column, sorted)."""
    table = table.combine_chunks()
    bounds = [(0, 0)] * len(keys)
    if table.num_rows:
        # Each request's rows from the runs of its number (no Python list of the numbers).
        runs = pc.run_end_encode(table.column(0).chunk(0))
        lo = 0
        for req, hi in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
            bounds[req] = (lo, hi)
            lo = hi
    return {key: _Rows(table, lo, hi) for key, (lo, hi) in zip(keys, bounds, strict=True)}


class _Pieces:
    """One request's rows as ``_Streamed`` read them: slices ``lo..hi - 1`` of batches' columns
    (Python lists), in order."""

    __slots__ = ("pieces", "width")

    def __init__(self, pieces: list[tuple[list[list], int, int]], width: int) -> None:
        self.pieces, self.width = pieces, width

    def columns(self) -> tuple[list, ...]:
        """The rows' columns after the first (the request's number), as Python lists."""
        if len(self.pieces) == 1:
            columns, lo, hi = self.pieces[0]
            return tuple(c[lo:hi] for c in columns)
        out: tuple[list, ...] = tuple([] for _ in range(self.width))
        for columns, lo, hi in self.pieces:
            for into, c in zip(out, columns, strict=True):
                into.extend(c[lo:hi])
        return out


class _Streamed:
    """Requests' rows read from the engine's batches (their first column the request's number,
    sorted) as the replay asks for them: ``get(key)`` as a dict's, a request's rows given once.

    The replay asks in its events' order, which is the requests' (numbered in offset order)
    but for the requests of one record: those read on the way are held until asked. So the
    driver holds a batch or two, not the tens of millions of rows a long history's incidents
    open (bench/RESULTS.md). The statement runs at the first ``get``: the replay runs no other
    statement meanwhile."""

    def __init__(self, keys: list, reader: Callable[[], pa.RecordBatchReader]) -> None:
        self.number = {key: i for i, key in enumerate(keys)}
        self.offsets = [key[0] for key in keys] if keys and isinstance(keys[0], tuple) else None
        """The requests' offsets, in number order: a request of an offset the replay has left
        behind is never asked for (more are asked than the rules open), and its rows go."""
        self.dropped = 0
        self.start = reader
        self.reader: pa.RecordBatchReader | None = None
        self.pieces: dict[int, list] = {}
        """Request -> its rows read so far (``_Pieces``: slices of batches' columns)."""
        self.complete = 0
        """The requests below this number have all their rows read."""
        self.given: set[int] = set()

    def get(self, key) -> _Pieces | None:
        req = self.number.get(key)
        if req is None:
            return None
        if req in self.given:
            raise RuntimeError(f"the incidents' replay asked twice for the effects of {key}")
        self.given.add(req)
        if self.offsets is not None:
            for n in range(self.dropped, bisect.bisect_left(self.offsets, self.offsets[req])):
                self.pieces.pop(n, None)
            self.dropped = max(self.dropped, bisect.bisect_left(self.offsets, self.offsets[req]))
        if self.reader is None:
            self.reader = self.start()
        while req >= self.complete:
            self._read()
        return _Pieces(self.pieces.pop(req, []), len(self.reader.schema) - 1)

    def close(self) -> None:
        """Let go of the rows not read: DuckDB runs no other statement on the connection while a
        result is open."""
        if self.reader is not None:
            self.reader.close()
        self.pieces.clear()

    def _read(self) -> None:
        try:
            batch = self.reader.read_next_batch()  # type: ignore[union-attr]  # None only once closed; read while open
        except StopIteration:
            batch = None
        if batch is None:
            self.complete = len(self.number)
            return
        if not batch.num_rows:
            return
        runs = pc.run_end_encode(batch.column(0))
        # A batch's columns as Python lists at once, each request's rows slices of them: per
        # request, Arrow's slicing and conversion cost more than the replay's own work (a
        # history of dense failures asks for hundreds of thousands of requests' rows).
        columns = [batch.column(i).to_pylist() for i in range(1, batch.num_columns)]
        lo = 0
        for req, hi in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
            if req >= self.dropped:
                self.pieces.setdefault(req, []).append((columns, lo, hi))
            lo = hi
        # The last request of the batch may go on in the next one.
        self.complete = max(self.complete, req)


def _register_requests(engine, asked: list[tuple[int, int, str | None]]) -> None:
    """``inc_qb`` and ``inc_qi`` (``effects``) for the requests ``asked`` ((offset, broker,
    directory or None), numbered by their place): a broker's under ``_ANY``."""
    lists: dict[tuple[int, str], list[tuple[int, int, str]]] = {}
    for req, (at, b, dd) in enumerate(asked):
        lists.setdefault((b, _ANY if dd is None else dd), []).append((at, req, _ANY if dd is None else dd))
    qi = []
    for (b, dd), items in lists.items():
        items.sort()
        qi += [(b, dd, i, req, mode) for i, (_at, req, mode) in enumerate(items)]
    engine.table(
        "inc_qi", qi, [("b", "INT"), ("dir", "STRING"), ("idx", "BIGINT"), ("req", "BIGINT"), ("mode", "STRING")]
    )
    marks = {k: [[at for at, _r, _m in v]] for k, v in lists.items()}
    register(engine, "inc_qb", marks, _RANK_KEY, ["q"])


def availability_totals(end_ms: int) -> str:
    """Per partition life (``inc_avail``: ``availability_changes`` kept), whether its topic was
    removed and the record time it spent with each flag: each change point's flags hold until
    the next point (or the removal; to ``end_ms`` at the end)."""
    held = f"CASE WHEN nxt IS NULL THEN {end_ms} ELSE nxt_ms END - t_ms"
    sums = ", ".join(
        f"sum(CASE WHEN (code & {bit}) <> 0 THEN {held} ELSE 0 END) AS {name}"
        for name, bit in (("nl", _NL), ("um", _UM), ("lo", _LO), ("io", _IO))
    )
    return f"SELECT pk, max(removed) AS removed, {sums} FROM inc_avail GROUP BY pk"


def outage_rows(d: Dialect) -> str:
    """The outages (no leader, leader offline) of ``inc_avail``'s change points, in the order
    the tracker's per-record pass opens them per partition (by partition life, then offset):
    an outage begins at a point whose reason (no leader before leader offline) is not the one
    before, and lasts until the next point whose reason differs (``last_offset``, ``to_ms``:
    the offset before it, its time), or the topic's removal (the offset before it, the time of
    the removal record), or the end (null). With the topic id and partition of the life
    (``lives``) and each outage's place among the directory failures its record brought
    (``inc_steps``: the tracker measures the partitions again after each)."""
    why = f"CASE WHEN (code & {_NL}) <> 0 THEN 'no leader' WHEN (code & {_LO}) <> 0 THEN 'leader offline' END"
    by_time = "PARTITION BY pk ORDER BY t"
    return f"""
    WITH w AS (
      SELECT pk, t, removed, ldir, t_ms, {why} AS why,
        last_value(nxt_ms) OVER ({by_time} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS final_ms
      FROM inc_avail
    ),
    c AS (SELECT *, lag(why) OVER ({by_time}) AS was FROM w),
    ch AS (
      SELECT *, lead(t) OVER ({by_time}) AS until_, lead(t_ms) OVER ({by_time}) AS until_ms
      FROM c WHERE NOT (why IS NOT DISTINCT FROM was)
    )
    SELECT lv.life_topic AS topic_id,
      CASE WHEN o.pk - o.life * 4294967296 >= 2147483648 THEN o.pk - o.life * 4294967296 - 4294967296
        ELSE o.pk - o.life * 4294967296 END AS {d.q("partition")},
      o.why, o.t AS first_offset,
      CASE WHEN o.until_ IS NOT NULL THEN o.until_ - 1 WHEN o.removed IS NOT NULL THEN o.removed - 1 END AS last_offset,
      o.t_ms AS from_ms,
      CASE WHEN o.until_ IS NOT NULL THEN o.until_ms WHEN o.removed IS NOT NULL THEN o.final_ms END AS to_ms,
      coalesce(s.step, 0) AS step
    FROM (SELECT *, {d.idiv("pk", 4294967296)} AS life FROM ch WHERE why IS NOT NULL) o
    JOIN lives lv ON lv.life_index = o.life
    LEFT JOIN inc_steps s ON s.off = o.t AND s.dir = CAST(o.ldir AS STRING)
    ORDER BY o.pk, o.t
    """


def _availability(engine, lives, names, end_ms, steps) -> tuple[list[PartitionAvailability], OutageList, Spans]:
    """Per partition, the time in each bad state (those of partitions still there at the end,
    worst first), the outages (no leader, leader offline) in the order the tracker opens them,
    and their ``Spans``, from where its flags change (``inc_avail``): summed and cut into
    outages by the engine, so the driver holds the partitions and the outages' columns, not a
    Python object per change point (millions in a long history of dense failures)."""
    rows = []
    for pk, removed, *spent in engine.rows(availability_totals(end_ms)):
        if removed is not None or not any(spent):
            continue
        topic, p = partition_of(lives, pk)
        nl, um, lo, io = (int(x) for x in spent)  # a sum may come back wider than an int64
        avail = PartitionAvailability(topic_id=topic, topic=names.get(topic), partition=p)
        avail.no_leader_ms, avail.under_min_isr_ms, avail.leader_offline_ms, avail.isr_offline_ms = nl, um, lo, io
        avail.unavailable_ms = nl + lo
        rows.append(avail)
    rows.sort(key=lambda a: (-a.unavailable_ms, -a.isr_offline_ms, a.topic or a.topic_id, a.partition))
    engine.table(
        "inc_steps",
        [(off, dd, n) for (off, dd), n in steps.items()],
        [("off", "BIGINT"), ("dir", "STRING"), ("step", "BIGINT")],
    )
    found = engine.arrow(outage_rows(engine.dialect))
    outages = OutageList()
    outages.extend_arrow(found)
    order = unwrap(found.column("step").combine_chunks().cast(pa.int64()), "q")
    del found
    spans = outages.spans(end_ms)  # before the sort: a partition's rows are together
    outages.sort(order)
    return rows, outages, spans


def _per_record(engine) -> IncidentsResult:
    """``find_incidents`` over the log's records, decoded in offset order (``FALLBACK``)."""
    from kraftlake.records.arrow import from_table

    log.info("plan.incidents", fallback=FALLBACK)
    o = engine.dialect.q("offset")
    table = engine.arrow(f"SELECT {o}, record FROM log")
    return find_incidents(from_table(table.sort_by("offset")) if table.num_rows else [])
