"""Every partition's state after each of its records, as DataFrame code: Kafka's replay of
PartitionRecord and PartitionChangeRecord (``statemachine.kraft.partitions.merge``) written as
forward fills over a window per partition, ordered by offset.

A PartitionRecord sets every field; a PartitionChange's null (or leader -2, LRS -1) leaves one
unchanged. Epochs are running counts since the last PartitionRecord (the rules of
``PartitionRegistration.merge``). Directories
follow the explicit ``assignment`` of the last record that had one; a change that sets replicas
without one keeps each staying replica's directory and gives new replicas UNASSIGNED
(``directories_from``): that case is a fold per replica, run only for the partitions that need
it. Records the local reducer refuses (a partition of a topic that does not exist, a change of a
partition that does not, directories that do not fit the replicas) are left out of the state and
returned as instant violations, worded as the local audit words them.
"""

from __future__ import annotations

import functools
import operator

from kraftlake.records.kraft import MIGRATING, UNASSIGNED
from kraftlake.statemachine.invariants import REPLAY_RULE_TO_INVARIANT

from .words import say, severity

KEY = "key"
PK = "pk"
"""A number for each partition's lifetime, the one partition spec of every window here: its
topic's lifetime (an index into ``topic_lives``) in the high 32 bits, the partition id in the
low ones; -1 for records of a topic that does not exist (refused whatever their window says).
Spark sorts by a prefix of the first sort column: keys (``partition/<topic id>/...``) share
their first 40 bytes, and a sort by key compared whole strings (a measurable share of the
timeline's CPU, bench/RESULTS.md)."""
PARTITION_TYPES = ("Partition", "PartitionChange")


def topic_lives(spark, lives: list[tuple[str, int, int | None]]):
    """A small DataFrame of topic lifetimes: (index in ``lives``, topic id, created at, removed
    at or null)."""
    return spark.createDataFrame(
        [(i, *life) for i, life in enumerate(lives)], "life_index long, life_topic string, life long, removed long"
    )


def partition_key(life_index, partition_id):
    """``PK`` of a partition of the topic lifetime ``life_index`` (-1 when null: no lifetime)."""
    from pyspark.sql import functions as F

    return F.coalesce(
        F.shiftleft(life_index, 32).bitwiseOR(partition_id.cast("long").bitwiseAND(0xFFFFFFFF)), F.lit(-1)
    )


def _refusal(rule: str, reason):
    """A record the reducer refuses (``rule``, ``reason`` a string column): the invariant the
    rule maps to, its severity and the catalogue's words, as one struct column."""
    from pyspark.sql import functions as F

    inv = REPLAY_RULE_TO_INVARIANT[rule]
    return F.struct(
        F.lit(inv).alias("invariant"),
        severity(inv).alias("severity"),
        say(inv, "refused", rule=rule, message=reason).alias("message"),
    )


OTHER_FIELDS = (
    ("set_removing", "removing_replicas"),
    ("set_adding", "adding_replicas"),
    ("set_lrs", "leader_recovery_state"),
    ("set_elr", "eligible_leader_replicas"),
    ("set_lkelr", "last_known_elr"),
)
"""The registration's fields no invariant reads: (the record's value, null = unchanged; the
registration's field). The timeline carries each record's own values; only the partitions' final
states need the fields themselves (the final state's hash), folded once by ``final_fields``."""


def final_fields(timeline):
    """(``PK``, the registration's other fields): each partition's other fields after its last
    record, from the values its records set (``OTHER_FIELDS``). One aggregate over the few rows
    that set any, not five window functions copying arrays into every state: a simpler window,
    and a little less CPU for the fill, near the machine's noise (bench/RESULTS.md)."""
    from pyspark.sql import functions as F

    sets = [F.col(s).isNotNull() for s, _ in OTHER_FIELDS]
    rows = timeline.where(functools.reduce(operator.or_, sets))
    return rows.groupBy(PK).agg(
        *[F.max_by(s, F.when(F.col(s).isNotNull(), F.col("offset"))).alias(c) for s, c in OTHER_FIELDS]
    )


def partition_timeline(df, lives, keep, scratch):
    """``(timeline, refused)`` for a log DataFrame (``read_log``) and its topic lifetimes.

    ``timeline``: one row per applied partition record, with the columns ``keep(states)``
    makes of the states (``_one_pass``'s columns; the audit's ``keep`` is
    ``spark.audit.state_facts``): offset, ``PK``, ``end`` (the offset where this state stops: the partition's next record,
    the topic's removal, or null), the state (leader, isr, replicas, dirs, epochs) and the state
    before (``old_*``, null for a new partition). What ``keep`` makes is what ``scratch``
    (``spark.scratch.Scratch``) keeps: the fewer arrays, the cheaper. ``refused``: violations
    (invariant, severity, entity, first_offset, last_offset, message, evidence) of the records
    left out.

    Every partition goes through one pass of two window operators (``_one_pass``); the few
    whose history needs more (a refused change in the middle, a change of replicas without
    directories, a change before the partition) are recomputed step by step (``_careful``).
    """
    from pyspark.sql import functions as F

    rows = _rows(df, lives)
    states = _one_pass(rows)
    fast = scratch.keep(states.select(*keep(states), KEY, "refusal", "slow"), "timeline")
    slow = [r[0] for r in fast.where("slow").select(PK).distinct().collect()]
    refused_topic = fast.where(F.col(PK) == -1).select(*_refused_columns())
    timeline = fast.where((F.col(PK) != -1) & ~F.col("slow")).drop(KEY, "refusal", "slow")
    if not slow:
        return timeline, refused_topic
    keys = rows.sparkSession.createDataFrame([(k,) for k in slow], f"{PK} long")
    careful, refused = _careful(rows.join(F.broadcast(keys), PK, "left_semi"))
    careful = scratch.keep(
        careful.select(*keep(careful)), "careful"
    )  # the few slow partitions, not the whole timeline again
    timeline = timeline.join(F.broadcast(keys), PK, "left_anti")
    return timeline.unionByName(careful), refused_topic.unionByName(refused)


def _refused_columns():
    from pyspark.sql import functions as F

    return (
        F.col("refusal.invariant").alias("invariant"),
        F.col("refusal.severity").alias("severity"),
        F.col(KEY).alias("entity"),
        F.col("offset").alias("first_offset"),
        F.col("offset").alias("last_offset"),
        F.col("refusal.message").alias("message"),
        F.array("offset").alias("evidence"),
    )


def _rows(df, lives):
    """The partition records' own fields (``set_*``: null = unchanged) and their topic's
    lifetime (``life``: its creation offset; -1 when the topic does not exist)."""
    from pyspark.sql import functions as F

    p, c = F.col("partition"), F.col("partition_change")
    is_record = F.col("type") == "Partition"
    assign = F.coalesce(p["assignment"], c["assignment"])
    rows = df.where(F.col("type").isin(*PARTITION_TYPES)).select(
        "offset",
        KEY,
        "type",
        "ts_ms",
        F.coalesce(p["topic_id"], c["topic_id"]).alias("topic_id"),
        F.coalesce(p["partition_id"], c["partition_id"]).alias("partition_id"),
        F.coalesce(p["replicas"], c["replicas"]).alias("set_replicas"),
        F.coalesce(p["isr"], c["isr"]).alias("set_isr"),
        F.coalesce(p["leader"], F.when(c["leader"] != -2, c["leader"])).alias("set_leader"),
        F.coalesce(p["removing_replicas"], c["removing_replicas"]).alias("set_removing"),
        F.coalesce(p["adding_replicas"], c["adding_replicas"]).alias("set_adding"),
        F.coalesce(
            p["leader_recovery_state"], F.when(c["leader_recovery_state"] != -1, c["leader_recovery_state"])
        ).alias("set_lrs"),
        F.when(is_record, F.coalesce(p["eligible_leader_replicas"], F.array().cast("array<int>")))
        .otherwise(c["eligible_leader_replicas"])
        .alias("set_elr"),
        F.when(is_record, F.coalesce(p["last_known_elr"], F.array().cast("array<int>")))
        .otherwise(c["last_known_elr"])
        .alias("set_lkelr"),
        # A field of an array of structs (generated code), not ``transform`` (interpreted, slower).
        F.when(F.size(assign) > 0, assign["broker"]).alias("assign_brokers"),
        F.when(F.size(assign) > 0, assign["directory"]).alias("assign_dirs"),
        (~is_record & (c["leader"] != -2)).cast("int").alias("sets_leader"),
        p["leader_epoch"].alias("base_leader_epoch"),
        p["partition_epoch"].alias("base_partition_epoch"),
    )
    rows = rows.join(
        F.broadcast(lives),
        (rows["topic_id"] == lives["life_topic"])
        & (rows["offset"] > lives["life"])
        & (lives["removed"].isNull() | (rows["offset"] < lives["removed"])),
        "left",
    ).drop("life_topic")
    rows = rows.select("*", partition_key(F.col("life_index"), F.col("partition_id")).alias(PK)).drop("life_index")
    return rows.withColumn("life", F.coalesce("life", F.lit(-1)))


def _dirs_message(assign_brokers, replicas):
    """R-REPLAY-DIRECTORIES' message when an assignment does not fit ``replicas`` (else null)."""
    from pyspark.sql import functions as F

    n_assign, n_replicas = F.size(assign_brokers), F.size(replicas)
    at = F.try_element_at  # 1-based, null when out of range (ANSI mode would raise on [i])
    mismatch = F.filter(
        F.sequence(F.lit(1), F.greatest(n_assign, F.lit(1))), lambda i: at(assign_brokers, i) != at(replicas, i)
    )
    first = at(mismatch, F.lit(1))
    return F.when(
        n_assign != n_replicas,
        say("K2", "assignment_length", entries=n_assign, count=n_replicas, replicas=replicas),
    ).when(
        F.size(mismatch) > 0,
        say("K2", "assignment_order", index=first - 1, broker=at(assign_brokers, first), replica=at(replicas, first)),
    )


def _explicit_dirs():
    """The directories a record names: its assignment's, or a PartitionRecord's MIGRATING."""
    from pyspark.sql import functions as F

    return F.when(F.col("assign_dirs").isNotNull(), F.col("assign_dirs")).when(
        F.col("is_record"), F.array_repeat(F.lit(MIGRATING), F.size("set_replicas"))
    )


def _one_pass(rows):
    """Every partition's states in two window operators (one sort): numbers and arrays, no
    strings but the directories (the partition's name is made from ``PK`` on the driver, for
    violations only: ``partition_of``), and the values each record sets of ``OTHER_FIELDS``. Right for a
    partition whose first record is a PartitionRecord, whose changes of replicas name
    directories, and whose changes the reducer all applies; ``slow`` marks the rows that show a
    partition is not (its whole history is then redone by ``_careful``). Records of a topic that does not exist (``PK`` -1) carry their ``KEY`` and
    ``refusal``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(PK).orderBy("offset")
    upto = w.rowsBetween(Window.unboundedPreceding, 0)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    # What crosses the shuffle: no strings but directories (a record's key and topic only for
    # the records of a topic that does not exist, which are refused).
    missing = F.col(PK) == -1
    rows = rows.select(
        "offset",
        PK,
        "removed",
        "sets_leader",
        "base_leader_epoch",
        "base_partition_epoch",
        "assign_brokers",
        "assign_dirs",
        *[c for c in rows.columns if c.startswith("set_")],
        (F.col("type") == "Partition").alias("is_record"),
        F.when(missing, F.col(KEY)).alias(KEY),
        F.when(missing, _refusal("R-REPLAY-TOPIC", say("L3", "topic_missing", topic=F.col("topic_id")))).alias(
            "refusal"
        ),
    )
    is_record = F.col("is_record")
    change = ~is_record
    explicit = _explicit_dirs()
    t = rows.select(
        "offset",
        PK,
        "removed",
        "sets_leader",
        "base_leader_epoch",
        "base_partition_epoch",
        "set_replicas",
        "assign_brokers",
        "assign_dirs",
        "is_record",
        KEY,
        "refusal",
        *[s for s, _ in OTHER_FIELDS],
        F.last(F.when(is_record, F.col("offset")), ignorenulls=True).over(upto).alias("segment"),
        *[F.last(f"set_{c}", ignorenulls=True).over(upto).alias(c) for c in ("replicas", "isr", "leader")],
        *[F.last(f"set_{c}", ignorenulls=True).over(before).alias(f"old_{c}") for c in ("replicas", "isr", "leader")],
        F.last(explicit, ignorenulls=True).over(upto).alias("dirs"),
        F.last(explicit, ignorenulls=True).over(before).alias("old_dirs"),
        F.sum(F.coalesce("sets_leader", F.lit(0))).over(upto).alias("n_leader"),
        F.sum(change.cast("int")).over(upto).alias("n_change"),
        F.lead("offset").over(w).alias("next_offset"),
    )
    # Epochs: a PartitionRecord's, then +1 per change (partition) and per change that sets the
    # leader (leader epoch), as ``PartitionRegistration.merge`` counts: the running count, corrected
    # at each PartitionRecord.
    le_fix = F.when(is_record, F.col("base_leader_epoch") - F.col("n_leader"))
    pe_fix = F.when(is_record, F.col("base_partition_epoch") - F.col("n_change"))
    t = t.select(
        "*",
        (F.last(le_fix, ignorenulls=True).over(upto) + F.col("n_leader")).alias("leader_epoch"),
        (F.last(pe_fix, ignorenulls=True).over(upto) + F.col("n_change")).alias("partition_epoch"),
        (F.last(le_fix, ignorenulls=True).over(before) + F.col("n_leader")).alias("le_before_record"),
        (F.last(pe_fix, ignorenulls=True).over(before) + F.col("n_change")).alias("pe_before_record"),
    )
    # What the reducer would refuse (a change before the partition, or directories that do not fit
    # its replicas: R-REPLAY-PARTITION, R-REPLAY-DIRECTORIES) or must fold replica by replica.
    slow = (F.col(PK) != -1) & (
        F.col("segment").isNull()
        | (change & F.col("set_replicas").isNotNull() & F.col("assign_dirs").isNull())
        | (
            change
            & F.col("set_replicas").isNull()
            & F.col("assign_brokers").isNotNull()
            & ~F.col("assign_brokers").eqNullSafe(F.col("old_replicas"))
        )
    )
    return t.select(
        "offset",
        PK,
        "is_record",
        "removed",
        F.coalesce("next_offset", "removed").alias("end"),
        "sets_leader",
        "replicas",
        "isr",
        "leader",
        "dirs",
        "leader_epoch",
        "partition_epoch",
        "old_replicas",
        "old_isr",
        "old_leader",
        "old_dirs",
        F.when(is_record, F.col("le_before_record"))
        .otherwise(F.col("leader_epoch") - F.col("sets_leader"))
        .alias("old_leader_epoch"),
        F.when(is_record, F.col("pe_before_record"))
        .otherwise(F.col("partition_epoch") - 1)
        .alias("old_partition_epoch"),
        *[s for s, _ in OTHER_FIELDS],
        KEY,
        "refusal",
        slow.alias("slow"),
    )


def _careful(rows):
    """``(timeline, refused)`` step by step: the records the reducer refuses are left out
    before the state is filled, and directories are folded per replica where they must be."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(PK).orderBy("offset")
    upto = w.rowsBetween(Window.unboundedPreceding, 0)
    is_record = F.col("type") == "Partition"
    rows = rows.select(
        "*",
        is_record.alias("is_record"),
        F.last(F.when(is_record, F.col("offset")), ignorenulls=True).over(upto).alias("segment"),
        F.last("set_replicas", ignorenulls=True).over(upto).alias("replicas"),
    )
    why = (
        F.when(F.col("life") == -1, _refusal("R-REPLAY-TOPIC", say("L3", "topic_missing", topic=F.col("topic_id"))))
        .when(
            F.col("segment").isNull(),
            _refusal("R-REPLAY-PARTITION", say("L3", "partition_missing", partition=F.col("partition_id"))),
        )
        .when(
            F.col("set_replicas").isNull() & F.col("assign_brokers").isNotNull(),
            _refusal("R-REPLAY-DIRECTORIES", _dirs_message(F.col("assign_brokers"), F.col("replicas"))),
        )
    )
    rows = rows.withColumn("refusal", why)
    refused = rows.where(F.col("refusal").isNotNull()).select(*_refused_columns())

    kept = rows.where(F.col("refusal").isNull())
    change = ~is_record
    explicit = _explicit_dirs()
    t = kept.select(
        "offset",
        PK,
        "is_record",
        "removed",
        "segment",
        "replicas",
        "set_replicas",
        "sets_leader",
        F.last("set_isr", ignorenulls=True).over(upto).alias("isr"),
        F.last("set_leader", ignorenulls=True).over(upto).alias("leader"),
        *[s for s, _ in OTHER_FIELDS],
        explicit.alias("explicit_dirs"),
        F.last(explicit, ignorenulls=True).over(upto).alias("dirs"),
        F.last(F.when(is_record, F.col("base_leader_epoch")), ignorenulls=True).over(upto).alias("base_le"),
        F.last(F.when(is_record, F.col("base_partition_epoch")), ignorenulls=True).over(upto).alias("base_pe"),
        F.sum(F.coalesce("sets_leader", F.lit(0))).over(upto).alias("n_leader"),
        F.sum(change.cast("int")).over(upto).alias("n_change"),
        F.max((change & F.col("set_replicas").isNotNull() & F.col("assign_dirs").isNull()).cast("int"))
        .over(Window.partitionBy(PK))
        .alias("folds_dirs"),
        F.lead("offset").over(w).alias("next_offset"),
    )
    is_record = F.col("is_record")
    t = t.select(
        "*",
        (
            F.col("base_le")
            + F.col("n_leader")
            - F.last(F.when(is_record, F.col("n_leader")), ignorenulls=True).over(upto)
        ).alias("leader_epoch"),
        (
            F.col("base_pe")
            + F.col("n_change")
            - F.last(F.when(is_record, F.col("n_change")), ignorenulls=True).over(upto)
        ).alias("partition_epoch"),
        F.coalesce("next_offset", "removed").alias("end"),
    )
    t = _with_folded_dirs(t)
    t = t.select(
        "*",
        *[
            F.lag(col).over(w).alias(f"old_{col}")
            for col in ("isr", "replicas", "leader", "leader_epoch", "partition_epoch", "dirs")
        ],
    )
    return t.drop("base_le", "base_pe", "n_leader", "n_change", "next_offset", "explicit_dirs"), refused


def _with_folded_dirs(t):
    """``dirs`` for partitions with a change that sets replicas without directories: per replica,
    the directory of the last record that named it while it stayed a replica; UNASSIGNED when it
    joined by such a change (Kafka's ``createDirectoriesFrom``). Other partitions keep ``dirs``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(PK).orderBy("offset")
    slow = t.where(F.col("folds_dirs") == 1).select(
        PK,
        "offset",
        "replicas",
        "explicit_dirs",
        "set_replicas",
        F.coalesce(F.lag("replicas").over(w), F.array().cast("array<int>")).alias("before"),
    )
    members = slow.select(
        PK, "offset", "explicit_dirs", "set_replicas", "before", F.posexplode("replicas").alias("pos", "broker")
    )
    named = F.when(F.col("explicit_dirs").isNotNull(), F.col("explicit_dirs")[F.col("pos")]).when(
        F.col("set_replicas").isNotNull() & ~F.array_contains("before", F.col("broker")), F.lit(UNASSIGNED)
    )
    wb = Window.partitionBy(PK, "broker").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    members = members.select(PK, "offset", "pos", F.last(named, ignorenulls=True).over(wb).alias("dir"))
    folded = members.groupBy(PK, "offset").agg(
        F.transform(F.array_sort(F.collect_list(F.struct("pos", "dir"))), lambda s: s["dir"]).alias("folded")
    )
    return t.join(folded, [PK, "offset"], "left").withColumn("dirs", F.coalesce("folded", "dirs")).drop("folded")
