"""Eligible leader replicas (KIP-966) in the plan: SQL beside ``plan.sql``'s, over the few columns
ELR needs, run only on a log that turns the feature on or clears an ELR.

- ``level_at``: the feature's level at each row, from the driver's timeline of it
  (``ControlPlane.elr_levels``): K1, K13, K14 and K15 judge a state by the feature in force at the
  record that made it.
- ``with_clears``: the partition records and a row per partition each ClearElr changes
  (``clears``: at_, topic; null = every topic): Kafka's replay merges a change that empties the
  ELR and the LastKnownElr of every partition of the topic that has either, so its partition
  epoch goes up by one (``reducer._clear_elr``). The timeline is built over it.
- ``k1_exempt``: K1's exception, an empty ISR without a leader with the feature on.
- ``states``: per state of a partition that ever has an ELR (or elects a leader outside its
  ISR), the ELR before and after, the leader recovery state, K13's kind and K14's answer.
- ``k15_states``: ELR members on offline directories (``bad``) at each point where that can
  change, as ``plan.sql.k4_k5_states`` does for the ISR.

Kinds and fields, not words: the driver words them with the catalogue's ``say`` (``plan.run``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlake.records.kraft import LRS_RECOVERING
from kraftlake.statemachine.sql_dialect import Dialect

from .sql import change_points

ROWS = (
    "off",
    "record_key",
    "is_record",
    "topic_id",
    "partition_id",
    "set_replicas",
    "set_isr",
    "set_leader",
    "set_removing",
    "set_adding",
    "set_lrs",
    "set_elr",
    "set_lkelr",
    "assign_brokers",
    "assign_dirs",
    "sets_leader",
    "base_le",
    "base_pe",
    "removed",
    "pk",
)
"""The columns of ``plan.sql.partition_rows``, in its order."""

_BEFORE = "(PARTITION BY pk ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
_UPTO = "(PARTITION BY pk ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"


def level_at(changes: Sequence[tuple[int, object]], base: object, column: str = "off") -> str:
    """A level in force before each row (after the last change at an offset below ``column``),
    from the driver's (offset, level after it) changes; booleans as SQL's TRUE and FALSE."""

    def lit(v: object) -> str:
        return ("TRUE" if v else "FALSE") if isinstance(v, bool) else str(v)

    if not changes:
        return lit(base)
    whens = " ".join(f"WHEN {column} > {o} THEN {lit(v)}" for o, v in reversed(changes))
    return f"CASE {whens} ELSE {lit(base)} END"


def k1_exempt(levels: list[tuple[int, bool]]) -> str:
    """A condition on a timeline row: K1's empty ISR is KIP-966's leaderless state (no leader,
    the feature on at the row), not a fault."""
    return f"(k1 = 'empty_isr' AND leader = -1 AND {level_at(levels, False)})"


def with_clears(d: Dialect) -> str:
    """``partition_records`` (``plan.sql.partition_rows``) and, after each ClearElr, a row of
    every partition it changes: nothing set but the two ELR fields, emptied (a change: the
    timeline counts a partition epoch). Whether a partition has an ELR or a LastKnownElr at the
    ClearElr is read from every record before it, a refused one's included: refusals are rare
    and their ELR fields are Kafka's as written (a known approximation of the reducer)."""
    ints = d.empty("INT")
    clear = {
        "is_record": "FALSE",
        "set_elr": ints,
        "set_lkelr": ints,
        "sets_leader": "0",
    }
    kept = ("off", "pk", "removed", "topic_id", "partition_id")
    clear_cols = ", ".join(f"{clear[c]} AS {c}" if c in clear else c if c in kept else f"NULL AS {c}" for c in ROWS)
    return f"""
    WITH parts AS (
      SELECT pk, min(off) AS born, max(removed) AS removed, min(topic_id) AS topic_id,
        min(partition_id) AS partition_id
      FROM partition_records WHERE pk <> -1 GROUP BY pk
    ),
    c AS (
      SELECT p.pk, k.at_ AS off, p.removed, p.topic_id, p.partition_id
      FROM clears k
        JOIN lives l ON (k.topic IS NULL OR k.topic = l.life_topic) AND k.at_ > l.life
          AND (l.removed IS NULL OR k.at_ < l.removed)
        JOIN parts p ON {d.idiv("p.pk", 4294967296)} = l.life_index AND p.born < k.at_
    ),
    u AS (
      SELECT pk, off, FALSE AS is_clear, set_elr, set_lkelr, NULL AS removed, NULL AS topic_id,
        NULL AS partition_id
      FROM partition_records WHERE pk IN (SELECT pk FROM c)
      UNION ALL SELECT pk, off, TRUE AS is_clear, {ints} AS set_elr, {ints} AS set_lkelr, removed, topic_id,
        partition_id
      FROM c
    ),
    f AS (
      SELECT *, {d.last("set_elr")} OVER {_BEFORE} AS elr, {d.last("set_lkelr")} OVER {_BEFORE} AS lkelr
      FROM u
    )
    SELECT {", ".join(ROWS)} FROM partition_records
    UNION ALL SELECT {clear_cols} FROM f
      WHERE is_clear AND ({d.size("elr")} > 0 OR {d.size("lkelr")} > 0)
    """


def states(d: Dialect, levels: list[tuple[int, bool]], mv_levels: list[tuple[int, int]], mv_base: int, mv_3_2: int):
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
        {d.last("set_elr")} OVER {_UPTO} AS elr,
        {d.last("set_elr")} OVER {_BEFORE} AS old_elr,
        {d.last("set_lrs")} OVER {_UPTO} AS lrs,
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


def elections_count(levels: list[tuple[int, bool]]) -> str:
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
