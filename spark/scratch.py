"""Where the Spark audit keeps the DataFrames it reads more than once (the partition timeline).

Every K invariant reads the timeline (one row per partition record), so it is computed once and
kept. Spark's cache builds compressed column batches in the JVM's memory and spills them past
it: building it was a large part of the forward fill, and on a long history it did not fit.
Parquet files in a scratch directory cost less to write, take no memory, and each reader scans
only its columns and skips row groups by their statistics (K1 reads the few rows with a message).
The measures are in bench/RESULTS.md (bench/spark_audit.py).

The directory must be one every executor sees: a local temporary directory for a local session;
on a cluster, under the SparkContext's checkpoint directory (``sc.setCheckpointDir``) or one the
caller names. Without any, Spark's cache is used. The files go when the scratch is closed.
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
        self._cached: list = []

    def keep(self, df, name: str):
        """``df`` computed now and read back from the scratch directory (or Spark's cache)."""
        if self.root is None:
            df = df.persist()
            df.count()
            self._cached.append(df)
            return df
        path = f"{self.root.rstrip('/')}/{name}-{uuid.uuid4().hex}"
        df.write.mode("errorifexists").parquet(path)
        self._made.insert(0, path)
        return self.spark.read.parquet(path)

    def close(self) -> None:
        for df in self._cached:
            df.unpersist()
        for path in self._made:
            _delete(self.spark, path)
        self._made, self._cached = [], []

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
