"""Spark reads a log exactly as delta-rs does: the same rows for every version, a timestamp and an
offset cut, after compaction and after vacuum (the file-list reader, the one these machines can
run; the connector reader is refused cleanly without the connector)."""

from __future__ import annotations

from datetime import UTC

import pyarrow as pa
import pytest

from kraftlake.records import Log
from kraftlake.records.errors import LogError, TimeTravelError
from kraftlake.spark import has_delta_connector, read_log
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    cfg = WorkloadConfig(brokers=4, dirs_per_broker=2, topics=2, partitions=12, seed=5)
    batches = list(generate(cfg, records=1200))
    log = Log.create(tmp_path_factory.mktemp("spark") / "log")
    chunk: list = []
    for b in batches:  # five appends of ~240 records: five versions, five files
        chunk.extend(b)
        if len(chunk) >= 240:
            log.append(chunk)
            chunk = []
    if chunk:
        log.append(chunk)
    return log


def _rows_spark(df) -> pa.Table:
    return df.toArrow().sort_by("offset")


def _same(df, expected: pa.Table) -> None:
    got = _rows_spark(df)
    assert got.num_rows == expected.num_rows
    assert got.column_names == expected.column_names
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name


def test_auto_reads_the_file_list_here_and_delta_needs_the_connector(spark, log):
    assert not has_delta_connector(spark)
    with pytest.raises(LogError, match="needs the Delta Spark connector"):
        read_log(spark, log.path, reader="delta")


def test_every_version_reads_the_same_rows_as_delta_rs(spark, log):
    assert log.version >= 5
    for version in range(1, log.version + 1):
        _same(read_log(spark, log.path, version=version), log.at(version=version).table())


def test_a_timestamp_and_an_offset_cut(spark, log):
    commit = sorted(log.history(), key=lambda c: c.version)[2]
    from datetime import datetime

    when = datetime.fromtimestamp(commit.timestamp_ms / 1000, UTC).isoformat()
    _same(read_log(spark, log.path, timestamp=when), log.at(timestamp=when).table())
    _same(read_log(spark, log.path, to_offset=500), log.at(offset=500).table())
    assert read_log(spark, log.path, version=2, to_offset=10).count() == 11


def test_after_compaction_and_vacuum(spark, log, tmp_path):
    import shutil

    copy = Log.open(shutil.copytree(log.path, tmp_path / "copy"))
    old = copy.version
    copy.maintain(retention_hours=0)
    assert len(copy.at().files()) < len(copy.at(version=old).files())
    _same(read_log(spark, copy.path), copy.at().table())
    with pytest.raises(TimeTravelError, match="vacuumed"):
        read_log(spark, copy.path, version=1)


# -- the local reducers, per entity on Spark -----------------------------------------------------


def _local(log_, offset):
    from kraftlake.replay.state import state_at
    from kraftlake.statemachine.kraft.view import broker_hash, partition_hash

    view = state_at(log_, offset=offset, use_snapshots=False).published()
    parts = {(p.topic_id, p.partition_id): partition_hash(p) for p in view.iter_partitions()}
    brokers = {b.id: broker_hash(b) for b in view.brokers.values()}
    return parts, brokers


def _spark(spark, log_, offset):
    from kraftlake.spark.replay import state_at

    partitions, brokers = state_at(spark, log_.path, offset)
    parts = {(r["topic_id"], r["partition_id"]): r["state_hash"] for r in partitions.collect()}
    return parts, {r["broker_id"]: r["state_hash"] for r in brokers.collect()}


@pytest.mark.parametrize("offset", [150, 700, None])
def test_per_entity_replay_on_spark_hashes_like_the_local_reducers(spark, log, offset):
    local = _local(log, offset)
    assert local[0] and local[1]
    assert _spark(spark, log, offset) == local


def test_per_entity_replay_of_real_kafka_logs_with_transactions(spark, tmp_path):
    """The imported jbod log: a bootstrap transaction, a re-registration, a controlled shutdown."""
    from kraftlake.records.kafka.importer import import_kafka

    from helpers.kafka_logs import KAFKA_LOGS

    log_ = Log.create(tmp_path / "jbod")
    import_kafka(KAFKA_LOGS / "kafka37-jbod-dirs", log_)
    for offset in (2, 60, None):  # inside the bootstrap transaction, mid-history, the end
        assert _spark(spark, log_, offset) == _local(log_, offset)


def test_spark_uri_names_s3_as_hadoop_does_and_local_files_as_file_uris(monkeypatch, tmp_path):
    from kraftlake.spark.read import spark_uri

    assert spark_uri("s3://bucket/a/part-0.parquet") == "s3a://bucket/a/part-0.parquet"
    # A bare path would be resolved against a cluster's default file system (HDFS): file:// says where.
    assert spark_uri("/tmp/log/part-0.parquet") == "file:///tmp/log/part-0.parquet"
    monkeypatch.chdir(tmp_path)
    assert spark_uri("my log/part-0.parquet") == f"file://{tmp_path}/my log/part-0.parquet"
    assert spark_uri("file:///tmp/log") == "file:///tmp/log"
    assert spark_uri("gs://bucket/a") == "gs://bucket/a"


def test_spark_reads_a_log_whose_path_has_a_space(spark, tmp_path):
    """Hadoop takes a file:// URI's path unescaped: a log under "my log" reads whole."""
    log_ = Log.create(tmp_path / "my log")
    log_.append([r for b in generate(WorkloadConfig(seed=2), records=300) for r in b])
    assert read_log(spark, log_.path, reader="files").count() == log_.at().last_offset + 1 > 0


def test_a_log_on_s3_hands_spark_s3a_uris_not_local_paths(spark, s3_bucket):
    """These machines have no hadoop-aws JARs: Spark refuses the s3a:// files it is handed (no S3AFileSystem class), which
    shows it was handed the store's URIs (docs/object-storage.md has the cluster recipe)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    log = Log.create(s3_bucket.uri("spark"))
    cfg = WorkloadConfig(brokers=4, dirs_per_broker=2, topics=2, partitions=12, seed=5)
    log.append([r for batch in generate(cfg, records=100) for r in batch])
    with pytest.raises((Py4JJavaError, PySparkException), match="S3AFileSystem not found"):
        read_log(spark, log).count()
