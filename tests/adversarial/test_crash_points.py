"""Crashes at chosen points of an append, a snapshot and an import (issue 33, crash class): the
store stays readable, nothing lands twice, and a rerun finishes the work. (tests/test_crash.py
kills real processes at random moments; these stop at each point on purpose.)"""

from __future__ import annotations

import pytest

from kraftlake.records import Log, NoOp
from kraftlake.records.kafka.importer import import_kafka
from kraftlake.records.store import log as log_module
from kraftlake.replay import snapshots as snapshots_module
from kraftlake.replay.snapshots import SnapshotStore
from kraftlake.replay.state import state_at, take_snapshots
from tests.helpers.kafka_logs import KAFKA_LOGS


class Crash(Exception):
    pass


def _crash(*args, **kwargs):
    raise Crash


def test_crash_between_data_file_and_commit(new_log, monkeypatch):
    new_log.append([NoOp()], producer="p", seq=0)
    with monkeypatch.context() as m:
        m.setattr(log_module, "put_if_absent", _crash)  # the commit file of a local log
        with pytest.raises(Crash):
            new_log.append([NoOp(), NoOp()], producer="p", seq=1)
    log = Log.open(new_log.path)
    assert log.last_offset == 0 and [r.offset for r in log.read()] == [0]
    again = log.append([NoOp(), NoOp()], producer="p", seq=1)
    assert (again.first_offset, again.last_offset, again.duplicate) == (1, 2, False)
    assert log.append([NoOp(), NoOp()], producer="p", seq=1).duplicate
    assert [r.offset for r in Log.open(new_log.path).read()] == [0, 1, 2]


def test_crash_while_writing_a_snapshot(new_log, monkeypatch):
    new_log.append([NoOp()] * 30)
    with monkeypatch.context() as m:
        m.setattr(snapshots_module, "write_deltalake", _crash)
        with pytest.raises(Crash):
            take_snapshots(new_log, every=10)
    assert SnapshotStore(new_log.path).list() == []
    assert [s.offset for s in take_snapshots(new_log, every=10)] == [0, 10, 20]
    assert state_at(new_log).offset == 29


def test_import_interrupted_then_run_again(tmp_path, monkeypatch):
    src = KAFKA_LOGS / "kafka37-jbod-dirs"
    clean = Log.create(tmp_path / "clean")
    import_kafka(src, clean, chunk=20)
    log = Log.create(tmp_path / "log")
    calls = []
    real = Log.append

    def append_then_crash(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise Crash
        return real(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(Log, "append", append_then_crash)
        with pytest.raises(Crash):
            import_kafka(src, log, chunk=20)
    assert Log.open(log.path).last_offset == 39
    import_kafka(src, Log.open(log.path), chunk=20)

    def rows(path):
        return [(r.source_offset, r.source, type(r).__name__) for r in Log.open(path).read()]

    assert rows(log.path) == rows(clean.path)


def test_compaction_does_not_rewrite_a_damaged_file(new_log):
    """A page that fails its checksum stops ``compact`` (naming the file): rewritten, it would get
    checksums of its own and read back as good."""
    import random

    from kraftlake.records import CorruptStoreError

    for _ in range(4):
        new_log.append([NoOp()] * 50)
    files = sorted(p for p in __import__("pathlib").Path(new_log.path).glob("part-*.parquet"))
    data = bytearray(files[1].read_bytes())
    rng = random.Random(3)
    caught = 0
    for _ in range(20):
        pos = rng.randrange(4, len(data) - 8)
        damaged = bytearray(data)
        damaged[pos] ^= 0x10
        files[1].write_bytes(bytes(damaged))
        try:
            Log.open(new_log.path).at().table()
        except CorruptStoreError:
            with pytest.raises(CorruptStoreError, match=files[1].name):
                Log.open(new_log.path).compact(2)
            caught += 1
    files[1].write_bytes(bytes(data))
    assert caught > 0
    assert Log.open(new_log.path).compact(2) is not None
    assert [r.offset for r in Log.open(new_log.path).read()] == list(range(200))


def test_maintain_does_not_rewrite_a_damaged_file(new_log):
    """``maintain`` checks every file before it compacts or vacuums anything."""
    from kraftlake.records import CorruptStoreError

    for _ in range(3):
        new_log.append([NoOp()] * 50)
    f = sorted(__import__("pathlib").Path(new_log.path).glob("part-*.parquet"))[1]
    data = bytearray(f.read_bytes())
    data[len(data) // 3] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match=f.name):  # a third into the file: inside a data page
        Log.open(new_log.path).at().table()
    with pytest.raises(CorruptStoreError, match=f.name):
        Log.open(new_log.path).maintain()
    assert len(list(__import__("pathlib").Path(new_log.path).glob("part-*.parquet"))) == 3
