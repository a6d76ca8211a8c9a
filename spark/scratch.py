"""Where the Spark audit keeps the DataFrames it reads more than once (the partition timeline).

Every K invariant reads the timeline (one row per partition record), so it is computed once and
kept. Spark's cache builds compressed column batches in the JVM's memory and spills them past
it: building it was a large part of the forward fill, and on a long history it did not fit.
Parquet files in a scratch directory cost less to write, take no memory, and each reader scans
only its columns and skips row groups by their statistics (K1 reads the few rows with a message).
The measures are in bench/RESULTS.md (bench/spark_audit.py).

The directory must be one every executor sees: a local temporary directory for a local session;
on a cluster, under the SparkContext's checkpoint directory (``sc.setCheckpointDir``) or one the
caller names. Without any, the rows are kept in Spark's block store behind a plan that only
scans them: a persisted DataFrame keeps its whole lineage in every plan that reads it, and the
plans that read the timeline several times (the incidents) then grew past the driver's heap in
the analyzer. The files, and the kept blocks, go when the scratch is closed.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid

from kraftlake.logging import get_logger

log = get_logger(__name__)


class Scratch:
    """Keeps DataFrames for the length of a ``with`` block: ``keep(df)`` computes ``df`` once
    and returns a DataFrame that reads the result."""

    def __init__(self, spark, directory: str | None = None):
        self.spark = spark
        self.root = directory if directory is not None else _default_directory(spark)
        # A temporary directory made here goes with the files; a named one stays.
        self._made: list[str] = [self.root] if directory is None and self.root is not None else []
        self._blocks: list = []  # the JVM's RDDs of kept rows

    def keep(self, df, name: str):
        """``df`` computed now and read back from the scratch directory (or Spark's block store)."""
        if self.root is None:
            return self._in_block_store(df)
        path = f"{self.root.rstrip('/')}/{name}-{uuid.uuid4().hex}"
        df.write.mode("errorifexists").parquet(path)
        self._made.insert(0, path)
        return self.spark.read.parquet(path)

    def _in_block_store(self, df):
        """``df``'s rows kept in the block store, behind a DataFrame whose plan is only a scan of
        them. Not ``localCheckpoint``: its plan carries the original plan's constraints, and
        Spark 4.2's optimizer then failed (``key not found``) on a union of two reads of it."""
        from pyspark.sql import DataFrame

        try:
            context = df.sparkSession.sparkContext
        except Exception:  # Spark Connect: no JVM here; the server drops it with the session
            return df.localCheckpoint(eager=True)
        level = context._jvm.org.apache.spark.storage.StorageLevel.MEMORY_AND_DISK()
        rows = df._jdf.javaRDD().persist(level)
        rows.count()
        self._blocks.append(rows)
        return DataFrame(df.sparkSession._jsparkSession.createDataFrame(rows, df._jdf.schema()), df.sparkSession)

    def close(self) -> None:
        for rows in self._blocks:
            rows.unpersist(True)
        for path in self._made:
            _delete(self.spark, path)
        self._made, self._blocks = [], []

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _default_directory(spark) -> str | None:
    try:
        context = spark.sparkContext
    except Exception:  # a Spark Connect session has no SparkContext: the server keeps the cache
        log.info("spark.scratch.cache", reason="a Spark Connect session: the timeline stays in Spark's cache")
        return None
    master = context.master
    if master.startswith("local"):
        return tempfile.mkdtemp(prefix="kraftlake-spark-")
    checkpoints = context.getCheckpointDir()
    if checkpoints:
        return f"{checkpoints.rstrip('/')}/kraftlake-scratch"
    log.info(
        "spark.scratch.cache", reason="a cluster without a checkpoint directory: the timeline stays in Spark's cache"
    )
    return None


def _delete(spark, path: str) -> None:
    """Remove ``path`` through Hadoop's file system (local or a cluster's); on Spark Connect,
    which has no JVM on this side, a local path is removed here and any other is left (said)."""
    try:
        context = spark.sparkContext
    except Exception:
        local = path[len("file://") :] if path.startswith("file://") else path
        if "://" not in local:
            shutil.rmtree(local, ignore_errors=True)
        else:
            log.warning("spark.scratch.left", path=path, reason="Spark Connect: no file system to remove it with")
        return
    jvm = context._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    p.getFileSystem(context._jsc.hadoopConfiguration()).delete(p, True)
