"""CPU milliseconds of the two columnar stages of an append, per input form, without the write.

    python bench/append_stages.py --size 10000 --rounds 30

``Log.append`` checks a batch (``columnar.from_python`` for Structs; ``append.service_msgpack``
for msgpack, as the HTTP service decodes it) and converts it to the log's Arrow table
(``columnar.to_table``), then writes Parquet and commits (bench/append_cpu.py measures the
whole). Here only the two stages, each timed with ``time.process_time`` on bench/append.py's
workload, the collector paused as ``Log.append`` pauses it, at offsets past 65 535 (the
``record`` column's offsets in one msgpack form, as in a long log). The first round is a
warm-up. Prints the median per stage (``--json``: one JSON object).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgspec  # noqa: E402
from append import Workload, service_msgpack  # noqa: E402 - bench/append.py's

from kraftlake.records.base import gc_paused  # noqa: E402
from kraftlake.records.columnar import from_python, to_table  # noqa: E402

STAGES = ("python_check", "python_table", "msgpack_check", "msgpack_table")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=10_000, help="records per batch (default 10000)")
    ap.add_argument("--rounds", type=int, default=30, help="timed rounds (default 30)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the medians as one JSON object")
    args = ap.parse_args()
    work = Workload(args.seed)
    cpu: dict[str, list[float]] = {s: [] for s in STAGES}
    for i in range(args.rounds + 1):
        batch = work.batch(args.size)
        packed = msgspec.msgpack.encode(batch)
        times = []
        with gc_paused():
            for check, source in ((from_python, batch), (service_msgpack, packed)):
                start = time.process_time()
                checked = check(source)
                times.append(time.process_time() - start)
                start = time.process_time()
                to_table(checked, first_offset=70_000, ts_ms=1_700_000_000_000)
                times.append(time.process_time() - start)
        if i:
            for stage, t in zip(STAGES, times):
                cpu[stage].append(t * 1000)
    medians = {s: round(statistics.median(v), 2) for s, v in cpu.items()}
    if args.json:
        print(json.dumps(medians))
        return
    print(f"CPU ms per stage, {args.size:,} records (median of {args.rounds}; load {os.getloadavg()[0]:.1f})")
    for stage, ms in medians.items():
        print(f"  {stage:14s} {ms:8.2f}")


if __name__ == "__main__":
    main()
