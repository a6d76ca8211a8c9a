"""Seeded single-bit flips over a log's whole data files and commit files (issue 54, Done when):
every flip either leaves each reader's answer unchanged or is refused with exit code 2 (for the
table API: an error the CLI turns into exit code 2), never another answer, another exit code
or a traceback. Readers: the default audit (DuckDB's plan), the per-record engine
(``audit --engine python``) and the table API (``Log.at().table()``); Spark on a smaller sample.

A harness to re-run with new seeds: each seed is one case (the file, the byte and the bit it
flips follow from it), and the environment chooses them::

    KRAFTLAKE_BITFLIP_SEEDS=500 KRAFTLAKE_BITFLIP_FIRST=1000 \\
        .venv/bin/python -m pytest -q tests/adversarial/test_store_bitflips.py -m "not spark"

``KRAFTLAKE_BITFLIP_SEEDS`` (default 12 in CI's tier, ~2 s; scaled by ``helpers.tiers``) is how many seeds, from
``KRAFTLAKE_BITFLIP_FIRST`` (default 0); Spark's sample is ``KRAFTLAKE_BITFLIP_SPARK_SEEDS``
(default 1) from ``KRAFTLAKE_BITFLIP_SPARK_FIRST`` (default 1: a data file, which its executors
check). A failure names the seed, the file, the byte and the bit.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import (
    CorruptStoreError,
    Log,
    LogNotFoundError,
    RecordError,
    ReplayError,
    TimeTravelError,
    UnsupportedLocationError,
    iter_lines,
)

from helpers.tiers import rounds

runner = CliRunner()
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
FIRST = int(os.environ.get("KRAFTLAKE_BITFLIP_FIRST", "0"))
SEEDS = int(os.environ.get("KRAFTLAKE_BITFLIP_SEEDS", str(rounds(12))))
SPARK_FIRST = int(os.environ.get("KRAFTLAKE_BITFLIP_SPARK_FIRST", "1"))
SPARK_SEEDS = int(os.environ.get("KRAFTLAKE_BITFLIP_SPARK_SEEDS", "1"))
REFUSED = (CorruptStoreError, LogNotFoundError, RecordError, ReplayError, TimeTravelError, UnsupportedLocationError)
"""What the table API may raise for a damaged store: the errors the CLI exits 2 for
(``kraftlake.cli.app``)."""


@dataclass(frozen=True)
class Answers:
    """What each reader answers for the undamaged log."""

    duckdb: str
    python: str
    table: object


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, Answers]:
    """The JBOD fixture in three appends: three data files, four commit files (the first holds
    the protocol and the schema)."""
    path = tmp_path_factory.mktemp("bitflips") / "log"
    log = Log.create(path)
    records = list(iter_lines(FIXTURE.read_bytes().splitlines()))
    third = len(records) // 3
    for chunk in (records[:third], records[third : 2 * third], records[2 * third :]):
        log.append(chunk, validated=True)
    duckdb, python = (_audit(path, engine) for engine in ("duckdb", "python"))
    assert duckdb.exit_code == 0 and python.exit_code == 0, (duckdb.output, python.output)
    return path, Answers(_report(duckdb), _report(python), Log.open(path).at().table())


def _audit(path: Path, engine: str):
    return runner.invoke(app, ["audit", str(path), "--engine", engine, "--format", "json"])


def _report(result) -> str:
    return json.dumps(json.loads(result.stdout), sort_keys=True)


@dataclass(frozen=True)
class Flip:
    seed: int
    file: str
    byte: int
    bit: int

    def __str__(self) -> str:
        return f"seed {self.seed}: bit {self.bit} of byte {self.byte} of {self.file}"


def flip(path: Path, seed: int) -> Flip:
    """Flip one bit of one of the log's data or commit files, chosen by ``seed`` (a data file or a
    commit file with even odds, then a byte and a bit of it, uniformly)."""
    rng = random.Random(seed)
    data = sorted(p.name for p in path.glob("part-*.parquet"))
    commits = sorted(f"_delta_log/{p.name}" for p in (path / "_delta_log").glob("*.json"))
    name = rng.choice(data if rng.random() < 0.5 else commits)
    body = bytearray((path / name).read_bytes())
    byte, bit = rng.randrange(len(body)), rng.randrange(8)
    body[byte] ^= 1 << bit
    (path / name).write_bytes(bytes(body))
    return Flip(seed, name, byte, bit)


def _same_or_refused(result, answer: str, what: str, reader: str) -> None:
    assert "Traceback" not in result.output, f"{what}: {reader} printed a traceback"
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{what}: {reader} crashed: {result.exception!r}"
    if result.exit_code == 0:
        assert _report(result) == answer, f"{what}: {reader} answered something else with exit code 0"
    else:
        assert result.exit_code == 2, f"{what}: {reader} exit code {result.exit_code}: {result.stderr[-400:]}"


def _damaged(store, tmp_path, seed: int) -> tuple[Path, Flip]:
    copy = tmp_path / "log"
    shutil.copytree(store[0], copy)
    return copy, flip(copy, seed)


@pytest.mark.parametrize("seed", range(FIRST, FIRST + SEEDS))
def test_a_flipped_bit_is_refused_or_changes_no_answer(store, tmp_path, seed):
    path, what = _damaged(store, tmp_path, seed)
    answers = store[1]
    _same_or_refused(_audit(path, "duckdb"), answers.duckdb, str(what), "the default audit")
    _same_or_refused(_audit(path, "python"), answers.python, str(what), "the per-record audit")
    try:
        table = Log.open(path).at().table()
    except REFUSED:
        return
    assert table.equals(answers.table), f"{what}: the table API read other rows"


SAME = ("verdict", "records", "first_offset", "last_offset", "state_hash", "invariants", "violations")
"""What the plan's report on Spark must share with the default audit's (engines agree, DESIGN §7)."""


@pytest.mark.parametrize("seed", range(SPARK_FIRST, SPARK_FIRST + SPARK_SEEDS))
def test_a_flipped_bit_is_refused_or_changes_no_answer_on_spark(store, tmp_path, seed, spark):
    """Spark reads the files itself (the digests checked on its executors, page checksums as it
    reads): the plan's report on Spark is the default audit's of the undamaged log, or the read
    is refused."""
    import kraftlake
    from kraftlake.replay import report_json

    path, what = _damaged(store, tmp_path, seed)
    try:
        report = report_json.to_builtins(kraftlake.audit(path, engine="spark"))
    except REFUSED:
        return
    reference = json.loads(store[1].duckdb)
    assert {k: report[k] for k in SAME} == {k: reference[k] for k in SAME}, f"{what}: Spark answered otherwise"
