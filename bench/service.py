"""Benchmark of the HTTP service (``kraftlake serve``) on loopback: records/s and p50/p99 latency
for 1, 4, 16 and 256 concurrent clients sending batches of 1 and 100 records, beside the
in-process ``Appender`` on a local log (one commit per batch: the baseline); then, for each batch
size, latency at half the saturation rate (open loop) against the service's median commit time;
and the server's peak memory.

    python bench/service.py [--clients 1,4,16,256] [--sizes 1,100] [--seconds 8]

Clients are keep-alive connections driven by ``bench/_loadgen.py`` in a process of its own (an
asyncio loop, a producer and exactly-once sequences per connection), so the numbers are the
server's, not those of client threads fighting over one GIL. Group commit is what makes the
service fast: the table shows records per commit.

Goals (issue: services append over HTTP): >= 5 000 records/s from 256 single-record clients;
>= 30 000 records/s from 16 clients sending 100-record batches; p99 < 3x the median commit at
half the saturation rate.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).parent


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


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started, from any of its threads (the commit process is started by
    the service's supervising thread, not its main one)."""
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def _p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(0.99 * len(s)))] if s else float("nan")


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
    return {"records": n, "seconds": seconds, "lat": lat}


class Server:
    """``kraftlake serve`` on a fresh log, in a process of its own."""

    def __init__(self, work: Path, name: str) -> None:
        from kraftlake.records import Log

        self.path = work / name
        Log.create(self.path)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kraftlake.cli", "serve", str(self.path), "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("the service did not start")

    def position(self) -> tuple[int, int]:
        """(version, last offset) of its log."""
        from kraftlake.records import Log

        log = Log.open(self.path)
        return log.version, log.last_offset

    def median_commit_ms(self) -> float:
        """The median commit duration, from /metrics' histogram as Prometheus's
        histogram_quantile(0.5, …) estimates it: linear within the bucket that holds it."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(self.url + "/metrics") as r:
            text = r.read().decode()
        buckets = sorted(
            (float(s.labels["le"]), s.value)
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "kraftlake_commit_duration_seconds_bucket"
        )
        total = buckets[-1][1]
        lower, below = 0.0, 0.0
        for upper, count in buckets:
            if count >= total / 2:
                upper = lower if upper == float("inf") else upper
                return 1000 * (lower + (upper - lower) * (total / 2 - below) / max(count - below, 1))
            lower, below = upper, count
        raise ValueError("no commits yet")

    def stop(self) -> float:
        """Stop it; its peak RSS in MB, with its commit process's."""
        pid = self.proc.pid
        peak = (_peak_kb(pid) + sum(_peak_kb(c) for c in _children(pid))) / 1024
        self.proc.terminate()
        self.proc.wait(30)
        return peak


def load(url: str, clients: int, size: int, seconds: float, rate: float | None = None) -> dict:
    cmd = [sys.executable, str(HERE / "_loadgen.py"), url, str(clients), str(size), str(seconds)]
    if rate is not None:
        cmd.append(str(rate))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


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
    sizes = [int(x) for x in args.sizes.split(",")]
    counts = [int(x) for x in args.clients.split(",")]
    rows, base, best, peaks = [], {}, {}, []
    try:
        for size in sizes:
            r = in_process(work / f"local-{size}", size, args.seconds)
            base[size] = r["records"] / r["seconds"]
            rows.append(
                ("in-process Appender", 1, size, base[size], statistics.median(r["lat"]), _p99(r["lat"]), size, 1.0)
            )
        server = Server(work, "served")
        for size in sizes:
            for clients in counts:
                v0, o0 = server.position()
                r = load(server.url, clients, size, args.seconds)
                v1, o1 = server.position()  # warm-up included: records per commit over the whole run
                rate = r["records"] / r["seconds"]
                best[size] = max(best.get(size, 0.0), rate)
                rows.append(
                    (
                        "HTTP service",
                        clients,
                        size,
                        rate,
                        statistics.median(r["lat"]),
                        _p99(r["lat"]),
                        (o1 - o0) / max(1, v1 - v0),
                        rate / base[size],
                    )
                )
        peaks.append(server.stop())
        half = []
        for size in sizes:
            # A fresh server, so that its commit-time histogram covers this run only.
            server = Server(work, f"half-{size}")
            rate = best[size] / 2 / size  # requests/s
            r = load(server.url, max(counts), size, args.seconds, rate)
            commit_ms = server.median_commit_ms()
            peaks.append(server.stop())
            p99 = _p99(r["lat"])
            half.append(
                (
                    size,
                    rate * size,
                    r["records"] / r["seconds"],
                    statistics.median(r["lat"]),
                    p99,
                    commit_ms,
                    p99 / commit_ms,
                )
            )
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"{'engine':<20} {'clients':>7} {'batch':>5} {'records/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'rec/commit':>10} {'vs in-process':>13}"
    )
    for name, clients, size, rate, p50, p99, per_commit, ratio in rows:
        print(
            f"{name:<20} {clients:>7} {size:>5} {rate:>11,.0f} {p50:>8.1f} {p99:>8.1f} {per_commit:>10,.0f} {ratio:>12.2f}x"
        )
    print()
    print("open loop at half the saturation rate (the best closed-loop rate above / 2):")
    print(
        f"{'batch':>5} {'offered rec/s':>13} {'served rec/s':>12} {'p50 ms':>8} {'p99 ms':>8} {'median commit ms':>16} {'p99 / commit':>12}"
    )
    for size, offered, served, p50, p99, commit_ms, ratio in half:
        print(
            f"{size:>5} {offered:>13,.0f} {served:>12,.0f} {p50:>8.1f} {p99:>8.1f} {commit_ms:>16.1f} {ratio:>11.1f}x"
        )
    print()
    for size, clients, goal in ((1, 256, 5_000), (100, 16, 30_000)):
        got = next((r[3] for r in rows if r[0] == "HTTP service" and r[1] == clients and r[2] == size), None)
        if got is not None:
            print(
                f"goal {clients} clients x {size}: >= {goal:,} records/s: {got:,.0f} ({'met' if got >= goal else 'NOT met'})"
            )
    for size, _, _, _, _, _, ratio in half:
        print(
            f"goal p99 < 3x median commit at half saturation, batch {size}: {ratio:.1f}x ({'met' if ratio < 3 else 'NOT met'})"
        )
    print(f"server peak RSS (service and its commit process): {max(peaks):.0f} MB")


if __name__ == "__main__":
    main()
