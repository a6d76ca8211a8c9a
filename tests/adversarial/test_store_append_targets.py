"""Appends into tables that are not kraftlake logs, or are damaged (issue 54, item 3): ``append``
checks what it appends to as strictly as ``log`` and ``view`` do, and refuses with exit code 2,
writing nothing; locally and on S3 (both commit paths). It checks once per opened log and once
per commit of another writer it follows (``records.log_checks``), never re-reading history."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import CorruptStoreError, Log, NoOp
from kraftlake.records.store.location import resolve

runner = CliRunner()
LINE = '{"type": "NoOp"}\n'


def run(*args, input: str | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def _refused(result, *words):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for w in words:
        assert w in result.stderr, (w, result.stderr)


def _state(uri: str) -> tuple[int, list[str]]:
    """The table's version and its objects (data and commit files): what an append would change."""
    where = resolve(uri)
    dt = DeltaTable(uri, storage_options=where.options)
    files = sorted(dt.file_uris())
    return dt.version(), files


def _append_refused(uri: str, *words: str) -> None:
    before = _state(uri)
    _refused(run("append", uri, "-", input=LINE), *words)
    assert _state(uri) == before


@pytest.mark.parametrize("columns", ["with an offset column", "without one"])
def test_append_refuses_a_foreign_delta_table(table_uri, columns):
    rows = pa.table({"offset": pa.array([0, 1], pa.int64()), "x": ["a", "b"]})
    if columns == "without one":
        rows = rows.drop_columns(["offset"])
    write_deltalake(table_uri, rows, storage_options=resolve(table_uri).options)
    for command in ("log", "view"):
        _refused(run(command, table_uri), "not a kraftlake log")
    _append_refused(table_uri, "not a kraftlake log")
    assert DeltaTable(table_uri, storage_options=resolve(table_uri).options).to_pyarrow_table().equals(rows)


def test_append_refuses_a_log_with_an_emptied_middle_commit(table_uri):
    log = Log.create(table_uri)
    for _ in range(3):
        log.append([NoOp()])
    resolve(table_uri).write(f"_delta_log/{2:020d}.json", b"")
    for command in ("log", "view"):
        _refused(run(command, table_uri), "offsets are missing", "_delta_log")
    _append_refused(table_uri, "offsets are missing", "_delta_log")


def test_append_refuses_a_log_with_a_row_appended_by_plain_deltalake(table_uri):
    log = Log.create(table_uri)
    log.append([NoOp()])
    write_deltalake(table_uri, log.at().table(), mode="append", storage_options=resolve(table_uri).options)
    for command in ("log", "view"):
        _refused(run(command, table_uri), "held twice")
    _append_refused(table_uri, "held twice")


def test_a_writer_refuses_a_foreign_row_committed_while_it_had_the_log_open(table_uri):
    """A writer follows the commits of other writers it lost a version to: one that adds rows
    without a kraftlake offset stops it, instead of being appended after."""
    log = Log.create(table_uri)
    log.append([NoOp()])
    write_deltalake(table_uri, log.at().table(), mode="append", storage_options=resolve(table_uri).options)
    before = _state(table_uri)
    with pytest.raises(CorruptStoreError, match="held twice"):
        log.append([NoOp()])
    assert _state(table_uri) == before
