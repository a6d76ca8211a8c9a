"""The Spark session kraftlake runs on: local and sized for the machine, or the caller's own.

A local session takes seconds to start, so a program builds one and passes it around (tests share
one per run). Settings that matter for the log's workloads: Arrow for the transfer to Python,
enough shuffle partitions that a big history's sorts fit in memory (adaptive execution merges them
back for small data), UTC, no UI, and a high file-listing threshold (below it Spark lists a log's
many small files as a job, slowly). Both measured in docs/delta-on-this-machine.md. Broadcast
joins are the plan's engine's to set (``spark.engine``: at run time only), on this session and on
a caller's or a Spark Connect server's alike.
"""

from __future__ import annotations

import os
import sys

from kraftlake.logging import get_logger

log = get_logger(__name__)

SHUFFLE_PARTITIONS_PER_CORE = 16


def session(
    spark=None,
    *,
    cores: int | None = None,
    app_name: str = "kraftlake",
    memory: str | None = None,
    master: str | None = None,
):
    """``spark`` itself when given; else a SparkSession on ``master`` (a cluster's URL) or, by
    default, local on ``cores`` cores (all by default), with ``memory`` for the driver (default:
    a quarter of the machine, at least 1g, at most 8g)."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    # Workers must run this interpreter (the one kraftlake is installed in), not `python3` on
    # PATH; a local SparkContext reads it from the environment only.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    n = cores or os.cpu_count() or 1
    mem = memory or _driver_memory()
    url = master or f"local[{n}]"
    builder = (
        SparkSession.builder.master(url)
        .appName(app_name)
        .config("spark.driver.memory", mem)
        # 16 per core, not 2: with 2, the forward fill's sort and the grace's joins of a long
        # history spilled to disk and took longer; with 16 nothing spilled (bench/RESULTS.md,
        # bench/spark_audit.py). Adaptive execution coalesces the small shuffles of small logs
        # back to a few partitions: Spark's default, set anyway since this count relies on it.
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS_PER_CORE * n))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.default.parallelism", str(max(2, 2 * n)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
        # parquet-mr checks no page checksum unless asked: every Parquet read of this session
        # checks them (the log's reads ask for it themselves too, on any session: spark.read).
        .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        # Python workers start with `python -m`, which puts the working directory first on
        # sys.path: run from a kraftlake checkout, its kraftlake/ folder (the facade alone) would
        # shadow the installed package and its kraftlake.records, kraftlake.statemachine, ...
        .config("spark.executorEnv.PYTHONSAFEPATH", "1")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    log.info("spark.session", master=url, driver_memory=mem, version=spark.version)
    return spark


def _driver_memory() -> str:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2g"
    gb = max(1, min(8, total // 4 // 2**30))
    return f"{gb}g"


def remote_session(url: str, *, app_name: str = "kraftlake"):
    """A session on the Spark Connect server at ``url`` (``sc://host:15002``). The server's
    settings are its operator's; the session sets the runtime ones the plan's results rely on
    (UTC, adaptive execution). Needs pyspark's Connect client (``pip install 'kraftlake[connect]'``:
    grpcio and friends): ``ImportError`` naming it otherwise."""
    from pyspark.sql import SparkSession

    try:
        spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    except ImportError as exc:  # pyspark's PySparkImportError is one
        raise ImportError(
            f"--remote needs pyspark's Spark Connect client: pip install 'kraftlake[connect]' ({exc})"
        ) from exc
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    log.info("spark.session", remote=url, version=spark.version)
    return spark
