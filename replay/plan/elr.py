"""Eligible leader replicas (KIP-966) in the plan: the partition states a ClearElr makes, run only
on a log that clears an ELR.

- ``with_clears``: the partition records and a row per partition each ClearElr changes
  (``clears``: at_, topic; null = every topic): Kafka's replay merges a change that empties the
  ELR and the LastKnownElr of every partition of the topic that has either, so its partition
  epoch goes up by one (``reducer._clear_elr``). The timeline is built over it.

K13, K14 and K15's own statements (the ELR per state, K15's offline members) and K1's exception
(an empty ISR without a leader with the feature on) are the invariants'
(``statemachine.kraft.invariants_sql``).
"""

from __future__ import annotations

from kraftlake.statemachine.kraft.invariants_sql import BEFORE
from kraftlake.statemachine.sql_dialect import Dialect

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
      SELECT *, {d.last("set_elr")} OVER {BEFORE} AS elr, {d.last("set_lkelr")} OVER {BEFORE} AS lkelr
      FROM u
    )
    SELECT {", ".join(ROWS)} FROM partition_records
    UNION ALL SELECT {clear_cols} FROM f
      WHERE is_clear AND ({d.size("elr")} > 0 OR {d.size("lkelr")} > 0)
    """
