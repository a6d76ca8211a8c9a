"""Reading a kraftlake log into Spark, as of a Delta version, a timestamp or an offset.

Two readers give the same rows:

- ``delta``: the Delta Spark connector, ``spark.read.format("delta")`` with ``versionAsOf`` /
  ``timestampAsOf``. It needs the connector's JARs on the classpath, which a user's cluster has
  and these machines cannot download (Maven Central is out of reach). On a cluster::

      pip install delta-spark
      spark = configure_spark_with_delta_pip(SparkSession.builder  # or --packages io.delta:delta-spark_2.13:<v>
          .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
          .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")).getOrCreate()

- ``files``: delta-rs resolves the snapshot (``Log.at``) and Spark reads exactly its Parquet files
  with the log's full schema (files written before a column existed read it as null). Valid
  because kraftlake's tables use no deletion vectors, column mapping or partition columns
  (``LogSnapshot`` refuses tables that do).

``reader="auto"`` takes ``delta`` when the connector is on the classpath, else ``files``.

Both hand Spark URIs, never bare paths (executors are other processes, on other machines on a
cluster): the table's (``delta``) or the snapshot's files' (``files``); a local log's as
``file://`` (the disk must be mounted at the same path wherever an executor runs), an object
store's with ``s3://`` spelled ``s3a://`` (Hadoop's S3 connector; its JARs and ``fs.s3a.*``
settings are the cluster's: docs/object-storage.md).
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from functools import lru_cache

from kraftlake.logging import get_logger
from kraftlake.records import Log
from kraftlake.records.errors import LogError, TimeTravelError

log = get_logger(__name__)

_CONNECTOR_CLASS = "org.apache.spark.sql.delta.sources.DeltaDataSource"
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def has_delta_connector(spark) -> bool:
    """Whether the Delta Spark connector's classes are on this session's classpath (unknown, so
    False, on a Spark Connect session: it has no JVM here)."""
    try:
        app = spark.sparkContext.applicationId
    except Exception:
        return False
    return _has_class(app, spark, _CONNECTOR_CLASS)


@lru_cache(maxsize=8)
def _has_class(_app: str, spark, name: str) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(name)  # type: ignore[union-attr]
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def spark_schema(log_: Log):
    """The log table's latest schema as a Spark StructType (from its Delta schema, via Arrow):
    older files lack newer columns, which then read as null."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(log_.at().schema())


def spark_uri(uri: str) -> str:
    """``uri`` as Spark's Hadoop file systems name it, for executors that may run anywhere:
    ``s3://`` is ``s3a://`` there (EMR's ``s3://`` is its own connector; ``s3a://`` is the one
    every Hadoop has); a local path is a ``file://`` URI (a bare path is resolved against the
    cluster's default file system, HDFS on most clusters: ``file:`` says it is on a disk every
    executor mounts at the same place). Other schemes (``gs://``, ``abfss://``) are left as they
    are. Hadoop's paths take the path unescaped (a space stays a space)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    if _URI_SCHEME.match(uri):
        return uri
    return "file://" + os.path.abspath(uri)


def read_log(
    spark,
    path: str | os.PathLike[str] | Log,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    to_offset: int | None = None,
    *,
    reader: str = "auto",
    storage_options: dict[str, str] | None = None,
):
    """The log's rows (envelope, struct columns, the ``record`` column) as a Spark DataFrame, as of
    a Delta ``version`` or ``timestamp`` (at most one), cut after ``to_offset``. ``path``: a
    ``Log``, a local path or a URI (with delta-rs's ``storage_options``, for the snapshot
    delta-rs resolves; Spark reaches the store with its own ``fs.*`` settings)."""
    if version is not None and timestamp is not None:
        raise ValueError("give at most one of version, timestamp")
    if reader not in ("auto", "delta", "files"):
        raise ValueError(f"reader is auto, delta or files, not {reader!r}")
    from pyspark.sql import functions as F

    opened = path if isinstance(path, Log) else Log.open(path, storage_options=storage_options)
    connector = has_delta_connector(spark)
    if reader == "delta" and not connector:
        raise LogError(
            "reader='delta' needs the Delta Spark connector on the classpath (delta-spark's JARs);"
            " this session has none: use reader='files' or 'auto'"
        )
    if reader == "delta" or (reader == "auto" and connector):
        df = spark.read.format("delta")
        if version is not None:
            df = df.option("versionAsOf", version)
        elif timestamp is not None:
            df = df.option("timestampAsOf", str(timestamp))
        df = df.load(spark_uri(opened.path))
        last = opened.at(version=version, timestamp=timestamp).last_offset
    else:
        snap = opened.at(version=version, timestamp=timestamp)
        files = [spark_uri(f) for f in snap.files()]
        missing = [f for f in snap.files() if not os.path.exists(f)] if snap.location.is_local else []
        if missing:
            raise TimeTravelError(
                f"version {snap.version} refers to {os.path.basename(missing[0])}, which was vacuumed;"
                " read the latest version cut at an offset instead"
            )
        last = snap.last_offset
        schema = spark_schema(opened)
        df = spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
        log.debug("spark.read_log", reader="files", files=len(files), version=snap.version)
    hi = last if to_offset is None else min(to_offset, last)
    return df.where(F.col("offset") <= F.lit(hi))
