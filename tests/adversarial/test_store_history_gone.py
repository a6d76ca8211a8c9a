"""Store corruption, the log's history gone under a writer (issue 54, item 4): its commit files
and data files deleted (the bucket deleted and made again, on S3), or the log replaced by
another one as long. A writer commits only on top of the version it last saw, that very commit
file: otherwise it refuses, naming the file, and writes nothing."""

from __future__ import annotations

import shutil

import pytest

from kraftlake.records import Config, CorruptStoreError, Log

from helpers.stores import files, wipe


def batch(i: int, n: int = 2) -> list[Config]:
    return [Config(resource_type=4, resource_name="r", name="n", value=f"{i}/{k}") for k in range(n)]


def test_a_writer_refuses_to_commit_once_the_history_is_gone(table_uri, request):
    log = Log.create(table_uri)
    log.append(batch(0), producer="p", seq=0)
    log.append(batch(1), producer="p", seq=1)
    wipe(table_uri, request)
    for seq in (2, 3):  # and again: a refusal leaves nothing that would let the next one pass
        with pytest.raises(CorruptStoreError, match="00000000000000000002.json, the version this writer builds on"):
            log.append(batch(seq), producer="p", seq=seq)
        assert files(table_uri, request) == []


def test_a_writer_refuses_to_commit_on_another_log_as_long_as_its_own(table_uri, request):
    log = Log.create(table_uri)
    log.append(batch(0))
    log.append(batch(1))
    wipe(table_uri, request)
    if "://" not in table_uri:
        shutil.rmtree(table_uri)
    other = Log.create(table_uri)  # another log, at the same version: 2
    other.append(batch(10))
    other.append(batch(11))
    before = files(table_uri, request)
    with pytest.raises(CorruptStoreError, match="is not the one this writer saw"):
        log.append(batch(2))
    assert files(table_uri, request) == before
    assert [r.value for r in Log.open(table_uri).read()] == ["10/0", "10/1", "11/0", "11/1"]
