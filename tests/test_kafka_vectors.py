"""Real Kafka metadata logs (fixtures/kafka, see its PROVENANCE.md): every byte read, re-encoded identically,
agreeing with kafka-python's reader; imported, replayed and compared field by field with Kafka's
own snapshots; exported back byte for byte; audited with a pass (Kafka's controller is correct).
Plus synthetic KIP-858 histories exported as Kafka segments and read back."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import Log
from kraftlake.records.kafka import (
    MetadataDecoder,
    decode_control,
    encode_batch,
    encode_control,
    encode_value,
    iter_batches,
    open_metadata_dir,
)
from kraftlake.records.kafka.exporter import export_kafka
from kraftlake.records.kafka.importer import ImportStats, import_kafka, read_kafka
from kraftlake.records.kraft import (
    UNASSIGNED,
    BrokerRegistrationChange,
    NoOp,
    Partition,
    PartitionChange,
    RegisterBroker,
)
from kraftlake.replay.audit import audit_log
from kraftlake.replay.kafka_snapshots import checkpoint_view, differences
from kraftlake.replay.state import state_at

from helpers.kafka_logs import KAFKA_LOG_NAMES, KAFKA_LOGS

FILES = sorted(p for p in KAFKA_LOGS.rglob("*") if p.suffix in (".log", ".checkpoint"))
runner = CliRunner()


# sha256 of every file as Kafka wrote it: the logs are data, kept byte for byte.
SHA256 = {
    "codecrafters-single/__cluster_metadata-0/00000000000000000000.log": "7298ad9a3b0c2b977b910df2148a8abe4f43aa722388bea57703a992dc727510",
    "codecrafters-single/meta.properties": "a4fe6cad21b3bb37f9fdfbd3c9f2edb42d708ee0d63be7cea2335c609f7892d1",
    "kafka40-single/__cluster_metadata-0/00000000000000000000.log": "bf62ffe8c4472d24343aabb79fba3d2464e8529bc38a1a16f88a9537ceb002ec",
    "kafka40-single/bootstrap.checkpoint": "c2a74638c1ff4163eaae4976b0a44d62650ebbca326b2db45e7d8b8b90ac3425",
    "kafka40-single/meta.properties": "b8b895b809af7c0225e3f138c2ced08a60c7cf6f56694e810caa36d0a80d3d13",
    "kafka37-jbod-dirs/__cluster_metadata-0/00000000000000000000.log": "c26a1c8bfd22816d8852e8a626852d7a3b86c60bfbd14ec5b52198b0c82c83bc",
    "kafka37-jbod-dirs/bootstrap.checkpoint": "822188638d57d1ae0e7e33d5117ba730dda17ca8a263bcd6dbc896b5e09d1322",
    "kafka37-jbod-dirs/meta.properties": "9be77f29b13904481d7d1e3f0845f6822d51d4ee2bf863cd2784603357de065f",
    "single-snapshot/__cluster_metadata-0/00000000000000000000.log": "3e3b2cba06047bbd7235437fd0abc8e2c7cd531ee167c03a79765e22f0f307d8",
    "single-snapshot/__cluster_metadata-0/00000000000000007161-0000000001.checkpoint": "e2f8c17da9af99896d9bc03bc0cf0d30b6188e16f31bdd99a6497ebda03ce2d8",
    "single-snapshot/meta.properties": "a3fc49d93e7a031e4ce12b8fab36a4c909f960f02b70f332710f19865f303ed7",
    "three-snapshots/__cluster_metadata-0/00000000000000000000.log": "ac3ade28cb008e2ea743b209773c6626619d901416e7523fe69bb8b5f40c8c85",
    "three-snapshots/__cluster_metadata-0/00000000000000007192-0000000001.checkpoint": "5d7c2bc04a5e630250ce859a50cade324cef47ea6fb2e062a2bffdc9fea2d7e0",
    "three-snapshots/__cluster_metadata-0/00000000000000014366-0000000001.checkpoint": "fd9adbc8c24beda50760a8f627f250f4c1e8061bd6760d962beebae2f054b486",
    "three-snapshots/__cluster_metadata-0/00000000000000021513-0000000001.checkpoint": "9010b637f230b9fc7e9f6d70f3e9ed41290168d149ec45b91bed5182ac499181",
    "three-snapshots/bootstrap.checkpoint": "915e4391b2c8026d6451187ec9e2cdd1db2cc83c3ac7a7e2d369e345722f875e",
    "three-snapshots/meta.properties": "e772ae257083333273451c777143a049112c88d0093652650ff42810086decaa",
}


def test_the_vectors_are_there_byte_for_byte():
    # A missing folder or file must fail, never silently test nothing; an edited one fails too.
    assert sorted(p.name for p in KAFKA_LOGS.iterdir() if p.is_dir()) == KAFKA_LOG_NAMES
    assert len(FILES) == 12
    found = {
        p.relative_to(KAFKA_LOGS).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in KAFKA_LOGS.rglob("*")
        if p.is_file() and p.suffix != ".md"
    }
    assert found == SHA256


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Log]:
    """Each vector imported into its own log (NoOps skipped)."""
    root = tmp_path_factory.mktemp("imported")
    logs = {}
    for name in KAFKA_LOG_NAMES:
        logs[name] = Log.create(root / name)
        import_kafka(KAFKA_LOGS / name, logs[name])
    return logs


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(KAFKA_LOGS)))
def test_every_byte_decodes_and_reencodes_identically(path):
    data = path.read_bytes()
    decoder = MetadataDecoder()
    rebuilt = bytearray()
    for batch in iter_batches(data, file=str(path)):
        entries = []
        for offset, ts, key, value in batch.records:
            if batch.is_control:
                r = decode_control(key, value, epoch=batch.partition_leader_epoch, offset=offset, ts_ms=ts, source=None)
                k, v = encode_control(r)
            else:
                r = decoder.decode(value, offset=offset, ts_ms=ts, source=None)
                k, v = None, encode_value(r)
            assert (k, v) == (key, value), (offset, r)
            entries.append((offset, ts, k, v))
        rebuilt += encode_batch(
            entries,
            base_offset=batch.base_offset,
            partition_leader_epoch=batch.partition_leader_epoch,
            control=batch.is_control,
        )
    assert bytes(rebuilt) == data


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(KAFKA_LOGS)))
def test_batches_agree_with_kafka_python(path):
    from kafka.record.memory_records import MemoryRecords

    data = path.read_bytes()
    theirs = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        theirs.append(
            (
                batch.base_offset,
                batch.leader_epoch,
                batch.is_control_batch,
                [(r.offset, r.timestamp, r.key, r.value) for r in batch],
            )
        )
    ours = [
        (
            b.base_offset,
            b.partition_leader_epoch,
            b.is_control,
            [(o, t, None if k is None else bytes(k), None if v is None else bytes(v)) for o, t, k, v in b.records],
        )
        for b in iter_batches(data)
    ]
    assert ours == theirs


def test_what_provenance_says_the_jbod_log_holds():
    """fixtures/kafka/PROVENANCE.md: Kafka 3.7.0, one combined node; a re-registration of the same
    incarnation that still got a new epoch (6 -> 8: before KAFKA-16952), and a controlled shutdown as
    Kafka's ReplicationControlManager writes it (handleBrokerInControlledShutdown, then
    handleBrokerFenced)."""
    records = [r for batch in read_kafka(KAFKA_LOGS / "kafka37-jbod-dirs") for r in batch]
    by_offset = {r.source_offset: r for r in records}
    regs = [r for r in records if type(r) is RegisterBroker]
    assert [r.version for r in regs] == [3, 3] and all(len(r.log_dirs) == 1 for r in regs)
    assert [r.broker_epoch for r in regs] == [6, 8] and regs[0].incarnation_id == regs[1].incarnation_id
    parts = [r for r in records if type(r) is Partition]
    assert len(parts) == 54 and {r.version for r in parts} == {1}
    assert all(p.assignment and p.assignment[0].directory == regs[0].log_dirs[0] for p in parts)
    shutdown = by_offset[4871]
    assert type(shutdown) is BrokerRegistrationChange and shutdown.version == 1 and shutdown.in_controlled_shutdown == 1
    changes = [by_offset[o] for o in range(4872, 4926)]
    assert all(type(c) is PartitionChange and c.leader == -1 and c.isr is None for c in changes)
    assert by_offset[4926].fenced == 1 and by_offset[4926].version == 0


def test_noops_are_counted_and_kept_only_when_asked():
    stats = ImportStats()
    kept = [r for b in read_kafka(KAFKA_LOGS / "three-snapshots", include_noop=True, stats=stats) for r in b]
    assert stats.noops == 28173 == sum(type(r) is NoOp for r in kept)
    skipped = ImportStats()
    rest = [r for b in read_kafka(KAFKA_LOGS / "three-snapshots", stats=skipped) for r in b]
    assert skipped.noops == 28173 and not any(type(r) is NoOp for r in rest)
    assert len(kept) - len(rest) == 28173
    assert [r.source_offset for r in rest] == sorted(r.source_offset for r in rest)


@pytest.mark.parametrize(
    "checkpoint",
    [c for c in FILES if c.suffix == ".checkpoint" and c.parent.name == "__cluster_metadata-0"],
    ids=lambda p: str(p.relative_to(KAFKA_LOGS)),
)
def test_replay_to_a_snapshot_gives_kafkas_own_image(imported, checkpoint):
    """The test that matters: the log replayed up to a snapshot's last offset is, field by field,
    the image Kafka wrote into the snapshot."""
    md = open_metadata_dir(checkpoint.parent.parent)
    cp = next(c for c in md.checkpoints if c.path == checkpoint)
    expected = checkpoint_view(checkpoint)
    assert expected.brokers and expected.features  # a real image, not an empty one
    log = imported[checkpoint.parent.parent.name]
    actual = state_at(log, source_offset=cp.end_offset - 1).published()
    assert differences(expected, actual) == []
    # And a difference is seen when there is one.
    before = state_at(log, source_offset=2).published()
    assert differences(expected, before)


def test_an_import_from_a_snapshot_ends_where_a_full_import_does(imported, tmp_path):
    log = Log.create(tmp_path / "from-snapshot")
    stats = import_kafka(KAFKA_LOGS / "three-snapshots", log, from_snapshot="latest")
    assert stats.snapshot == "00000000000000021513-0000000001.checkpoint"
    full = state_at(imported["three-snapshots"]).published()
    assert differences(full, state_at(log).published()) == []
    records = [r for b in log.at().iter_records() for r in b]
    image = [r for r in records if r.source == "kafka-snapshot@1:21513"]
    assert image and all(r.source_offset == 21512 for r in image)
    assert all(r.source_offset >= 21513 for r in records[len(image) :])  # then the log's tail only
    older = Log.create(tmp_path / "from-older-snapshot")
    cp = KAFKA_LOGS / "three-snapshots" / "__cluster_metadata-0" / "00000000000000007192-0000000001.checkpoint"
    assert import_kafka(KAFKA_LOGS / "three-snapshots", older, from_snapshot=cp).snapshot == cp.name
    assert differences(full, state_at(older).published()) == []


def test_an_open_metadata_transaction_is_never_published(imported):
    """Kafka offsets 1..4 of every 3.6+ log are the bootstrap transaction: inside it nothing is
    visible, at its End everything is."""
    log = imported["three-snapshots"]
    for kafka_offset in (1, 2, 3):
        inside = state_at(log, source_offset=kafka_offset)
        assert inside.transaction is not None
        assert not inside.published().features
    assert state_at(log, source_offset=4).published().features == {"metadata.version": 20}


@pytest.mark.parametrize("name", KAFKA_LOG_NAMES)
def test_kafkas_own_controller_passes_the_audit(imported, name):
    report = audit_log(imported[name].at())
    assert report.verdict == "pass", [msgspec.to_builtins(v) for v in report.violations]
    assert report.records == imported[name].last_offset + 1


@pytest.mark.parametrize("name", KAFKA_LOG_NAMES)
def test_import_then_export_gives_the_same_bytes(tmp_path, name):
    log = Log.create(tmp_path / "log")
    import_kafka(KAFKA_LOGS / name, log, include_noop=True)
    stats = export_kafka((r for b in log.at().iter_records() for r in b), tmp_path / "out")
    original = (KAFKA_LOGS / name / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
    assert Path(stats.segment).read_bytes() == original


def test_a_simulated_kip858_history_becomes_a_kafka_segment_and_comes_back(tmp_path):
    """Dir failures, BRCR v2 LogDirs changes, directory changes of partitions, UNASSIGNED
    directories: no public Kafka log has them, so kraftlake's own encoder makes them, and its
    importer reads them back."""
    from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

    cfg = WorkloadConfig(
        brokers=4,
        dirs_per_broker=2,
        topics=2,
        partitions=12,
        seed=11,
        faults=("dir-failure", "controlled-shutdown", "broker-crash", "reassign"),
    )
    history = [r for batch in generate(cfg, records=1500) for r in batch]
    log = Log.create(tmp_path / "sim")
    log.append(history)
    stats = export_kafka((r for b in log.at().iter_records() for r in b), tmp_path / "kafka")
    assert stats.left_out  # observations have no Kafka form
    back = [r for b in read_kafka(tmp_path / "kafka", include_noop=True) for r in b]
    kafka_types = [r for b in log.at().iter_records() for r in b if type(r).__name__ not in stats.left_out]
    strip = {"source", "source_offset", "offset"}
    assert [{k: v for k, v in msgspec.to_builtins(r).items() if k not in strip} for r in back] == [
        {k: v for k, v in msgspec.to_builtins(r).items() if k not in strip} for r in kafka_types
    ]
    kinds = Counter(type(r).__name__ for r in back)
    assert kinds["PartitionChange"] and any(type(r) is BrokerRegistrationChange and r.log_dirs for r in back)
    assert any(
        type(r) is PartitionChange and r.assignment and any(p.directory == UNASSIGNED for p in r.assignment)
        for r in back
    )


# -- the command line ----------------------------------------------------------------------------


def test_cli_import_view_audit_and_dump(tmp_path):
    log = tmp_path / "jbod"
    result = runner.invoke(app, ["import-kafka", str(KAFKA_LOGS / "kafka37-jbod-dirs"), str(log)])
    assert result.exit_code == 0, result.output
    assert "4,801" in result.stderr and "Kafka offsets 0..4926" in result.stderr
    assert "bootstrap.checkpoint: metadata.version=19" in result.stderr
    result = runner.invoke(app, ["view", str(log), "--source-offset", "4871"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["brokers"][0]["in_controlled_shutdown"] is True
    result = runner.invoke(app, ["audit", str(log), "--to-source-offset", "4900", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "pass"
    result = runner.invoke(app, ["dump", str(KAFKA_LOGS / "codecrafters-single"), "--format", "jsonl"])
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert [x["type"] for x in lines if x["kind"] == "record"] == [
        "BEGIN_TRANSACTION_RECORD",
        "FEATURE_LEVEL_RECORD",
        "ZK_MIGRATION_STATE_RECORD",
        "END_TRANSACTION_RECORD",
        "TOPIC_RECORD",
        "PARTITION_RECORD",
    ]
    checkpoint = KAFKA_LOGS / "three-snapshots" / "__cluster_metadata-0" / "00000000000000007192-0000000001.checkpoint"
    result = runner.invoke(app, ["view", "--kafka-checkpoint", str(checkpoint)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["features"] == {"metadata.version": 20}


def test_cli_import_of_a_corrupt_segment_names_file_and_byte_then_skips(tmp_path):
    src = tmp_path / "meta" / "__cluster_metadata-0"
    src.mkdir(parents=True)
    data = bytearray(
        (KAFKA_LOGS / "codecrafters-single" / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
    )
    data[200] ^= 0x55  # inside the second batch (bytes 145..310)
    (src / "00000000000000000000.log").write_bytes(bytes(data))
    result = runner.invoke(app, ["import-kafka", str(tmp_path / "meta"), str(tmp_path / "log")])
    assert result.exit_code == 2
    assert "00000000000000000000.log at byte 145: CRC-32C mismatch" in result.stderr
    result = runner.invoke(app, ["import-kafka", str(tmp_path / "meta"), str(tmp_path / "log"), "--skip-corrupt"])
    assert result.exit_code == 0, result.output
    assert "skipped" in result.stderr and Log.open(tmp_path / "log").last_offset == 3


def test_an_import_run_again_resumes_and_writes_nothing_twice(tmp_path):
    log = Log.create(tmp_path / "log")
    first = import_kafka(KAFKA_LOGS / "kafka37-jbod-dirs", log, chunk=40)
    version, last = log.version, log.last_offset
    assert last + 1 == first.records == 128 and version == 4  # four chunks, four commits
    again = import_kafka(KAFKA_LOGS / "kafka37-jbod-dirs", Log.open(log.path), chunk=40)
    reopened = Log.open(log.path)
    assert again.records == first.records and (reopened.version, reopened.last_offset) == (version, last)
    other = Log.create(tmp_path / "other")
    other.append(list(read_kafka(KAFKA_LOGS / "codecrafters-single"))[0])
    from kraftlake.records.errors import LogError

    with pytest.raises(LogError, match="not written by this import"):
        import_kafka(KAFKA_LOGS / "kafka37-jbod-dirs", other)


def test_a_kafka_40_log_replays_with_elr_off(imported):
    """kafka40-single (Kafka 4.0, metadata.version 25 = 4.0-IV3, eligible.leader.replicas.version
    supported but not finalized): Partition and PartitionChange records v2, and a controlled
    shutdown that, ELR being off, leaves each ISR as it was with no leader (the last replica
    standing), which the audit accepts."""
    records = [r for batch in read_kafka(KAFKA_LOGS / "kafka40-single") for r in batch]
    assert {r.version for r in records if type(r).__name__ in ("Partition", "PartitionChange")} == {2}
    view = state_at(imported["kafka40-single"]).published()
    assert view.features["metadata.version"] == 25 and "eligible.leader.replicas.version" not in view.features
    parts = list(view.iter_partitions())
    assert parts and all(p.isr and not p.eligible_leader_replicas for p in parts)
    assert any(p.leader == -1 for p in parts)


def test_a_simulated_kafka_41_elr_history_becomes_a_kafka_segment_and_comes_back(tmp_path):
    """No public Kafka log has ELR on: a seeded Kafka 4.1 history (ELR, empty ISRs, ClearElr
    after min.insync.replicas changes) goes through kraftlake's own encoder and importer, record
    for record, and its export of the import is byte-identical."""
    from kraftlake.records import ClearElr, PartitionChange
    from kraftlake.statemachine.kraft.workload import FAULTS, WorkloadConfig, generate

    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=2, topics=2, partitions=12, seed=3, metadata_version=27, faults=FAULTS
    )
    history = [r for batch in generate(cfg, records=1500) for r in batch]
    assert any(isinstance(r, ClearElr) for r in history)
    assert any(isinstance(r, PartitionChange) and r.eligible_leader_replicas for r in history)
    log = Log.create(tmp_path / "sim")
    log.append(history)
    stats = export_kafka((r for b in log.at().iter_records() for r in b), tmp_path / "kafka")
    back = [r for b in read_kafka(tmp_path / "kafka", include_noop=True) for r in b]
    kafka_types = [r for b in log.at().iter_records() for r in b if type(r).__name__ not in stats.left_out]
    strip = {"source", "source_offset", "offset"}
    assert [{k: v for k, v in msgspec.to_builtins(r).items() if k not in strip} for r in back] == [
        {k: v for k, v in msgspec.to_builtins(r).items() if k not in strip} for r in kafka_types
    ]
    again = Log.create(tmp_path / "again")
    import_kafka(tmp_path / "kafka", again, include_noop=True)
    out = export_kafka((r for b in again.at().iter_records() for r in b), tmp_path / "kafka2")
    assert Path(out.segment).read_bytes() == Path(stats.segment).read_bytes()
    assert audit_log(again.at()).verdict == "pass"
