"""Replay benchmark (issue: KRaft state machines): a generated JBOD history replayed from the
Delta log.

Generates a history with the seeded KRaft workload (brokers x dirs, partitions, directory
failures, disk replacements, controlled shutdowns, crashes, ISR recovery; every record decided by
the real deciders), appends it to a fresh log, then measures, each phase in a fresh process so
peak memory is the phase's own:

- end to end: Parquet files -> records -> controller view (``replay_log``), records/s
- reducer alone: the same records already in memory -> ``replay``, records/s
- snapshots every N records (``take_snapshots``), and ``state_at`` latency at random offsets

Goals: reducer >= 1 000 000 records/s, end to end >= 500 000 records/s (one core), state_at < 1 s
at 10^7 records. Usage::

    python bench/replay.py                     # 10^6 records, 1 000 brokers x 4 dirs, 100 000 partitions
    python bench/replay.py --records 10000000  # 10^7 (takes a while to generate)
    python bench/replay.py --records 200000 --brokers 100 --partitions 10000   # quick look
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_generate(args: argparse.Namespace) -> dict:
    from kraftlake.logging import configure
    from kraftlake.records import Log
    from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

    configure(level="warning")
    log = Log.create(Path(args.dir) / "log")
    config = WorkloadConfig(
        brokers=args.brokers, dirs_per_broker=args.dirs, partitions=args.partitions,
        topics=args.topics, seed=args.seed, noop_every=args.noop_every,
    )  # fmt: skip
    mix: Counter[str] = Counter()
    buf: list = []
    gen_s = append_s = 0.0
    t = time.perf_counter()
    for batch in generate(config, records=args.records):
        mix.update(type(r).__name__ for r in batch)
        buf.extend(batch)
        while len(buf) >= args.append_batch:
            gen_s += time.perf_counter() - t
            t = time.perf_counter()
            log.append(buf[: args.append_batch], validated=True)
            append_s += time.perf_counter() - t
            buf = buf[args.append_batch :]
            t = time.perf_counter()
    gen_s += time.perf_counter() - t
    if buf:
        t = time.perf_counter()
        log.append(buf, validated=True)
        append_s += time.perf_counter() - t
    n = sum(mix.values())
    return {"records": n, "generate_s": gen_s, "append_s": append_s, "files": len(log.at().files()),
            "mix": dict(mix.most_common()), "peak_mb": _peak_mb()}  # fmt: skip


def phase_e2e(args: argparse.Namespace) -> dict:
    from kraftlake.records import Log
    from kraftlake.replay.state import replay_log

    log = Log.open(Path(args.dir) / "log")
    snap = log.at()
    t = time.perf_counter()
    view = replay_log(snap)
    s = time.perf_counter() - t
    return {"records": snap.last_offset + 1, "seconds": s, "state_hash": view.state_hash(), "peak_mb": _peak_mb()}


def phase_reducer(args: argparse.Namespace) -> dict:
    """The reducer's time alone: each file is decoded first (untimed), then folded (timed), so
    memory stays bounded at 10^7 records."""
    from kraftlake.records import Log
    from kraftlake.records.base import gc_paused
    from kraftlake.statemachine.kraft.reducer import replay
    from kraftlake.statemachine.kraft.view import ControllerView

    log = Log.open(Path(args.dir) / "log")
    view = ControllerView()
    n, s = 0, 0.0
    for records in log.at().iter_records():
        t = time.perf_counter()
        with gc_paused():  # as replay_log does
            replay(records, view)
        s += time.perf_counter() - t
        n += len(records)
    return {"records": n, "seconds": s, "state_hash": view.state_hash(), "peak_mb": _peak_mb()}


def phase_snapshots(args: argparse.Namespace) -> dict:
    from kraftlake.records import Log
    from kraftlake.replay.state import take_snapshots

    log = Log.open(Path(args.dir) / "log")
    t = time.perf_counter()
    written = take_snapshots(log, every=args.snapshot_every)
    s = time.perf_counter() - t
    return {"snapshots": len(written), "seconds": s, "bytes": sum(w.bytes for w in written),
            "peak_mb": _peak_mb()}  # fmt: skip


def phase_state_at(args: argparse.Namespace) -> dict:
    from kraftlake.records import Log
    from kraftlake.replay.state import state_at

    log = Log.open(Path(args.dir) / "log")
    last = log.last_offset
    rng = random.Random(args.seed)
    offsets = [rng.randrange(last + 1) for _ in range(args.samples)]
    times = []
    for o in offsets:
        t = time.perf_counter()
        view = state_at(log, offset=o)
        times.append(time.perf_counter() - t)
        assert view.offset == o
    # The first answer checked against a full replay (snapshots must not change the state).
    full = state_at(log, offset=offsets[0], use_snapshots=False).state_hash()
    same = state_at(log, offset=offsets[0]).state_hash() == full
    return {"samples": len(times), "p50_s": statistics.median(times), "p95_s": sorted(times)[int(0.95 * (len(times) - 1))],
            "max_s": max(times), "matches_full_replay": same, "peak_mb": _peak_mb()}  # fmt: skip


PHASES = {"generate": phase_generate, "e2e": phase_e2e, "reducer": phase_reducer,
          "snapshots": phase_snapshots, "state_at": phase_state_at}  # fmt: skip


def run_phase(name: str, argv: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", name, *argv], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--brokers", type=int, default=1000)
    p.add_argument("--dirs", type=int, default=4)
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--noop-every", type=int, default=0, help="a NoOp every N records (real logs: ~99%% NoOps); 0 = none")
    p.add_argument("--snapshot-every", type=int, default=100_000)
    p.add_argument("--samples", type=int, default=20, help="random offsets for state_at")
    p.add_argument("--append-batch", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the generated log")
    p.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:
        print(json.dumps(PHASES[args.phase](args)))
        return

    from rich.console import Console
    from rich.table import Table

    console = Console()
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraftlake-bench-"))
    argv = [
        f"--{k.replace('_', '-')}={v}"
        for k, v in vars(args).items()
        if k not in ("dir", "keep", "phase") and v is not None
    ] + ["--dir", str(work)]
    try:
        with console.status(f"generating {args.records:,} records ({args.brokers} brokers x {args.dirs} dirs, {args.partitions:,} partitions)"):
            gen = run_phase("generate", argv)
        n = gen["records"]
        console.print(f"history: {n:,} records in {gen['files']} files; generated at {n / gen['generate_s']:,.0f}/s,"
                      f" appended at {n / gen['append_s']:,.0f}/s")  # fmt: skip
        console.print("mix: " + ", ".join(f"{k} {v / n:.1%}" for k, v in gen["mix"].items()))
        with console.status("end-to-end replay"):
            e2e = run_phase("e2e", argv)
        with console.status("reducer alone"):
            red = run_phase("reducer", argv)
        with console.status(f"snapshots every {args.snapshot_every:,}"):
            snaps = run_phase("snapshots", argv)
        with console.status(f"state_at at {args.samples} random offsets"):
            sat = run_phase("state_at", argv)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    assert e2e["state_hash"] == red["state_hash"], "end-to-end and reducer-alone replays disagree"
    table = Table(title=f"kraftlake replay, {n:,} records", header_style="bold")
    for col in ("measure", "value", "goal", "vs goal", "peak RSS"):
        table.add_column(col, justify="right" if col != "measure" else "left")
    e2e_rate = e2e["records"] / e2e["seconds"]
    red_rate = red["records"] / red["seconds"]
    table.add_row("end to end (Delta -> view)", f"{e2e_rate:,.0f} rec/s", "500,000 rec/s", f"{e2e_rate / 500_000:.2f}x", f"{e2e['peak_mb']:,.0f} MB")
    table.add_row("reducer alone", f"{red_rate:,.0f} rec/s", "1,000,000 rec/s", f"{red_rate / 1_000_000:.2f}x", f"{red['peak_mb']:,.0f} MB")
    table.add_row(f"snapshots every {args.snapshot_every:,}", f"{snaps['snapshots']} in {snaps['seconds']:.1f} s",
                  "", "", f"{snaps['peak_mb']:,.0f} MB")  # fmt: skip
    table.add_row("state_at p50 / p95 / max", f"{sat['p50_s']:.3f} / {sat['p95_s']:.3f} / {sat['max_s']:.3f} s", "< 1 s",
                  f"{1 / max(sat['max_s'], 1e-9):.2f}x", f"{sat['peak_mb']:,.0f} MB")  # fmt: skip
    table.add_row("generate (deciders) / append", f"{n / gen['generate_s']:,.0f} / {n / gen['append_s']:,.0f} rec/s", "", "", f"{gen['peak_mb']:,.0f} MB")
    console.print(table)
    console.print(f"state_at equals a full replay: {sat['matches_full_replay']}; state hash {e2e['state_hash'][:16]}")


if __name__ == "__main__":
    main()
