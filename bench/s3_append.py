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
reusing one ``DeltaTable``, with zstd as kraftlake's files (``--raw-codec snappy``: delta-rs's
default codec, as the bench wrote before session 6). The two take turns commit by commit; one untimed warm-up commit each.
Records/s over the timed commits, ms per commit p50/p99, ratio = kraftlake / raw. Beside them,
per commit: the HTTP requests each writer made (counted in moto's access log, by the table's
prefix), the CPU milliseconds of this process (``time.process_time``: delta-rs's and pyarrow's
threads included) and of moto's server during the call (its ``/proc`` times), and this process's
peak RSS after each size (``ru_maxrss``, cumulative).

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
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' moto server (helpers/object_store.py)

from append import ARROW_DROPPED, Workload, parse_commits, parse_sizes, percentile  # noqa: E402 - bench/append.py's
from deltalake import DeltaTable, WriterProperties, write_deltalake  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from kraftlake.records import Log  # noqa: E402
from kraftlake.records.arrow import LOG_SCHEMA, to_table  # noqa: E402
from kraftlake.records.store.log import TABLE_PROPERTIES  # noqa: E402

from helpers.object_store import Bucket, MotoServer  # noqa: E402

SIZES = (1, 100, 1_000, 10_000)
FULL = {1: 60, 100: 60, 1_000: 30, 10_000: 10}
QUICK = {1: 15, 100: 15, 1_000: 8, 10_000: 4}
console = Console(width=170)


def moto_cpu_s(server: MotoServer) -> float:
    """User + system CPU seconds moto's server process has used so far."""
    fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_requests(request_log: str, bucket: str, prefix: str) -> int:
    """Requests for the table at ``prefix`` in moto's access log so far (objects under it, and
    listings of it)."""
    time.sleep(0.2)  # moto writes a request's line after answering it
    pattern = re.compile(
        rf'"[A-Z]+ /{re.escape(bucket)}(/{re.escape(prefix)}/|\?[^ ]*prefix={re.escape(prefix)}%2F|\?[^ ]*prefix={re.escape(prefix)}/)'
    )
    with open(request_log, "rb") as f:
        return sum(1 for line in f.read().decode("utf-8", "replace").splitlines() if pattern.search(line))


def bench_appends(
    bucket: Bucket,
    size: int,
    commits: int,
    work: Workload,
    request_log: str | None,
    form: str = "python",
    raw_codec: str = "zstd",
) -> dict[str, float]:
    ours_name, raw_name = f"kraftlake-{size}", f"raw-{size}"
    log = Log.create(bucket.uri(ours_name))
    raw_uri = bucket.uri(raw_name)
    DeltaTable.create(raw_uri, schema=LOG_SCHEMA, configuration=TABLE_PROPERTIES)
    raw = DeltaTable(raw_uri)
    # delta-rs writes snappy by default; kraftlake's data files are zstd (the like-for-like default)
    raw_properties = WriterProperties(compression=raw_codec.upper())
    wall: dict[int, list[float]] = {0: [], 1: []}
    cpu: dict[int, list[float]] = {0: [], 1: []}
    moto: dict[int, list[float]] = {0: [], 1: []}
    before: list[int] = []
    for i in range(commits + 1):
        if i == 1 and request_log:  # after the warm-up commits
            before = [count_requests(request_log, bucket.name, name) for name in (ours_name, raw_name)]
        batch = work.batch(size)
        table = to_table(batch, first_offset=0, ts_ms=0)
        given = batch if form == "python" else table.drop_columns(ARROW_DROPPED)  # converted untimed
        for turn in (0, 1) if i % 2 == 0 else (1, 0):
            m, c, t = moto_cpu_s(bucket.server), time.process_time(), time.perf_counter()
            if turn == 0:
                log.append(given)
            else:
                write_deltalake(raw, table, mode="append", writer_properties=raw_properties)
            took = time.perf_counter() - t
            if i:  # the first commit of each is a warm-up
                wall[turn].append(took)
                cpu[turn].append(time.process_time() - c)
                moto[turn].append(moto_cpu_s(bucket.server) - m)
    assert log.last_offset == (commits + 1) * size - 1
    requests = [float("nan")] * 2
    if request_log:
        after = [count_requests(request_log, bucket.name, name) for name in (ours_name, raw_name)]
        requests = [(a - b) / commits for a, b in zip(after, before)]
    out: dict[str, float] = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    for turn, key in ((0, ""), (1, "raw_")):
        out |= {
            f"{key}rate": size * len(wall[turn]) / sum(wall[turn]),
            f"{key}p50": statistics.median(wall[turn]) * 1000,
            f"{key}p99": percentile(wall[turn], 99) * 1000,
            f"{key}cpu": statistics.mean(cpu[turn]) * 1000,
            f"{key}moto": statistics.mean(moto[turn]) * 1000,
            f"{key}requests": requests[turn],
        }
    out["ratio"] = out["rate"] / out["raw_rate"]
    return out


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
    ap.add_argument("--sizes", type=parse_sizes, default=list(SIZES), help="records per batch, e.g. 1,100,1000")
    ap.add_argument("--commits", type=parse_commits, default={}, help="commits per size, e.g. 1=60,10000=10")
    ap.add_argument("--no-replay", action="store_true", help="appends only")
    ap.add_argument(
        "--input",
        choices=("python", "arrow"),
        default="python",
        help="what kraftlake appends: the Python Structs, or the batch's rows as a pyarrow Table (bench/append.py's arrow form)",
    )
    ap.add_argument(
        "--raw-codec",
        choices=("zstd", "snappy"),
        default="zstd",
        help="raw write_deltalake's Parquet codec: zstd (kraftlake's, like for like) or snappy (delta-rs's default)",
    )
    ap.add_argument("--replay-records", type=int, default=200_000)
    ap.add_argument("--snapshot-every", type=int, default=50_000)
    ap.add_argument("--points", type=int, default=10)
    args = ap.parse_args()
    if args.quick:
        args.replay_records = min(args.replay_records, 50_000)
        args.snapshot_every = min(args.snapshot_every, 10_000)
    commits = {**(QUICK if args.quick else FULL), **args.commits}

    request_log = os.path.join(tempfile.mkdtemp(prefix="kraftlake-moto-"), "requests.log")
    server = MotoServer(request_log=request_log)
    try:
        bucket = Bucket.new(server)
        os.environ.update(bucket.env)  # delta-rs, pyarrow and the replay processes read them
        work = Workload(seed=7)
        console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

        table = Table(
            title=f"appends on S3 (moto, loopback): kraftlake vs raw write_deltalake ({args.raw_codec})",
            title_justify="left",
        )
        for col in (
            "records/batch",
            "commits",
            "kraftlake rec/s",
            "p50 ms",
            "p99 ms",
            "raw rec/s",
            "raw p50",
            "raw p99",
            "ratio",
            "requests (raw)",
            "CPU ms (raw)",
            "moto CPU ms (raw)",
            "peak RSS MB",
        ):
            table.add_column(col, justify="right")
        for size in args.sizes:
            r = bench_appends(bucket, size, commits.get(size, 10), work, request_log, args.input, args.raw_codec)
            table.add_row(
                f"{size:,}",
                str(commits.get(size, 10)),
                f"{r['rate']:,.0f}",
                f"{r['p50']:.1f}",
                f"{r['p99']:.1f}",
                f"{r['raw_rate']:,.0f}",
                f"{r['raw_p50']:.1f}",
                f"{r['raw_p99']:.1f}",
                f"{r['ratio']:.2f}x",
                f"{r['requests']:.1f} ({r['raw_requests']:.1f})",
                f"{r['cpu']:.1f} ({r['raw_cpu']:.1f})",
                f"{r['moto']:.1f} ({r['raw_moto']:.1f})",
                f"{r['peak_rss_mb']:.0f}",
            )
        console.print(table)
        console.print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.no_replay:
            return

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
