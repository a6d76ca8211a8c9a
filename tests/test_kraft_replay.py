"""Replay from the Delta log: validation errors, transactions, snapshots + tail = full replay,
time travel of views, and the `view` / `snapshot` commands."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import (
    AbortTransaction,
    BeginTransaction,
    BrokerRegistrationChange,
    EndTransaction,
    Log,
    PartitionChange,
    ReplayError,
    ReplicaDirectory,
    Topic,
    iter_lines,
)
from kraftlake.replay.snapshots import SNAPSHOTS_DIR, SnapshotStore
from kraftlake.replay.state import state_at, take_snapshots
from kraftlake.statemachine.kraft import replay
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

from helpers.kraft import bootstrap, registration, uid, without_offsets
from helpers.tiers import examples

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
RECORDS = list(iter_lines(FIXTURE.open("rb")))
runner = CliRunner()


def history(records: int = 3000, seed: int = 3) -> list:
    cfg = WorkloadConfig(brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=seed)
    return [r for batch in generate(cfg, records=records) for r in batch]


@pytest.fixture(scope="module")
def long_log(tmp_path_factory):
    """A generated history in a log of several files, with snapshots every 500 records."""
    records = history()
    log = Log.create(tmp_path_factory.mktemp("replay") / "log")
    for i in range(0, len(records), 700):
        log.append(records[i : i + 700], validated=True)
    take_snapshots(log, every=500)
    return log, records


# -- replay validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, rule",
    [
        (BrokerRegistrationChange(broker_id=101, broker_epoch=7, fenced=1), "R-REPLAY-BROKER-EPOCH"),
        (BrokerRegistrationChange(broker_id=999, broker_epoch=1, fenced=1), "R-REPLAY-BROKER"),
        (Topic(name="a", topic_id=uid("another-a")), "R-REPLAY-TOPIC"),
        (PartitionChange(topic_id=uid("nope"), partition_id=0, leader=1), "R-REPLAY-TOPIC"),
        (PartitionChange(topic_id=RECORDS[7].topic_id, partition_id=9, leader=1), "R-REPLAY-PARTITION"),
        (
            PartitionChange(
                topic_id=RECORDS[7].topic_id,
                partition_id=0,
                assignment=(ReplicaDirectory(broker=101, directory=uid("x")),),
            ),
            "R-REPLAY-DIRECTORIES",
        ),
        (EndTransaction(), "R-REPLAY-TXN"),
        (registration(102, [uid("dir-A2")]), "R-REPLAY-DIR-OWNER"),
    ],
)
def test_a_record_kafka_would_reject_names_offset_and_rule(bad, rule):
    records = without_offsets(RECORDS) + [bad]
    with pytest.raises(ReplayError) as info:
        replay(records)
    err = info.value
    assert (err.rule, err.offset, err.record_type) == (rule, len(RECORDS), type(bad).__name__)
    assert f"offset {len(RECORDS)}" in str(err) and rule in str(err)


def test_offsets_must_increase():
    first, second = (msgspec.structs.replace(r, offset=o) for r, o in ((RECORDS[0], 5), (RECORDS[1], 5)))
    with pytest.raises(ReplayError, match="R-REPLAY-ORDER") as info:
        replay([first, second])
    assert info.value.offset == 5


def test_an_aborted_transaction_leaves_no_trace_and_a_committed_one_does():
    base = replay(without_offsets(RECORDS))
    txn = [BeginTransaction(name="t"), registration(7, [uid("seven")]), Topic(name="z", topic_id=uid("z"))]
    aborted = replay(without_offsets(RECORDS) + txn + [AbortTransaction(reason="no")])
    assert aborted.state_hash() == base.state_hash() and 7 not in aborted.brokers
    committed = replay(without_offsets(RECORDS) + txn + [EndTransaction()])
    assert 7 in committed.brokers and "z" in committed.topic_ids
    inside = replay(without_offsets(RECORDS) + txn)
    assert inside.transaction is not None and inside.image().transaction.begin_offset == len(RECORDS)


def test_an_open_transaction_is_not_published(tmp_path):
    """Kafka publishes nothing of a transaction before its End: the facade and `view` show the
    state before Begin while one is open, and the whole transaction once it ends."""
    import kraftlake

    txn = [BeginTransaction(name="t"), registration(7, [uid("seven")]), Topic(name="z", topic_id=uid("z"))]
    log = Log.create(tmp_path / "log")
    log.append(without_offsets(RECORDS) + txn + [EndTransaction()])
    before = replay(without_offsets(RECORDS))
    inside = kraftlake.state_at(log, offset=len(RECORDS) + 2)
    assert inside.transaction is None and inside.offset == len(RECORDS) - 1
    assert inside.state_hash() == before.state_hash() and 7 not in inside.brokers
    # The replay engine's own state keeps the open transaction (an audit goes on from it).
    assert state_at(log, offset=len(RECORDS) + 2).transaction is not None
    after = kraftlake.state_at(log)
    assert 7 in after.brokers and "z" in after.topic_ids
    result = runner.invoke(app, ["view", str(log.path), "--offset", str(len(RECORDS) + 1)])
    assert result.exit_code == 0, result.output
    assert "inside the metadata transaction" in result.stderr
    assert json.loads(result.stdout)["state_hash"] == before.state_hash()


def test_epoch_rules_on_replay():
    """As Kafka's ``PartitionRegistration.merge``: +1 partition epoch per change; +1 leader epoch
    iff leader is set (even to the current leader or to -1)."""
    v = replay(without_offsets(RECORDS[:13]))
    t = RECORDS[7].topic_id
    before = v.partition(t, 0)
    for change, le in (
        (PartitionChange(topic_id=t, partition_id=0, isr=(101,)), 0),
        (PartitionChange(topic_id=t, partition_id=0, leader=101), 1),
        (PartitionChange(topic_id=t, partition_id=0, leader=-1), 1),
        (PartitionChange(topic_id=t, partition_id=0, leader_recovery_state=1), 0),
    ):
        prev = v.partition(t, 0)
        replay([change], v)
        now = v.partition(t, 0)
        assert now.partition_epoch == prev.partition_epoch + 1
        assert now.leader_epoch == prev.leader_epoch + le
    assert v.partition(t, 0).partition_epoch == before.partition_epoch + 4


# -- snapshots, state_at ------------------------------------------------------------------------------


def test_generated_history_replays_and_hashes_like_the_log(long_log):
    log, records = long_log
    assert state_at(log, use_snapshots=False).state_hash() == replay(records).state_hash()


@settings(max_examples=examples(25), deadline=None)
@given(cut=st.integers(min_value=0, max_value=2999))
def test_snapshot_plus_tail_hashes_equal_to_a_full_replay(long_log, cut):
    log, records = long_log
    cut = min(cut, len(records) - 1)
    full = replay(records[: cut + 1])
    fast = state_at(log, offset=cut)
    assert fast.offset == full.offset == cut
    assert fast.state_hash() == full.state_hash()
    assert fast.image() == full.image()


def test_snapshots_are_used_listed_and_survive_maintenance(long_log, tmp_path):
    log, records = long_log
    store = SnapshotStore(log.path)
    offsets = [s.offset for s in store.list()]
    assert offsets and all(o % 500 == 0 for o in offsets) and offsets == sorted(offsets)
    nearest = store.nearest(1234)
    assert nearest is not None and nearest.offset == max(o for o in offsets if o <= 1234)
    assert nearest.state_hash() == replay(records[: nearest.offset + 1]).state_hash()
    # Running it again only adds what is new.
    assert take_snapshots(log, every=500) == []
    # A copy of the log with its maintenance done keeps the snapshots.
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(log.path, copy)
    Log.open(copy).maintain(retention_hours=0)
    assert (copy / SNAPSHOTS_DIR).is_dir()
    assert [s.offset for s in SnapshotStore(copy).list()] == offsets


def test_corrupt_snapshot_is_skipped(tmp_path):
    log = Log.create(tmp_path / "log")
    log.append(RECORDS)
    store = SnapshotStore(log.path)
    store.write(replay(RECORDS[:20]))
    assert store.nearest(25).offset == 19
    # Flip the stored blob's checksum: the snapshot must be ignored, not trusted.
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = [p for p in Path(store.path).glob("*.parquet")]
    table = pq.read_table(files[0])
    table = table.set_column(
        table.schema.get_field_index("blob_sha256"), "blob_sha256", pa.array(["0" * 64], pa.string())
    )
    pq.write_table(table, files[0])
    assert store.nearest(25) is None
    assert state_at(log, offset=25).state_hash() == replay(RECORDS[:26]).state_hash()


def test_no_snapshot_inside_a_transaction(tmp_path):
    log = Log.create(tmp_path / "log")
    log.append(RECORDS)
    written = take_snapshots(log, every=1)
    # Offsets 0 and 1 are inside the bootstrap transaction (Begin at 0, End at 2).
    assert [s.offset for s in written][:2] == [2, 3]
    from kraftlake.records.errors import LogError

    with pytest.raises(LogError, match="inside the metadata transaction"):
        SnapshotStore(log.path).write(replay(RECORDS[:1]))


def test_state_at_version_and_timestamp(tmp_path):
    log = Log.create(tmp_path / "log")
    log.append(RECORDS[:13])
    log.append(RECORDS[13:])
    assert state_at(log, version=1).offset == 12
    assert state_at(log, version=1).state_hash() == replay(RECORDS[:13]).state_hash()
    from datetime import datetime

    newest = max(log.history(), key=lambda c: c.version)
    when = datetime.fromtimestamp(newest.timestamp_ms / 1000, UTC).isoformat()
    assert state_at(log, timestamp=when).offset == len(RECORDS) - 1


# -- determinism across processes ---------------------------------------------------------------


def test_state_hash_is_the_same_in_other_processes_and_hash_seeds(long_log):
    log, records = long_log
    script = (
        "import sys; from kraftlake.records import Log; from kraftlake.replay.state import state_at;"
        "from kraftlake.statemachine.kraft.broker_view import broker_view;"
        "v = state_at(Log.open(sys.argv[1]), use_snapshots=False);"
        "print(v.state_hash(), broker_view(v, 1).state_hash)"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", script, log.path],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout
        for seed in ("1", "2", "random")
    }
    assert len(outs) == 1
    from kraftlake.statemachine.kraft.broker_view import broker_view

    here = replay(records)
    assert outs.pop().split() == [here.state_hash(), broker_view(here, 1).state_hash]


# -- CLI ---------------------------------------------------------------------------------------------


def test_cli_view_json_is_canonical_and_time_travels(tmp_path):
    log = tmp_path / "log"
    runner.invoke(app, ["init", str(log)])
    assert runner.invoke(app, ["append", str(log), str(FIXTURE)]).exit_code == 0
    res = runner.invoke(app, ["view", str(log)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert list(doc)[:4] == ["offset", "state_hash", "features", "brokers"]
    assert doc["offset"] == 27 and doc["state_hash"] == replay(RECORDS).state_hash()
    assert [b["id"] for b in doc["brokers"]] == [101, 102]
    a0 = next(p for p in doc["partitions"] if p["partition"] == 0)
    assert (a0["leader"], a0["isr"], a0["leader_epoch"], a0["partition_epoch"]) == (102, [102], 1, 3)
    assert set(doc["partitions"][0]) >= {
        "topic_id",
        "partition",
        "replicas",
        "isr",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "leader_recovery_state",
        "assignment",
    }
    before = json.loads(runner.invoke(app, ["view", str(log), "--offset", "24"]).stdout)
    assert before["offset"] == 24 and next(p for p in before["partitions"] if p["partition"] == 0)["leader"] == 101
    assert runner.invoke(app, ["view", str(log), "--offset", "24", "--version", "1"]).exit_code == 2
    assert runner.invoke(app, ["view", str(log), "--offset", "99"]).exit_code == 2


def test_cli_view_broker_and_table(tmp_path):
    log = tmp_path / "log"
    runner.invoke(app, ["init", str(log)])
    runner.invoke(app, ["append", str(log), str(FIXTURE)])
    doc = json.loads(runner.invoke(app, ["view", str(log), "--broker", "101"]).stdout)
    assert doc["broker_id"] == 101 and doc["offline_dirs"] == [uid("dir-A1")]
    offline = [r for r in doc["replicas"] if not r["online"]]
    assert {(r["partition"], r["role"], r["in_isr"]) for r in offline} == {(0, "follower", False)}
    res = runner.invoke(app, ["view", str(log), "--format", "table"])
    assert res.exit_code == 0 and "partitions" in res.stdout and "102" in res.stdout
    res = runner.invoke(app, ["view", str(log), "--broker", "101", "-f", "table"])
    assert res.exit_code == 0 and "offline dirs" in res.stdout


def test_cli_snapshot_writes_lists_and_drops(tmp_path):
    log = tmp_path / "log"
    runner.invoke(app, ["init", str(log)])
    runner.invoke(app, ["append", str(log), str(FIXTURE)])
    res = runner.invoke(app, ["snapshot", str(log), "--every", "10"])
    assert res.exit_code == 0, res.output
    listed = [json.loads(line) for line in runner.invoke(app, ["snapshot", str(log), "--list"]).stdout.splitlines()]
    assert [s["offset"] for s in listed] == [2, 10, 20]
    assert (
        json.loads(runner.invoke(app, ["view", str(log), "--offset", "22"]).stdout)["state_hash"]
        == replay(RECORDS[:23]).state_hash()
    )
    assert runner.invoke(app, ["snapshot", str(log), "--drop"]).exit_code == 0
    assert runner.invoke(app, ["snapshot", str(log), "--list"]).stdout == ""


def test_cli_view_of_a_log_kafka_would_reject_exits_2(tmp_path):
    log = tmp_path / "log"
    runner.invoke(app, ["init", str(log)])
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b"".join(msgspec.json.encode(r) + b"\n" for r in bootstrap())
        + msgspec.json.encode(BrokerRegistrationChange(broker_id=5, broker_epoch=1, fenced=1))
        + b"\n"
    )
    runner.invoke(app, ["append", str(log), str(bad)])
    res = runner.invoke(app, ["view", str(log)])
    assert res.exit_code == 2 and "R-REPLAY-BROKER" in res.stderr and "offset 1" in res.stderr


def test_the_workload_is_deterministic_and_its_records_pass_full_validation(tmp_path):
    """Same config, same records; and every record the deciders made is accepted by the log's
    full validation (types, bounds, uuids, versions' fields)."""
    first, again = history(800, seed=11), history(800, seed=11)
    assert first == again and history(800, seed=12) != first
    log = Log.create(tmp_path / "log")
    log.append(without_offsets(first))  # validated=False
    assert state_at(log).state_hash() == replay(first).state_hash()


def test_rows_without_the_record_column_decode_from_the_struct_columns():
    """Rows written before the ``record`` column existed (null there, or no column at all) read
    back from the typed struct columns, to the same records."""
    import pyarrow as pa

    from kraftlake.records.arrow import RECORD_COLUMN, from_table, to_table

    records = history(400, seed=4)
    table = to_table(records, first_offset=0, ts_ms=1)
    expected = from_table(table)
    assert [r.offset for r in expected] == list(range(len(records)))
    without = table.drop_columns([RECORD_COLUMN])
    nulls = table.set_column(
        table.schema.get_field_index(RECORD_COLUMN), RECORD_COLUMN, pa.nulls(len(records), pa.binary())
    )
    assert from_table(without) == expected == from_table(nulls)


def test_listing_snapshots_reports_their_sizes(long_log):
    log, _ = long_log
    listed = SnapshotStore(log.path).list()
    assert listed and all(s.bytes and s.bytes > 100 for s in listed)
