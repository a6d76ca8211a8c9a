"""The plan on Spark: the same SQL through ``spark.sql``, on a local session, a cluster
(``spark://``, YARN, Kubernetes) or a Spark Connect server. Tables the plan reads more than once
(the judged partition records, the timeline, the members' bad overlaps) are kept by
``spark.scratch`` (Parquet in a directory every executor sees, or Spark's cache)."""

from __future__ import annotations

from kraftlake.logging import get_logger

from ..scratch import Scratch
from .dialect import SPARK

log = get_logger(__name__)


class SparkEngine:
    """A Spark session that runs the plan: ``log`` is a temporary view of the log's rows."""

    dialect = SPARK
    name = "spark"

    def __init__(self, spark, *, scratch: str | None = None):
        self.spark = spark
        self._scratch = Scratch(spark, scratch)

    def read(self, df) -> None:
        """The log's rows (``spark.read_log``, already cut)."""
        df.createOrReplaceTempView("log")

    def table(self, name: str, rows: list[tuple], columns: list[tuple[str, str]]) -> None:
        schema = ", ".join(f"{c} {SPARK.dir_type if t == 'DIR' else t}" for c, t in columns)
        self.spark.createDataFrame(rows, schema).createOrReplaceTempView(name)

    def directories(self, sql: str) -> None:
        """Directory ids stay strings on Spark (``dialect``): no dictionary to build."""

    def view(self, name: str, sql: str) -> None:
        self.spark.sql(sql).createOrReplaceTempView(name)

    def keep(self, name: str, sql: str) -> None:
        self._scratch.keep(self.spark.sql(sql), name).createOrReplaceTempView(name)

    def rows(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def iter_rows(self, sql: str):
        """``rows``, collected at once (``toLocalIterator`` would run a job per partition of the
        result: hundreds after a shuffle)."""
        return iter(self.rows(sql))

    def arrow(self, sql: str):
        return self.spark.sql(sql).toArrow()

    def close(self) -> None:
        self._scratch.close()

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
