"""Every partition's state after each of its records, as DataFrame code: Kafka's replay of
PartitionRecord and PartitionChangeRecord (``statemachine.kraft.partitions.merge``) written as
forward fills over a window per partition, ordered by offset.

A PartitionRecord sets every field; a PartitionChange's null (or leader -2, LRS -1) leaves one
unchanged. Epochs are running counts since the last PartitionRecord (R-EPOCH-1/2). Directories
follow the explicit ``assignment`` of the last record that had one; a change that sets replicas
without one keeps each staying replica's directory and gives new replicas UNASSIGNED
(``directories_from``): that case is a fold per replica, run only for the partitions that need
it. Records the local reducer refuses (a partition of a topic that does not exist, a change of a
partition that does not, directories that do not fit the replicas) are left out of the state and
returned as instant violations, worded as the local audit words them.
"""

from __future__ import annotations

from kraftlake.records.kraft import MIGRATING, UNASSIGNED

KEY = "key"
PARTITION_TYPES = ("Partition", "PartitionChange")


def topic_lives(spark, lives: list[tuple[str, int, int | None]]):
    """A small DataFrame of topic lifetimes: (topic id, created at, removed at or null)."""
    return spark.createDataFrame(lives, "life_topic string, life long, removed long")


def _entity():
    from pyspark.sql import functions as F

    return F.concat(F.lit("partition/"), "topic_id", F.lit("/"), F.col("partition_id").cast("string"))


def _list(col):
    """Python's ``str(list)`` of an int array column: ``[1, 2]``."""
    from pyspark.sql import functions as F

    return F.concat(F.lit("["), F.array_join(col, ", "), F.lit("]"))


def partition_timeline(df, lives):
    """``(timeline, refused)`` for a log DataFrame (``read_log``) and its topic lifetimes.

    ``timeline``: one row per applied partition record: offset, key, topic_id, partition_id,
    type, ts_ms, ``end`` (the offset where this state stops: the partition's next record, the
    topic's removal, or null), the state (leader, isr, replicas, dirs, leader_epoch,
    partition_epoch and the other fields of the registration) and the state before (``old_*``,
    null for a new partition). ``refused``: violations (invariant, severity, entity,
    first_offset, last_offset, message, evidence) of the records left out.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    p, c = F.col("partition"), F.col("partition_change")
    is_record = F.col("type") == "Partition"
    assign = F.coalesce(p["assignment"], c["assignment"])
    rows = df.where(F.col("type").isin(*PARTITION_TYPES)).select(
        "offset", KEY, "type", "ts_ms",
        F.coalesce(p["topic_id"], c["topic_id"]).alias("topic_id"),
        F.coalesce(p["partition_id"], c["partition_id"]).alias("partition_id"),
        F.coalesce(p["replicas"], c["replicas"]).alias("set_replicas"),
        F.coalesce(p["isr"], c["isr"]).alias("set_isr"),
        F.coalesce(p["leader"], F.when(c["leader"] != -2, c["leader"])).alias("set_leader"),
        F.coalesce(p["removing_replicas"], c["removing_replicas"]).alias("set_removing"),
        F.coalesce(p["adding_replicas"], c["adding_replicas"]).alias("set_adding"),
        F.coalesce(p["leader_recovery_state"], F.when(c["leader_recovery_state"] != -1, c["leader_recovery_state"])).alias("set_lrs"),
        F.when(is_record, F.coalesce(p["eligible_leader_replicas"], F.array().cast("array<int>")))
        .otherwise(c["eligible_leader_replicas"]).alias("set_elr"),
        F.when(is_record, F.coalesce(p["last_known_elr"], F.array().cast("array<int>")))
        .otherwise(c["last_known_elr"]).alias("set_lkelr"),
        F.when(F.size(assign) > 0, F.transform(assign, lambda a: a["broker"])).alias("assign_brokers"),
        F.when(F.size(assign) > 0, F.transform(assign, lambda a: a["directory"])).alias("assign_dirs"),
        (~is_record & (c["leader"] != -2)).cast("int").alias("sets_leader"),
        p["leader_epoch"].alias("base_leader_epoch"),
        p["partition_epoch"].alias("base_partition_epoch"),
    )  # fmt: skip
    rows = rows.join(
        F.broadcast(lives),
        (rows["topic_id"] == lives["life_topic"]) & (rows["offset"] > lives["life"])
        & (lives["removed"].isNull() | (rows["offset"] < lives["removed"])),
        "left",
    ).drop("life_topic")  # fmt: skip
    w = Window.partitionBy(KEY, "life").orderBy("offset")
    upto = w.rowsBetween(Window.unboundedPreceding, 0)
    rows = rows.select(
        "*",
        F.last(F.when(is_record, F.col("offset")), ignorenulls=True).over(upto).alias("segment"),
        F.last("set_replicas", ignorenulls=True).over(upto).alias("replicas"),
    )
    # A change's assignment without replicas is held to the replicas in force (R-REPLAY-DIRECTORIES).
    n_assign, n_replicas = F.size("assign_brokers"), F.size("replicas")
    at = F.try_element_at  # 1-based, null when out of range (ANSI mode would raise on [i])
    mismatch = F.filter(F.sequence(F.lit(1), F.greatest(n_assign, F.lit(1))),
                        lambda i: at("assign_brokers", i) != at("replicas", i))  # fmt: skip
    first = at(mismatch, F.lit(1))
    bad_dirs = (
        F.when(n_assign != n_replicas,
               F.concat(F.lit("`assignment` has "), n_assign.cast("string"), F.lit(" entries for "), n_replicas.cast("string"),
                        F.lit(" replicas "), _list(F.col("replicas"))))
        .when(F.size(mismatch) > 0,
              F.concat(F.lit("`assignment` entry "), (first - 1).cast("string"), F.lit(" is broker "),
                       at("assign_brokers", first).cast("string"), F.lit(", replica "), (first - 1).cast("string"),
                       F.lit(" is "), at("replicas", first).cast("string")))
    )  # fmt: skip
    why = (
        F.when(F.col("life").isNull(), F.concat(F.lit("R-REPLAY-TOPIC: topic "), "topic_id", F.lit(" does not exist")))
        .when(F.col("segment").isNull(), F.concat(F.lit("R-REPLAY-PARTITION: partition "), F.col("partition_id").cast("string"),
                                                  F.lit(" does not exist")))
        .when(F.col("set_replicas").isNull() & F.col("assign_brokers").isNotNull(),
              F.concat(F.lit("R-REPLAY-DIRECTORIES: "), bad_dirs))
    )  # fmt: skip
    rows = rows.withColumn("refusal", why)
    refused = rows.where(F.col("refusal").isNotNull()).select(
        F.when(F.col("refusal").startswith("R-REPLAY-DIRECTORIES"), F.lit("K2")).otherwise(F.lit("L3")).alias("invariant"),
        F.lit("error").alias("severity"), F.col(KEY).alias("entity"), F.col("offset").alias("first_offset"),
        F.col("offset").alias("last_offset"), F.concat("refusal", F.lit(" (record skipped)")).alias("message"),
        F.array("offset").alias("evidence"),
    )  # fmt: skip

    kept = rows.where(F.col("refusal").isNull())
    change = ~is_record
    explicit = F.when(F.col("assign_dirs").isNotNull(), F.col("assign_dirs")).when(
        is_record, F.array_repeat(F.lit(MIGRATING), F.size("set_replicas"))
    )
    t = kept.select(
        "offset", KEY, "type", "ts_ms", "topic_id", "partition_id", "life", "removed", "segment", "replicas",
        "set_replicas", "sets_leader",
        F.last("set_isr", ignorenulls=True).over(upto).alias("isr"),
        F.last("set_leader", ignorenulls=True).over(upto).alias("leader"),
        F.last("set_removing", ignorenulls=True).over(upto).alias("removing_replicas"),
        F.last("set_adding", ignorenulls=True).over(upto).alias("adding_replicas"),
        F.last("set_lrs", ignorenulls=True).over(upto).alias("leader_recovery_state"),
        F.last("set_elr", ignorenulls=True).over(upto).alias("eligible_leader_replicas"),
        F.last("set_lkelr", ignorenulls=True).over(upto).alias("last_known_elr"),
        explicit.alias("explicit_dirs"),
        F.last(explicit, ignorenulls=True).over(upto).alias("dirs"),
        F.last(F.when(is_record, F.col("base_leader_epoch")), ignorenulls=True).over(upto).alias("base_le"),
        F.last(F.when(is_record, F.col("base_partition_epoch")), ignorenulls=True).over(upto).alias("base_pe"),
        F.sum(F.coalesce("sets_leader", F.lit(0))).over(upto).alias("n_leader"),
        F.sum(change.cast("int")).over(upto).alias("n_change"),
        F.max((change & F.col("set_replicas").isNotNull() & F.col("assign_dirs").isNull()).cast("int"))
        .over(Window.partitionBy(KEY, "life")).alias("folds_dirs"),
        F.lead("offset").over(w).alias("next_offset"),
    )  # fmt: skip
    t = t.select(
        "*",
        (F.col("base_le") + F.col("n_leader")
         - F.last(F.when(is_record, F.col("n_leader")), ignorenulls=True).over(upto)).alias("leader_epoch"),
        (F.col("base_pe") + F.col("n_change")
         - F.last(F.when(is_record, F.col("n_change")), ignorenulls=True).over(upto)).alias("partition_epoch"),
        F.coalesce("next_offset", "removed").alias("end"),
    )  # fmt: skip
    if _any(t, F.col("folds_dirs") == 1):
        t = _with_folded_dirs(t)
    t = t.select(
        "*", *[F.lag(col).over(w).alias(f"old_{col}") for col in ("isr", "replicas", "leader", "leader_epoch", "partition_epoch", "dirs")]
    )  # fmt: skip
    return t.drop("base_le", "base_pe", "n_leader", "n_change", "next_offset", "explicit_dirs"), refused


def _any(df, cond) -> bool:
    return bool(df.where(cond).limit(1).count())


def _with_folded_dirs(t):
    """``dirs`` for partitions with a change that sets replicas without directories: per replica,
    the directory of the last record that named it while it stayed a replica; UNASSIGNED when it
    joined by such a change (Kafka's ``createDirectoriesFrom``). Other partitions keep ``dirs``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(KEY, "life").orderBy("offset")
    slow = t.where(F.col("folds_dirs") == 1).select(
        KEY, "life", "offset", "replicas", "explicit_dirs", "set_replicas",
        F.coalesce(F.lag("replicas").over(w), F.array().cast("array<int>")).alias("before"),
    )  # fmt: skip
    members = slow.select(KEY, "life", "offset", "explicit_dirs", "set_replicas", "before",
                          F.posexplode("replicas").alias("pos", "broker"))  # fmt: skip
    named = (
        F.when(F.col("explicit_dirs").isNotNull(), F.col("explicit_dirs")[F.col("pos")])
        .when(F.col("set_replicas").isNotNull() & ~F.array_contains("before", F.col("broker")), F.lit(UNASSIGNED))
    )  # fmt: skip
    wb = Window.partitionBy(KEY, "life", "broker").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    members = members.select(KEY, "offset", "pos", F.last(named, ignorenulls=True).over(wb).alias("dir"))
    folded = members.groupBy(KEY, "offset").agg(
        F.transform(F.array_sort(F.collect_list(F.struct("pos", "dir"))), lambda s: s["dir"]).alias("folded")
    )
    return t.join(folded, [KEY, "offset"], "left").withColumn("dirs", F.coalesce("folded", "dirs")).drop("folded")
