"""Build a big KRaft history fast: copies of one simulated shard laid end to end as further shards.

Simulating 10^8 records takes about 6 500 CPU-s (bench/RESULTS.md). A history of K shards
(``replay.py --phase generate --shards K``) is K parts of the cluster with disjoint ids laid end to
end; this script makes one from a single generated shard by copying it K times with the ids
``shard_config`` gives shard k (``statemachine.kraft.tiling``: broker ids + k * brokers, topics
``<prefix>-s<k>-<i>``, a uuid of its own per copy for every topic, directory and incarnation)
and the offsets and times ``workload.sharded`` gives them. It works on the log's columns: each
data file of the shard is read once per group of copies; its typed columns are remapped with
Arrow compute (broker id lists + k * brokers, uuids and names through a per-file dictionary,
offsets and times shifted), its ``record`` column decoded, remapped record by record and encoded
again; the files are written with the log's own writer and committed in offset order, one commit
per file, as an append writes them. Files are made by ``--workers`` processes.

Usage::

    python bench/tile.py --from /tmp/h6/log --to /tmp/h7/log --copies 10        # 10^6 -> 10^7
    python bench/tile.py --from SHARD --to OUT --copies 100 --workers 2 --group 10
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kraftlake.records.arrow import column_name, encoded_column, from_table
from kraftlake.records.catalog import BY_NAME, RECORD_TYPES
from kraftlake.records.columnar import key_column
from kraftlake.records.store.data_files import write_data_file
from kraftlake.records.store.delta_commit import DataFile
from kraftlake.statemachine.kraft.tiling import BROKER, CONFIG_NAME, Role, Tile, roles, tile_records
from kraftlake.statemachine.kraft.workload import WorkloadConfig

_BY_COLUMN = {column_name(cls): cls for cls in RECORD_TYPES}
_DROPPED = ("producer", "producer_seq")
"""Null in a generated history's rows: a shard's producer (if it had one) is not the copy's."""


@dataclass(frozen=True)
class Shard:
    """The shard's data files in offset order, with what a copy of each needs to know about the
    rest: its first offset, its rows, and the operation index (``sharded``'s ``op``) and time
    of the row before it."""

    files: list[str]
    firsts: list[int]
    rows: list[int]
    op_before: list[int]
    ts_before: list[int | None]
    records: int
    ops: int
    brokers: int


def read_shard(files: list[str]) -> Shard:
    """The shard's files by first offset, checked gapless from offset 0, and its operations."""
    heads = []
    for f in files:
        t = pq.read_table(f, columns=["offset", "ts_ms"])
        heads.append((t.column("offset")[0].as_py(), f, t))
    heads.sort(key=lambda h: h[0])
    out_files, firsts, rows, op_before, ts_before = [], [], [], [], []
    op, last_ts, expect, brokers = -1, None, 0, 0
    for first, f, t in heads:
        offsets = t.column("offset").to_numpy()
        if first != expect or not np.array_equal(offsets, np.arange(first, first + len(offsets))):
            raise ValueError(f"{f}: offsets are not {expect}.. in order: tile a whole log, as a shard is written")
        ts = t.column("ts_ms").to_numpy()
        out_files.append(f)
        firsts.append(first)
        rows.append(len(offsets))
        op_before.append(op)
        ts_before.append(last_ts)
        op = int(_ops(ts, op, last_ts)[-1])
        last_ts = int(ts[-1])
        expect = first + len(offsets)
        schema = pq.read_schema(f)
        for col in ("register_broker", "log_dirs_loaded"):
            if col in schema.names:
                ids = pq.read_table(f, columns=[col]).column(col).combine_chunks().field("broker_id")
                brokers = max(brokers, (pc.max(ids).as_py() or 0) + 1)
    return Shard(out_files, firsts, rows, op_before, ts_before, expect, op + 1, brokers)


def _ops(ts: np.ndarray, op_before: int, ts_before: int | None) -> np.ndarray:
    """``sharded``'s operation index of each row: one more at each change of time (and at the
    shard's first row)."""
    changed = np.empty(len(ts), np.int64)
    changed[0] = 1 if ts_before is None else int(ts[0] != ts_before)
    changed[1:] = ts[1:] != ts[:-1]
    return op_before + np.cumsum(changed)


def remap(arr: pa.Array, role: Role, tile: Tile) -> pa.Array:
    """``arr`` (a column, a struct's child, a list's values) with the ids of ``role`` remapped."""
    if pa.types.is_list(arr.type):
        values = remap(arr.values, role, tile)
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, values, type=arr.type, mask=mask)
    if isinstance(role, dict):
        children = [
            remap(arr.field(i), role[f.name], tile) if f.name in role else arr.field(i) for i, f in enumerate(arr.type)
        ]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(arr.type), mask=mask)
    if role == BROKER:
        if tile.copy == 0:
            return arr
        return pc.if_else(pc.less(arr, 0), arr, pc.add_checked(arr, pa.scalar(tile.copy * tile.brokers, arr.type)))
    # uuids, names, paths: a few thousand distinct values in a file, remapped once each
    fn = tile.scalar(role)
    distinct = pc.unique(arr).drop_null()
    mapped = pa.array([fn(v) for v in distinct.to_pylist()], arr.type)
    return pc.take(mapped, pc.index_in(arr, value_set=distinct))


def _config_names(col: pa.StructArray, tile: Tile) -> pa.StructArray:
    names = [
        None if n is None else tile.config_name(t, n)
        for t, n in zip(col.field("resource_type").to_pylist(), col.field("resource_name").to_pylist())
    ]
    i = col.type.get_field_index("resource_name")
    children = [pa.array(names, pa.string()) if j == i else col.field(j) for j in range(col.type.num_fields)]
    return pa.StructArray.from_arrays(children, fields=list(col.type), mask=col.is_null() if col.null_count else None)


def tile_file(table: pa.Table, records: list, tile: Tile, first: int, ts: np.ndarray) -> pa.Table:
    """One data file of the shard (``table``, its decoded ``records``) as copy ``tile.copy``,
    rows ``first ..`` at times ``ts``."""
    n = table.num_rows
    offsets = pa.array(np.arange(first, first + n, dtype=np.int64))
    stamped = list(tile_records(records, tile, zip(range(first, first + n), ts.tolist())))
    columns: dict[str, pa.Array] = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        cls = _BY_COLUMN.get(name)
        if cls is not None:
            fields = roles(cls.__name__)
            if CONFIG_NAME in fields.values():
                col = _config_names(col, tile)
            elif fields:
                col = remap(col, fields, tile)
        columns[name] = col
    columns["offset"] = columns["source_offset"] = offsets
    columns["ts_ms"] = pa.array(ts, pa.int64())
    columns["record"] = encoded_column(stamped)
    types = columns["type"]
    keys = columns["key"]
    for name in pc.unique(types).to_pylist():
        cls = BY_NAME[name]
        col = columns.get(column_name(cls))
        fresh = key_column(cls, lambda f, col=col: col.field(f), n)
        if fresh is None:
            raise ValueError(f"cannot tile {name} records: their key is computed in Python")
        keys = pc.if_else(pc.equal(types, name), fresh, keys)
    columns["key"] = keys
    names = [c for c in table.column_names if c not in _DROPPED]
    return pa.table([columns[c] for c in names], schema=pa.schema([table.schema.field(c) for c in names]))


@dataclass(frozen=True)
class Job:
    file: int
    copies: tuple[int, ...]
    shard: Shard
    to: str
    topic_prefix: str
    start_ms: int
    step_ms: int


def run_job(job: Job) -> list[tuple[int, int, str, DataFile]]:
    """Copies ``job.copies`` of the shard's file ``job.file``, written into the log at ``job.to``:
    (first offset, rows, batch id, data file) for each."""
    s = job.shard
    table = pq.read_table(s.files[job.file])
    records = from_table(table)
    ops = _ops(table.column("ts_ms").to_numpy(), s.op_before[job.file], s.ts_before[job.file])
    out = []
    for k in job.copies:
        tile = Tile(k, s.brokers, job.topic_prefix)
        first = k * s.records + s.firsts[job.file]
        ts = job.start_ms + (k * s.ops + ops) * job.step_ms
        rows = tile_file(table, records, tile, first, ts)
        batch = str(uuid.uuid4())
        data = write_data_file(job.to, rows, f"part-{first:020d}-{batch}.zstd.parquet")
        out.append((first, rows.num_rows, batch, data))
    return out


def jobs(shard: Shard, copies: int, group: int, to: str, prefix: str, start_ms: int, step_ms: int) -> Iterator[Job]:
    """Groups of ``group`` copies, each group file by file (a worker decodes a file once per group)."""
    for g in range(0, copies, group):
        ks = tuple(range(g, min(copies, g + group)))
        for f in range(len(shard.files)):
            yield Job(f, ks, shard, to, prefix, start_ms, step_ms)


def tile(
    source: str,
    to: str,
    copies: int,
    *,
    workers: int = 0,
    group: int = 10,
    topic_prefix: str = "topic",
    start_ms: int | None = None,
    step_ms: int | None = None,
    brokers: int | None = None,
) -> dict:
    """Lay ``copies`` copies of the log at ``source`` end to end as a new log at ``to``; ``workers``
    0 makes the files in this process. Returns what was done."""
    from kraftlake.records import Log

    default = WorkloadConfig()
    snap = Log.open(source).at()
    shard = read_shard(snap.files())
    if brokers is not None:
        shard = Shard(**{**shard.__dict__, "brokers": brokers})
    if shard.brokers < 1:
        raise ValueError(f"{source}: no broker registers in it: give --brokers")
    log = Log.create(to)
    todo = jobs(
        shard,
        copies,
        group,
        log.path,
        topic_prefix,
        default.start_ms if start_ms is None else start_ms,
        default.step_ms if step_ms is None else step_ms,
    )
    t = time.perf_counter()
    pool = multiprocessing.get_context("spawn").Pool(workers) if workers else None
    made = pool.imap(run_job, todo) if pool else map(run_job, todo)
    pending: dict[int, tuple] = {}
    nxt = 0
    try:
        for done in made:
            for first, n, batch, data in done:
                pending[first] = (n, batch, data)
            while nxt in pending:  # commit in offset order as the files arrive
                n, batch, data = pending.pop(nxt)
                log.commit_data_file(data, nxt, n, batch)
                nxt += n
    finally:
        if pool:
            pool.close()
            pool.join()
    if pending or nxt != copies * shard.records:
        raise AssertionError(f"tiled {nxt} records, expected {copies * shard.records}")
    return {
        "records": nxt,
        "shard_records": shard.records,
        "copies": copies,
        "brokers_per_copy": shard.brokers,
        "files": copies * len(shard.files),
        "seconds": time.perf_counter() - t,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", required=True, help="the shard: a kraftlake log of one generated history")
    p.add_argument("--to", required=True, help="the new log (must not exist)")
    p.add_argument("--copies", type=int, required=True, help="copies of the shard, laid end to end")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes making files (0: this one)")
    p.add_argument("--group", type=int, default=10, help="copies made from one decode of a shard file")
    p.add_argument("--topic-prefix", default="topic", help="the shard's topic prefix (WorkloadConfig.topic_prefix)")
    p.add_argument("--brokers", type=int, help="brokers per copy (default: the shard's highest broker id + 1)")
    p.add_argument("--start-ms", type=int, help="time of the first operation (default: the workload's)")
    p.add_argument("--step-ms", type=int, help="time between operations (default: the workload's)")
    a = p.parse_args(argv)
    if a.copies < 1:
        p.error("--copies must be at least 1")
    result = tile(
        a.source,
        a.to,
        a.copies,
        workers=a.workers,
        group=a.group,
        topic_prefix=a.topic_prefix,
        start_ms=a.start_ms,
        step_ms=a.step_ms,
        brokers=a.brokers,
    )
    result["records_per_s"] = round(result["records"] / result["seconds"])
    self_ = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_s"] = round(self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime, 1)
    print("| records | copies | files | seconds | records/s | CPU s |", file=sys.stdout)
    print("|---|---|---|---|---|---|")
    print(
        f"| {result['records']:,} | {a.copies} | {result['files']} | {result['seconds']:.1f} |"
        f" {result['records_per_s']:,} | {result['cpu_s']} |".replace(",", " ")
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
