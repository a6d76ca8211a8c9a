"""bench/tile.py: copies of one simulated shard laid end to end. The tiled log equals what the
record-level path makes (``tiling.tile_records`` per copy, ``workload.sharded``, ``Log.append``),
reads back through kraftlake's own validation, and audits to each copy's violations, shifted."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec.inspect as mi
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, decode_line
from kraftlake.records.catalog import BY_NAME
from kraftlake.records.kraft import Config, RegisterController
from kraftlake.replay.audit import audit_log
from kraftlake.replay.books import AuditConfig
from kraftlake.statemachine.kraft import tiling
from kraftlake.statemachine.kraft.replication import BROKER_RESOURCE, TOPIC_RESOURCE
from kraftlake.statemachine.kraft.tiling import Tile, tile_records
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate, sharded

BENCH = Path(__file__).parent.parent / "bench" / "tile.py"
_spec = importlib.util.spec_from_file_location("bench_tile", BENCH)
bench_tile = importlib.util.module_from_spec(_spec)
sys.modules["bench_tile"] = bench_tile  # dataclasses look their module up
_spec.loader.exec_module(bench_tile)

COPIES = 3
FILE_ROWS = 700
"""Rows per data file of the shard: several files, the last one short."""


def _shard(path: Path, bug: str) -> Log:
    log = Log.create(path)
    cfg = WorkloadConfig(brokers=6, partitions=24, topics=4, seed=3, bug=bug)
    records = [r for batch in generate(cfg, records=3000) for r in batch]
    for i in range(0, len(records), FILE_ROWS):
        log.append(records[i : i + FILE_ROWS], validated=True)
    return log


@pytest.fixture(scope="module", params=["skip-dir-assignment", "keep-offline-replica-in-isr"])
def tiled(request, tmp_path_factory):
    """(shard log, tiled log, the tiler's summary) for a shard with a controller bug."""
    root = tmp_path_factory.mktemp("tile")
    shard = _shard(root / "shard", request.param)
    done = bench_tile.tile(str(root / "shard"), str(root / "tiled"), COPIES, workers=0, group=2)
    return shard, Log.open(root / "tiled"), done


def test_tiled_log_equals_the_record_level_path(tiled, tmp_path):
    shard, out, done = tiled
    assert done["brokers_per_copy"] == 6
    records = [r for batch in shard.at().iter_records() for r in batch]
    copies = [list(tile_records(records, Tile(k, 6))) for k in range(COPIES)]
    ref = Log.create(tmp_path / "ref")
    cfg = WorkloadConfig()
    for copy in sharded(iter(copies), start_ms=cfg.start_ms, step_ms=cfg.step_ms):
        for i in range(0, len(copy), FILE_ROWS):
            ref.append(copy[i : i + FILE_ROWS], validated=True)
    a, b = out.at().table(), ref.at().table()
    assert a.num_rows == b.num_rows == COPIES * len(records)
    assert a.schema == b.schema
    for name in a.column_names:
        assert a.column(name).equals(b.column(name)), name

    # the same files and commits: one per shard file and copy, each as an append writes it
    def rows(log):
        return sorted(pa.table(log.at()._dt.get_add_actions(flatten=True)).column("num_records").to_pylist())

    assert rows(out) == rows(ref)
    # and the copies are really other brokers, topics and directories
    last = records_of(out)[-len(records) :]
    assert {r.broker_id for r in last if hasattr(r, "broker_id")} == set(range(12, 18))
    assert {r.name for r in last if type(r).__name__ == "Topic"} == {f"topic-s2-{i}" for i in range(4)}
    dirs = {d for r in records if type(r).__name__ == "RegisterBroker" for d in r.log_dirs}
    assert not dirs & {d for r in last if type(r).__name__ == "RegisterBroker" for d in r.log_dirs}


def records_of(log: Log) -> list:
    return [r for batch in log.at().iter_records() for r in batch]


def _entity(e: str, tile: Tile) -> str:
    kind, *rest = e.split("/")
    if kind == "broker":
        return f"broker/{tile.broker(int(rest[0]))}"
    if kind == "dir":
        return f"dir/{tile.broker(int(rest[0]))}/{tile.uuid(rest[1])}"
    if kind == "partition":
        return f"partition/{tile.uuid(rest[0])}/{rest[1]}"
    if kind == "replica":
        return f"replica/{tile.uuid(rest[0])}/{rest[1]}/{tile.broker(int(rest[2]))}"
    raise AssertionError(f"an entity the test does not know: {e}")


def _key(v, shift: int = 0, tile: Tile | None = None) -> tuple:
    return (
        v.invariant,
        v.severity,
        v.entity if tile is None else _entity(v.entity, tile),
        v.first_offset + shift,
        None if v.last_offset is None else v.last_offset + shift,
        tuple(e + shift for e in v.evidence),
    )


def test_python_audit_of_the_tiled_log_finds_each_copys_violations(tiled):
    """Copy k's violations are the shard's, at k * n and with copy k's ids. The copies before the
    last see a few more: states the shard leaves wrong at its end, within the grace there, that
    later copies give the time to count (as they would a shard generated apart)."""
    shard, out, _ = tiled
    one, whole = audit_log(shard.at()), audit_log(out.at())
    n = shard.last_offset + 1
    assert one.violations, "the shard's bug must show"
    assert {i.id: i.checked for i in whole.invariants} == {i.id: COPIES * i.checked for i in one.invariants}
    per_copy = [
        {_key(v, -k * n, None) for v in whole.violations if k * n <= v.first_offset < (k + 1) * n}
        for k in range(COPIES)
    ]
    own = [{_key(v, k * n, Tile(k, 6)) for v in one.violations} for k in range(COPIES)]
    got = [{_key(v) for v in whole.violations if k * n <= v.first_offset < (k + 1) * n} for k in range(COPIES)]
    assert got[-1] == own[-1]  # the last copy ends the log, as the shard does
    assert sum(map(len, per_copy)) == len(whole.violations)
    extra = [got[k] - own[k] for k in range(COPIES - 1)]
    assert all(own[k] <= got[k] for k in range(COPIES - 1))
    times = {r.offset: r.ts_ms for r in shard.at().records()}
    for k, more in enumerate(extra):  # open at the shard's end, begun within the grace's time of it
        assert all(e[4] is None and times[e[3] - k * n] >= times[n - 1] - AuditConfig().grace_ms for e in more), more
    assert len({len(e) for e in extra}) == 1  # every copy before the last the same
    # copy 0 keeps the shard's brokers and uuids: its messages are the shard's, word for word
    first = sorted(v.message for v in whole.violations if v.first_offset < n and _key(v) in own[0])
    assert first == sorted(v.message for v in one.violations)


def test_tiled_log_reads_back_through_the_cli(tiled):
    _, out, done = tiled
    runner = CliRunner()
    res = runner.invoke(app, ["log", out.path])
    assert res.exit_code == 0, res.output
    records = [decode_line(line) for line in res.stdout.splitlines()]  # every record's own checks
    assert [r.offset for r in records] == list(range(done["records"]))
    assert all(r.source_offset == r.offset for r in records)
    ts = [r.ts_ms for r in records]
    assert ts == sorted(ts)
    res = runner.invoke(app, ["history", out.path, "--json"])
    commits = [json.loads(line) for line in res.stdout.splitlines()][::-1]
    assert [c["operation"] for c in commits] == ["init"] + ["append"] * done["files"]
    assert [(c["first_offset"], c["last_offset"]) for c in commits[1:]] == [
        (a["first_offset"], a["last_offset"]) for a in commits[1:]
    ]
    assert commits[1]["first_offset"] == 0 and commits[-1]["last_offset"] == done["records"] - 1
    assert all(b["first_offset"] == a["last_offset"] + 1 for a, b in zip(commits[1:], commits[2:]))


@pytest.mark.slow  # worker processes: make test's
def test_the_script_with_worker_processes_makes_the_same_log(tiled, tmp_path):
    shard, out, _ = tiled
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--from",
            shard.path,
            "--to",
            str(tmp_path / "t"),
            "--copies",
            "3",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1])["records"] == 3 * (shard.last_offset + 1)
    a, b = Log.open(tmp_path / "t").at().table(), out.at().table()
    assert a.equals(b)


def test_tiling_refuses_what_it_cannot_copy(tmp_path):
    log = Log.create(tmp_path / "odd")
    log.append(
        [RegisterController(controller_id=3000, incarnation_id="7VClYINnQFpGJBAHLfil2w", zk_migration_ready=False)]
    )
    with pytest.raises(ValueError, match="cannot tile RegisterController records"):
        bench_tile.tile(str(tmp_path / "odd"), str(tmp_path / "t1"), 2, workers=0, brokers=3)
    with pytest.raises(ValueError, match="is not named topic-<i>"):
        Tile(1, 3).topic("orders")
    with pytest.raises(ValueError, match="not /b<broker>/<dir>"):
        Tile(1, 3).path("/data/disk1")
    with pytest.raises(ValueError, match="past int32"):
        Tile(3, 2**30)


def test_config_names_follow_their_resource():
    t = Tile(2, 10)
    recs = [
        Config(resource_type=BROKER_RESOURCE, resource_name="4", name="x", value="1"),
        Config(resource_type=BROKER_RESOURCE, resource_name="", name="min.insync.replicas", value="2"),
        Config(resource_type=TOPIC_RESOURCE, resource_name="topic-7", name="x", value="1"),
    ]
    assert [r.resource_name for r in tile_records(recs, t)] == ["24", "", "topic-s2-7"]


def _is_id(t: mi.Type) -> bool:
    """A broker id (BrokerId and the leader types, by their description) or a uuid (22 characters)."""
    if isinstance(t, mi.Metadata):
        desc = (t.extra_json_schema or {}).get("description", "")
        if isinstance(t.type, mi.IntType) and re.search(r"broker|leader", desc):
            return True
        t = t.type
    if isinstance(t, mi.StrType):
        return t.min_length == 22 and t.max_length == 22
    if isinstance(t, (mi.ListType, mi.VarTupleType)):
        return _is_id(t.item_type)
    if isinstance(t, mi.UnionType):
        return any(_is_id(u) for u in t.types)
    return False


def _nested(t: mi.Type) -> mi.StructType | None:
    if isinstance(t, mi.Metadata):
        t = t.type
    if isinstance(t, (mi.ListType, mi.VarTupleType)):
        return _nested(t.item_type)
    return t if isinstance(t, mi.StructType) else None


@pytest.mark.parametrize("name", sorted(tiling.ROLES))
def test_roles_name_every_id_field(name):
    """Every field typed as a broker id or uuid of a type the tiler copies has a role (so no id
    is copied unchanged into another shard), nested Structs included."""

    def missing(info: mi.StructType, roles: dict, where: str) -> list[str]:
        out = []
        for f in info.fields:
            if f.name in ("version", "offset", "ts_ms", "source", "source_offset"):
                continue
            inner = _nested(f.type)
            if inner is not None and _has_ids(inner):
                role = roles.get(f.name)
                out += [f"{where}{f.name}"] if not isinstance(role, dict) else missing(inner, role, f"{where}{f.name}.")
            elif _is_id(f.type) and f.name not in roles:
                out.append(f"{where}{f.name}")
        return out

    assert missing(mi.type_info(BY_NAME[name]), tiling.ROLES[name], "") == []


def _has_ids(info: mi.StructType) -> bool:
    return any(_is_id(f.type) or (_nested(f.type) is not None and _has_ids(_nested(f.type))) for f in info.fields)


def test_copy_zero_keeps_ids_and_renames_topics():
    t = Tile(0, 6)
    assert (t.broker(5), t.uuid("7VClYINnQFpGJBAHLfil2w"), t.topic("topic-3")) == (
        5,
        "7VClYINnQFpGJBAHLfil2w",
        "topic-s0-3",
    )
    # reserved directories and sentinels stay in every copy
    t = Tile(4, 6)
    assert (t.broker(-1), t.broker(-2), t.uuid("AAAAAAAAAAAAAAAAAAAAAg")) == (-1, -2, "AAAAAAAAAAAAAAAAAAAAAg")
    assert (t.path("/b3/d1"), t.path("")) == ("/b27/d1", "")
