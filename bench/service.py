"""Benchmark of the HTTP service (``kraftlake serve``) on loopback: records/s and p50/p99 latency
for 1, 4, 16 (and 256) concurrent clients sending batches of 1 and 100 records, beside the
in-process ``Appender`` on a local log (one commit per batch: the baseline), and the server's
peak memory.

    python bench/service.py [--clients 1,4,16,256] [--sizes 1,100] [--seconds 8]

Every client is a thread with its own producer (exactly-once sequences), so the numbers include
the client's JSON encoding and HTTP round trip. Group commit is what makes the service fast: the
table shows records per commit.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _records(n: int, tag: str):
    from kraftlake.records import Config

    return [Config(resource_type=4, resource_name=tag, name="n", value=str(i)) for i in range(n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def in_process(path: Path, size: int, seconds: float) -> dict:
    from kraftlake import Appender
    from kraftlake.records import Log

    app = Appender(Log.create(path), producer="bench")
    lat, n, end = [], 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        app.append(_records(size, "local"))
        lat.append((time.perf_counter() - t) * 1000)
        n += size
    return {"records": n, "seconds": seconds, "lat": lat, "commits": len(lat)}


def over_http(url: str, clients: int, size: int, seconds: float) -> dict:
    from kraftlake import Appender

    lat: list[float] = []
    counts = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = time.perf_counter() + seconds + 1e9

    def client(c: int) -> None:
        app = Appender(url, producer=f"bench-{clients}-{size}-{c}-{time.time_ns()}")
        batch = _records(size, f"c{c}")
        start.wait()
        mine = []
        while time.perf_counter() < stop:
            t = time.perf_counter()
            app.append(batch)
            mine.append((time.perf_counter() - t) * 1000)
            counts[c] += size
        lat.extend(mine)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    stop = began + seconds
    for t in threads:
        t.join()
    took = time.perf_counter() - began
    return {"records": sum(counts), "seconds": took, "lat": lat}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", default="1,4,16,256")
    p.add_argument("--sizes", default="1,100")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--dir", default=None, help="Work directory (default: a temporary one, removed after).")
    args = p.parse_args()
    from kraftlake.logging import configure

    configure(level="warning")
    work = Path(args.dir or tempfile.mkdtemp(prefix="kraftlake-bench-service-"))
    rows = []
    sizes = [int(x) for x in args.sizes.split(",")]
    base = {}
    for size in sizes:
        r = in_process(work / f"local-{size}", size, args.seconds)
        base[size] = r["records"] / r["seconds"]
        rows.append(("in-process Appender", 1, size, r["records"] / r["seconds"], statistics.median(r["lat"]),
                     _p99(r["lat"]), size, 1.0))  # fmt: skip
    median_commit = rows[0][4]
    from kraftlake.records import Log

    Log.create(work / "served")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kraftlake.cli", "serve", str(work / "served"), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait(port)
        url = f"http://127.0.0.1:{port}"
        for size in sizes:
            for clients in [int(x) for x in args.clients.split(",")]:
                v0 = Log.open(work / "served").version
                r = over_http(url, clients, size, args.seconds)
                commits = max(1, Log.open(work / "served").version - v0)
                rate = r["records"] / r["seconds"]
                rows.append(("HTTP service", clients, size, rate, statistics.median(r["lat"]), _p99(r["lat"]),
                             r["records"] / commits, rate / base[size]))  # fmt: skip
        peak = _peak_kb(proc.pid) / 1024
    finally:
        proc.terminate()
        proc.wait(30)
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'engine':<20} {'clients':>7} {'batch':>5} {'records/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'rec/commit':>10} {'vs in-process':>13}")
    for name, clients, size, rate, p50, p99, per_commit, ratio in rows:
        print(f"{name:<20} {clients:>7} {size:>5} {rate:>11,.0f} {p50:>8.1f} {p99:>8.1f} {per_commit:>10,.0f} {ratio:>12.2f}x")
    print(f"median in-process commit (1 record): {median_commit:.1f} ms; server peak RSS: {peak:.0f} MB")


def _p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(0.99 * len(s)))] if s else float("nan")


def _wait(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the service did not start")


if __name__ == "__main__":
    main()
