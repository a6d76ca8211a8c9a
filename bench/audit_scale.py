"""Audit scale benchmark: is every engine's cost linear in the records, on every history shape?

Two shapes, each at 10^5, 10^6 and 10^7 records (``--sizes``):

- **S1**, the simulator's default, dense faults: ``kraftlake simulate --seed 7 --faults
  dir-failure,broker-crash`` (6 brokers; directories fail and brokers crash all the time);
- **S2**, a large cluster: ``bench/replay.py --phase generate --brokers 1000 --partitions 100000``
  (few faults, a burst of 100 000 partitions at the start).

A history above 10^6 records is 10^6 generated and tiled (``bench/tile.py``: copies laid end to
end with ids of their own). Each audit is a whole process, as a user runs it (``kraftlake audit
LOG --engine E --format json``): its CPU seconds (user + system, its children included), wall,
peak resident memory, microseconds per record, and the growth of that per x10 records; beside
it, in the same run and the same way, the hand-written K1 query's whole process
(``bench/spark_audit.py --phase duckdb``: read the log, forward-fill, count K1's islands), the
reference the plan is held to, and the summary report's size. Usage::

    python bench/audit_scale.py                                  # S1 and S2, 10^5..10^7, both engines
    python bench/audit_scale.py --sizes 100000,1000000 --shapes S2 --engines duckdb
    python bench/audit_scale.py --dir /data/scale --keep         # keep the logs for the next run
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
BASE = 1_000_000
"""Histories above this are this many records generated, then tiled."""

MEASURE = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - t\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'code': p.returncode, 'wall': wall, 'cpu': u.ru_utime + u.ru_stime,"
    " 'peak_mb': u.ru_maxrss / 1024, 'out': p.stdout.decode(errors='replace')[-2000:],"
    " 'err': p.stderr.decode(errors='replace')[-2000:]}))\n"
)
"""Runs a command as its only child: the child's CPU (and its own children's) and peak RSS."""


def measure(cmd: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _kraftlake(*args: str) -> list[str]:
    return [sys.executable, "-m", "kraftlake", *args]


def build(shape: str, records: int, work: Path) -> Path:
    """The log of ``shape`` at ``records`` under ``work`` (kept there: built once)."""
    log = work / f"{shape}-{records}"
    if (log / "_delta_log").is_dir():
        return log
    if records > BASE:
        base = build(shape, BASE, work)
        copies = -(-records // BASE)
        subprocess.run(
            [sys.executable, str(HERE / "tile.py"), "--from", str(base), "--to", str(log), "--copies", str(copies)],
            check=True,
            capture_output=True,
        )
        return log
    if shape == "S1":
        lines = work / f"{shape}-{records}.jsonl"
        sim = ["simulate", "--seed", "7", "--faults", "dir-failure,broker-crash", "--records", str(records)]
        subprocess.run(_kraftlake(*sim, "--out", str(lines)), check=True, capture_output=True)
        subprocess.run(_kraftlake("init", str(log)), check=True, capture_output=True)
        subprocess.run(_kraftlake("append", str(log), str(lines)), check=True, capture_output=True)
        lines.unlink()
        return log
    gen = work / f"gen-{shape}-{records}"
    subprocess.run(
        [
            sys.executable,
            str(HERE / "replay.py"),
            "--phase",
            "generate",
            "--records",
            str(records),
            "--brokers",
            "1000",
            "--partitions",
            "100000",
            "--dir",
            str(gen),
            "--keep",
        ],
        check=True,
        capture_output=True,
    )
    shutil.move(str(gen / "log"), str(log))
    shutil.rmtree(gen, ignore_errors=True)
    return log


def _records(log: Path) -> int:
    from kraftlake.records import Log

    return Log.open(log).at().last_offset + 1


def audit(log: Path, engine: str, memory_limit: str | None) -> dict:
    report = log.parent / f"report-{log.name}-{engine}.json"
    args = ["audit", str(log), "--engine", engine, "--format", "json", "--out", str(report)]
    if memory_limit and engine == "duckdb":
        args += ["--memory-limit", memory_limit]
    m = measure(_kraftlake(*args))
    if m["code"] not in (0, 1):
        raise SystemExit(f"audit {log} --engine {engine} failed ({m['code']}):\n{m['err']}")
    doc = json.loads(report.read_text())
    m["violations"] = sum(i["violations"] for i in doc["invariants"])
    m["state_hash"] = doc["state_hash"]
    m["report_kb"] = report.stat().st_size / 1024
    report.unlink()
    return m


def k1_reference(log: Path) -> dict:
    m = measure([sys.executable, str(HERE / "spark_audit.py"), "--phase", "duckdb", "--log", str(log), "--cores", "0"])
    if m["code"] != 0:
        raise SystemExit(f"the K1 reference failed:\n{m['err']}")
    return m


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000,10000000", help="comma-separated record counts")
    p.add_argument("--shapes", default="S1,S2", help="comma-separated: S1 (dense faults), S2 (a large cluster)")
    p.add_argument("--engines", default="python,duckdb", help="comma-separated: python, duckdb")
    p.add_argument("--memory-limit", help="DuckDB's memory limit for the plan (default: the audit's)")
    p.add_argument("--dir", help="where the logs are built (default: a temporary directory, removed)")
    p.add_argument("--keep", action="store_true", help="keep the logs in --dir for the next run")
    p.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    args = p.parse_args()
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraftlake-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    try:
        for shape in args.shapes.split(","):
            for n in sizes:
                log = build(shape, n, work)
                records = _records(log)
                ref = k1_reference(log)
                for engine in args.engines.split(","):
                    m = audit(log, engine, args.memory_limit)
                    rows.append({"shape": shape, "records": records, "engine": engine, **m, "k1": ref})
                    _print(rows)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        for r in rows:
            print(json.dumps({k: v for k, v in r.items() if k not in ("out", "err")}))


def _print(rows: list[dict]) -> None:
    head = (
        f"{'shape':<5} {'records':>11} {'engine':<7} {'CPU-s':>8} {'wall-s':>8} {'peak MB':>8} {'us/rec':>7}"
        f" {'x10':>5} {'vs py':>6} {'K1 CPU':>7} {'K1 wall':>7} {'vs K1':>6} {'viol':>9} {'report KB':>9}"
    )
    lines = [head]
    for r in rows:
        us = r["cpu"] / r["records"] * 1e6
        # Growth per x10: the ratio of microseconds per record to the next smaller size's (1.00
        # is linear), scaled to a factor of ten where the sizes are not exactly ten apart.
        smaller = [
            q for q in rows if q["shape"] == r["shape"] and q["engine"] == r["engine"] and q["records"] < r["records"]
        ]
        prev = max(smaller, key=lambda q: q["records"]) if smaller else None
        growth = "-"
        if prev:
            ratio = us / (prev["cpu"] / prev["records"] * 1e6)
            growth = f"{ratio ** (1 / math.log10(r['records'] / prev['records'])):.2f}"
        py = next(
            (q for q in rows if q["shape"] == r["shape"] and q["records"] == r["records"] and q["engine"] == "python"),
            None,
        )
        vs_py = f"{py['wall'] / r['wall']:.2f}" if py and r["engine"] != "python" else "-"
        k1 = r["k1"]
        lines.append(
            f"{r['shape']:<5} {r['records']:>11,} {r['engine']:<7} {r['cpu']:>8.1f} {r['wall']:>8.1f} {r['peak_mb']:>8.0f}"
            f" {us:>7.1f} {growth:>5} {vs_py:>6} {k1['cpu']:>7.1f} {k1['wall']:>7.1f} {r['wall'] / k1['wall']:>6.1f}"
            f" {r['violations']:>9,} {r['report_kb']:>9,.0f}"
        )
    print("\n".join(lines), flush=True)
    print(flush=True)


if __name__ == "__main__":
    main()
