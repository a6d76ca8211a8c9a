"""Appends written as Delta commit files by kraftlake itself (records/store/delta_commit.py): delta-rs
reads them as its own (versions, history, app transactions, files, checkpoints); a taken version
is refused and leaves nothing behind; a file holds only the columns its batch uses and reads
back the same, compacted or not; a writer that lost a version follows the appends after it, and
falls back to delta-rs when another writer did more than append; background upkeep checkpoints
and compacts beside the writer without losing a record."""

from __future__ import annotations

import base64
import json
import os
import time

import pyarrow.parquet as pq
from deltalake import DeltaTable

from kraftlake.records import Config, Log, NoOp, Topic
from kraftlake.records.store.delta_commit import appends_after, commit_path, put_if_absent


def _config(i: int) -> Config:
    return Config(resource_type=4, resource_name="x", name="n", value=str(i))


def _topic(i: int) -> Topic:
    return Topic(name=f"t{i}", topic_id=base64.urlsafe_b64encode((1000 + i).to_bytes(16, "big")).decode().rstrip("="))


def test_delta_rs_reads_the_commits_as_its_own(tmp_path):
    path = tmp_path / "log"
    log = Log.create(path)
    for i in range(5):
        log.append([_config(i), _config(i + 100)], producer="p", seq=i)
    dt = DeltaTable(str(path))
    assert dt.version() == 5 == log.version
    assert dt.transaction_version("kraftlake.offset") == 9
    assert dt.transaction_version("kraftlake.producer/p") == 4
    assert len(dt.file_uris()) == 5
    newest = dt.history(1)[0]
    assert newest["operation"] == "WRITE" and newest["kraftlake.first_offset"] == "8" and newest["kraftlake.seq"] == "4"
    assert newest["engineInfo"].startswith("kraftlake/")
    assert [r.value for r in Log.open(path).read()] == [v for i in range(5) for v in (str(i), str(i + 100))]
    # Exactly once still holds through a fresh object (it reads what delta-rs reads).
    again = Log.open(path).append([_config(3), _config(103)], producer="p", seq=3)
    assert again.duplicate and (again.first_offset, again.last_offset, again.version) == (6, 7, 4)


def test_every_hundredth_version_gets_a_checkpoint_inline_or_in_the_background(tmp_path):
    for background in (False, True):
        path = tmp_path / f"log-{background}"
        log = Log.create(path)
        checkpoints = log.upkeep_in_background() if background else None
        for i in range(101):
            log.append([_config(i)])
        if checkpoints is not None:
            checkpoints.close()
            assert checkpoints.written == [100]
        last = json.loads((path / "_delta_log" / "_last_checkpoint").read_text())
        assert last["version"] == 100
        assert (path / "_delta_log" / f"{100:020d}.checkpoint.parquet").exists()
        assert DeltaTable(str(path)).version() == 101
        assert DeltaTable(str(path), version=100).transaction_version("kraftlake.offset") == 99


def test_a_taken_version_is_refused_and_leaves_nothing(tmp_path):
    path = tmp_path / "log"
    log = Log.create(path)
    log.append([NoOp()])
    before = sorted(os.listdir(path / "_delta_log"))
    original = (path / "_delta_log" / f"{1:020d}.json").read_bytes()
    assert not put_if_absent(str(path), 1, b'{"commitInfo":{}}\n')
    assert sorted(os.listdir(path / "_delta_log")) == before
    assert open(commit_path(str(path), 1), "rb").read() == original


def test_a_file_holds_only_its_columns_and_reads_back_the_same(tmp_path):
    path = tmp_path / "log"
    log = Log.create(path)
    log.append([_config(0), _config(1)])
    log.append([_topic(1), NoOp()])
    log.append([_config(2)])
    files = Log.open(path).at().files()
    first = pq.read_schema(files[0]).names
    assert "config" in first and "topic" not in first and "no_op" not in first and "source" not in first
    assert "offset" in first and "record" in first
    before = Log.open(path).read()
    assert [type(r).__name__ for r in before] == ["Config", "Config", "Topic", "NoOp", "Config"]
    # The struct columns hold the records for SQL engines: absent columns read as null.
    table = Log.open(path).at().table()
    assert table.column("topic").to_pylist()[2]["name"] == "t1"
    assert table.column("topic").null_count == 4
    # Compaction merges files of different columns into one, and nothing changes.
    Log.open(path).maintain(retention_hours=0)
    assert len(Log.open(path).at().files()) == 1
    assert Log.open(path).read() == before


def test_a_loser_follows_appends_and_compactions(tmp_path):
    path = tmp_path / "log"
    a, b = Log.create(path), Log.open(path)
    a.append([_config(0)], producer="pa", seq=0)
    b.append([_config(1)], producer="pb", seq=0)  # b's view of the log is one version behind a's
    followed = appends_after(str(path), 1)
    assert followed is not None and followed[0] == 2 and followed[1]["kraftlake.producer/pb"] == 0
    r = a.append([_config(2)], producer="pa", seq=1)  # lost version 2, followed b's append
    assert (r.first_offset, r.version) == (2, 3)
    assert a.producer_seq("pb") == 0
    Log.open(path).maintain(retention_hours=0)  # a compaction (remove actions), then a vacuum
    assert appends_after(str(path), 3, compactions=False) is None
    assert appends_after(str(path), 3) == (Log.open(path).version, {})  # a writer just follows it
    r = b.append([_config(3)], producer="pb", seq=1)
    assert r.first_offset == 3 and r.version > 3
    assert [x.value for x in Log.open(path).read()] == ["0", "1", "2", "3"]
    # An old sequence is still answered with its original offsets, from the history.
    dup = b.append([_config(0)], producer="pa", seq=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 0)


def test_upkeep_compacts_beside_the_writer_and_nothing_is_lost(tmp_path):
    path = tmp_path / "log"
    log = Log.create(path)
    upkeep = log.upkeep_in_background(compact_after=50)

    def until_compacted(times: int) -> None:
        deadline = time.monotonic() + 60
        while len(upkeep.compactions) < times and time.monotonic() < deadline:
            log.append([_config(len(written))], producer="p", seq=len(written))  # the writer goes on
            written.append(1)

    written: list[int] = []
    while len(written) < 120:
        log.append([_config(len(written))], producer="p", seq=len(written))
        written.append(1)
    until_compacted(1)  # more than 50 files at version 100
    while len(written) < 250:
        log.append([_config(len(written))], producer="p", seq=len(written))
        written.append(1)
    until_compacted(2)
    upkeep.close()
    assert len(upkeep.compactions) == 2
    history = Log.open(path).history()
    assert any(c.operation == "compact" for c in history)
    n = len(written)
    assert len(Log.open(path).at().files()) < n - 100  # what came after the last compaction, and its output
    records = Log.open(path).read()
    assert [r.offset for r in records] == list(range(n))
    assert [r.value for r in records] == [str(i) for i in range(n)]
    assert Log.open(path).producer_seq("p") == n - 1
    # A retry of an early batch is still answered from the history, after the compaction.
    dup = Log.open(path).append([_config(3)], producer="p", seq=3)
    assert dup.duplicate and dup.first_offset == 3
