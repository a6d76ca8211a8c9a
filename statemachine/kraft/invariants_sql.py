"""The KRaft invariants' SQL: each relational invariant's statements beside its per-record rule
(``invariants``), in the dialect both engines share (``statemachine.sql_dialect``), and the
registry (``RELATIONAL``) the SQL plan (``replay.plan.run``) loops over: per invariant, the
relations it keeps, how often it checks (``checked``), the statement of its wrong rows and how a
row is worded, with the rule's own message functions (``k1_message``, ``k4_message``, ...).

A sibling of ``invariants``, not in it: the statements are about 400 lines, and the rules'
module would pass 600 with them. What stays in the plan (``replay.plan``) is the machinery every
invariant shares: the partition states (``fills``, ``states``, ``timeline``), the members and
their overlaps with bad intervals, the runs of wrong states (``islands``), the grace (``held``),
the final states and the refusals.

Statements return kinds and fields, never words: the driver words the few rows it reads with
the entry's ``found``, which calls the catalogue's ``say`` through the rule's message functions.

The relations the statements read are a contract with the plan, which registers or computes
them before it runs an invariant's stage (``RELATIONS``: each with its columns and what it
holds). Offsets are BIGINT; ``pk`` numbers a partition per lifetime of its topic (the topic's
lifetime in the high 32 bits, the partition id in the low); ``end_`` is the offset of the
record that ends a state (null: still in force at the end of the log); directory ids are of
the dialect's ``dir_type``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kraftlake.records.kraft import LRS_RECOVERING

from ..invariant import say
from ..sql_dialect import Dialect
from .features import MV_3_0_IV1, MV_3_2_IV0
from .invariants import K4_RANKS, k1_message, k3_message, k4_message, k13_message, k14_message, offline_members_message

# -- the contract: what the plan gives the invariants' statements --------------------------------


class Relation(NamedTuple):
    name: str
    columns: tuple[str, ...]
    holds: str


STATE_COLUMNS = (
    "pk", "off", "end_", "removed", "is_record", "leader", "isr", "replicas", "dirs", "leader_epoch",
    "partition_epoch", "old_replicas", "old_isr", "old_leader", "old_dirs", "old_leader_epoch", "old_partition_epoch",
)  # fmt: skip
"""A partition state's columns (``replay.plan.sql.STATE``)."""

RELATIONS = (
    Relation(
        "log",
        ("offset", "type", "assign_replicas_to_dirs_request"),
        "the log table (one row per record; of its columns these are the ones read here): the"
        " record's offset, type name, time (null: none) and an AssignReplicasToDirsRequest's fields"
        " (broker_id, broker_epoch, directories: id, topics: topic_id, partitions)",
    ),
    Relation(
        "timeline",
        (*STATE_COLUMNS, "k1", "k3", "moved", "left_", "u", "old_u", "changed"),
        "one row per applied partition record: the state after it (leader -1: none; replicas, dirs"
        " in replica order, isr, epochs), where it ends (end_), the state before (old_*: null for a"
        " partition's first), and what the invariants read of it: k1, k3 (the kind of wrongness"
        " ``k1_kinds``/``k3_kinds`` name, null = right), moved (replicas or directories changed),"
        " left_ (replicas that left), u/old_u (UNASSIGNED replicas after and before, null where"
        " neither has any), changed (a state before exists)",
    ),
    Relation(
        "partition_rows",
        ("pk", "off", "set_lrs", "set_elr"),
        "the published partition records' own fields (set_*: null = unchanged), a row per record"
        " (and per partition a ClearElr changes); pk -1 where the topic does not exist",
    ),
    Relation(
        "lives",
        ("life_index", "life_topic", "life", "removed"),
        "each topic lifetime: its number (pk's high bits), topic id, the offset that created it and"
        " the one that removed it (null: never)",
    ),
    Relation(
        "bad",
        ("bad_broker", "bad_dir", "start_", "stop_", "reason"),
        "the intervals [start_, stop_) in which a broker (bad_dir '*') is unregistered or fenced,"
        " or a directory of it offline (reason 'offline')",
    ),
    Relation(
        "bad_overlaps",
        ("pk", "off", "end_", "role", "pos", "broker", "dir", "reason", "s", "e"),
        "a partition state's leader (role 'L', pos 0) or ISR member (role 'I', pos its place; K5's"
        " last replica standing left out) joined with each bad interval of its broker or directory it"
        " overlaps, [s, e) the overlap; reason 'unregistered', 'fenced' or 'offline'",
    ),
    Relation(
        "removals",
        ("at_", "bad_broker", "bad_dir"),
        "each directory a BrokerRegistrationChange takes from its broker, at its offset (registered"
        " only when there is one)",
    ),
    Relation(
        "events",
        ("off", "broker"),
        "where K8 judges a broker besides where its UNASSIGNED count leaves or returns to zero: each"
        " record of the broker's (``ControlPlane.broker_events``) and each request to unfence it",
    ),
    Relation(
        "reg_epochs",
        ("off", "broker", "epoch"),
        "each broker's registration epoch from the record that set it (null: not registered from there)",
    ),
)
"""The relations the invariants' statements read, and their columns."""


class Facts(NamedTuple):
    """What the plan's driver knows, from the control plane it replays, that a statement reads."""

    elr_levels: Sequence[tuple[int, bool]]
    """(offset, KIP-966 on after it) where ``eligible.leader.replicas.version`` changes."""
    mv_levels: Sequence[tuple[int, int]]
    """(offset, level after it) where ``metadata.version`` changes."""
    published: str
    """A condition on a ``log`` row: its record is published (in no aborted or unfinished
    transaction)."""


Builder = Callable[[Dialect, Facts], str]
"""A statement (or a relation's text) of the dialect and the driver's facts."""


# -- the helpers the statements share ------------------------------------------------------------

NO_DIR = ""
"""K9's mark of a state where the broker is no replica: never a directory id."""

BEFORE = "(PARTITION BY pk ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
"""A partition's rows before this one (a forward fill over it is the state before); the plan's
statements use it too (``replay.plan.sql``)."""
UPTO = "(PARTITION BY pk ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
"""A partition's rows up to this one (a forward fill over it is the state after)."""


def level_at(changes: Sequence[tuple[int, object]], base: object, column: str = "off") -> str:
    """A level in force before each row (after the last change at an offset below ``column``),
    from the driver's (offset, level after it) changes; booleans as SQL's TRUE and FALSE."""

    def lit(v: object) -> str:
        return ("TRUE" if v else "FALSE") if isinstance(v, bool) else str(v)

    if not changes:
        return lit(base)
    whens = " ".join(f"WHEN {column} > {o} THEN {lit(v)}" for o, v in reversed(changes))
    return f"CASE {whens} ELSE {lit(base)} END"


def change_points(overlaps: str) -> str:
    """Where an answer over ``overlaps`` (pk, off, end_ of a state; s, e of an overlap inside
    it) can change: each state's start and its overlaps' edges inside it (pk, t, state, row_end)."""
    return f"""
      SELECT DISTINCT pk, t, state, row_end FROM (
        SELECT pk, off AS t, off AS state, end_ AS row_end FROM {overlaps}
        UNION ALL SELECT pk, s AS t, off AS state, end_ AS row_end FROM {overlaps}
        UNION ALL SELECT pk, e AS t, off AS state, end_ AS row_end FROM {overlaps}
          WHERE e IS NOT NULL AND (end_ IS NULL OR e < end_)
      ) x"""


# -- K1, K3: a partition state's kind of wrongness (read into ``timeline``) ---------------------


def k1_kinds(d: Dialect) -> dict[str, str]:
    """K1's kinds of wrongness (the catalogue's message kinds), each with its condition on a
    state, the first that holds naming it."""
    return {
        "empty_isr": f"{d.size('isr')} = 0",
        "isr_outside_replicas": d.outside("isr", "replicas"),
        "leader_outside_isr": f"leader <> -1 AND NOT {d.contains('isr', 'leader')}",
    }


def k1_exempt(levels: Sequence[tuple[int, bool]]) -> str:
    """A condition on a timeline row: K1's empty ISR is KIP-966's leaderless state (no leader,
    the feature on at the row), not a fault."""
    return f"(k1 = 'empty_isr' AND leader = -1 AND {level_at(levels, False)})"


def k3_kinds(d: Dialect, mv_3_6: int) -> dict[str, str]:
    """K3's, on a state and the one before it (``mv``: the metadata.version in force): a change
    that removes a replica (or, before 3.6-IV0, shrinks the ISR) without a leader-epoch bump; a
    PartitionRecord rewriting a partition whose epochs do not move."""
    same_le = "leader_epoch = old_leader_epoch"
    return {
        "replicas_left": f"NOT is_record AND {same_le} AND {d.outside('old_replicas', 'replicas')}",
        "isr_shrunk": f"NOT is_record AND {same_le} AND mv < {mv_3_6} AND {d.outside('old_isr', 'isr')}",
        "partition_epoch_stuck": "is_record AND partition_epoch <= old_partition_epoch",
        "leader_epoch_stuck": "is_record AND leader <> old_leader AND leader_epoch <= old_leader_epoch",
    }


# -- K4, K5: leaders and ISR members on bad brokers and directories ------------------------------


def k4_k5_states(d: Dialect) -> str:
    """K4's and K5's answer at each point where it can change (each state with a bad overlap,
    and the overlaps' edges inside it): the leader's worst reason (``k4_rank``: 0 unregistered,
    1 fenced, 2 offline directory; null = right) and the ISR members on offline directories
    (``k5_brokers``/``k5_dirs`` in ISR order; null = none). A state with no overlap is right and
    left out (``islands`` reads the gap as right)."""
    rank = "CASE WHEN reason = 'unregistered' THEN 0 WHEN reason = 'fenced' THEN 1 ELSE 2 END"
    return f"""
    WITH pts AS ({change_points("bad_overlaps")}),
    cover AS (
      SELECT p.pk, p.t, p.row_end, o.role, o.pos, o.broker, o.dir, o.reason
      FROM pts p LEFT JOIN bad_overlaps o
        ON p.pk = o.pk AND p.state = o.off AND o.s <= p.t AND (o.e IS NULL OR p.t < o.e)
    ),
    agg AS (
      SELECT pk, t, row_end,
        min(CASE WHEN role = 'L' THEN {rank} END) AS k4_rank,
        min(CASE WHEN role = 'L' THEN broker END) AS k4_broker,
        max(CASE WHEN role = 'L' THEN dir END) AS k4_dir,
        {d.ordered_list("broker", "pos", "role = 'I'")} AS k5_brokers,
        {d.ordered_list("dir", "pos", "role = 'I'")} AS k5_dirs
      FROM cover GROUP BY pk, t, row_end
    )
    SELECT pk, t AS off, least(lead(t) OVER (PARTITION BY pk ORDER BY t), row_end) AS end_,
      k4_rank, k4_broker, k4_dir, k5_brokers, k5_dirs
    FROM agg
    """


# -- K7: directory removals -----------------------------------------------------------------------


def k7_hits() -> str:
    """K7: members on an offline directory at a change that takes it from their broker
    (``removals``: at_, bad_broker, bad_dir); role 0 leads, 1 in the ISR only."""
    return """
    SELECT o.pk, r.at_, o.broker, o.dir, min(CASE WHEN o.role = 'L' THEN 0 ELSE 1 END) AS role
    FROM bad_overlaps o JOIN removals r
      ON o.reason = 'offline' AND o.broker = r.bad_broker AND o.dir = r.bad_dir AND o.off < r.at_
      AND (o.end_ IS NULL OR r.at_ < o.end_)
    GROUP BY o.pk, r.at_, o.broker, o.dir
    """


# -- K8, K10, K11: a broker's UNASSIGNED replicas -------------------------------------------------


def unassigned_counts(d: Dialect) -> str:
    """(off, broker, after): a broker's number of UNASSIGNED replicas where K8 is checked: where
    it goes from zero to some or back, and at each of the broker's records (``events``: off,
    broker), from the gains and losses of each partition's states and its topic's removal."""
    gained = d.distinct(d.filter("u", lambda v: f"NOT {d.contains('old_u', v)}"))
    lost = d.distinct(d.filter("old_u", lambda v: f"NOT {d.contains('u', v)}"))
    return f"""
    WITH t AS (SELECT off, end_, removed, u, old_u FROM timeline WHERE u IS NOT NULL),
    steps AS (
      SELECT off, {d.explode(gained, "broker")}, 1 AS step FROM t
      UNION ALL SELECT off, {d.explode(lost, "broker")}, -1 AS step FROM t
      UNION ALL SELECT removed AS off, {d.explode(d.distinct("u"), "broker")}, -1 AS step FROM t
        WHERE removed IS NOT NULL AND end_ = removed
    ),
    grouped AS (
      SELECT broker, off, sum(step) AS step, FALSE AS event FROM steps GROUP BY broker, off
      UNION ALL SELECT broker, off, 0 AS step, TRUE AS event FROM events
    ),
    counted AS (
      SELECT *, sum(step) OVER (PARTITION BY broker ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        AS after
      FROM grouped
    )
    SELECT off, broker, after FROM counted WHERE event OR ((after = 0) <> (after - step = 0))
    """


# -- K9: reported directories ---------------------------------------------------------------------


def accepted(d: Dialect, published: str) -> str:
    """(off): the published AssignReplicasToDirsRequests the controller accepts, those from a
    broker registered, at the request, with the epoch it gives (``reg_epochs``: each broker's
    registration epoch from the record that set it, null where it is not registered), as the
    local audit tells them (``published``: a condition on a log row, ``Facts.published``). Each request
    takes the last of its broker's records before it."""
    o, t = d.q("offset"), d.q("type")
    req = d.q("assign_replicas_to_dirs_request")
    since = "(PARTITION BY broker ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    return f"""
    WITH ev AS (
      SELECT off, broker, off AS seg, CAST(NULL AS BIGINT) AS asked FROM reg_epochs
      UNION ALL
      SELECT {o} AS off, {req}.broker_id AS broker, CAST(NULL AS BIGINT) AS seg, {req}.broker_epoch AS asked
      FROM log WHERE {t} = 'AssignReplicasToDirsRequest' AND {published}
    ),
    f AS (SELECT off, broker, asked, {d.last("seg")} OVER {since} AS seg FROM ev)
    SELECT f.off FROM f JOIN reg_epochs r ON r.broker = f.broker AND r.off = f.seg
    WHERE f.asked IS NOT NULL AND r.epoch = f.asked
    """


def k9_checked(d: Dialect) -> str:
    """How many replica directories the accepted AssignReplicasToDirs requests report: K9's
    ``checked`` (the catalogue's ``counts``), read from the requests the driver does not decode."""
    req = d.q("assign_replicas_to_dirs_request")
    return f"""
    WITH r0 AS (
      SELECT {d.posexplode(f"{req}.directories", "dpos", "dd")}
      FROM log l JOIN accepted a ON l.{d.q("offset")} = a.off
      WHERE l.{d.q("type")} = 'AssignReplicasToDirsRequest'
    ),
    r1 AS (SELECT {d.posexplode("dd.topics", "tpos", "tp")} FROM r0)
    SELECT coalesce(sum({d.size("tp.partitions")}), 0) FROM r1
    """


def k9_runs(d: Dialect) -> str:
    """K9's candidate intervals: a replica directory its broker reported (and the controller
    accepted: ``accepted``) that the partition does not record, until a state records it or
    drops the replica. A report that disagrees with the partition where it is made is
    effective; it holds until the first state that records the reported directory or drops the
    replica, or the next effective report (which continues the same wrong interval). Rows:
    pk, broker, first_offset, reported, recorded, fixed_by. Only the replicas some accepted
    report names are followed (the others cannot be wrong). A reported directory is of the
    plan's directory type (``reported_dirs`` puts every one in the dictionary, known to the
    plan or not), returned as a string: the windows then carry a small integer, not a string
    of 22 characters (faster, and within less memory: bench/RESULTS.md)."""
    req = d.q("assign_replicas_to_dirs_request")
    report = "reported IS NOT NULL"
    upto = "(PARTITION BY pk, broker ORDER BY pos, seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    before = "(PARTITION BY pk, broker ORDER BY pos, seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"

    def dir_in(replicas: str, dirs: str, b: str) -> str:
        return f"CASE WHEN {d.contains(replicas, b)} THEN {d.at(dirs, d.position(replicas, b))} END"

    def moves(b: str) -> str:
        return f"NOT ({dir_in('replicas', 'dirs', b)} IS NOT DISTINCT FROM {dir_in('old_replicas', 'old_dirs', b)})"

    none = d.dir(NO_DIR)
    return f"""
    WITH r0 AS (
      SELECT l.{d.q("offset")} AS at_, {req}.broker_id AS broker, {d.posexplode(f"{req}.directories", "dpos", "dd")}
      FROM log l JOIN accepted a ON l.{d.q("offset")} = a.off
      WHERE l.{d.q("type")} = 'AssignReplicasToDirsRequest'
    ),
    r1 AS (SELECT at_, broker, dpos, dd.id AS reported, {d.posexplode("dd.topics", "tpos", "tp")} FROM r0),
    r2 AS (
      SELECT at_, broker, reported, tp.topic_id AS topic_id, dpos * 1000000 + tpos * 1000 AS pos0,
        {d.posexplode("tp.partitions", "ppos", "pid")}
      FROM r1
    ),
    asks AS (
      SELECT r2.at_, r2.broker, CAST(r2.reported AS {d.dir_type}) AS reported, r2.pos0 + r2.ppos AS seq,
        l.life_index * 4294967296 + (CAST(r2.pid AS BIGINT) & 4294967295) AS pk
      FROM r2 JOIN lives l
        ON r2.topic_id = l.life_topic AND r2.at_ > l.life AND (l.removed IS NULL OR r2.at_ < l.removed)
    ),
    asked AS (SELECT DISTINCT pk, broker FROM asks),
    -- A state that leaves the replica's directory as the state before did changes nothing here:
    -- it neither records a reported directory first nor drops the replica (left out before the
    -- explode: a state moves one or two of its replicas, rarely all).
    st0 AS (
      SELECT pk, off, replicas, dirs,
        {d.explode(d.filter(d.union("replicas", f"coalesce(left_, {d.empty('INT')})"), moves), "broker")}
      FROM timeline WHERE moved AND pk IN (SELECT pk FROM asked)
    ),
    st AS (
      SELECT st0.pk, st0.off, st0.broker, {dir_in("replicas", "dirs", "st0.broker")} AS dir
      FROM st0 JOIN asked a ON st0.pk = a.pk AND st0.broker = a.broker
    ),
    both_ AS (
      SELECT pk, broker, off AS pos, CAST(-1 AS BIGINT) AS seq, dir, CAST(NULL AS {d.dir_type}) AS reported
      FROM st
      UNION ALL SELECT pk, broker, at_ AS pos, CAST(seq AS BIGINT) AS seq, CAST(NULL AS {d.dir_type}) AS dir, reported
      FROM asks
    ),
    t0 AS (
      SELECT *, NULLIF({d.last(f"CASE WHEN NOT ({report}) THEN coalesce(dir, {none}) END")} OVER {before}, {none})
        AS recorded
      FROM both_
    ),
    t1 AS (SELECT * FROM t0 WHERE NOT ({report}) OR (recorded IS NOT NULL AND recorded <> reported)),
    t2 AS (
      SELECT *, sum(CASE WHEN {report} THEN 1 ELSE 0 END) OVER {upto} AS segment,
        {d.last("reported")} OVER {upto} AS waits_for
      FROM t1
    ),
    segs AS (
      SELECT pk, broker, segment,
        max(CASE WHEN {report} THEN pos END) AS at_,
        max(reported) AS reported, max(CASE WHEN {report} THEN recorded END) AS recorded,
        min(CASE WHEN NOT ({report}) AND (dir IS NULL OR dir = waits_for) THEN pos END) AS fix
      FROM t2 WHERE segment > 0 GROUP BY pk, broker, segment
    ),
    -- A segment with a fix ends its island: the island of a segment is the number of fixed
    -- segments before it, and only an island's last segment has a fix.
    e AS (
      SELECT *, sum(CASE WHEN fix IS NOT NULL THEN 1 ELSE 0 END)
          OVER (PARTITION BY pk, broker ORDER BY segment ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        - CASE WHEN fix IS NOT NULL THEN 1 ELSE 0 END AS island
      FROM segs
    )
    SELECT pk, broker, {d.min_by("at_", "segment")} AS first_offset,
      CAST({d.min_by("reported", "segment")} AS STRING) AS reported, {d.min_by("recorded", "segment")} AS recorded,
      max(fix) AS fixed_by
    FROM e GROUP BY pk, broker, island
    """


# -- K13, K14, K15: eligible leader replicas (KIP-966) ----------------------------------------------


def elr_states(
    d: Dialect,
    levels: Sequence[tuple[int, bool]],
    mv_levels: Sequence[tuple[int, int]],
    mv_base: int,
    mv_3_2: int,
) -> str:
    """Per state of a partition whose ELR is ever non-empty, or that elects a leader from outside
    its ISR: ``on_`` (the feature at the state's record), the ELR after and before, ``k13`` (the
    kind of wrongness, null = right) and ``k14`` (a change electing a leader from outside the ISR
    and the ELR before it, in a clean election: ``statemachine.kraft.invariants``)."""
    on = level_at(levels, False)
    ints = d.empty("INT")
    candidate = f"""(NOT is_record AND leader <> old_leader AND leader <> -1 AND {d.contains("replicas", "leader")}
        AND NOT {d.contains("old_isr", "leader")} AND {on})"""
    clean = f"""NOT {d.contains(f"coalesce(old_elr, {ints})", "leader")}
        AND NOT ({d.contains("isr", "leader")}
          AND ({d.size("isr")} > 1 OR NOT (replicas IS NOT DISTINCT FROM old_replicas)))
        AND NOT ({d.size("isr")} = 1 AND {d.at("isr", "1")} = leader
          AND (coalesce(lrs, 0) = {LRS_RECOVERING} OR {level_at(mv_levels, mv_base)} < {mv_3_2}))"""
    in_isr = d.filter("elr", lambda v: d.contains("isr", v))
    return f"""
    WITH tr AS (
      -- The timeline carries no ELR (plan.sql.OTHER_FIELDS): its rows' own fields, joined back.
      SELECT t.pk, t.off, t.end_, t.is_record, t.leader, t.isr, t.replicas, t.dirs, t.old_leader, t.old_isr,
        t.old_replicas, r.set_elr, r.set_lrs
      FROM timeline t JOIN partition_rows r ON r.pk = t.pk AND r.off = t.off
      WHERE t.pk IN (SELECT pk FROM partition_rows WHERE {d.size("set_elr")} > 0)
        OR t.pk IN (SELECT pk FROM timeline WHERE {candidate})
    ),
    s AS (
      SELECT pk, off, end_, is_record, leader, isr, replicas, dirs, old_leader, old_isr, old_replicas,
        {d.last("set_elr")} OVER {UPTO} AS elr,
        {d.last("set_elr")} OVER {BEFORE} AS old_elr,
        {d.last("set_lrs")} OVER {UPTO} AS lrs,
        {on} AS on_
      FROM tr
    )
    SELECT pk, off, end_, on_, elr, old_elr, replicas, dirs, isr, leader, old_isr,
      CASE WHEN on_ AND {d.outside("elr", "replicas")} THEN 'elr_outside_replicas'
        WHEN on_ AND {d.size(in_isr)} > 0 THEN 'elr_in_isr' END AS k13,
      coalesce({candidate} AND {clean}, FALSE) AS k14
    FROM s
    """


def judged_count(d: Dialect) -> str:
    """How many states K13 and K15 judge (``checked``): those made with the feature on of a
    partition whose ELR is or was just non-empty (a ClearElr's state among them)."""
    ints = d.empty("INT")
    return f"""SELECT count(*) FROM elr_states
      WHERE on_ AND ({d.size("elr")} > 0 OR {d.size(f"coalesce(old_elr, {ints})")} > 0)"""


def elections_count(levels: Sequence[tuple[int, bool]]) -> str:
    """How many leader changes K14 judges (``checked``): each PartitionChange that moves the
    leader with the feature on."""
    return f"SELECT count(*) FROM timeline WHERE NOT is_record AND leader <> old_leader AND {level_at(levels, False)}"


def k15_states(d: Dialect) -> str:
    """K15's answer at each point where it can change: the ELR members (of states made with the
    feature on) whose replica is on a directory its broker has offline (``bad``, reason
    ``offline``), in ELR order (``k15_brokers``/``k15_dirs``; null = none). Points: each such
    state, and the edges of its members' offline intervals inside it; states without one are
    left out (``islands`` reads the gap as right)."""
    member = (
        f"""CASE WHEN {d.contains("replicas", "broker")} THEN {d.at("dirs", d.position("replicas", "broker"))} END"""
    )
    return f"""
    WITH m0 AS (
      SELECT pk, off, end_, replicas, dirs, {d.posexplode("elr", "pos", "broker")}
      FROM elr_states WHERE on_ AND {d.size("elr")} > 0
    ),
    m AS (SELECT pk, off, end_, pos, broker, {member} AS dir FROM m0),
    o AS (
      SELECT m.pk, m.off, m.end_, m.pos, m.broker, m.dir,
        greatest(m.off, b.start_) AS s, least(m.end_, b.stop_) AS e
      FROM m JOIN bad b
        ON b.reason = 'offline' AND b.bad_broker = m.broker AND b.bad_dir = m.dir
        AND (m.end_ IS NULL OR b.start_ < m.end_) AND (b.stop_ IS NULL OR b.stop_ > m.off)
    ),
    pts AS ({change_points("o")}),
    cover AS (
      SELECT p.pk, p.t, p.row_end, o.pos, o.broker, o.dir
      FROM pts p LEFT JOIN o
        ON p.pk = o.pk AND p.state = o.off AND o.s <= p.t AND (o.e IS NULL OR p.t < o.e)
    ),
    agg AS (
      SELECT pk, t, row_end,
        {d.ordered_list("broker", "pos", "broker IS NOT NULL")} AS k15_brokers,
        {d.ordered_list("dir", "pos", "broker IS NOT NULL")} AS k15_dirs
      FROM cover GROUP BY pk, t, row_end
    )
    SELECT pk, t AS off, least(lead(t) OVER (PARTITION BY pk ORDER BY t), row_end) AS end_, k15_brokers, k15_dirs
    FROM agg
    """


# -- the registry: each relational invariant as the plan runs it -----------------------------------


class Found(NamedTuple):
    """A wrong row, worded: the partition (``pk``), where it went wrong and the record that
    ended it (``fixed_by``; None: still open, or a point's), its message, and for a replica's
    finding (K9) the broker (the entity is then the replica, not the partition)."""

    pk: int
    first: int
    fixed_by: int | None
    message: str
    broker: int | None = None


@dataclass(frozen=True)
class Runs:
    """Wrong states, found as runs (``replay.plan.sql.islands``): the states of ``source`` (pk,
    off, end_) where ``wrong`` holds, a run's first state's ``payload`` (columns of ``s``, a row
    of ``payload_from``) beside it. A row: pk, first_offset, fixed_by, the payload."""

    source: Builder
    wrong: str
    payload_from: str
    payload: str


@dataclass(frozen=True)
class Rows:
    """Wrong rows of the invariant's own statement: each at one record (``point``: pk, offset
    first) or an interval (pk, broker, first_offset, ..., fixed_by: ``Found``'s order is the
    entry's ``found``'s to make)."""

    statement: Builder
    point: bool


@dataclass(frozen=True)
class Counts:
    """A statement whose rows the driver reads in order and judges itself (K8, K10 and K11 over
    one pass of the brokers' UNASSIGNED counts: ``replay.plan.driver.broker_checks``)."""

    statement: Builder


@dataclass(frozen=True)
class Relational:
    """An invariant's relational definition, as the plan runs it at ``stage`` (the moment the
    relations it reads exist: ``STAGES``). First the relations it ``keeps`` (name, statement;
    one kept once for every invariant that names it), then, where ``guard`` (a statement) has a
    row or there is none, its ``checked`` count (a statement of one value; None: the plan counts
    it with the states) and its wrong rows (``select``), each worded by ``found``. Graced
    invariants' rows (the catalogue's ``graced``) are held to the grace by the plan's one
    mechanism (``replay.plan.sql.held``), which adds a last column."""

    invariant: str
    stage: str
    select: Runs | Rows | Counts
    found: Callable[..., Found] | None = None
    keeps: tuple[tuple[str, Builder], ...] = ()
    guard: str | None = None
    checked: Builder | None = None


STAGES = ("timeline", "bad_overlaps", "removals", "elr", "events", "accepted")
"""The plan's stages, in its order: after the partition states; after the members' overlaps with
the bad intervals (``bad``, ``bad_overlaps``); once directory removals are registered (only
where there are any); on a log that turns KIP-966 on; once the brokers' events are; once their
registration epochs are (``reg_epochs``)."""


def _k1(pk: int, first: int, fixed: int | None, kind: str, isr: list, replicas: list, leader: int) -> Found:
    return Found(pk, first, fixed, k1_message(kind, isr, replicas, leader))


def _k3(
    pk: int, off: int, kind: str, old_replicas: list, replicas: list, old_isr: list, isr: list, old_leader: int,
    leader: int, le: int, pe: int, old_pe: int,
) -> Found:  # fmt: skip
    return Found(
        pk, off, None, k3_message(kind, old_replicas, replicas, old_isr, isr, old_leader, leader, le, pe, old_pe)
    )


def _k4(pk: int, first: int, fixed: int | None, rank: int, broker: int, directory: str | None, _hi: int) -> Found:
    return Found(pk, first, fixed, k4_message(K4_RANKS[rank], broker, directory))


def _offline(inv: str) -> Callable[..., Found]:
    def found(pk: int, first: int, fixed: int | None, brokers: list, dirs: list, _hi: int) -> Found:
        return Found(pk, first, fixed, offline_members_message(inv, zip(brokers, dirs)))

    return found


def _k7(pk: int, at: int, broker: int, directory: str, role: int) -> Found:
    return Found(pk, at, None, say("K7", "leads" if role == 0 else "in_isr", broker=broker, directory=directory))


def _k9(pk: int, broker: int, first: int, reported: str, recorded: str | None, fixed: int | None, _hi: int) -> Found:
    return Found(pk, first, fixed, say("K9", "unrecorded", broker=broker, reported=reported, recorded=recorded), broker)


def _k13(pk: int, first: int, fixed: int | None, kind: str, elr: list, replicas: list, isr: list) -> Found:
    return Found(pk, first, fixed, k13_message(kind, elr, replicas, isr))


def _k14(pk: int, off: int, leader: int, isr: list, old_elr: list | None) -> Found:
    return Found(pk, off, None, k14_message(leader, isr, old_elr or []))


def _wrong_k1(_d: Dialect, f: Facts) -> str:
    return f"(SELECT pk, off, end_ FROM timeline WHERE k1 IS NOT NULL AND NOT {k1_exempt(f.elr_levels)}) s0"


_K3_ROWS = (
    "SELECT pk, off, k3, old_replicas, replicas, old_isr, isr, old_leader, leader, leader_epoch,"
    " partition_epoch, old_partition_epoch FROM timeline WHERE k3 IS NOT NULL"
)
_K4K5: tuple[str, Builder] = ("k4k5", lambda d, _f: k4_k5_states(d))
_ELR: tuple[str, Builder] = (
    "elr_states",
    lambda d, f: elr_states(d, f.elr_levels, f.mv_levels, MV_3_0_IV1, MV_3_2_IV0),
)
_UNASSIGNED = Counts(lambda d, _f: unassigned_counts(d))

RELATIONAL: dict[str, Relational] = {
    r.invariant: r
    for r in (
        Relational("K1", "timeline", Runs(_wrong_k1, "TRUE", "timeline", "s.k1, s.isr, s.replicas, s.leader"), _k1),
        Relational("K3", "timeline", Rows(lambda _d, _f: _K3_ROWS, point=True), _k3),
        Relational(
            "K4",
            "bad_overlaps",
            Runs(lambda _d, _f: "k4k5", "k4_rank IS NOT NULL", "k4k5", "s.k4_rank, s.k4_broker, s.k4_dir"),
            _k4,
            keeps=(_K4K5,),
        ),
        Relational(
            "K5",
            "bad_overlaps",
            Runs(lambda _d, _f: "k4k5", "k5_brokers IS NOT NULL", "k4k5", "s.k5_brokers, s.k5_dirs"),
            _offline("K5"),
            keeps=(_K4K5,),
        ),
        Relational("K7", "removals", Rows(lambda _d, _f: k7_hits(), point=True), _k7),
        Relational(
            "K13",
            "elr",
            Runs(
                lambda _d, _f: "(SELECT pk, off, end_ FROM elr_states WHERE k13 IS NOT NULL) s13",
                "TRUE",
                "elr_states",
                "s.k13, s.elr, s.replicas, s.isr",
            ),
            _k13,
            keeps=(_ELR,),
            checked=lambda d, _f: judged_count(d),
        ),
        Relational(
            "K14",
            "elr",
            Rows(lambda _d, _f: "SELECT pk, off, leader, old_isr, old_elr FROM elr_states WHERE k14", point=True),
            _k14,
            keeps=(_ELR,),
            checked=lambda _d, f: elections_count(f.elr_levels),
        ),
        Relational(
            "K15",
            "elr",
            Runs(lambda _d, _f: "k15", "k15_brokers IS NOT NULL", "k15", "s.k15_brokers, s.k15_dirs"),
            _offline("K15"),
            keeps=(_ELR, ("k15", lambda d, _f: k15_states(d))),
            checked=lambda d, _f: judged_count(d),
        ),
        Relational("K8", "events", _UNASSIGNED),
        Relational("K10", "events", _UNASSIGNED),
        Relational("K11", "events", _UNASSIGNED),
        Relational(
            "K9",
            "accepted",
            Rows(lambda d, _f: k9_runs(d), point=False),
            _k9,
            keeps=(("accepted", lambda d, f: accepted(d, f.published)),),
            guard="SELECT 1 FROM accepted LIMIT 1",
            checked=lambda d, _f: k9_checked(d),
        ),
    )
}
"""Invariant id -> its relational definition, in the order the plan runs them (``STAGES``)."""
