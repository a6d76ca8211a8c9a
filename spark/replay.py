"""The local reducers, run per entity on Spark: each partition's records replayed by the same
``from_record``/``merge`` as ``kraftlake view``, each broker's by the same ``apply``, grouped by
entity key (``applyInArrow``), giving per-entity state hashes equal to the local engine's.

What crosses entities is small and goes to every task with the function: the offset ranges of
aborted metadata transactions (and of one still open at the cut, which Kafka does not publish),
and the offsets where topics were removed. Records read are the ``record`` column (msgpack of the
whole record), decoded with kraftlake's own decoder.
"""

from __future__ import annotations

import bisect

from kraftlake.logging import get_logger
from kraftlake.replay.transactions import unpublished_ranges as transaction_ranges

log = get_logger(__name__)

PARTITION_SCHEMA = (
    "topic_id string, partition_id int, last_offset long, state_hash string, leader int,"
    " leader_epoch int, partition_epoch int, isr array<int>, replicas array<int>, directories array<string>"
)
BROKER_SCHEMA = "broker_id int, last_offset long, state_hash string, epoch long, fenced boolean, in_controlled_shutdown boolean, log_dirs array<string>"
_TXN_TYPES = ("BeginTransaction", "EndTransaction", "AbortTransaction")
BROKER_TYPES = ("RegisterBroker", "UnregisterBroker", "BrokerRegistrationChange", "FenceBroker", "UnfenceBroker")


def unpublished_ranges(spark_df, hi: int) -> list[tuple[int, int]]:
    """[first, last] offset ranges whose records Kafka never publishes: aborted transactions,
    and a transaction still open at ``hi`` (``replay.transactions``)."""
    from pyspark.sql import functions as F

    rows = (
        spark_df.where(F.col("type").isin(*_TXN_TYPES) & (F.col("offset") <= hi))
        .select("offset", "type")
        .orderBy("offset")
        .collect()
    )
    return transaction_ranges(((r["offset"], r["type"]) for r in rows), hi)


def keep_offsets(ranges: list[tuple[int, int]]):
    """A condition: the row's offset is in none of ``ranges`` ([first, last] each)."""
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for lo, hi in ranges:
        cond = cond & ~F.col("offset").between(lo, hi)
    return cond


def _cut(spark_df, at_offset: int | None) -> int:
    from pyspark.sql import functions as F

    last = spark_df.agg(F.max("offset")).first()[0]
    last = -1 if last is None else last
    return last if at_offset is None else min(at_offset, last)


def partition_states(spark_df, *, at_offset: int | None = None):
    """Every partition's state after ``at_offset`` (default: the end), one row per partition,
    from a DataFrame of log rows (``read_log``)."""
    from pyspark.sql import functions as F

    hi = _cut(spark_df, at_offset)
    ranges = unpublished_ranges(spark_df, hi)
    removed: dict[str, list[int]] = {}
    for r in (
        spark_df.where((F.col("type") == "RemoveTopic") & (F.col("offset") <= hi) & keep_offsets(ranges))
        .select("offset", F.col("remove_topic.topic_id").alias("t"))
        .collect()
    ):
        removed.setdefault(r["t"], []).append(r["offset"])
    for offsets in removed.values():
        offsets.sort()
    rows = spark_df.where(
        F.col("type").isin("Partition", "PartitionChange") & (F.col("offset") <= hi) & keep_offsets(ranges)
    )
    return (
        rows.select("key", "offset", "record")
        .groupBy("key")
        .applyInArrow(_replay_partition(removed, hi), PARTITION_SCHEMA)
    )


def _replay_partition(removed: dict[str, list[int]], hi: int):
    def replay(table):
        import msgspec
        import pyarrow as pa

        from kraftlake.records.base import trusted
        from kraftlake.records.catalog import AnyRecord
        from kraftlake.records.kraft import Partition
        from kraftlake.statemachine.kraft.partitions import from_record, merge
        from kraftlake.statemachine.kraft.view import partition_hash

        table = table.sort_by("offset")
        decoder = msgspec.msgpack.Decoder(AnyRecord)
        with trusted():
            records = [decoder.decode(b) for b in table.column("record").to_pylist()]
        state, last = None, None
        gone = removed.get(records[0].topic_id, []) if records else []
        for r in records:
            if state is not None and _removed_between(gone, last, r.offset):
                state = None
            if type(r) is Partition:
                state = from_record(r)
            elif state is not None:
                try:
                    state = merge(state, r)
                except ValueError:
                    continue  # the local reducer refuses it too (R-REPLAY-DIRECTORIES)
            else:
                continue  # R-REPLAY-PARTITION: a change of a partition that does not exist
            last = r.offset
        if state is not None and _removed_between(gone, last, hi + 1):
            state = None
        if state is None:
            return pa.table({}, schema=_arrow_schema())
        return pa.table(
            {
                "topic_id": [state.topic_id],
                "partition_id": [state.partition_id],
                "last_offset": [last],
                "state_hash": [partition_hash(state)],
                "leader": [state.leader],
                "leader_epoch": [state.leader_epoch],
                "partition_epoch": [state.partition_epoch],
                "isr": [list(state.isr)],
                "replicas": [list(state.replicas)],
                "directories": [list(state.directories)],
            },
            schema=_arrow_schema(),
        )

    return replay


def _removed_between(offsets: list[int], after: int | None, before: int) -> bool:
    """Whether the topic was removed at an offset in (after, before)."""
    i = bisect.bisect_right(offsets, -1 if after is None else after)
    return i < len(offsets) and offsets[i] < before


def _arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("topic_id", pa.string()),
            ("partition_id", pa.int32()),
            ("last_offset", pa.int64()),
            ("state_hash", pa.string()),
            ("leader", pa.int32()),
            ("leader_epoch", pa.int32()),
            ("partition_epoch", pa.int32()),
            ("isr", pa.list_(pa.int32())),
            ("replicas", pa.list_(pa.int32())),
            ("directories", pa.list_(pa.string())),
        ]
    )


def broker_states(spark_df, *, at_offset: int | None = None):
    """Every registered broker's state after ``at_offset``, one row per broker, replayed per
    broker by the local reducer."""
    from pyspark.sql import functions as F

    hi = _cut(spark_df, at_offset)
    ranges = unpublished_ranges(spark_df, hi)
    rows = spark_df.where(F.col("type").isin(*BROKER_TYPES) & (F.col("offset") <= hi) & keep_offsets(ranges))
    return rows.select("key", "offset", "record").groupBy("key").applyInArrow(_replay_broker, BROKER_SCHEMA)


def _replay_broker(table):
    import msgspec
    import pyarrow as pa

    from kraftlake.records.base import trusted
    from kraftlake.records.catalog import AnyRecord
    from kraftlake.records.errors import ReplayError
    from kraftlake.statemachine.kraft.reducer import apply
    from kraftlake.statemachine.kraft.view import ControllerView, broker_hash

    schema = pa.schema(
        [
            ("broker_id", pa.int32()),
            ("last_offset", pa.int64()),
            ("state_hash", pa.string()),
            ("epoch", pa.int64()),
            ("fenced", pa.bool_()),
            ("in_controlled_shutdown", pa.bool_()),
            ("log_dirs", pa.list_(pa.string())),
        ]
    )
    table = table.sort_by("offset")
    decoder = msgspec.msgpack.Decoder(AnyRecord)
    view = ControllerView()
    last = None
    with trusted():
        for blob in table.column("record").to_pylist():
            r = decoder.decode(blob)
            try:
                apply(view, r)
                last = r.offset
            except ReplayError:
                view.offset = r.offset  # skipped, as the local audit does
    if not view.brokers:
        return pa.table({}, schema=schema)
    (b,) = view.brokers.values()
    return pa.table(
        {
            "broker_id": [b.id],
            "last_offset": [last],
            "state_hash": [broker_hash(b)],
            "epoch": [b.epoch],
            "fenced": [b.fenced],
            "in_controlled_shutdown": [b.in_controlled_shutdown],
            "log_dirs": [list(b.log_dirs)],
        },
        schema=schema,
    )


def state_at(spark, path, offset: int | None = None):
    """``(partitions, brokers)`` DataFrames of the controller's published state after ``offset``
    (default: the end): what ``kraftlake view --offset`` prints, one row per entity."""
    from .read import read_log

    df = read_log(spark, path, to_offset=offset).select("offset", "type", "key", "record", "remove_topic")
    df = df.cache()
    return partition_states(df, at_offset=offset), broker_states(df, at_offset=offset)
