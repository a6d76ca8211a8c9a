"""Append throughput of kraftlake's appender beside raw delta-rs, and the cost of opening and reading
a long log before and after ``maintain``.

    python bench/append.py --quick              # smoke run, about two minutes
    python bench/append.py                      # full run (1 000- and 10 000-commit logs)
    python bench/append.py --json bench/out/append.json --workdir /mnt/fast

What is measured
----------------
*Append.* For each batch size (1, 10, 100, 1 000, 10 000 records) a fresh log and fresh raw tables.
kraftlake: the wall time of ``log.append(batch)``, which includes validation, the Arrow conversion
(both columnar, ``records.columnar``), the Parquet write, the fenced Delta commit and the refresh
that follows: what a caller pays. ``--inputs`` picks the forms a batch arrives in, one kraftlake
row each: ``python`` (Structs built in Python), ``jsonl`` (the batch's JSON Lines bytes, split and
decoded inside the timed call, as ``kraftlake append`` does), ``reference`` (Structs through the
per-record path the columnar one replaced: ``normalize_batch`` and ``arrow.to_table``), ``arrow``
(a pyarrow Table of the rows, ``records.arrow_input``), ``msgpack`` (the records as msgpack bytes, decoded and
checked as the HTTP service does, ``service_msgpack``). CPU ms per commit (``time.process_time``,
all threads) is reported beside wall time. Raw: the same records converted once, untimed, with ``records.arrow.to_table``, then
``deltalake.write_deltalake(dt, table, mode="append")`` into a table created with the log's schema
and table properties, reusing one ``DeltaTable`` object (the issue's baseline). A second raw row
re-opens that object every ``REOPEN_EVERY`` commits, as the log does, because a long-lived
``DeltaTable`` slows down with the number of commits applied to it. Both raw rows write the same
codec as kraftlake's files (zstd) unless ``--raw-compression`` says otherwise. The writers take
turns commit by commit, in rotating order, so drift on a shared machine hits them alike. One
untimed warm-up commit per table comes first.

*Where the time goes.* A second, shorter pass wraps the functions ``Log.append`` calls
(``to_table``, ``pyarrow.parquet.write_table``, ``DeltaTable.create_write_transaction``, ...)
with timers and reports each stage's share. Validation is timed from the call to the moment the
appender reads its clock after validating. Only this pass runs with the wrappers.

*Open and read.* Logs of 1 000 and (``--big``) 10 000 commits of ``--log-batch`` records. Each
measurement runs in a fresh Python process (median of ``--repeat``), which also gives the
reader's own peak memory: ``Log.open(path)``, ``Log.open(path).read()`` (records) and
``Log.open(path).at().table()`` (Arrow only). Then a few appends on top of the long log, then
``log.maintain(retention_hours=0)``, then the same again.

The 10 000-commit log is built by writing what kraftlake's appender writes without going through
delta-rs's commit path, whose cost grows with the number of files in the table (a build through
it took many minutes, each commit slower than the last: bench/RESULTS.md). Commit 1 is a real
``log.append``; its JSON commit serves as the template for commits 2..N (same actions and metadata, new file, offsets, stats and
timestamps), each data file is written with kraftlake's ``to_table`` and the codec of the real
file, and delta-rs writes the checkpoints at the versions its post-commit hook does. The result is
checked through ``Log.open`` (version, last offset) and by the readers (every offset 0..n-1 once),
and the appends that follow go through the real appender. ``--big-build append`` builds it with
real appends instead.
"""

from __future__ import annotations

import abc
import argparse
import base64
import copy
import importlib.metadata
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, WriterProperties, write_deltalake
from rich import box
from rich.console import Console
from rich.table import Table

import kraftlake.logging
import kraftlake.records.store.appending as append_module
import kraftlake.records.store.log as log_module
from kraftlake import Appender
from kraftlake.records import (
    BrokerRegistrationChange,
    Log,
    NoOp,
    Partition,
    PartitionChange,
    Record,
    ReplicaDirectory,
    normalize,
)
from kraftlake.records import arrow as arrow_module
from kraftlake.records import columnar as columnar_module
from kraftlake.records.arrow import LOG_SCHEMA, to_table
from kraftlake.records.codec import encode_lines, normalize_batch
from kraftlake.records.columnar import Validated, from_builtins_batch, from_lines
from kraftlake.service.limits import Limits

SIZES = (1, 10, 100, 1_000, 10_000)
FULL_COMMITS = {1: 200, 10: 200, 100: 200, 1_000: 100, 10_000: 30}
QUICK_COMMITS = {1: 20, 10: 20, 100: 20, 1_000: 10, 10_000: 5}
GOAL_RATIO = 1.0
GOAL_MIN_BATCH = 1
INPUTS = {
    "python": ("kraftlake", "kraftlake Log.append"),
    "jsonl": ("kraftlake_jsonl", "kraftlake JSON Lines"),
    "reference": ("kraftlake_reference", "kraftlake, per-record path"),
    "arrow": ("kraftlake_arrow", "kraftlake Arrow rows"),
    "msgpack": ("kraftlake_msgpack", "kraftlake msgpack"),
}
"""Batch forms kraftlake is timed with (``--inputs``): Python Structs, JSON Lines bytes (decoded
inside the timed call, as ``kraftlake append`` does), and Python Structs through the per-record
reference path that ``records.columnar`` replaced (``normalize_batch``, ``arrow.to_table``), and
a pyarrow Table of the batch's rows (``records.arrow_input``: the raw rows' table without the
columns the log computes, offsets and times included), and msgpack bytes of the records as the
HTTP service receives them (``service_msgpack``)."""
ARROW_DROPPED = ["offset", "ts_ms", "key", "producer", "producer_seq", "record"]
_ITEMS = msgspec.msgpack.Decoder(list[msgspec.Raw])


def service_msgpack(packed: bytes) -> list[Record]:
    """The records of a msgpack array as the HTTP service checks a body of them: one over
    ``max_record_bytes`` arrives as items, decoded typed in one call (``from_msgpack_items``,
    where the code measured has it; otherwise, as sessions before 5 measured it, decoded to
    objects and checked by ``from_builtins_batch``); a smaller one as objects."""
    typed = getattr(columnar_module, "from_msgpack_items", None)
    if typed is not None and len(packed) > Limits().max_record_bytes:
        items = _ITEMS.decode(packed)
        out = typed(items)
        return out if out is not None else from_builtins_batch([msgspec.msgpack.decode(i) for i in items])
    return from_builtins_batch(msgspec.msgpack.decode(packed))


OFFSET_TXN = getattr(log_module, "OFFSET_TXN", "kraftlake.offset")
TABLE_PROPERTIES = dict(getattr(log_module, "TABLE_PROPERTIES", {}))
REOPEN_EVERY = getattr(log_module, "REOPEN_EVERY", 100)
FAST_BUILD_ABOVE = 2_000
"""Logs with more commits than this are built the fast way unless ``--big-build append``."""


# -- workload --------------------------------------------------------------------------------------


class Workload:
    """A deterministic stream of KRaft metadata records for a small JBOD cluster.

    Mostly ``PartitionChange`` (ISR shrink/expand, leader elections, a few reassignments with
    replicas and directory assignment), some new ``Partition``s with replicas and assignment,
    ``BrokerRegistrationChange`` (fencing, controlled shutdown, log dirs) and ``NoOp`` heartbeats.
    Partition state is tracked, so ISRs stay subsets of the replicas and leaders stay in the ISR.
    """

    MIX = (("PartitionChange", 0.82), ("Partition", 0.08), ("BrokerRegistrationChange", 0.06), ("NoOp", 0.04))

    def __init__(self, seed: int, *, brokers: int = 9, topics: int = 200, dirs_per_broker: int = 2) -> None:
        import random

        self.rng = random.Random(seed)
        self.brokers = list(range(brokers))
        self.dirs = {b: [self._uuid() for _ in range(dirs_per_broker)] for b in self.brokers}
        self.epochs = {b: self.rng.randrange(1_000, 100_000) for b in self.brokers}
        self.topics = [self._uuid() for _ in range(topics)]
        self.next_partition = {t: 0 for t in self.topics}
        self.state: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], int]] = {}
        self.keys: list[tuple[str, int]] = []
        for t in self.topics:
            for _ in range(self.rng.randrange(1, 25)):
                self._new_partition(t)
        kinds, weights = zip(*self.MIX)
        self._kinds, self._cum = kinds, [sum(weights[: i + 1]) for i in range(len(weights))]

    def _uuid(self) -> str:
        while True:
            raw = self.rng.randbytes(16)
            if int.from_bytes(raw[:8], "big") or int.from_bytes(raw[8:], "big") >= 100:
                return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def _assignment(self, replicas: tuple[int, ...]) -> tuple[ReplicaDirectory, ...]:
        return tuple(ReplicaDirectory(broker=b, directory=self.rng.choice(self.dirs[b])) for b in replicas)

    def _new_partition(self, topic: str) -> tuple[str, int, tuple[int, ...]]:
        pid = self.next_partition[topic]
        self.next_partition[topic] = pid + 1
        replicas = tuple(self.rng.sample(self.brokers, 3))
        self.state[(topic, pid)] = (replicas, replicas, replicas[0])
        self.keys.append((topic, pid))
        return topic, pid, replicas

    def record(self) -> Record:
        rng = self.rng
        x = rng.random()
        kind = next(k for k, c in zip(self._kinds, self._cum) if x < c) if x < self._cum[-1] else "NoOp"
        if kind == "PartitionChange":
            topic, pid = rng.choice(self.keys)
            replicas, isr, leader = self.state[(topic, pid)]
            y = rng.random()
            if y < 0.05:  # reassignment: new replicas, their directories, full ISR
                new = tuple(rng.sample(self.brokers, 3))
                self.state[(topic, pid)] = (new, new, new[0])
                return PartitionChange(
                    topic_id=topic,
                    partition_id=pid,
                    replicas=new,
                    isr=new,
                    leader=new[0],
                    assignment=self._assignment(new),
                )
            if y < 0.30 and len(isr) > 1:  # leader election within the ISR
                new_leader = rng.choice([b for b in isr if b != leader] or list(isr))
                self.state[(topic, pid)] = (replicas, isr, new_leader)
                return PartitionChange(topic_id=topic, partition_id=pid, leader=new_leader)
            # ISR shrink or expand; the leader changes only when it dropped out
            k = rng.randrange(1, len(replicas) + 1)
            keep = set(rng.sample(replicas, k))
            new_isr = tuple(b for b in replicas if b in keep)
            new_leader = leader if leader in new_isr else new_isr[0]
            self.state[(topic, pid)] = (replicas, new_isr, new_leader)
            return PartitionChange(
                topic_id=topic,
                partition_id=pid,
                isr=new_isr,
                leader=new_leader if new_leader != leader or rng.random() < 0.5 else -2,
            )
        if kind == "Partition":
            topic = rng.choice(self.topics)
            topic, pid, replicas = self._new_partition(topic)
            return Partition(
                topic_id=topic,
                partition_id=pid,
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
                assignment=self._assignment(replicas),
            )
        if kind == "BrokerRegistrationChange":
            b = rng.choice(self.brokers)
            dirs = self.dirs[b]
            log_dirs = tuple(rng.sample(dirs, rng.randrange(1, len(dirs) + 1))) if rng.random() < 0.3 else ()
            return BrokerRegistrationChange(
                broker_id=b,
                broker_epoch=self.epochs[b],
                fenced=rng.choice((-1, 0, 0, 1)),
                in_controlled_shutdown=1 if rng.random() < 0.1 else 0,
                log_dirs=log_dirs,
            )
        return NoOp()

    def batch(self, n: int) -> list[Record]:
        return [self.record() for _ in range(n)]


# -- small helpers ---------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: with 30 samples, p95 is the 29th)."""
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def own_peak_rss_mb() -> float:
    """This process image's peak RSS (VmHWM). A child's ru_maxrss starts at its parent's peak
    (Linux carries it across fork and exec), so the readers report this instead."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return peak_rss_mb()


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def fmt_rate(x: float) -> str:
    if x >= 100_000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:,.1f}"


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.1f}" if x < 1_000 else f"{x:,.0f}"


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def parse_sizes(text: str) -> list[int]:
    return [int(s.replace("_", "")) for s in text.split(",") if s.strip()]


def parse_commits(text: str) -> dict[int, int]:
    out = {}
    for part in text.split(","):
        if part.strip():
            size, n = part.split("=")
            out[int(size.replace("_", ""))] = int(n.replace("_", ""))
    return out


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def machine_info(workdir: str) -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    fs = "?"
    try:
        best = ""
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mnt, typ, *_ = line.split()
            if os.path.realpath(workdir).startswith(mnt) and len(mnt) > len(best):
                best, fs = mnt, f"{typ} ({mnt})"
    except OSError:
        pass
    commit = None
    try:  # read-only git: no index refresh, no locks
        repo = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
        git = ["git", "-C", repo]
        commit = (
            subprocess.run(
                git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10, env=env
            ).stdout.strip()
            or None
        )
        changed = subprocess.run(
            git + ["diff", "--name-only", "HEAD", "--", "kraftlake", "records", "replay", "spark", "statemachine"],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
        ).stdout.split()
        if commit and changed:
            commit += f" + uncommitted changes to {', '.join(changed)}"
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": affinity,
        "memory_gb": mem_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "deltalake": deltalake.__version__,
        "pyarrow": pa.__version__,
        "msgspec": msgspec.__version__,
        "kraftlake": _version("kraftlake"),
        "kraftlake_commit": commit,
        "workdir_fs": fs,
        "loadavg_start": list(os.getloadavg()),
    }


# -- stage timing ----------------------------------------------------------------------------------


STAGES = (
    ("validate", "validate (normalize)"),
    ("to_table", "to_table (Arrow)"),
    ("parquet", "Parquet write"),
    ("commit", "Delta commit"),
    ("update", "update_incremental"),
    ("txn", "txn lookups"),
    ("reopen", "re-open table"),
    ("other", "other"),
)


class StageTimer:
    """Wraps the functions ``Log.append`` calls with timers, for as long as it is active."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = defaultdict(float)
        self.missing: list[str] = []
        self._patches: list[tuple[Any, str, Any]] = []
        self._validated_at: float | None = None

    def _wrap(self, owner: Any, attr: str, stage: str) -> None:
        orig = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
        if orig is None:
            self.missing.append(f"{getattr(owner, '__name__', owner)}.{attr}")
            return
        acc = self.acc
        perf = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = perf()
            try:
                return orig(*args, **kwargs)
            finally:
                acc[stage] += perf() - t

        setattr(owner, attr, timed)
        self._patches.append((owner, attr, orig))

    def __enter__(self) -> StageTimer:
        self._wrap(append_module, "to_table", "to_table")
        self._wrap(pq, "write_table", "parquet")
        self._wrap(DeltaTable, "create_write_transaction", "commit")
        self._wrap(DeltaTable, "update_incremental", "update")
        self._wrap(DeltaTable, "transaction_version", "txn")
        self._wrap(log_module, "open_table", "reopen")
        clock = getattr(append_module, "now_ms", None)
        if clock is None:
            self.missing.append("records.appending.now_ms (validation not separated)")
        else:

            def now_ms() -> int:
                if self._validated_at is None:
                    self._validated_at = time.perf_counter()
                return clock()

            append_module.now_ms = now_ms  # type: ignore[attr-defined]
            self._patches.append((append_module, "now_ms", clock))
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, attr, orig in reversed(self._patches):
            setattr(owner, attr, orig)
        self._patches.clear()

    def call(self, fn: Callable[[], Any]) -> float:
        """Run one append; returns its wall time and books validation and 'other'."""
        self._validated_at = None
        before = sum(self.acc.values())
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        if self._validated_at is not None:
            self.acc["validate"] += self._validated_at - t0
        self.acc["other"] += (t1 - t0) - (sum(self.acc.values()) - before)
        return t1 - t0

    def report(self, commits: int, total: float) -> dict[str, Any]:
        return {
            "commits": commits,
            "ms_per_commit": total / commits * 1000,
            "stages_ms": {k: self.acc.get(k, 0.0) / commits * 1000 for k, _ in STAGES},
            "stages_share": {k: self.acc.get(k, 0.0) / total for k, _ in STAGES},
            "not_instrumented": self.missing,
        }


# -- append benchmark ------------------------------------------------------------------------------


class Writer(abc.ABC):
    """One contender: appends the batch it is given to its own table, one commit per call."""

    def __init__(self, name: str, label: str) -> None:
        self.name, self.label = name, label
        self.samples: list[float] = []
        self.cpu: list[float] = []
        """CPU seconds of this process (all its threads) per commit."""

    @abc.abstractmethod
    def write(self, batch: list[Record], table: pa.Table, jsonl: bytes, packed: bytes = b"") -> None:
        """Append one batch (kraftlake takes the records or their JSON Lines, raw delta-rs the
        Arrow table)."""

    def finish(self) -> dict[str, Any]:
        return {}


class KraftlakeWriter(Writer):
    def __init__(self, path: str, via: str, form: str = "python") -> None:
        name, label = INPUTS[form]
        super().__init__(name, label if via == "log" else label.replace("Log.append", "Appender"))
        self.form = form
        self.log = Log.create(path)
        self.append = Appender(self.log, producer="bench").append if via == "appender" else self.log.append

    def write(self, batch: list[Record], table: pa.Table, jsonl: bytes, packed: bytes = b"") -> None:
        if self.form == "jsonl":
            self.append(from_lines(jsonl.splitlines()), validated=True)
        elif self.form == "msgpack":
            self.append(service_msgpack(packed), validated=True)
        elif self.form == "reference":
            with reference_path():
                self.append(batch)
        elif self.form == "arrow":
            self.append(table.drop_columns(ARROW_DROPPED))
        else:
            self.append(batch)

    def finish(self) -> dict[str, Any]:
        fresh = Log.open(self.log.path)
        return {"version": fresh.version, "last_offset": fresh.last_offset}


class RawWriter(Writer):
    def __init__(
        self, name: str, label: str, path: str, reopen_every: int, writer_properties: WriterProperties | None
    ) -> None:
        super().__init__(name, label)
        self.path = path
        self.dt = DeltaTable.create(path, schema=LOG_SCHEMA, configuration=TABLE_PROPERTIES or None)
        self.reopen_every = reopen_every
        self.props = writer_properties
        self.since_open = 0

    def write(self, batch: list[Record], table: pa.Table, jsonl: bytes, packed: bytes = b"") -> None:
        if self.reopen_every and self.since_open >= self.reopen_every:
            self.dt = DeltaTable(self.path)
            self.since_open = 0
        write_deltalake(self.dt, table, mode="append", writer_properties=self.props)
        self.since_open += 1

    def finish(self) -> dict[str, Any]:
        dt = DeltaTable(self.path)
        return {"version": dt.version(), "rows": dt.to_pyarrow_dataset().count_rows()}


class reference_path:
    """``Log.append`` through the per-record path ``records.columnar`` replaced, while active."""

    def __enter__(self) -> None:
        self.saved = append_module.from_python, append_module.to_table
        append_module.from_python = lambda records: Validated(normalize_batch(records))  # type: ignore[attr-defined]
        append_module.to_table = arrow_module.to_table  # type: ignore[attr-defined]

    def __exit__(self, *exc: Any) -> None:
        append_module.from_python, append_module.to_table = self.saved  # type: ignore[attr-defined]


def summarize(samples: list[float], size: int) -> dict[str, Any]:
    total = sum(samples)
    ms = [s * 1000 for s in samples]
    return {
        "commits": len(samples),
        "records": len(samples) * size,
        "seconds": total,
        "records_per_s": len(samples) * size / total,
        "commits_per_s": len(samples) / total,
        "ms_p50": statistics.median(ms),
        "ms_p95": percentile(ms, 95),
        "ms_p99": percentile(ms, 99),
        "ms_max": max(ms),
        "ms_mean": statistics.fmean(ms),
    }


def bench_size(
    args: argparse.Namespace, work: Workload, workdir: str, size: int, commits: int, progress: Console
) -> dict[str, Any]:
    gen_s = 0.0

    def generate(i: int) -> tuple[list[Record], pa.Table, bytes, bytes]:
        """Batch i and its Arrow table for the raw rows, made just before use (untimed): a heap of
        pre-built batches would make the collector's full passes, inside the timed appends, cost
        what they would not cost in a service."""
        nonlocal gen_s
        t = time.perf_counter()
        batch = work.batch(size)
        table = to_table(batch, first_offset=i * size, ts_ms=time.time_ns() // 1_000_000)
        jsonl = encode_lines(batch)
        packed = msgspec.msgpack.encode(batch)
        gen_s += time.perf_counter() - t
        return batch, table, jsonl, packed

    props = None if args.raw_compression == "default" else WriterProperties(compression=args.raw_compression.upper())
    base = os.path.join(workdir, f"append-{size}")
    writers: list[Writer] = [KraftlakeWriter(f"{base}-kraftlake-{form}", args.via, form) for form in args.inputs]
    if "reuse" in args.raw:
        writers.append(RawWriter("raw_one_table", "delta-rs, one DeltaTable", base + "-raw-reuse", 0, props))
    if "reopen" in args.raw:
        writers.append(
            RawWriter("raw_reopen", f"delta-rs, reopen/{REOPEN_EVERY}", base + "-raw-reopen", REOPEN_EVERY, props)
        )
    batch, table, jsonl, packed = generate(0)
    for w in writers:  # warm-up commit, untimed
        w.write(batch, table, jsonl, packed)
    perf, cpu = time.perf_counter, time.process_time
    for i in range(1, commits + 1):
        batch, table, jsonl, packed = generate(i)
        k = i % len(writers)
        for w in writers[k:] + writers[:k]:
            c, t = cpu(), perf()
            w.write(batch, table, jsonl, packed)
            w.samples.append(perf() - t)
            w.cpu.append(cpu() - c)
    del batch, table, jsonl, packed
    result: dict[str, Any] = {"batch": size, "commits": commits, "generate_s": gen_s, "writers": {}}
    for w in writers:
        s = summarize(w.samples, size)
        s["cpu_ms_p50"] = statistics.median(w.cpu) * 1000
        s["label"] = w.label
        s["check"] = w.finish()
        s["samples_ms"] = [round(x * 1000, 3) for x in w.samples]
        result["writers"][w.name] = s
    ours = {n: s for n, s in result["writers"].items() if n.startswith("kraftlake")}
    expect = {"version": commits + 1, "last_offset": (commits + 1) * size - 1}
    for name, s in ours.items():
        if s["check"] != expect:
            raise SystemExit(f"{name} log for batch {size}: expected {expect}, found {s['check']}")
    k = next(iter(ours.values()))  # the first form asked for: "kraftlake ÷ this" is relative to it
    for name, s in result["writers"].items():
        if name != next(iter(ours)):
            s["ratio"] = k["records_per_s"] / s["records_per_s"]
    raws = [s for n, s in result["writers"].items() if n not in ours]
    if raws:
        best = max(raws, key=lambda s: s["records_per_s"])
        result["best_raw"] = best["label"]
        result["ratio_vs_best_raw"] = k["records_per_s"] / best["records_per_s"]
        result["ratios_vs_best_raw"] = {n: s["records_per_s"] / best["records_per_s"] for n, s in ours.items()}
    for w in writers:
        shutil.rmtree(getattr(w, "path", None) or w.log.path, ignore_errors=True)  # type: ignore[attr-defined]
    result["peak_rss_mb"] = peak_rss_mb()
    progress.log(
        f"batch {size:>6}: kraftlake {fmt_rate(k['records_per_s'])} rec/s, "
        + ", ".join(f"{s['label']} {fmt_rate(s['records_per_s'])} rec/s" for s in raws)
    )
    return result


def breakdown_size(work: Workload, workdir: str, size: int, commits: int, via: str) -> dict[str, Any]:
    path = os.path.join(workdir, f"breakdown-{size}")
    log = Log.create(path)
    append = Appender(log, producer="bench").append if via == "appender" else log.append
    append(work.batch(size))  # warm-up (first append also checks the table schema)
    total = 0.0
    with StageTimer() as timer:
        for _ in range(commits):
            b = work.batch(size)
            total += timer.call(lambda b=b: append(b))
    out = timer.report(commits, total)
    out["batch"] = size
    shutil.rmtree(path, ignore_errors=True)
    return out


# -- building long logs ----------------------------------------------------------------------------


def build_by_append(path: str, commits: int, batch: int, work: Workload, progress: Console) -> dict[str, Any]:
    log = Log.create(path)
    samples = []
    t0 = time.perf_counter()
    for i in range(commits):
        b = work.batch(batch)
        t = time.perf_counter()
        log.append(b)
        samples.append(time.perf_counter() - t)
        if (i + 1) % 1000 == 0:
            progress.log(f"  built {i + 1}/{commits} commits, {time.perf_counter() - t0:.0f} s")
    head, tail = samples[:100], samples[-100:]
    return {
        "method": "append",
        "seconds": time.perf_counter() - t0,
        "append_seconds": sum(samples),
        "ms_per_commit_first_100_p50": statistics.median(head) * 1000,
        "ms_per_commit_last_100_p50": statistics.median(tail) * 1000,
    }


class TemplateMismatch(Exception):
    pass


def build_fast(path: str, commits: int, batch: int, work: Workload, progress: Console) -> dict[str, Any]:
    """Write what the appender writes, commit by commit, without delta-rs's commit path.

    Commit 1 is a real ``log.append``; its JSON commit is the template for the others.
    """
    t0 = time.perf_counter()
    log = Log.create(path)
    log.append(work.batch(batch))
    log_dir = os.path.join(path, "_delta_log")
    lines = Path(log_dir, f"{1:020d}.json").read_text().splitlines()
    actions = [json.loads(line) for line in lines if line.strip()]
    kinds = [next(iter(a)) for a in actions]
    if sorted(kinds) != sorted(["commitInfo", "add", "txn"]):
        raise TemplateMismatch(f"commit 1 holds actions {kinds}, expected commitInfo, add and one txn")
    add = next(a["add"] for a in actions if "add" in a)
    txn = next(a["txn"] for a in actions if "txn" in a)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    if txn.get("appId") != OFFSET_TXN:
        raise TemplateMismatch(f"commit 1's app transaction is {txn.get('appId')!r}, not {OFFSET_TXN!r}")
    batch_id = info.get("kraftlake.batch")
    first_tag = f"{0:020d}"
    if not batch_id or batch_id not in add["path"] or first_tag not in add["path"]:
        raise TemplateMismatch(f"cannot derive file names from {add['path']!r}")
    stats0 = json.loads(add["stats"]) if add.get("stats") else None
    codec = pq.ParquetFile(os.path.join(path, add["path"])).metadata.row_group(0).column(0).compression
    compression = {"UNCOMPRESSED": "none"}.get(codec, codec.lower())
    interval = int(TABLE_PROPERTIES.get("delta.checkpointInterval", "100"))
    checkpoints = 0
    for version in range(2, commits + 1):
        records = [normalize(r) for r in work.batch(batch)]
        first = (version - 1) * batch
        last = first + len(records) - 1
        ts_ms = time.time_ns() // 1_000_000
        data = to_table(records, first_offset=first, ts_ms=ts_ms)
        bid = str(uuid.uuid4())
        name = add["path"].replace(first_tag, f"{first:020d}").replace(batch_id, bid)
        full = os.path.join(path, name)
        pq.write_table(data, full, compression=compression)
        st = os.stat(full)
        new_add = copy.deepcopy(add)
        new_add.update(path=name, size=st.st_size, modificationTime=int(st.st_mtime * 1000))
        if stats0 is not None:
            stats = copy.deepcopy(stats0)
            stats["numRecords"] = len(records)
            for key, fn in (("minValues", pc.min), ("maxValues", pc.max)):
                for col in stats.get(key, {}):
                    stats[key][col] = fn(data.column(col)).as_py()
            new_add["stats"] = json.dumps(stats)
        new_info = dict(info, timestamp=ts_ms)
        for key, value in (
            ("kraftlake.batch", bid),
            ("kraftlake.first_offset", str(first)),
            ("kraftlake.last_offset", str(last)),
            ("kraftlake.records", str(len(records))),
        ):
            if key in new_info:
                new_info[key] = value
        out = []
        for kind in kinds:
            obj = {"commitInfo": new_info, "add": new_add, "txn": dict(txn, version=last)}[kind]
            out.append(json.dumps({kind: obj}, separators=(",", ":")))
        with open(os.path.join(log_dir, f"{version:020d}.json"), "x") as f:  # put-if-absent
            f.write("\n".join(out) + "\n")
        if (version + 1) % interval == 0:  # where the appender's post-commit hook checkpoints
            DeltaTable(path).create_checkpoint()
            checkpoints += 1
        if version % 2000 == 0:
            progress.log(f"  built {version}/{commits} commits, {time.perf_counter() - t0:.0f} s")
    check = Log.open(path)
    expect = (commits, commits * batch - 1)
    if (check.version, check.last_offset) != expect:
        raise SystemExit(
            f"fast-built log: expected (version, last offset) {expect}, got {(check.version, check.last_offset)}"
        )
    return {
        "method": "fast",
        "seconds": time.perf_counter() - t0,
        "checkpoints_written": checkpoints,
        "codec": compression,
    }


# -- open / read in a fresh process ----------------------------------------------------------------


def read_worker(path: str, repeat: int, expect: int) -> dict[str, Any]:
    """Runs in its own process: open, read records, read Arrow; median of ``repeat`` each."""
    kraftlake.logging.configure(level="warning")
    out: dict[str, Any] = {}
    rss_start = own_peak_rss_mb()
    opens, reads, arrows = [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        Log.open(path)
        opens.append(time.perf_counter() - t)
    for i in range(repeat):
        t = time.perf_counter()
        records = Log.open(path).read()
        reads.append(time.perf_counter() - t)
        if i == 0:
            offsets = [r.offset for r in records]
            out["records"] = len(records)
            out["offsets_ok"] = offsets == list(range(expect))
        del records
    for _ in range(repeat):
        t = time.perf_counter()
        table = Log.open(path).at().table()
        arrows.append(time.perf_counter() - t)
        out["rows"] = table.num_rows
        del table
    snap = Log.open(path).at()
    out.update(
        version=snap.version,
        files=len(snap.files()),
        open_s=statistics.median(opens),
        read_s=statistics.median(reads),
        table_s=statistics.median(arrows),
        open_samples_s=opens,
        read_samples_s=reads,
        table_samples_s=arrows,
        reader_rss_at_start_mb=rss_start,
        reader_peak_rss_mb=own_peak_rss_mb(),
    )
    return out


def measure_reads(path: str, repeat: int, expect: int) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--read-worker",
            path,
            "--repeat",
            str(repeat),
            "--expect",
            str(expect),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"read worker failed on {path}:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["records"] != expect or not result["offsets_ok"] or result["rows"] != expect:
        raise SystemExit(f"read of {path}: expected offsets 0..{expect - 1} once each, got {result}")
    result["data_mb"] = dir_bytes(path) / 2**20
    result["delta_log_mb"] = dir_bytes(os.path.join(path, "_delta_log")) / 2**20
    return result


def probe_appends(path: str, commits: int, batch: int, work: Workload) -> dict[str, Any]:
    """A few real appends on top of a long log, with the stage timers on."""
    log = Log.open(path)
    samples = []
    with StageTimer() as timer:
        for _ in range(commits):
            b = work.batch(batch)
            samples.append(timer.call(lambda b=b: log.append(b)))
    out = timer.report(commits, sum(samples))
    out["ms_p50"] = statistics.median(samples) * 1000
    return out


def bench_log(
    args: argparse.Namespace, work: Workload, workdir: str, commits: int, progress: Console
) -> dict[str, Any]:
    path = os.path.join(workdir, f"log-{commits}")
    batch = args.log_batch
    fast = args.big_build == "fast" and commits > FAST_BUILD_ABOVE
    progress.log(f"log of {commits} commits x {batch} records: building ({'fast' if fast else 'append'})")
    if fast:
        try:
            build = build_fast(path, commits, batch, work, progress)
        except TemplateMismatch as exc:
            progress.log(f"  fast build not possible ({exc}); building with real appends")
            shutil.rmtree(path, ignore_errors=True)
            build = build_by_append(path, commits, batch, work, progress)
            build["fast_build_refused"] = str(exc)
    else:
        build = build_by_append(path, commits, batch, work, progress)
    result: dict[str, Any] = {"commits": commits, "records_per_commit": batch, "build": build}
    n = commits * batch
    progress.log(f"  built in {build['seconds']:.1f} s; reading (before maintain)")
    result["before"] = measure_reads(path, args.repeat, n)
    if args.probe_commits:
        result["append_before_maintain"] = probe_appends(path, args.probe_commits, batch, work)
        n += args.probe_commits * batch
    progress.log("  maintain")
    t = time.perf_counter()
    report = Log.open(path).maintain(retention_hours=0)
    result["maintain_s"] = time.perf_counter() - t
    result["maintain"] = report.to_dict()
    progress.log(f"  maintained in {result['maintain_s']:.1f} s; reading (after maintain)")
    result["after"] = measure_reads(path, args.repeat, n)
    if args.probe_commits:
        result["append_after_maintain"] = probe_appends(path, args.probe_commits, batch, work)
    shutil.rmtree(path, ignore_errors=True)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


# -- output ----------------------------------------------------------------------------------------


def print_machine(console: Console, m: dict[str, Any], args: argparse.Namespace) -> None:
    t = Table(title="kraftlake append benchmark", box=box.SIMPLE_HEAD, show_header=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("machine", f"{m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gb']} GB, {m['os']}")
    t.add_row(
        "versions",
        f"Python {m['python']}, deltalake {m['deltalake']}, pyarrow {m['pyarrow']}, "
        f"msgspec {m['msgspec']}, kraftlake {m['kraftlake']} ({m['kraftlake_commit'] or '?'})",
    )
    t.add_row("workdir", f"{args.workdir_resolved} on {m['workdir_fs']}")
    t.add_row("load average", " ".join(f"{x:.2f}" for x in m["loadavg_start"]) + " (1/5/15 min, at start)")
    t.add_row(
        "mode",
        f"{'quick' if args.quick else 'full'}; appends via {args.via}; raw codec {args.raw_compression}; seed {args.seed}",
    )
    console.print(t)


def print_append(console: Console, results: list[dict[str, Any]]) -> None:
    t = Table(title="Append throughput (one batch = one Delta commit)", box=box.SIMPLE_HEAD)
    for col, justify in (
        ("batch", "right"),
        ("writer", "left"),
        ("commits", "right"),
        ("records/s", "right"),
        ("commits/s", "right"),
        ("ms/commit p50", "right"),
        ("p95", "right"),
        ("p99", "right"),
        ("max", "right"),
        ("CPU ms/commit p50", "right"),
        ("kraftlake ÷ this", "right"),
    ):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in results:
        for i, (_name, s) in enumerate(r["writers"].items()):
            t.add_row(
                f"{r['batch']:,}" if i == 0 else "",
                s["label"],
                str(s["commits"]),
                fmt_rate(s["records_per_s"]),
                f"{s['commits_per_s']:.1f}",
                fmt_ms(s["ms_p50"]),
                fmt_ms(s["ms_p95"]),
                fmt_ms(s["ms_p99"]),
                fmt_ms(s["ms_max"]),
                fmt_ms(s.get("cpu_ms_p50")),
                f"{s['ratio']:.2f}×" if "ratio" in s else "",
                end_section=i == len(r["writers"]) - 1,
            )
    console.print(t)

    g = Table(
        title=f"Goal: at ≥ {GOAL_MIN_BATCH:,} records per batch, kraftlake ≥ {GOAL_RATIO}× raw delta-rs",
        box=box.SIMPLE_HEAD,
    )
    for col in ("batch", "kraftlake", "records/s", "best raw records/s", "best raw", "ratio", "goal", "peak RSS MB"):
        g.add_column(col, justify="left" if col in ("kraftlake", "best raw") else "right")
    for r in results:
        if "ratios_vs_best_raw" not in r:
            continue
        best = max(
            (s for n, s in r["writers"].items() if n not in r["ratios_vs_best_raw"]), key=lambda s: s["records_per_s"]
        )
        for i, (name, ratio) in enumerate(r["ratios_vs_best_raw"].items()):
            k = r["writers"][name]
            if r["batch"] >= GOAL_MIN_BATCH:
                verdict = "[green]met[/green]" if ratio >= GOAL_RATIO else "[red]missed[/red]"
            else:
                verdict = f"(per-commit overhead: {k['ms_p50'] - best['ms_p50']:+.1f} ms p50)"
            g.add_row(
                f"{r['batch']:,}" if i == 0 else "",
                k["label"],
                fmt_rate(k["records_per_s"]),
                fmt_rate(best["records_per_s"]),
                best["label"],
                f"{ratio:.2f}×",
                verdict,
                f"{r['peak_rss_mb']:,.0f}" if i == 0 else "",
                end_section=i == len(r["ratios_vs_best_raw"]) - 1,
            )
    console.print(g)


def print_breakdown(console: Console, rows: list[dict[str, Any]], title: str, label: str = "batch") -> None:
    t = Table(title=title, box=box.SIMPLE_HEAD)
    t.add_column(label, justify="right")
    t.add_column("ms/commit", justify="right")
    for _, head in STAGES:
        t.add_column(head, justify="right")
    for r in rows:
        cells = []
        for key, _ in STAGES:
            ms, share = r["stages_ms"][key], r["stages_share"][key]
            cells.append("-" if ms < 0.005 and key not in ("other",) else f"{ms:.1f} ({share * 100:.0f}%)")
        t.add_row(r["row_label"] if "row_label" in r else f"{r['batch']:,}", f"{r['ms_per_commit']:.1f}", *cells)
    console.print(t)
    missing = sorted({m for r in rows for m in r.get("not_instrumented", [])})
    if missing:
        console.print(f"  not instrumented (booked under 'other'): {', '.join(missing)}")


def print_logs(console: Console, logs: list[dict[str, Any]]) -> None:
    t = Table(
        title="Open and read the whole log (fresh process each, median of repeats, warm page cache)",
        box=box.SIMPLE_HEAD,
    )
    for col in (
        "log",
        "state",
        "version",
        "files",
        "on disk",
        "Log.open",
        "open + read()",
        "open + at().table()",
        "reader peak RSS (after imports)¹",
    ):
        t.add_column(col, justify="left" if col in ("log", "state") else "right")
    for lg in logs:
        name = f"{lg['commits']:,} commits × {lg['records_per_commit']}"
        for i, (key, state) in enumerate((("before", "before maintain"), ("after", "after maintain"))):
            m = lg[key]
            t.add_row(
                name if i == 0 else f"({lg['before']['records']:,} records)",
                state,
                str(m["version"]),
                f"{m['files']:,}",
                f"{m['data_mb']:.0f} MB" if m["data_mb"] >= 10 else f"{m['data_mb']:.1f} MB",
                fmt_s(m["open_s"]),
                fmt_s(m["read_s"]),
                fmt_s(m["table_s"]),
                f"{m['reader_peak_rss_mb']:,.0f} MB ({m['reader_rss_at_start_mb']:,.0f})",
                end_section=i == 1,
            )
    console.print(t)
    console.print("  ¹ VmHWM of the reader process (a child's ru_maxrss would start at its parent's peak).")

    b = Table(title="Building, maintaining and appending to the long logs", box=box.SIMPLE_HEAD)
    for col in (
        "log",
        "built by",
        "build time",
        "build ms/commit (first 100 → last 100)",
        "maintain",
        "files before → after",
        "append p50 before maintain",
        "append p50 after maintain",
    ):
        b.add_column(col, justify="left" if col in ("log", "built by") else "right")
    for lg in logs:
        build = lg["build"]
        per = "-"
        if build["method"] == "append":
            per = f"{build['ms_per_commit_first_100_p50']:.1f} → {build['ms_per_commit_last_100_p50']:.1f}"
        mt = lg["maintain"]
        before = lg.get("append_before_maintain")
        after = lg.get("append_after_maintain")
        b.add_row(
            f"{lg['commits']:,} commits",
            "log.append" if build["method"] == "append" else "fast (template, see note)",
            f"{build['seconds']:.1f} s",
            per,
            fmt_s(lg["maintain_s"]),
            f"{mt['files_before']:,} → {mt['files_after']:,}",
            f"{before['ms_p50']:.1f} ms" if before else "-",
            f"{after['ms_p50']:.1f} ms" if after else "-",
        )
    console.print(b)
    if any(lg["build"]["method"] == "fast" for lg in logs):
        console.print(
            "  fast build: commit 1 by log.append; commits 2..N written as the appender writes them (data file by"
            " kraftlake's to_table in the same codec, JSON commit from commit 1's template, delta-rs checkpoints"
            " at the same versions), not through delta-rs's commit path, whose cost grows with the file count."
            " Checked by Log.open (version, last offset) and the readers (offsets 0..n-1 once each); the appends"
            " and maintain that follow are real."
        )
    probes = []
    for lg in logs:
        for key, state in (("append_before_maintain", "before maintain"), ("append_after_maintain", "after maintain")):
            if key in lg:
                probes.append(dict(lg[key], row_label=f"{lg['commits']:,} commits, {state}"))
    if probes:
        print_breakdown(
            console,
            probes,
            f"Where an append of {logs[0]['records_per_commit']} records goes on a long log",
            label="log",
        )


# -- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="smoke run: few commits, a 200-commit log, no 10 000-commit log"
    )
    p.add_argument("--sizes", type=parse_sizes, default=list(SIZES), help="batch sizes (default 1,10,100,1000,10000)")
    p.add_argument(
        "--commits",
        type=parse_commits,
        default={},
        help="timed commits per batch size, e.g. 1=200,1000=100 (default 200/200/200/100/30; quick 20/20/20/10/5)",
    )
    p.add_argument(
        "--via",
        choices=("log", "appender"),
        default="log",
        help="time Log.append (default) or kraftlake.Appender (exactly-once, producer + seq)",
    )
    p.add_argument(
        "--inputs",
        default="python,jsonl",
        help=f"kraftlake rows, by the form a batch arrives in: {', '.join(INPUTS)} (default python,jsonl)",
    )
    p.add_argument(
        "--raw",
        default="reuse,reopen",
        help="raw delta-rs rows: reuse (one DeltaTable), reopen (every REOPEN_EVERY commits)",
    )
    p.add_argument(
        "--raw-compression",
        choices=("zstd", "snappy", "default"),
        default="zstd",
        help="codec of the raw rows' Parquet files (zstd = what kraftlake writes; default = delta-rs's)",
    )
    p.add_argument(
        "--breakdown-sizes",
        type=parse_sizes,
        default=[1, 1_000, 10_000],
        help="batch sizes for the stage breakdown (empty to skip)",
    )
    p.add_argument(
        "--breakdown-commits", type=int, default=None, help="commits per breakdown size (default 20; quick 5)"
    )
    p.add_argument(
        "--logs",
        type=parse_sizes,
        default=None,
        help="commit counts of the logs to open and read (default 1000, plus 10000 with --big; quick 200)",
    )
    p.add_argument(
        "--big",
        dest="big",
        action="store_true",
        default=None,
        help="also the 10 000-commit log (default unless --quick)",
    )
    p.add_argument("--no-big", dest="big", action="store_false")
    p.add_argument(
        "--big-build",
        choices=("fast", "append"),
        default="fast",
        help=f"how to build logs of more than {FAST_BUILD_ABOVE} commits (see the module docstring)",
    )
    p.add_argument("--log-batch", type=int, default=10, help="records per commit in the open/read logs (default 10)")
    p.add_argument("--repeat", type=int, default=3, help="repeats of each open/read measurement (median)")
    p.add_argument(
        "--probe-commits",
        type=int,
        default=None,
        help="real appends timed on each long log before and after maintain (default 20; quick 5)",
    )
    p.add_argument("--seed", type=int, default=20240501)
    p.add_argument(
        "--workdir", default=None, help="where temporary tables go (default: a new temp dir); removed at the end"
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--json", dest="json_path", default=None, help="also write the results as JSON to this file")
    p.add_argument("--width", type=int, default=None, help="console width (default: terminal, or 200 when redirected)")
    p.add_argument("--read-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.read_worker:
        print(json.dumps(read_worker(args.read_worker, args.repeat, args.expect)))
        return 0

    kraftlake.logging.configure(level="warning")
    defaults = QUICK_COMMITS if args.quick else FULL_COMMITS
    commits = {s: args.commits.get(s, defaults.get(s, 20 if args.quick else 100)) for s in args.sizes}
    if args.big is None:
        args.big = not args.quick
    if args.logs is None:
        args.logs = [200] if args.quick else [1_000]
        if args.big:
            args.logs.append(10_000)
    if args.breakdown_commits is None:
        args.breakdown_commits = 5 if args.quick else 20
    if args.probe_commits is None:
        args.probe_commits = 5 if args.quick else 20
    args.raw = [r.strip() for r in args.raw.split(",") if r.strip()]
    args.inputs = [f.strip() for f in args.inputs.split(",") if f.strip()]
    unknown = set(args.inputs) - set(INPUTS)
    if unknown or not args.inputs:
        p.error(f"--inputs: choose from {', '.join(INPUTS)}")

    console = Console(width=args.width or (None if sys.stdout.isatty() else 200), highlight=False)
    progress = Console(stderr=True, highlight=False)
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="kraftlake-bench-", dir=args.workdir)
    args.workdir_resolved = workdir
    machine = machine_info(workdir)
    print_machine(console, machine, args)
    t_start = time.perf_counter()
    work = Workload(args.seed)
    results: dict[str, Any] = {
        "machine": machine,
        "config": {
            "quick": args.quick,
            "sizes": args.sizes,
            "commits": commits,
            "via": args.via,
            "raw": args.raw,
            "inputs": args.inputs,
            "raw_compression": args.raw_compression,
            "logs": args.logs,
            "log_batch": args.log_batch,
            "repeat": args.repeat,
            "probe_commits": args.probe_commits,
            "big_build": args.big_build,
            "seed": args.seed,
            "table_properties": TABLE_PROPERTIES,
            "reopen_every": REOPEN_EVERY,
            "workload_mix": dict(Workload.MIX),
        },
    }
    try:
        appends = [bench_size(args, work, workdir, s, commits[s], progress) for s in args.sizes]
        results["append"] = appends
        results["append_peak_rss_mb"] = peak_rss_mb()
        print_append(console, appends)

        if args.breakdown_sizes:
            progress.log("stage breakdown")
            rows = [breakdown_size(work, workdir, s, args.breakdown_commits, args.via) for s in args.breakdown_sizes]
            results["breakdown"] = rows
            print_breakdown(
                console,
                rows,
                f"Where kraftlake's append time goes ({args.breakdown_commits} commits per size, fresh log, timers on)",
            )

        logs = [bench_log(args, work, workdir, c, progress) for c in args.logs]
        results["logs"] = logs
        if logs:
            print_logs(console, logs)
    finally:
        if args.keep:
            progress.log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    results["peak_rss_mb"] = peak_rss_mb()
    results["wall_s"] = time.perf_counter() - t_start
    results["loadavg_end"] = list(os.getloadavg())
    console.print(
        f"peak memory (ru_maxrss): benchmark process {results['peak_rss_mb']:,.0f} MB"
        f" (after the append runs: {results['append_peak_rss_mb']:,.0f} MB)"
        + (
            f"; readers: up to {max(lg[k]['reader_peak_rss_mb'] for lg in results['logs'] for k in ('before', 'after')):,.0f} MB"
            if results.get("logs")
            else ""
        )
        + f"; wall time {results['wall_s']:.0f} s; load average at end "
        + " ".join(f"{x:.2f}" for x in results["loadavg_end"])
    )
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(results, indent=2) + "\n")
        console.print(f"results written to {args.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
