"""Benchmark of the following audit: latency from an HTTP append of a violating record to its
report by ``kraftlake audit LOG --follow`` (p50/p99), under background load.

    python bench/follow.py [--load 0,10000] [--samples 60] [--seconds 20]

A ``kraftlake serve`` and a ``kraftlake audit --follow --format jsonl`` run in processes of their
own on a fresh local log; ``bench/_loadgen.py`` (another process) appends Config records at the
``--load`` rate (open loop, batches of 200 over 8 connections) while this script appends, one by
one, ``--samples`` violating records: a PartitionChange for a topic that does not exist (the audit
reports it, L3, at its own record: no grace to wait for). Latency counts from just before the
POST to the moment the audit's ``open`` line for that record is read from its stdout; the audit
looks for new commits every 0.1 s (``Log.follow``'s default poll), which is part of it.

Goal (issue 30): p99 within 1 s at 10 000 records/s of background load.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

HERE = Path(__file__).parent
BATCH = 200
CLIENTS = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _violation(topic_id: str) -> dict:
    return {"type": "PartitionChange", "topic_id": topic_id, "partition_id": 0, "leader": 1}


def run(load: int, samples: int, seconds: float) -> dict:
    from kraftlake.records import Log

    work = Path(tempfile.mkdtemp(prefix="kraftlake-follow-bench-"))
    log = work / "log"
    Log.create(log)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "kraftlake", "serve", str(log), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    auditor = subprocess.Popen(
        [sys.executable, "-m", "kraftlake", "audit", str(log), "--follow", "--format", "jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    seen: dict[str, float] = {}

    def read_events() -> None:
        assert auditor.stdout is not None
        for line in auditor.stdout:
            event = json.loads(line)
            if event["event"] == "open" and event["violation"]["invariant"] == "L3":
                seen.setdefault(event["violation"]["entity"].split("/")[1], time.perf_counter())

    threading.Thread(target=read_events, daemon=True).start()
    loader = None
    try:
        for _ in range(600):
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        # Not counted: one violation reported before anything is timed (the audit process started
        # and caught up).
        warm = _topic_id()
        httpx.post(
            f"{url}/v1/records", json={"producer": "warm-up", "seq": 0, "records": [_violation(warm)]}, timeout=30
        )
        for _ in range(600):
            if warm in seen:
                break
            time.sleep(0.1)
        if load:
            rate = load / BATCH  # requests a second
            loader = subprocess.Popen(
                [sys.executable, str(HERE / "_loadgen.py"), url, str(CLIENTS), str(BATCH), str(seconds), str(rate)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            time.sleep(2.0)  # past the load generator's warm-up
        sent: dict[str, float] = {}
        gap = max(0.05, (seconds - 3) / samples) if load else 0.2
        with httpx.Client(timeout=30) as client:
            for i in range(samples):
                tid = _topic_id()
                t0 = time.perf_counter()
                r = client.post(
                    f"{url}/v1/records", json={"producer": "violator", "seq": i, "records": [_violation(tid)]}
                )
                r.raise_for_status()
                sent[tid] = t0
                time.sleep(gap)
        deadline = time.perf_counter() + 30
        while len(seen.keys() & sent.keys()) < len(sent) and time.perf_counter() < deadline:
            time.sleep(0.05)
        achieved = 0.0
        if loader is not None:
            out, _ = loader.communicate(timeout=seconds + 60)
            result = json.loads(out)
            achieved = result["records"] / result["seconds"]
        lat = sorted((seen[t] - sent[t]) * 1000 for t in sent if t in seen)
        return {
            "load": load,
            "achieved": achieved,
            "samples": len(sent),
            "reported": len(lat),
            "p50": statistics.median(lat) if lat else float("nan"),
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan"),
            "max": lat[-1] if lat else float("nan"),
            "last_offset": Log.open(log).last_offset,
        }
    finally:
        for p in (loader, auditor, server):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", default="0,10000", help="background records/s, comma-separated")
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=20.0, help="background load duration")
    args = ap.parse_args()
    rows = [run(int(x), args.samples, args.seconds) for x in args.load.split(",")]
    print("| load target (records/s) | achieved (records/s) | violations sent | reported | p50 ms | p99 ms | max ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['load']} | {r['achieved']:.0f} | {r['samples']} | {r['reported']} |"
            f" {r['p50']:.0f} | {r['p99']:.0f} | {r['max']:.0f} |"
        )


if __name__ == "__main__":
    main()
