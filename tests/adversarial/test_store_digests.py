"""Damaged data files read by every engine (issue 54, item 1): each reader checks the bytes it
uses before it uses them, against the digest in the file's name (``records.digests``) or, for a
file named without one, Parquet's page checksums; a damaged file is refused with exit code 2
naming it, never read as data. The issue's case: flips in the struct columns' pages, which the
per-record engine never reads and DuckDB read unchecked (13 of 30 changed its answer)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import CorruptStoreError, Log
from kraftlake.records.store import digests

runner = CliRunner()
FLIPS = 4
"""Seeded single-bit flips in the struct columns' pages (the issue's reproduction)."""


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _refused(result, *words):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for w in words:
        assert w in result.stderr, (w, result.stderr)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """``simulate --seed 23 --records 300`` appended as one batch (one data file), and its
    default audit as JSON."""
    work = tmp_path_factory.mktemp("digests")
    path = work / "log"
    assert run("simulate", "--seed", 23, "--records", 300, "--out", work / "sim.jsonl").exit_code == 0
    assert run("init", path).exit_code == 0
    assert run("append", path, work / "sim.jsonl").exit_code == 0
    audit = run("audit", path, "--format", "json")
    assert audit.exit_code == 0, audit.output
    return path, json.loads(audit.stdout)["state_hash"]


def _copy(simulated, tmp_path) -> tuple[Path, Path]:
    copy = tmp_path / "log"
    shutil.copytree(simulated[0], copy)
    (f,) = copy.glob("part-*.parquet")
    return copy, f


def _struct_chunks(f: Path) -> list[tuple[int, int]]:
    """The byte ranges of the column chunks other than ``record``, ``offset`` and ``type``."""
    meta = pq.ParquetFile(f).metadata
    out = []
    for g in range(meta.num_row_groups):
        for c in range(meta.row_group(g).num_columns):
            col = meta.row_group(g).column(c)
            if col.path_in_schema.split(".")[0] not in ("record", "offset", "type"):
                start = col.dictionary_page_offset or col.data_page_offset
                out.append((start, start + col.total_compressed_size))
    return out


def _flip(f: Path, byte: int, mask: int = 1) -> None:
    data = bytearray(f.read_bytes())
    data[byte] ^= mask
    f.write_bytes(bytes(data))


def _footer_name(f: Path, name: bytes) -> int:
    """Where the footer names a column ``name`` (its schema comes first in the footer)."""
    data = f.read_bytes()
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    return data.index(name, footer)


def test_every_data_file_carries_the_crc32_of_its_bytes(tmp_path):
    from kraftlake.records import NoOp

    log = Log.create(tmp_path / "log")
    for _ in range(3):
        log.append([NoOp(), NoOp()])
    assert log.compact(2) is not None  # the compaction's file too
    files = log.at().files()
    assert len(files) == 1 and "compacted" in files[0]
    for f in tmp_path.glob("log/part-*.parquet"):
        assert digests.expected(str(f)) == digests.crc32(f.read_bytes()), f.name


def test_maintain_leaves_every_file_checkable(tmp_path):
    """maintain compacted with delta-rs, whose files carry neither a digest nor page checksums:
    after it, nothing could check a log's bytes. Its compaction is kraftlake's now."""
    from kraftlake.records import NoOp

    log = Log.create(tmp_path / "log")
    for i in range(4):
        log.append([NoOp()] * (i + 1))
    before = Log.open(log.path).read()
    report = Log.open(log.path).maintain(retention_hours=0)
    assert report.to_dict()["files_removed_by_compaction"] == 4 and report.files_after == 1
    (f,) = tmp_path.glob("log/part-*.parquet")
    assert digests.expected(str(f)) == digests.crc32(f.read_bytes())
    assert Log.open(log.path).read() == before


@pytest.mark.parametrize("seed", range(FLIPS))
def test_the_default_audit_refuses_a_flipped_struct_column_page(simulated, tmp_path, seed):
    """The issue's reproduction: bits flipped inside the column chunks other than
    ``record``/``offset``/``type`` gave DuckDB another state hash, or a crash, with no refusal."""
    path, f = _copy(simulated, tmp_path)
    rng = random.Random(seed)
    start, end = rng.choice(_struct_chunks(f))
    _flip(f, rng.randrange(start, end), 1 << rng.randrange(8))
    for engine in ("auto", "python"):
        _refused(run("audit", path, "--engine", engine), f.name, "damaged")


def test_a_column_renamed_in_the_footer_is_refused_by_every_reader(simulated, tmp_path):
    """The footer has no checksum of its own: a flip there renames a column (``leader`` ->
    ``meader``), which page checksums cannot see and every reader read as null."""
    path, f = _copy(simulated, tmp_path)
    _flip(f, _footer_name(f, b"leader"))
    assert pq.read_schema(f).field("partition").type.get_field_index("meader") >= 0
    with pytest.raises(CorruptStoreError, match=f.name):
        Log.open(path).at().table()
    for args in (("audit",), ("audit", "--engine", "python"), ("log",), ("view", "--no-snapshots")):
        _refused(run(*args[:1], path, *args[1:]), f.name)


def _without_digest(path: Path, f: Path) -> Path:
    """``f`` renamed as kraftlake named data files before digests (its commit follows)."""
    old = f.with_name(f.name.split(".crc32-")[0] + ".zstd.parquet")
    f.rename(old)
    for commit in (path / "_delta_log").glob("*.json"):
        commit.write_text(commit.read_text().replace(f.name, old.name))
    return old


def test_a_file_without_a_digest_is_page_checked_before_duckdb_scans_it(simulated, tmp_path):
    """A file named without a digest (an older kraftlake's): DuckDB checks no page checksum,
    so pyarrow reads its pages with theirs first."""
    path, f = _copy(simulated, tmp_path)
    f = _without_digest(path, f)
    assert run("audit", path, "--format", "json").exit_code == 0  # still read
    start, _ = _struct_chunks(f)[0]
    _flip(f, start + 40)  # inside the first struct column's first page
    _refused(run("audit", path), f.name)


def test_a_damaged_data_file_on_s3_is_refused_by_every_engine(simulated, s3_bucket):
    """On S3 DuckDB scans local copies of the files, checked as they are fetched; the per-record
    engine and the table API check the bytes they fetch."""
    uri = s3_bucket.uri("log")
    Log.create(uri).append(Log.open(simulated[0]).read(), validated=True)
    client = s3_bucket.server.client()
    (key,) = [k for k in s3_bucket.keys("log/") if k.endswith(".parquet")]
    body = bytearray(client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read())
    footer = len(body) - 8 - int.from_bytes(body[-8:-4], "little")
    body[body.index(b"leader", footer)] ^= 1
    client.put_object(Bucket=s3_bucket.name, Key=key, Body=bytes(body))
    name = key.rsplit("/", 1)[1]
    for args in (("audit",), ("audit", "--engine", "python"), ("log",)):
        _refused(run(*args[:1], uri, *args[1:]), name)


def test_spark_checks_digests_on_its_executors_and_pages_where_there_is_none(simulated, tmp_path, spark):
    """Spark reads the files itself: their digests are checked on the executors before the plan
    reads them (``crc32`` of each file's bytes), and parquet-mr verifies the page checksums of a
    file named without one; either way the audit exits 2 naming the file."""
    from kraftlake.spark import read_log

    path, f = _copy(simulated, tmp_path)
    _flip(f, _footer_name(f, b"leader"))
    with pytest.raises(CorruptStoreError, match=f.name):
        read_log(spark, path)
    _refused(run("spark-audit", path), f.name)

    path, f = _copy(simulated, tmp_path / "no-digest")
    f = _without_digest(path, f)
    start, _ = _struct_chunks(f)[0]
    _flip(f, start + 40)
    _refused(run("spark-audit", path), f.name)
