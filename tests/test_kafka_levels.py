"""The ``metadata.version`` levels and record versions kraftlake knows are Kafka 4.2's, read at
apache/kafka tag 4.2.0-rc1 (6eef6636, released as 4.2.0): ``MetadataVersion.java`` and the
schemas under ``metadata/src/main/resources/common/metadata/``. A log at a newer level is imported
with a warning saying what kraftlake does; what it knows is replayed and audited, a record it
does not know is refused where it would be replayed (exit 2), named. The logs are written by
kraftlake's own Kafka segment writer from a seeded Kafka 4.2 simulation."""

from __future__ import annotations

import msgspec
import pytest
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records.kafka.batches import encode_batch
from kraftlake.records.kafka.exporter import export_kafka
from kraftlake.records.kafka.importer import ImportStats, read_kafka
from kraftlake.records.kafka.layout import PARTITION_DIR, checkpoint_name
from kraftlake.records.kafka.metadata import SCHEMAS, SnapshotFooter, SnapshotHeader, encode_control, encode_value
from kraftlake.records.kraft import FeatureLevel, KafkaOpaque, RegisterBroker
from kraftlake.records.metadata_versions import NEWEST_KNOWN, name_of
from kraftlake.statemachine.kraft import features
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

runner = CliRunner()

KAFKA_42_SCHEMAS = {
    "AbortTransactionRecord": (25, (0, 0)),
    "AccessControlEntryRecord": (18, (0, 0)),
    "BeginTransactionRecord": (23, (0, 0)),
    "BrokerRegistrationChangeRecord": (17, (0, 2)),
    "ClearElrRecord": (28, (0, 0)),
    "ClientQuotaRecord": (14, (0, 0)),
    "ConfigRecord": (4, (0, 0)),
    "DelegationTokenRecord": (10, (0, 0)),
    "EndTransactionRecord": (24, (0, 0)),
    "FeatureLevelRecord": (12, (0, 0)),
    "FenceBrokerRecord": (7, (0, 0)),
    "NoOpRecord": (20, (0, 0)),
    "PartitionChangeRecord": (5, (0, 2)),
    "PartitionRecord": (3, (0, 2)),
    "ProducerIdsRecord": (15, (0, 0)),
    "RegisterBrokerRecord": (0, (0, 3)),
    "RegisterControllerRecord": (27, (0, 0)),
    "RemoveAccessControlEntryRecord": (19, (0, 0)),
    "RemoveDelegationTokenRecord": (26, (0, 0)),
    "RemoveTopicRecord": (9, (0, 0)),
    "RemoveUserScramCredentialRecord": (22, (0, 0)),
    "TopicRecord": (2, (0, 0)),
    "UnfenceBrokerRecord": (8, (0, 0)),
    "UnregisterBrokerRecord": (1, (0, 0)),
    "UserScramCredentialRecord": (11, (0, 0)),
    "ZkMigrationRecord": (21, (0, 0)),
}
"""Every schema file at 4.2.0-rc1: its apiKey and validVersions (no change since 4.0.0)."""


def test_the_levels_are_kafka_42s():
    assert NEWEST_KNOWN == features.MV_4_2_IV1 == 29
    assert [name_of(n) for n in (1, 17, 23, 27, 28, 29, 30)] == [
        "3.0-IV1",
        "3.7-IV2",
        "4.0-IV1",
        "4.1-IV1",
        "4.2-IV0",
        "4.2-IV1",
        None,  # 4.3-IV0 is unstable in 4.2 and changed in 4.3
    ]
    named = {k: v for k, v in vars(features).items() if k.startswith("MV_")}
    assert named and all(name_of(v) == k[3:].replace("_IV", "-IV").replace("_", ".") for k, v in named.items())
    assert features.parse_metadata_version("4.2-IV1") == 29
    with pytest.raises(ValueError, match="4.2-IV1"):
        features.parse_metadata_version("30")


def test_the_record_table_is_kafka_42s():
    assert {s.cls.__name__: (s.api_key, s.versions) for s in SCHEMAS} == {
        name.removesuffix("Record").replace("ZkMigration", "ZkMigrationState"): key
        for name, key in KAFKA_42_SCHEMAS.items()
    }


def _kafka_log(tmp_path, level: int, extra: tuple = ()):
    """A Kafka 4.2 cluster's metadata log (seeded simulation: brokers, a topic, ELR on) whose
    ``metadata.version`` record says ``level``, written as a Kafka segment; ``extra`` records
    (built from the offset after the history) end it."""
    cfg = WorkloadConfig(brokers=3, dirs_per_broker=1, topics=1, partitions=3, seed=5, metadata_version=29)
    history = [
        msgspec.structs.replace(r, feature_level=level)
        if type(r) is FeatureLevel and r.name == "metadata.version"
        else r
        for batch in generate(cfg, records=200)
        for r in batch
    ]
    last = history[-1]
    history += [make(last.offset + 1 + i, last.ts_ms) for i, make in enumerate(extra)]
    export_kafka(history, tmp_path / "kafka")
    return tmp_path / "kafka"


@pytest.mark.parametrize("level", [29, 30])
def test_a_log_beyond_the_newest_known_level_is_imported_with_a_warning(tmp_path, level):
    kafka = _kafka_log(tmp_path, level)
    result = runner.invoke(app, ["import-kafka", str(kafka), str(tmp_path / "log")])
    assert result.exit_code == 0, result.output
    warned = "metadata.version 30 is newer than kraftlake knows (up to 29, 4.2-IV1, Kafka 4.2)"
    assert (warned in result.stderr) == (level == 30)
    if level == 30:
        assert "a record type or version it does not know is kept as KafkaOpaque" in result.stderr
    # Every record is one kraftlake knows: replayed and audited as Kafka 4.2's.
    result = runner.invoke(app, ["audit", str(tmp_path / "log"), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert msgspec.json.decode(result.stdout)["verdict"] == "pass"


def _register_broker_v4(offset: int, ts_ms: int) -> KafkaOpaque:
    """A RegisterBrokerRecord v4 (Kafka 4.3 adds CordonedLogDirs): a version kraftlake does not know."""
    value = bytearray(
        encode_value(RegisterBroker(version=3, broker_id=9, broker_epoch=300, incarnation_id="x3Kfh5TTSdOPzbT3ELiIfw"))
    )
    value[2] = 4
    return KafkaOpaque(api_key=0, kafka_version=4, value=bytes(value), offset=offset, ts_ms=ts_ms)


def test_a_record_kraftlake_does_not_know_is_refused_naming_it(tmp_path):
    kafka = _kafka_log(tmp_path, 30, extra=(_register_broker_v4,))
    stats_records = [r for b in read_kafka(kafka) for r in b]
    opaque = stats_records[-1]
    assert type(opaque) is KafkaOpaque and (opaque.api_key, opaque.kafka_version) == (0, 4)
    log = str(tmp_path / "log")
    result = runner.invoke(app, ["import-kafka", str(kafka), log])
    assert result.exit_code == 0, result.output  # kept, byte for byte, and warned about
    assert "apiKey 0 v4 record(s) kraftlake cannot decode" in result.stderr
    named = f"RegisterBroker v4 (apiKey 0; kraftlake knows v0-3) at Kafka offset {opaque.source_offset}"
    for engine in ([], ["--engine", "duckdb"]):
        result = runner.invoke(app, ["audit", log, *engine])
        assert result.exit_code == 2, result.output
        assert named in result.stderr and "metadata.version is 30, newer than kraftlake knows (29)" in result.stderr


def _checkpoint(level: int) -> bytes:
    """A snapshot (``RecordsSnapshotWriter``'s framing) holding only ``metadata.version`` ``level``."""
    hk, hv = encode_control(SnapshotHeader(0, 0))
    fk, fv = encode_control(SnapshotFooter(0))
    body = encode_value(FeatureLevel(name="metadata.version", feature_level=level))
    return (
        encode_batch([(0, 0, hk, hv)], base_offset=0, partition_leader_epoch=1, control=True)
        + encode_batch([(1, 0, None, body)], base_offset=1, partition_leader_epoch=1)
        + encode_batch([(2, 0, fk, fv)], base_offset=2, partition_leader_epoch=1, control=True)
    )


@pytest.mark.parametrize("where", ["bootstrap.checkpoint", "snapshot"])
def test_a_newer_level_in_the_bootstrap_or_a_snapshot_is_noted_too(tmp_path, where):
    kafka = _kafka_log(tmp_path, 29)
    if where == "bootstrap.checkpoint":
        (kafka / "bootstrap.checkpoint").write_bytes(_checkpoint(31))
        start = None
    else:
        (kafka / PARTITION_DIR / checkpoint_name(100, 1)).write_bytes(_checkpoint(31))
        start = "latest"
    stats = ImportStats()
    assert [r for b in read_kafka(kafka, from_snapshot=start, stats=stats) for r in b]
    assert stats.newer_metadata_version == 31
