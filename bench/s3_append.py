"""kraftlake on S3 (moto's standalone server on loopback) beside raw delta-rs on the same server.

    python bench/s3_append.py --quick      # about two minutes
    python bench/s3_append.py              # the table in bench/RESULTS.md

What is measured
----------------
*Appends.* For each batch size (1, 100, 1 000, 10 000 records) a fresh kraftlake log and a fresh
raw table (the log's schema and table properties) in one bucket. kraftlake: the wall time of
``log.append(batch)`` (validation, Arrow conversion, the Parquet PUT, the fenced commit through
delta-rs with its app transactions): what a caller pays. Raw: the same records converted once,
untimed, with ``records.arrow.to_table``, then ``write_deltalake(dt, table, mode="append")``
reusing one ``DeltaTable``. The two take turns commit by commit; one untimed warm-up commit each.
Records/s over the timed commits, ms per commit p50/p99, ratio = kraftlake / raw.

*Replay.* The same history (``--replay-records`` records appended in batches of 10 000) on S3
and on local disk; a fresh process each time replays it end to end (``Log.open`` ->
``state_at(use_snapshots=False)``: the Parquet reads and the reducers): records/s.

*state_at.* Snapshots every ``--snapshot-every`` records on both stores, then ``state_at`` at
``--points`` random offsets (same offsets on both): ms p50 and max.

moto's server is a Python process on the same 2 cores: its own latency (milliseconds per request)
stands in for S3's network round trip, so the ratios matter more than the absolute rates.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' moto server (helpers/object_store.py)

from append import Workload, percentile  # noqa: E402 - bench/append.py's workload
from deltalake import DeltaTable, write_deltalake  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from kraftlake.records import Log  # noqa: E402
from kraftlake.records.arrow import LOG_SCHEMA, to_table  # noqa: E402
from kraftlake.records.log import TABLE_PROPERTIES  # noqa: E402

from helpers.object_store import Bucket, MotoServer  # noqa: E402

SIZES = (1, 100, 1_000, 10_000)
FULL = {1: 60, 100: 60, 1_000: 30, 10_000: 10}
QUICK = {1: 15, 100: 15, 1_000: 8, 10_000: 4}
console = Console(width=140)


def bench_appends(bucket: Bucket, size: int, commits: int, work: Workload) -> dict[str, float]:
    log = Log.create(bucket.uri(f"kraftlake-{size}"))
    raw_uri = bucket.uri(f"raw-{size}")
    DeltaTable.create(raw_uri, schema=LOG_SCHEMA, configuration=TABLE_PROPERTIES)
    raw = DeltaTable(raw_uri)
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(commits + 1):
        batch = work.batch(size)
        table = to_table(batch, first_offset=0, ts_ms=0)
        for turn in (0, 1) if i % 2 == 0 else (1, 0):
            t = time.perf_counter()
            if turn == 0:
                log.append(batch)
            else:
                write_deltalake(raw, table, mode="append")
            took = time.perf_counter() - t
            if i:  # the first commit of each is a warm-up
                (ours if turn == 0 else theirs).append(took)
    assert log.last_offset == (commits + 1) * size - 1
    rate = size * len(ours) / sum(ours)
    raw_rate = size * len(theirs) / sum(theirs)
    return {
        "rate": rate,
        "p50": statistics.median(ours) * 1000,
        "p99": percentile(ours, 99) * 1000,
        "raw_rate": raw_rate,
        "raw_p50": statistics.median(theirs) * 1000,
        "raw_p99": percentile(theirs, 99) * 1000,
        "ratio": rate / raw_rate,
    }


_REPLAY = """
import sys, time
from kraftlake.records import Log
from kraftlake.replay.state import state_at
t = time.perf_counter()
view = state_at(Log.open(sys.argv[1]), use_snapshots=False)
print(time.perf_counter() - t, view.offset + 1)
"""


def replay_rate(uri: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", _REPLAY, uri], capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(out.stderr)
    took, n = out.stdout.split()
    return int(n) / float(took), int(n)


def state_at_ms(log: Log, offsets: list[int]) -> list[float]:
    from kraftlake.replay.state import state_at

    out = []
    for o in offsets:
        t = time.perf_counter()
        state_at(log, offset=o)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--replay-records", type=int, default=200_000)
    ap.add_argument("--snapshot-every", type=int, default=50_000)
    ap.add_argument("--points", type=int, default=10)
    args = ap.parse_args()
    if args.quick:
        args.replay_records = min(args.replay_records, 50_000)
        args.snapshot_every = min(args.snapshot_every, 10_000)
    commits = QUICK if args.quick else FULL

    server = MotoServer()
    try:
        bucket = Bucket.new(server)
        os.environ.update(bucket.env)  # delta-rs, pyarrow and the replay processes read them
        work = Workload(seed=7)

        table = Table(title="appends on S3 (moto, loopback): kraftlake vs raw write_deltalake", title_justify="left")
        for col in (
            "records/batch",
            "commits",
            "kraftlake rec/s",
            "p50 ms",
            "p99 ms",
            "raw rec/s",
            "raw p50",
            "raw p99",
        ):
            table.add_column(col, justify="right")
        table.add_column("ratio", justify="right")
        for size in SIZES:
            r = bench_appends(bucket, size, commits[size], work)
            table.add_row(
                f"{size:,}",
                str(commits[size]),
                f"{r['rate']:,.0f}",
                f"{r['p50']:.1f}",
                f"{r['p99']:.1f}",
                f"{r['raw_rate']:,.0f}",
                f"{r['raw_p50']:.1f}",
                f"{r['raw_p99']:.1f}",
                f"{r['ratio']:.2f}x",
            )
        console.print(table)

        with tempfile.TemporaryDirectory() as tmp:
            s3, local = bucket.uri("replay"), os.path.join(tmp, "replay")
            logs = [Log.create(s3), Log.create(local)]
            from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

            config = WorkloadConfig(brokers=100, dirs_per_broker=4, topics=100, partitions=10_000, seed=11)
            chunk: list = []
            for batch in generate(config, records=args.replay_records):
                chunk.extend(batch)
                if len(chunk) >= 10_000:
                    for lg in logs:
                        lg.append(chunk, validated=True)
                    chunk = []
            if chunk:
                for lg in logs:
                    lg.append(chunk, validated=True)
            args.replay_records = logs[1].last_offset + 1
            rep = Table(title=f"replay of {args.replay_records:,} records end to end", title_justify="left")
            for col in ("store", "records/s", "state_at p50 ms", "state_at max ms"):
                rep.add_column(col, justify="right")
            rng = random.Random(5)
            offsets = [rng.randrange(args.replay_records) for _ in range(args.points)]
            from kraftlake.replay.state import take_snapshots

            for name, uri, lg in (("s3 (moto)", s3, logs[0]), ("local disk", local, logs[1])):
                rate, _ = replay_rate(uri)
                take_snapshots(lg, every=args.snapshot_every)
                ms = state_at_ms(Log.open(uri), offsets)
                rep.add_row(name, f"{rate:,.0f}", f"{statistics.median(ms):.0f}", f"{max(ms):.0f}")
            console.print(rep)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
