"""What one request costs the service in memory, and whether health answers wait on work:
peak RSS (the service and its commit process, over what they held idle) for one POST of a
60 MiB record and for one GET of 10^5 records (a JSON array, and JSON Lines where the service
has them); then /healthz latency while two clients loop audits.

    python bench/service_memory.py [--records 100000] [--record-mib 60] [--seconds 5] [-- SERVE ARGS]

Each case runs against a fresh ``kraftlake serve`` process (VmHWM is a peak since start), on a
log filled in-process beforehand.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from service import _children, _free_port, _p99  # noqa: E402


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class Served:
    def __init__(self, path: Path, extra: list[str]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kraftlake.cli", "serve", str(path), "--port", str(self.port), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # /readyz: the commit process is up (404: a service without it)
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2):
                    break
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    time.sleep(3.0)  # no /readyz: give the commit process time to start
                    break
                time.sleep(0.2)
            except OSError:
                time.sleep(0.2)

    def pids(self) -> list[int]:
        pid = self.proc.pid
        return [pid] + _children(pid)

    def rss_mb(self, field: str) -> float:
        return sum(_kb(p, field) for p in self.pids()) / 1024

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _post_big(url: str, data: bytes) -> int:
    """POST ``data`` in 1 MiB pieces; the status, also when the service answered (413) and closed
    the connection before the body was all sent."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    conn.putrequest("POST", parts.path)
    conn.putheader("content-type", "application/json")
    conn.putheader("content-length", str(len(data)))
    conn.endheaders()
    try:
        for i in range(0, len(data), 1 << 20):
            conn.send(data[i : i + (1 << 20)])
    except OSError:
        pass  # the answer came early: read it
    try:
        return conn.getresponse().status
    finally:
        conn.close()


def _request(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, int]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            n = 0
            while chunk := r.read(1 << 20):
                n += len(chunk)
            return r.status, n
    except urllib.error.HTTPError as exc:
        return exc.code, len(exc.read())


def case(path: Path, extra: list[str], run) -> tuple[float, float, str]:
    s = Served(path, extra)
    try:
        idle = s.rss_mb("VmRSS")
        outcome = run(s.url)
        return idle, s.rss_mb("VmHWM") - idle, outcome
    finally:
        s.stop()


def health_under_audits(path: Path, extra: list[str], seconds: float) -> tuple[float, float, int]:
    s = Served(path, extra)
    stop = threading.Event()
    audits = [0]

    def loop() -> None:
        while not stop.is_set():
            _request(s.url + "/v1/audits", b"{}", {"content-type": "application/json"})
            audits[0] += 1

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    lat, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        _request(s.url + "/healthz")
        lat.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    s.stop()
    return statistics.median(lat), _p99(lat), audits[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--record-mib", type=int, default=60)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("serve_args", nargs="*", help="passed on to kraftlake serve (after --)")
    args = p.parse_args()
    from kraftlake.logging import configure
    from kraftlake.records import Config, Log

    configure(level="warning")
    work = Path(tempfile.mkdtemp(prefix="kraftlake-bench-memory-"))
    full = work / "full"
    log = Log.create(full)
    for lo in range(0, args.records, 10_000):
        n = min(10_000, args.records - lo)
        log.append([Config(resource_type=4, resource_name="r", name="n", value=str(lo + i)) for i in range(n)])
    big = (
        b'{"producer": "big", "seq": 0, "records": [{"type": "Config", "resource_type": 4, "resource_name": "r",'
        b' "name": "n", "value": "' + b"x" * (args.record_mib << 20) + b'"}]}'
    )
    rows = []

    def post_big(url: str) -> str:
        return str(_post_big(url + "/v1/records", big))

    def get_array(url: str) -> str:
        status, n = _request(url + "/v1/records?from=0")
        return f"{status}, {n / 2**20:.1f} MiB"

    def get_lines(url: str) -> str:
        status, n = _request(url + "/v1/records?from=0", headers={"accept": "application/x-ndjson"})
        return f"{status}, {n / 2**20:.1f} MiB"

    empty = work / "empty"
    Log.create(empty)
    cases = [
        (f"POST one {args.record_mib} MiB record", empty, post_big),
        (f"GET {args.records} records (JSON array)", full, get_array),
        (f"GET {args.records} records (Accept: application/x-ndjson)", full, get_lines),
    ]
    for name, path, run in cases:
        idle, grew, outcome = case(path, args.serve_args, run)
        rows.append((name, idle, grew, outcome))
    p50, p99, audits = health_under_audits(full, args.serve_args, args.seconds)
    print("| case | idle RSS MB | peak growth MB | answer |\n|---|---:|---:|---|")
    for name, idle, grew, outcome in rows:
        print(f"| {name} | {idle:.0f} | {grew:.0f} | {outcome} |")
    print(f"\n/healthz while 2 clients loop audits over {args.records} records: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"({audits} audit requests answered meanwhile)")


if __name__ == "__main__":
    main()
