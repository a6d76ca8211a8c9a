"""The audit plan on Spark as it scales out: ``kraftlake audit LOG --master M`` (the whole command,
a process of its own) on local[1] and local[2], and on a standalone cluster on loopback (pyspark's
own ``bin/spark-class``, ``tests/helpers/spark_cluster.py``) with one worker and with two (one core
each), on the same generated history; records/s, the ratios the issue sets goals for
(local[2] >= 1.6x local[1], 2 workers >= 1.6x 1 worker), CPU-seconds and peak memory, with the
load average before and after each run (the machine is shared).

CPU-seconds: the command's and its Spark driver JVM's plus, on a cluster, the executors' (the
workers' children), sampled from /proc every 0.5 s while the command runs (a process that lives
less than that is missed). Peak memory: each of those processes' peak RSS (VmHWM), summed (the
workers' and master's own JVMs left out). Usage::

    python bench/spark_cluster.py --records 1000000
    python bench/spark_cluster.py --history /tmp/b7/log --runs local1,local2,workers1,workers2
    python bench/spark_cluster.py --history /tmp/h7/log --runs local2 --out /tmp/reports

``--out DIR``: each run writes its report to ``DIR/<run>.json`` (``audit --out``) instead of
stdout, and the bench reads only the report's head (verdict, counts, state hash): at 10^7 records
the report is 1 GB, too much to hold as text and parse beside the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))  # helpers.spark_cluster: the tests' loopback cluster

TICK = os.sysconf("SC_CLK_TCK")


class _Sampler:
    """CPU-seconds and peak RSS of the processes in some process groups (a cluster's workers and
    the executors they start), sampled from /proc until stopped."""

    def __init__(self, groups: set[int]) -> None:
        self.groups = groups
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.peak_mb: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._sample()
        self._thread.start()

    def _sample(self) -> None:
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) not in self.groups:  # pgrp
                    continue
                ticks = int(fields[11]) + int(fields[12])  # utime + stime
                with open(f"/proc/{pid}/status") as f:
                    hwm = next((int(x.split()[1]) / 1024 for x in f if x.startswith("VmHWM:")), 0.0)
            except (OSError, IndexError, ValueError):
                continue
            self.first.setdefault(pid, ticks)
            self.last[pid] = ticks
            self.peak_mb[pid] = max(self.peak_mb.get(pid, 0.0), hwm)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def stop(self, daemons: set[int]) -> tuple[float, float]:
        """(CPU-seconds of every sampled process, summed peak MB of those not in ``daemons``)."""
        self._stop.set()
        self._thread.join()
        cpu = sum(self.last[p] - self.first[p] for p in self.last) / TICK
        return cpu, sum(mb for p, mb in self.peak_mb.items() if p not in daemons)


def run(log: str, master: str, cluster=None, out: Path | None = None) -> dict:
    records = _records(log)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    cli = [sys.executable, "-m", "kraftlake", "audit", log, "--master", master, "--format", "json"]
    if out is not None:
        cli += ["--out", str(out)]
    daemons = {p.proc.pid for p in cluster._procs} if cluster is not None else set()
    load = os.getloadavg()[0]
    t = time.perf_counter()
    # A group of its own: the command and its Spark JVM (pyspark's gateway is not waited for,
    # so getrusage(RUSAGE_CHILDREN) would miss it); on a cluster the workers' groups too.
    proc = subprocess.Popen(
        cli, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    sampler = _Sampler({proc.pid} | {os.getpgid(p) for p in daemons})
    stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - t
    cpu, peak = sampler.stop(daemons)
    written = stdout if out is None else (_head(out) if out.exists() else "")
    if proc.returncode not in (0, 1) or not written.strip():  # exit 1 is also an uncaught error's
        raise SystemExit(f"{' '.join(cli)}: exit {proc.returncode}\n{stderr[-3000:]}")
    if out is None:
        report = json.loads(stdout)
        violations, state_hash = len(report["violations"]), report["state_hash"]
    else:
        violations, state_hash = _counts(written)
    return {
        "records": records,
        "seconds": seconds,
        "cpu": cpu,
        "peak_mb": peak,
        "load": (load, os.getloadavg()[0]),
        "violations": violations,
        "state_hash": state_hash,
    }


def _head(path: Path, size: int = 1 << 20) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read(size)


def _counts(head: str) -> tuple[int, str]:
    """(violations, state hash) from a JSON report's head: the sum of the invariants' counts,
    which come before the violations' list."""
    invariants = head[: head.index(',"violations":[')]
    counts = re.findall(r'"violations":(\d+)', invariants)
    return sum(map(int, counts)), re.search(r'"state_hash":"([0-9a-f]+)"', head).group(1)


def _out(directory: Path | None, name: str) -> Path | None:
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.unlink(missing_ok=True)  # a run that writes nothing is not read as its predecessor's report
    return path


def _records(log: str) -> int:
    from kraftlake.records import Log

    return Log.open(log).at().last_offset + 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--brokers", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--history", help="a log kept before (instead of generating one)")
    p.add_argument("--runs", default="local1,local2,workers1,workers2")
    p.add_argument("--worker-memory", default="2g", help="each worker's (and its executor's) memory")
    p.add_argument("--out", type=Path, help="a directory: each run's report as DIR/<run>.json, not parsed whole")
    args = p.parse_args()
    from rich.console import Console
    from rich.table import Table

    from helpers.spark_cluster import StandaloneCluster

    console = Console()
    # Executors take the workers' memory (Spark's default executor memory is 1g).
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--conf spark.executor.memory={args.worker_memory} pyspark-shell"
    results: dict[str, dict] = {}
    if args.history:
        history = nullcontext(args.history)
    else:
        from _histories import generated_log

        history = generated_log(args.records, brokers=args.brokers, partitions=args.partitions, console=console)
    with history as log:
        for name in args.runs.split(","):
            if name.startswith("local"):
                with console.status(f"{name}: kraftlake audit --master local[{name[5:]}]"):
                    results[name] = run(log, f"local[{name[5:]}]", out=_out(args.out, name))
            else:
                import tempfile

                n = int(name[len("workers") :])
                with tempfile.TemporaryDirectory(prefix="kraftlake-bench-cluster-") as root:
                    with console.status(f"{name}: starting a standalone master and {n} worker(s)"):
                        cluster = StandaloneCluster(Path(root), workers=n, cores=1, memory=args.worker_memory)
                    try:
                        with console.status(f"{name}: kraftlake audit --master {cluster.url}"):
                            results[name] = run(log, cluster.url, cluster, out=_out(args.out, name))
                    finally:
                        cluster.stop()
            console.print(name, results[name])
    hashes = {r["state_hash"] for r in results.values()}
    table = Table(title=f"kraftlake audit on Spark, {next(iter(results.values()))['records']:,} records")
    for c in ("run", "records/s", "wall s", "CPU s", "peak MB", "load 1m before/after", "violations"):
        table.add_column(c, justify="right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r['records'] / r['seconds']:,.0f}",
            f"{r['seconds']:.1f}",
            f"{r['cpu']:.1f}",
            f"{r['peak_mb']:,.0f}",
            f"{r['load'][0]:.1f} / {r['load'][1]:.1f}",
            str(r["violations"]),
        )
    console.print(table)
    for a, b in (("local2", "local1"), ("workers2", "workers1")):
        if a in results and b in results:
            ratio = results[b]["seconds"] / results[a]["seconds"]
            console.print(f"{a} / {b} = {ratio:.2f}x (goal >= 1.6x)")
    console.print("same state hash on every run" if len(hashes) == 1 else f"state hashes DIFFER: {hashes}")


if __name__ == "__main__":
    main()
