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
from urllib.parse import unquote

from kraftlake.logging import get_logger
from kraftlake.records import Log
from kraftlake.records.errors import CorruptStoreError, LogError, TimeTravelError
from kraftlake.records.store import digests

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
        spark.sparkContext._jvm.java.lang.Class.forName(name)  # type: ignore[union-attr]  # py4j's gateway: untyped, set on a live context
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


VERIFY_PAGES = {"parquet.page.verify-checksum.enabled": "true"}
"""parquet-mr's option (``ParquetInputFormat.PAGE_VERIFY_CHECKSUM_ENABLED``, off by default):
executors check each page's CRC as they read it. A read option reaches the Hadoop configuration
of that read's tasks, on a caller's session and on Spark Connect alike."""


def verify_files(spark, files: list[str]) -> int:
    """Check the data files ``files`` (a snapshot's, as delta-rs names them) against the digests
    in their names (``records.digests``) on the executors, where Spark will read them: Spark
    SQL's ``crc32`` of each file's bytes (``binaryFile``; no Python there), only the digests
    come back. How many were checked; ``CorruptStoreError`` naming the first damaged (or lost)
    one. Files named without a digest are left to the page checksums (``VERIFY_PAGES``)."""
    from pyspark.sql import functions as F

    seen = _verified(spark)
    want = {os.path.basename(f): (f, digests.expected(f)) for f in files}
    want = {name: v for name, v in want.items() if v[1] is not None and name not in seen}
    if not want:
        return 0
    uris = [spark_uri(f) for f, _ in want.values()]
    try:
        rows = (
            spark.read.format("binaryFile")
            .load(uris)
            .select("path", "length", F.crc32("content").alias("crc"))
            .collect()
        )
    except Exception as exc:  # py4j's and Spark Connect's errors: a file gone, unreadable
        text = str(exc)
        named = next((f for name, (f, _) in want.items() if name in text), None)
        if named is None:
            raise
        raise CorruptStoreError(
            f"{os.path.basename(named)} cannot be read: {text.splitlines()[0]}", file=named
        ) from exc
    got = {os.path.basename(unquote(r["path"])): (r["crc"], r["length"]) for r in rows}
    for name, (f, crc) in sorted(want.items()):
        if name not in got:
            raise CorruptStoreError(f"{name} is missing: the snapshot refers to it (the store lost it)", file=f)
        have, size = got[name]
        if have != crc:
            raise CorruptStoreError(
                f"{name} is damaged: its {size} bytes have the CRC-32 {have:08x}, its name says {crc:08x}"
                " (the store changed or truncated the file)",
                file=f,
            )
    seen.update(want)
    return len(want)


def _verified(spark) -> set[str]:
    """The data files this session already checked (by name, which holds the file's batch id
    and digest: a file is never rewritten under its name). A notebook reading version after
    version checks each file once, not once per read (a job each: ~0.5 s on local[2]); Spark's
    page checksums still verify every read."""
    seen = getattr(spark, "_kraftlake_verified", None)
    if seen is None:
        seen = set()
        try:
            spark._kraftlake_verified = seen
        except AttributeError:  # a session class that takes no attributes: check every time
            pass
    return seen


_FAILED_READ = re.compile(r"error while reading file (\S+?)\.?\s")


def damaged_read(exc: BaseException) -> CorruptStoreError | None:
    """The ``CorruptStoreError`` naming the file of a Spark job that failed reading a damaged
    data file (parquet-mr's page checksums, ``VERIFY_PAGES``, or a file it cannot decode:
    Spark's ``FAILED_READ_FILE``); None for any other failure."""
    text = str(exc)
    match = _FAILED_READ.search(text)
    if match is None:
        return None
    uri = match.group(1)
    cause = next((line.strip() for line in text.splitlines() if line.startswith("Caused by:")), "")
    cause = cause.removeprefix("Caused by:").strip() or "Spark could not read it"
    name = os.path.basename(unquote(uri))
    return CorruptStoreError(f"{name} cannot be read: {cause}", file=uri)


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
    snap = opened.at(version=version, timestamp=timestamp)
    missing = [f for f in snap.files() if not os.path.exists(f)] if snap.location.is_local else []
    if missing:
        raise TimeTravelError(
            f"version {snap.version} refers to {os.path.basename(missing[0])}, which was vacuumed;"
            " read the latest version cut at an offset instead"
        )
    verify_files(spark, snap.files())
    if reader == "delta" or (reader == "auto" and connector):
        df = spark.read.format("delta").options(**VERIFY_PAGES)
        if version is not None:
            df = df.option("versionAsOf", version)
        elif timestamp is not None:
            df = df.option("timestampAsOf", str(timestamp))
        df = df.load(spark_uri(opened.path))
        last = snap.last_offset
    else:
        files = [spark_uri(f) for f in snap.files()]
        last = snap.last_offset
        schema = spark_schema(opened)
        df = (
            spark.read.schema(schema).options(**VERIFY_PAGES).parquet(*files)
            if files
            else spark.createDataFrame([], schema)
        )
        log.debug("spark.read_log", reader="files", files=len(files), version=snap.version)
    hi = last if to_offset is None else min(to_offset, last)
    return df.where(F.col("offset") <= F.lit(hi))
