"""The plan on Spark: the same SQL through ``spark.sql``, on a local session, a cluster
(``spark://``, YARN, Kubernetes) or a Spark Connect server. Tables the plan reads more than once
(the judged partition records, the timeline, the members' bad overlaps) are kept by
``spark.scratch`` (Parquet in a directory every executor sees, or Spark's cache).

Joins are broadcast only at run time, by adaptive execution, from the sizes of the shuffles it
has run, never from the planner's estimates. Those estimates are the Parquet files' compressed
sizes (the log's, the kept tables'), and they are far smaller than the rows: at 10^7 records
Spark chose to broadcast the log's (offset, ts_ms) in the grace, its AssignReplicasToDirs
requests and the timeline's moved states in K9's runs, and the driver ran out of memory building
the table ("Not enough memory to build and broadcast the table", 5g driver). The tables made
from the driver's rows have no estimate at all and were never broadcast statically either.
"""

from __future__ import annotations

from kraftlake.logging import get_logger
from kraftlake.statemachine.sql_dialect import SPARK

from .scratch import Scratch

log = get_logger(__name__)

STATIC_BROADCAST = "spark.sql.autoBroadcastJoinThreshold"
RUNTIME_BROADCAST = "spark.sql.adaptive.autoBroadcastJoinThreshold"


class SparkEngine:
    """A Spark session that runs the plan: ``log`` is a temporary view of the log's rows."""

    dialect = SPARK
    name = "spark"

    def __init__(self, spark, *, scratch: str | None = None):
        self.spark = spark
        self._scratch = Scratch(spark, scratch)
        self.spill: str | None = None
        """Where the driver's report columns spill (``columns.spill``): the system's temporary
        directory."""
        self._conf = _broadcast_at_run_time(spark)

    def read(self, df) -> None:
        """The log's rows (``spark.read_log``, already cut)."""
        df.createOrReplaceTempView("log")

    def table(self, name: str, rows: list[tuple], columns: list[tuple[str, str]]) -> None:
        schema = ", ".join(f"{c} {SPARK.dir_type if t == 'DIR' else t}" for c, t in columns)
        self.spark.createDataFrame(rows, schema).createOrReplaceTempView(name)

    def arrow_table(self, name: str, table) -> None:
        """A table from the driver's Arrow columns (``table``'s names and types)."""
        self.spark.createDataFrame(table).createOrReplaceTempView(name)

    def directories(self, sql: str) -> None:
        """Directory ids stay strings on Spark (``dialect``): no dictionary to build."""

    def view(self, name: str, sql: str) -> None:
        self.spark.sql(sql).createOrReplaceTempView(name)

    def keep(self, name: str, sql: str, *, sides_as_written: bool = False) -> None:
        """``sql`` computed once, kept (``spark.scratch``). ``sides_as_written`` is DuckDB's
        concern: Spark picks a join's strategy at run time from measured sizes."""
        self._scratch.keep(self.spark.sql(sql), name).createOrReplaceTempView(name)

    def drop(self, *names: str) -> None:
        """Forget kept relations no statement reads any more (their scratch goes with ``close``)."""
        for name in names:
            self.spark.catalog.dropTempView(name)

    def rows(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def iter_rows(self, sql: str, batch: int = 10_000):
        """``rows`` a batch at a time, collected at once as Arrow columns and made tuples a batch
        at a time. ``toLocalIterator`` would run a job per partition of the result (hundreds
        after a shuffle); ``collect`` holds a pyspark ``Row`` per row, and the final states of a
        history's partitions (with their lists) as Rows took the driver to 2 GB at 10^7 records
        (bench/RESULTS.md)."""
        for part in self.arrow(sql).to_batches(batch):
            yield from zip(*(column.to_pylist() for column in part.columns), strict=True)

    def arrow(self, sql: str):
        return self.spark.sql(sql).toArrow()

    def arrow_batches(self, sql: str, rows: int = 100_000):
        """``arrow`` as a reader of batches of at most ``rows``, collected at once (as
        ``iter_rows``)."""
        import pyarrow as pa

        table = self.arrow(sql)
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(rows))

    def close(self) -> None:
        self._scratch.close()
        for key, value in self._conf.items():  # the session as the caller gave it
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)
        self._conf = {}

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _broadcast_at_run_time(spark) -> dict[str, str | None]:
    """Turn the planner's broadcasts off and leave adaptive execution's on, with the threshold
    the session had (Spark's 10 MB by default; an explicit runtime threshold, or a session with
    broadcasts off, is kept as it is). Returns the settings before, for ``close``."""
    conf = spark.conf
    before = {key: conf.get(key, None) for key in (STATIC_BROADCAST, RUNTIME_BROADCAST)}
    if before[RUNTIME_BROADCAST] is None:  # unset: it falls back to the static threshold
        conf.set(RUNTIME_BROADCAST, before[STATIC_BROADCAST] or "10MB")
    conf.set(STATIC_BROADCAST, "-1")
    log.info("spark.broadcast", static="off", runtime=conf.get(RUNTIME_BROADCAST))
    return before
