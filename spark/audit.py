"""Audits on Spark as DataFrame code: no Python in the hot path.

Partition state is forward-filled per partition in offset order (a PartitionRecord sets every
field; a PartitionChange's null or -2 leaves one unchanged), each invariant becomes a boolean
and a message per row, and runs of wrong rows become intervals (gaps and islands), in the same
shape as ``kraftlake audit``'s violations: first offset, last offset (null = still open),
message of the first wrong row, evidence = the record that broke it and the one that fixed it.

So far: K1 (leader in ISR within replicas; ungraced). The broker/directory invariants (K4-K9)
need the broker timeline joined in, and come next.
"""

from __future__ import annotations

from collections.abc import Iterable

KEY = "key"
_PARTITION_TYPES = ("Partition", "PartitionChange")


def partition_timeline(df):
    """One row per Partition/PartitionChange record: the partition's state after it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = df.where(F.col("type").isin(*_PARTITION_TYPES)).select(
        "offset",
        KEY,
        F.coalesce("partition.topic_id", "partition_change.topic_id").alias("topic_id"),
        F.coalesce("partition.partition_id", "partition_change.partition_id").alias("partition_id"),
        F.coalesce("partition.isr", "partition_change.isr").alias("isr_set"),
        F.coalesce("partition.replicas", "partition_change.replicas").alias("replicas_set"),
        F.coalesce(
            F.col("partition.leader"),
            F.when(F.col("partition_change.leader") != -2, F.col("partition_change.leader")),
        ).alias("leader_set"),
    )
    w = Window.partitionBy(KEY).orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    return rows.select(
        "offset", KEY, "topic_id", "partition_id",
        F.last("isr_set", ignorenulls=True).over(w).alias("isr"),
        F.last("replicas_set", ignorenulls=True).over(w).alias("replicas"),
        F.last("leader_set", ignorenulls=True).over(w).alias("leader"),
    ).where(F.col("replicas").isNotNull())  # fmt: skip  (a change before its partition: L3, skipped)


def _list(col):
    """Python's ``str(list)`` of an int array column: ``[1, 2]``."""
    from pyspark.sql import functions as F

    return F.concat(F.lit("["), F.array_join(col, ", "), F.lit("]"))


def k1_message(isr, replicas, leader):
    """K1's message for a state (null when right), worded as ``leader_in_isr_in_replicas``."""
    from pyspark.sql import functions as F

    outside = F.filter(isr, lambda b: ~F.array_contains(replicas, b))
    return (
        F.when(F.size(isr) == 0, F.lit("the ISR is empty"))
        .when(F.size(outside) > 0, F.concat(F.lit("ISR "), _list(isr), F.lit(" lists "), _list(outside),
                                            F.lit(", not replicas "), _list(replicas)))  # fmt: skip
        .when((leader != -1) & ~F.array_contains(isr, leader),
              F.concat(F.lit("leader "), leader.cast("string"), F.lit(" is not in the ISR "), _list(isr)))  # fmt: skip
    )


def intervals(states, *, invariant: str, severity: str, removals=None):
    """Runs of rows with a non-null ``message`` per ``entity``, as violation rows.

    ``states``: offset, entity, message (null = right). ``removals``: entity, offset where the
    entity stopped existing (its open interval closes there)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("entity").orderBy("offset")
    s = states.select(
        "offset", "entity", "message",
        F.lead("offset").over(w).alias("next_offset"),
        (F.col("message").isNotNull()).alias("wrong"),
    )  # fmt: skip
    s = s.withColumn("changed", (F.col("wrong") != F.lag("wrong", 1, False).over(w)).cast("int"))
    s = s.withColumn("island", F.sum("changed").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    runs = s.groupBy("entity", "island").agg(
        F.min(F.struct("offset", "message", "wrong")).alias("first"),
        F.max(F.struct("offset", "next_offset")).alias("last"),
    ).where(F.col("first.wrong"))
    runs = runs.select("entity", F.col("first.offset").alias("first_offset"), F.col("first.message").alias("message"),
                       F.col("last.next_offset").alias("fixed_by"))  # fmt: skip
    if removals is not None:
        gone = removals.select("entity", F.col("offset").alias("removed_at"))
        runs = runs.join(gone, "entity", "left").where(
            F.col("removed_at").isNull() | (F.col("removed_at") > F.col("first_offset"))
        )
        # A removal between the wrong row and the next one closes the interval first.
        runs = runs.groupBy("entity", "first_offset", "message", "fixed_by").agg(F.min("removed_at").alias("removed_at"))
        runs = runs.withColumn(
            "fixed_by",
            F.when(F.col("removed_at").isNotNull() & (F.col("fixed_by").isNull() | (F.col("removed_at") < F.col("fixed_by"))),
                   F.col("removed_at")).otherwise(F.col("fixed_by")),
        )  # fmt: skip
    return runs.select(
        F.lit(invariant).alias("invariant"), F.lit(severity).alias("severity"), "entity", "first_offset",
        (F.col("fixed_by") - 1).alias("last_offset"), "message",
        F.when(F.col("fixed_by").isNull(), F.array("first_offset")).otherwise(F.array("first_offset", "fixed_by")).alias("evidence"),
    )  # fmt: skip


def k1_violations(df):
    """K1 intervals of a log DataFrame (``read_log``)."""
    from pyspark.sql import functions as F

    t = partition_timeline(df)
    states = t.select(
        "offset",
        F.concat(F.lit("partition/"), "topic_id", F.lit("/"), F.col("partition_id").cast("string")).alias("entity"),
        k1_message(F.col("isr"), F.col("replicas"), F.col("leader")).alias("message"),
    )
    removed_topics = df.where(F.col("type") == "RemoveTopic").select("offset", F.col("remove_topic.topic_id").alias("topic_id"))
    removals = (t.select("topic_id", "partition_id").distinct().join(removed_topics, "topic_id")
                .select(F.concat(F.lit("partition/"), "topic_id", F.lit("/"), F.col("partition_id").cast("string")).alias("entity"),
                        "offset"))  # fmt: skip
    return intervals(states, invariant="K1", severity="error", removals=removals)


def violations(df, invariants: Iterable[str] = ("K1",)) -> list[dict]:
    """The violations of ``invariants`` as dicts in ``kraftlake audit``'s JSON shape, sorted by
    (first_offset, invariant, entity)."""
    builders = {"K1": k1_violations}
    out = []
    for inv in invariants:
        for r in builders[inv](df).collect():
            d = r.asDict()
            d["evidence"] = list(d["evidence"])
            out.append(d)
    out.sort(key=lambda v: (v["first_offset"], v["invariant"], v["entity"]))
    return out
