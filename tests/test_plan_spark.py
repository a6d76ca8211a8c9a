"""The plan's Spark engine (``spark.spark.engine``): while it runs, Spark broadcasts a join's
side only from the sizes adaptive execution has measured, never from the planner's estimates
(a Parquet file's compressed size: at 10^7 records it broadcast tables that did not fit in the
driver); the session's settings are the caller's again when the engine closes."""

from __future__ import annotations

import pytest

from kraftlake.spark.engine import RUNTIME_BROADCAST, STATIC_BROADCAST, SparkEngine

pytestmark = pytest.mark.spark

JOIN = "SELECT count(*), sum(b.v) FROM big b JOIN small s ON b.k = s.k"


@pytest.fixture
def tables(spark, tmp_path):
    """Two Parquet tables, both far under the 10 MB threshold by their files' sizes."""
    spark.range(200_000).selectExpr("id % 1000 AS k", "id AS v").write.parquet(str(tmp_path / "big"))
    spark.range(100).selectExpr("id AS k").write.parquet(str(tmp_path / "small"))
    spark.read.parquet(str(tmp_path / "big")).createOrReplaceTempView("big")
    spark.read.parquet(str(tmp_path / "small")).createOrReplaceTempView("small")
    yield
    spark.catalog.dropTempView("big")
    spark.catalog.dropTempView("small")


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _settings(spark) -> tuple:
    return tuple(spark.conf.get(key, None) for key in (STATIC_BROADCAST, RUNTIME_BROADCAST))


def test_the_planner_broadcasts_by_estimate_outside_the_engine(spark, tables):
    # The premise: the session alone plans a broadcast from the files' sizes, before running.
    assert "BroadcastHashJoin" in _plan(spark.sql(JOIN))


def test_the_engine_plans_no_broadcast_and_adaptive_execution_still_makes_one(spark, tables):
    before = _settings(spark)
    with SparkEngine(spark):
        df = spark.sql(JOIN)
        assert "Broadcast" not in _plan(df)  # planned: a shuffle on both sides
        assert df.collect()[0][0] == 20_000  # 100 of the 1 000 keys
        # Run: the small side's shuffle measured under the threshold, so a broadcast after all.
        assert "BroadcastHashJoin" in _plan(df)
    assert _settings(spark) == before
    assert "BroadcastHashJoin" in _plan(spark.sql(JOIN))


def test_the_engine_keeps_the_sessions_thresholds(spark, tables):
    before = _settings(spark)
    spark.conf.set(RUNTIME_BROADCAST, "-1")  # the caller wants no broadcast at all
    try:
        with SparkEngine(spark):
            df = spark.sql(JOIN)
            df.collect()
            assert "Broadcast" not in _plan(df)
        assert spark.conf.get(RUNTIME_BROADCAST) == "-1"
        spark.conf.set(STATIC_BROADCAST, "1MB")  # a session's own static threshold: at run time too
        with SparkEngine(spark):
            assert spark.conf.get(STATIC_BROADCAST) == "-1"
        assert spark.conf.get(STATIC_BROADCAST) == "1MB"
        spark.conf.unset(RUNTIME_BROADCAST)
        with SparkEngine(spark):
            assert spark.conf.get(RUNTIME_BROADCAST) == "1MB"
        assert spark.conf.get(RUNTIME_BROADCAST, None) is None
    finally:
        for key, value in zip((STATIC_BROADCAST, RUNTIME_BROADCAST), before, strict=True):
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def test_iter_rows_gives_rows_tuples_in_order_a_batch_at_a_time(spark):
    # The driver reads the plan's long results (the final states, the UNASSIGNED counts) through
    # ``iter_rows``: the same tuples as ``rows``, in the statement's order, lists and nulls as
    # Python's, across batches.
    sql = (
        "SELECT id AS k, CASE WHEN id % 3 = 0 THEN NULL ELSE concat('d', id) END AS dir,"
        " array(id, id + 1) AS replicas FROM range(7) ORDER BY k DESC"
    )
    with SparkEngine(spark) as engine:
        rows = engine.rows(sql)
        got = list(engine.iter_rows(sql, batch=3))
    assert got == rows
    assert got[0] == (6, None, [6, 7]) and got[-1] == (0, None, [0, 1]) and got[1] == (5, "d5", [5, 6])
