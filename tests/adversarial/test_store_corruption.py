"""Damaged stores (issue 33, findings 4 and 12): every damage is refused with exit code 2 naming
the file and what is wrong, or read back unchanged; never different data with exit code 0.
Snapshots are derived data: an unreadable one is replayed past, with a warning."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, iter_lines

runner = CliRunner()
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
FLIPS = 40
"""Seeded single-bit flips per data file (the adversarial run found 1 silent change in 20)."""


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A log of the fixture in three appends (three commits, three data files) with snapshots,
    and its view and records as read when nothing is damaged."""
    path = tmp_path_factory.mktemp("store") / "log"
    log = Log.create(path)
    records = list(iter_lines(FIXTURE.read_bytes().splitlines()))
    third = len(records) // 3
    for chunk in (records[:third], records[third : 2 * third], records[2 * third :]):
        log.append(chunk, validated=True)
    assert run("snapshot", path, "--every", "10").exit_code == 0
    view = run("view", path, "--no-snapshots")
    listing = run("log", path)
    assert view.exit_code == 0 and listing.exit_code == 0
    return path, view.stdout, listing.stdout


def _damaged(store, tmp_path) -> Path:
    copy = tmp_path / "log"
    shutil.copytree(store[0], copy)
    return copy


def _data_files(path: Path) -> list[Path]:
    return sorted(path.glob("part-*.parquet"))


def _refused(result, *words):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for w in words:
        assert w in result.stderr, (w, result.stderr)


def test_truncated_data_file(store, tmp_path):
    path = _damaged(store, tmp_path)
    f = _data_files(path)[-1]
    f.write_bytes(f.read_bytes()[:100])
    for cmd in ("view", "log", "audit"):
        _refused(run(cmd, path), f.name)


def test_missing_data_file_of_the_current_version(store, tmp_path):
    path = _damaged(store, tmp_path)
    f = _data_files(path)[-1]
    f.unlink()
    result = run("view", path)
    _refused(result, f.name, "missing")
    assert "vacuumed" not in result.stderr


def test_missing_commit_file(store, tmp_path):
    path = _damaged(store, tmp_path)
    (path / "_delta_log" / f"{2:020d}.json").unlink()
    _refused(run("view", path), "_delta_log", f"{2:020d}.json")


@pytest.mark.parametrize("body", [b"garbage{\n", b"", b'{"commitInfo":{}}\n'])
def test_garbage_or_empty_commit_file(store, tmp_path, body):
    path = _damaged(store, tmp_path)
    (path / "_delta_log" / f"{2:020d}.json").write_bytes(body)
    result = run("log", path)
    _refused(result)
    assert f"{2:020d}.json" in result.stderr or "offsets" in result.stderr, result.stderr


def test_missing_snapshot_file_falls_back_to_a_full_replay(store, tmp_path):
    path = _damaged(store, tmp_path)
    for f in (path / "_kraftlake_snapshots").glob("*.parquet"):
        f.unlink()
    result = run("view", path)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout == store[1]


def test_garbage_snapshot_file_falls_back_to_a_full_replay(store, tmp_path):
    path = _damaged(store, tmp_path)
    for f in (path / "_kraftlake_snapshots").glob("*.parquet"):
        f.write_bytes(b"PAR1 not a snapshot")
    result = run("view", path)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout == store[1]


@pytest.mark.parametrize("seed", range(FLIPS))
def test_flipped_bit_is_caught_or_harmless(store, tmp_path, seed):
    path = _damaged(store, tmp_path)
    rng = random.Random(seed)
    f = rng.choice(_data_files(path))
    data = bytearray(f.read_bytes())
    bit = rng.randrange(len(data) * 8)
    data[bit // 8] ^= 1 << (bit % 8)
    f.write_bytes(bytes(data))
    for cmd, original in (("view", store[1]), ("log", store[2])):
        result = run(cmd, path, "--no-snapshots") if cmd == "view" else run(cmd, path)
        if result.exit_code == 0:
            assert result.stdout == original, f"byte {bit // 8} of {f.name}: {cmd} changed silently"
        else:
            _refused(result, f.name)


def test_flips_are_counted():
    """Keeps the suite's count honest: the flips above are seeded and fixed in number."""
    assert FLIPS >= 20 and json.dumps(FLIPS)


@pytest.mark.parametrize("column", ["record", "offset", "type"])
def test_envelope_disagreeing_with_the_record_blob(store, tmp_path, column):
    """A data file whose checksums hold but whose columns were mixed up (two rows' values of one
    column swapped): the envelope and the record blob disagree, and the read is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _damaged(store, tmp_path)
    f = _data_files(path)[-1]
    table = pq.read_table(f)
    values = table.column(column).to_pylist()
    i = next(i for i in range(1, len(values)) if values[i] != values[0])
    values[0], values[i] = values[i], values[0]
    table = table.set_column(
        table.schema.get_field_index(column), column, pa.array(values, table.schema.field(column).type)
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_page_checksum=True)
    _replace_data_file(path, f, sink.getvalue().to_pybytes())
    _refused(run("log", path), "column says")
    view = run("view", path, "--no-snapshots")  # reads only offset and record
    if column == "type":
        assert view.exit_code == 0 and view.stdout == store[1]
    else:
        _refused(view, "column says")


def _replace_data_file(path: Path, f: Path, body: bytes) -> None:
    """``f`` rewritten as ``body`` by a writer that gets it wrong but names it right: a new name
    with the digest of ``body`` (``records.digests``), in the commit that added ``f``."""
    from kraftlake.records.store import digests

    new = f.parent / digests.named(f.name.split(".crc32-")[0] + ".zstd.parquet", body)
    new.write_bytes(body)
    f.unlink()
    for commit in (path / "_delta_log").glob("*.json"):
        text = commit.read_text()
        if f.name in text:
            commit.write_text(text.replace(f.name, new.name))


def test_commit_damaged_under_an_open_log(tmp_path):
    """A writer that has the log open meets a damaged commit another process wrote: its next
    append is refused naming the file, not a traceback of msgspec or delta-rs."""
    from kraftlake.records import CorruptStoreError, NoOp

    log = Log.create(tmp_path / "log")
    log.append([NoOp()])
    other = Log.open(log.path)
    other.append([NoOp()])
    (tmp_path / "log" / "_delta_log" / f"{2:020d}.json").write_bytes(b"garbage{\n")
    with pytest.raises(CorruptStoreError, match=f"{2:020d}.json"):
        log.append([NoOp()])


@pytest.mark.parametrize("command", ["audit", "log", "view", "history"])
def test_a_jsonl_file_given_as_the_log_is_refused_by_name(tmp_path, command):
    """Not a damaged store but a common slip: the fixture file itself given where its log goes."""
    result = run(command, FIXTURE)
    assert result.exit_code == 2, result.output
    assert f"{FIXTURE} is a file, not a kraftlake log" in result.output
    assert "Traceback" not in result.output


DAMAGES = {
    "missing": f"{3:020d}.json is missing: the commits go from version 2 to 4",
    "garbage": f"{3:020d}.json is not a Delta commit: JSON is malformed",
    "emptied": f"{3:020d}.json is not a Delta commit: it holds no actions",
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_commit_is_said_in_the_same_words_on_every_store(table_uri, damage):
    """Issue 54, item 8: on S3 the same damage gave exit code 1 and delta-rs's Rust debug output
    (``Kernel error: … ParsedLogPath { location: FileMeta { …``)."""
    from kraftlake.records import NoOp
    from kraftlake.records.store.location import resolve

    log = Log.create(table_uri)
    for _ in range(4):
        log.append([NoOp()])
    where, rel = resolve(table_uri), f"_delta_log/{3:020d}.json"
    if damage == "missing":
        where.delete(rel)
    else:
        where.write(rel, b"garbage{\n" if damage == "garbage" else b"")
    for args in (("log",), ("view",), ("audit",), ("append", "-")):
        result = runner.invoke(app, [args[0], table_uri, *args[1:]], input='{"type": "NoOp"}\n')
        _refused(result, DAMAGES[damage])
        assert "ParsedLogPath" not in result.output and "Kernel error" not in result.output, result.output


def test_an_emptied_newest_commit_is_refused_not_read_as_a_shorter_log(tmp_path):
    """delta-rs reads an emptied commit file as a commit that did nothing: the newest one
    emptied, the log would end a batch early with every check passing."""
    from kraftlake.records import NoOp

    log = Log.create(tmp_path / "log")
    for _ in range(2):
        log.append([NoOp()])
    newest = tmp_path / "log" / "_delta_log" / f"{2:020d}.json"
    newest.write_bytes(b"")
    for command in ("log", "view", "audit"):
        _refused(run(command, tmp_path / "log"), f"{newest} is not a Delta commit: it holds no actions")


def test_a_field_renamed_in_the_commit_that_sets_the_schema_is_refused(tmp_path):
    """A flipped bit in ``schemaString`` renames a column or field (``recovery_delay_changed``
    -> ``recovery_delayWchanged``): readers read it as another, null column. The digest of the
    schema kraftlake wrote (``log_checks.SCHEMA_TXN``) no longer matches."""
    from kraftlake.records import CorruptStoreError, NoOp

    Log.create(tmp_path / "log").append([NoOp()])
    first = tmp_path / "log" / "_delta_log" / f"{0:020d}.json"
    body = first.read_bytes()
    at = body.index(b"recovery_delay_changed", body.index(b'"metaData"')) + len("recovery_delay")
    first.write_bytes(body[:at] + b"W" + body[at + 1 :])
    with pytest.raises(CorruptStoreError, match="is not the one kraftlake wrote"):
        Log.open(tmp_path / "log").at().table()
    for args in (("log",), ("audit",), ("append", "-")):
        result = runner.invoke(app, [args[0], str(tmp_path / "log"), *args[1:]], input='{"type": "NoOp"}\n')
        _refused(result, "is not the one kraftlake wrote")
