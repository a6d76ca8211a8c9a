"""Audits on Spark as DataFrame code: no Python in the hot path.

Partition state is forward-filled per partition in offset order (a PartitionRecord sets every
field; a PartitionChange's null or -2 leaves one unchanged), each invariant becomes a boolean
and a message per row, and runs of wrong rows become intervals (gaps and islands), in the same
shape as ``kraftlake audit``'s violations: first offset, last offset (null = still open),
message of the first wrong row, evidence = the record that broke it and the one that fixed it.

So far: K1 (leader in ISR within replicas; ungraced intervals), K3 (epoch rules; instant
violations), and L3/L4 for broker records (a change of an unregistered broker, or with a stale
broker epoch; instant, the record skipped as the local reducer does). The broker/directory invariants (K4-K9) need the broker timeline joined in, and
come next.
"""

from __future__ import annotations

from collections.abc import Iterable

from .replay import BROKER_TYPES

KEY = "key"
_PARTITION_TYPES = ("Partition", "PartitionChange")


def partition_timeline(df):
    """One row per Partition/PartitionChange record: the partition's state after it (replicas,
    ISR, leader, both epochs), and the state before it (``old_*``; null for a new partition)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = df.where(F.col("type").isin(*_PARTITION_TYPES)).select(
        "offset",
        KEY,
        "type",
        F.when(F.col("type") == "Partition", F.col("offset")).alias("reset"),
        F.col("partition.leader_epoch").alias("base_leader_epoch"),
        F.col("partition.partition_epoch").alias("base_partition_epoch"),
        (F.col("partition_change.leader") != -2).cast("int").alias("sets_leader"),
        F.col("partition_change.replicas").isNotNull().alias("sets_replicas"),
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
    t = rows.select(
        "offset", KEY, "type", "topic_id", "partition_id", "sets_leader", "sets_replicas",
        F.last("isr_set", ignorenulls=True).over(w).alias("isr"),
        F.last("replicas_set", ignorenulls=True).over(w).alias("replicas"),
        F.last("leader_set", ignorenulls=True).over(w).alias("leader"),
        F.last("reset", ignorenulls=True).over(w).alias("segment"),
    ).where(F.col("replicas").isNotNull())  # fmt: skip  (a change before its partition: L3, skipped)
    # Epochs: a PartitionRecord's, then +1 per change (partition) and per change that sets the
    # leader (leader epoch), R-EPOCH-1/2, counted within the run since that record.
    base = rows.where(F.col("type") == "Partition").select(
        KEY, F.col("offset").alias("segment"), "base_leader_epoch", "base_partition_epoch")
    ws = Window.partitionBy(KEY, "segment").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    t = t.join(base, [KEY, "segment"]).select(
        "*",
        (F.col("base_leader_epoch") + F.sum(F.coalesce("sets_leader", F.lit(0))).over(ws)).alias("leader_epoch"),
        (F.col("base_partition_epoch") + F.count(F.when(F.col("type") == "PartitionChange", 1)).over(ws)).alias("partition_epoch"),
    )  # fmt: skip
    wp = Window.partitionBy(KEY).orderBy("offset")
    return t.select(
        "*",
        *[F.lag(c).over(wp).alias(f"old_{c}") for c in ("isr", "replicas", "leader", "leader_epoch", "partition_epoch")],
    )


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


def k1_violations(df, timeline=None):
    """K1 intervals of a log DataFrame (``read_log``); ``timeline`` is its
    ``partition_timeline`` when the caller already has it."""
    from pyspark.sql import functions as F

    t = partition_timeline(df) if timeline is None else timeline
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


def _metadata_version(df):
    """A column expression: the metadata.version in force before each row (from the few
    FeatureLevel records, folded into a CASE on the offset)."""
    from pyspark.sql import functions as F

    from kraftlake.statemachine.kraft.features import METADATA_VERSION, MV_3_0_IV1

    levels = (df.where((F.col("type") == "FeatureLevel") & (F.col("feature_level.name") == METADATA_VERSION))
              .select("offset", F.col("feature_level.feature_level").alias("level")).orderBy("offset").collect())  # fmt: skip
    expr = F.lit(MV_3_0_IV1)
    for r in levels:
        expr = F.when(F.col("offset") > r["offset"], F.lit(r["level"])).otherwise(expr)
    return expr


def k3_violations(df, timeline=None):
    """K3, instant violations: a change that removes a replica (or, before 3.6-IV0, shrinks the
    ISR) without a leader-epoch bump; a PartitionRecord rewriting a partition whose epochs do
    not move (worded as ``change_bumps_leader_epoch`` / ``replacement_bumps_epochs``)."""
    from pyspark.sql import functions as F

    from kraftlake.statemachine.kraft.features import MV_3_6_IV0

    t = partition_timeline(df) if timeline is None else timeline
    t = t.where(F.col("old_replicas").isNotNull()).withColumn("mv", _metadata_version(df))
    lost = F.filter("old_replicas", lambda b: ~F.array_contains(F.col("replicas"), b))
    shrunk = F.filter("old_isr", lambda b: ~F.array_contains(F.col("isr"), b))
    change = F.col("type") == "PartitionChange"
    same_le = F.col("leader_epoch") == F.col("old_leader_epoch")
    message = (
        F.when(change & same_le & (F.size(lost) > 0),
               F.concat(F.lit("replicas "), _list(lost), F.lit(" left without a leader-epoch bump")))
        .when(change & same_le & (F.col("mv") < MV_3_6_IV0) & (F.size(shrunk) > 0),
              F.concat(F.lit("ISR lost "), _list(shrunk), F.lit(" without a leader-epoch bump (metadata.version < 3.6-IV0)")))
        .when(~change & (F.col("partition_epoch") <= F.col("old_partition_epoch")),
              F.concat(F.lit("partition epoch "), F.col("partition_epoch").cast("string"), F.lit(" does not move past "),
                       F.col("old_partition_epoch").cast("string")))
        .when(~change & (F.col("leader") != F.col("old_leader")) & (F.col("leader_epoch") <= F.col("old_leader_epoch")),
              F.concat(F.lit("leader "), F.col("old_leader").cast("string"), F.lit(" -> "), F.col("leader").cast("string"),
                       F.lit(" keeps leader epoch "), F.col("leader_epoch").cast("string")))
    )  # fmt: skip
    return t.select(
        F.lit("K3").alias("invariant"), F.lit("error").alias("severity"),
        F.concat(F.lit("partition/"), "topic_id", F.lit("/"), F.col("partition_id").cast("string")).alias("entity"),
        F.col("offset").alias("first_offset"), F.col("offset").alias("last_offset"), message.alias("message"),
        F.array("offset").alias("evidence"),
    ).where(F.col("message").isNotNull())  # fmt: skip


def broker_record_violations(df):
    """L3 and L4 of broker records (Kafka's replay checks, R-REPLAY-BROKER and -BROKER-EPOCH):
    each change, fence, unfence or unregistration is held against the registration in force,
    the last RegisterBroker before it unless a valid UnregisterBroker came in between."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = df.where(F.col("type").isin(*BROKER_TYPES)).select(
        "offset", "type", KEY,
        F.coalesce("register_broker.broker_id", "unregister_broker.broker_id", "broker_registration_change.broker_id",
                   "fence_broker.id", "unfence_broker.id").alias("broker"),
        F.coalesce("register_broker.broker_epoch", "unregister_broker.broker_epoch", "broker_registration_change.broker_epoch",
                   "fence_broker.epoch", "unfence_broker.epoch").alias("epoch"),
    )  # fmt: skip
    run = Window.partitionBy("broker").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    register = F.col("type") == "RegisterBroker"
    rows = rows.select(
        "*",
        F.last(F.when(register, F.col("offset")), ignorenulls=True).over(run).alias("seg"),
        F.last(F.when(register, F.col("epoch")), ignorenulls=True).over(run).alias("reg_epoch"),
    )
    candidate = (F.col("type") == "UnregisterBroker") & (F.col("epoch") == F.col("reg_epoch"))
    rows = rows.withColumn("unregistered_at", F.min(F.when(candidate, F.col("offset"))).over(Window.partitionBy("broker", "seg")))
    not_registered = F.col("seg").isNull() | (F.col("unregistered_at") < F.col("offset"))
    stale = F.col("epoch") != F.col("reg_epoch")
    b = F.col("broker").cast("string")
    return rows.where(~register & (not_registered | stale)).select(
        F.when(not_registered, F.lit("L3")).otherwise(F.lit("L4")).alias("invariant"),
        F.lit("error").alias("severity"), F.col(KEY).alias("entity"),
        F.col("offset").alias("first_offset"), F.col("offset").alias("last_offset"),
        F.when(not_registered, F.concat(F.lit("R-REPLAY-BROKER: broker "), b, F.lit(" is not registered (record skipped)")))
        .otherwise(F.concat(F.lit("R-REPLAY-BROKER-EPOCH: broker "), b, F.lit(" is registered with epoch "),
                            F.col("reg_epoch").cast("string"), F.lit(", the record has epoch "), F.col("epoch").cast("string"),
                            F.lit(" (record skipped)"))).alias("message"),
        F.array("offset").alias("evidence"),
    )  # fmt: skip


def violations(df, invariants: Iterable[str] = ("K1", "K3", "L3", "L4")) -> list[dict]:
    """The violations of ``invariants`` as dicts in ``kraftlake audit``'s JSON shape, sorted by
    (first_offset, invariant, entity). L3 covers broker records only so far."""
    wanted = set(invariants)
    timeline = None
    if wanted & {"K1", "K3"}:
        # Computed once (one scan, one sort by partition) for every partition invariant.
        timeline = partition_timeline(df).persist()
    builders = {
        "K1": lambda d: k1_violations(d, timeline),
        "K3": lambda d: k3_violations(d, timeline),
        "L3": broker_record_violations,
        "L4": broker_record_violations,
    }
    out = []
    for build in dict.fromkeys(builders[i] for i in invariants):  # L3 and L4 come from one query
        for r in build(df).collect():
            d = r.asDict()
            if d["invariant"] in wanted:
                d["evidence"] = list(d["evidence"])
                out.append(d)
    if timeline is not None:
        timeline.unpersist()
    out.sort(key=lambda v: (v["first_offset"], v["invariant"], v["entity"]))
    return out
