"""Snapshots tied to their log (issue 33, finding 2): a snapshot of another log, or of the log a
path held before it was created again, is skipped with a warning and the view replayed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, iter_lines
from kraftlake.replay.snapshots import SNAPSHOTS_DIR, SnapshotStore
from kraftlake.replay.state import state_at, take_snapshots

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kraft"


def _records(name):
    return list(iter_lines((FIXTURES / name).read_bytes().splitlines()))


@pytest.fixture
def two_logs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    Log.create(a).append(_records("jbod-dir-failure.jsonl"), validated=True)
    take_snapshots(Log.open(a), every=5)
    Log.create(b).append(_records("jbod-dir-failure.jsonl")[:12], validated=True)
    return a, b


def _view(path, *args):
    result = runner.invoke(app, ["view", str(path), *map(str, args)])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def test_snapshots_of_the_log_are_used(two_logs):
    a, _ = two_logs
    store = SnapshotStore(a)
    assert store.nearest(12) is not None and store.nearest(12).offset == 10
    assert _view(a, "--offset", 12) == _view(a, "--offset", 12, "--no-snapshots")


def test_log_created_again_beside_its_old_snapshots(two_logs):
    """The same records even: the new table's id differs, so the old snapshots are not its."""
    a, _ = two_logs
    for f in a.glob("part-*.parquet"):
        f.unlink()
    shutil.rmtree(a / "_delta_log")
    Log.create(a).append(_records("jbod-dir-failure.jsonl")[:12])
    assert SnapshotStore(a).nearest(10) is None
    assert _view(a, "--offset", 10) == _view(a, "--offset", 10, "--no-snapshots")
    log = Log.open(a)
    assert state_at(log, offset=10).state_hash() == state_at(log, offset=10, use_snapshots=False).state_hash()


def test_snapshot_table_copied_from_another_log(two_logs):
    a, b = two_logs
    shutil.copytree(a / SNAPSHOTS_DIR, b / SNAPSHOTS_DIR)
    assert SnapshotStore(b).nearest(11) is None
    assert _view(b, "--offset", 11) == _view(b, "--offset", 11, "--no-snapshots")


def test_snapshot_of_other_records_at_the_same_table(two_logs, monkeypatch):
    """Same table id, other records under the snapshot (the tail digest differs)."""
    a, _ = two_logs
    import kraftlake.replay.snapshots as snapshots

    real = snapshots.tail_digest
    monkeypatch.setattr(
        snapshots, "tail_digest", lambda source, offset: "0" * 64 if offset == 10 else real(source, offset)
    )
    nearest = SnapshotStore(a).nearest(12)
    assert nearest is not None and nearest.offset == 5


def test_snapshots_written_before_the_identity_columns(tmp_path):
    """A snapshot table as the code before wrote it (no table id, version nor digest): its
    snapshots are skipped (nothing ties them to the log), and new ones are added beside them."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from kraftlake.replay.snapshots import SCHEMA

    path = tmp_path / "log"
    Log.create(path).append(_records("jbod-dir-failure.jsonl"), validated=True)
    take_snapshots(Log.open(path), every=5)
    store = SnapshotStore(path)
    old = SCHEMA.remove(SCHEMA.get_field_index("tail_digest"))
    old = old.remove(old.get_field_index("log_version")).remove(old.get_field_index("table_id"))
    rows = pa.Table.from_pylist([{k: v for k, v in r.items() if k in old.names} for r in _rows(store)], schema=old)
    shutil.rmtree(store.path)
    write_deltalake(store.path, rows)
    assert store.nearest(12) is None
    assert _view(path, "--offset", 12) == _view(path, "--offset", 12, "--no-snapshots")
    store.write(state_at(Log.open(path), offset=12, use_snapshots=False))
    assert store.nearest(20).offset == 12


def _rows(store):
    import pyarrow.dataset as ds

    return ds.dataset(str(store.path), format="parquet").to_table().to_pylist()
