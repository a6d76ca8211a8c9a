"""What refusing duplicate JSON keys costs ``kraftlake append`` (issue 33, finding 5): JSON Lines
decoded into records per second with the check (``codec.duplicate_key``) and without it, on
simulated KRaft and S3Stream histories (and the share of lines walked object by object), and the append of the whole file.

Usage::

    python bench/json_keys.py [--records 50000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from kraftlake.records import Log, codec, iter_lines


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(lines: list[bytes], repeat: int) -> tuple[float, float]:
    """Best seconds to decode ``lines``, and to decode and append them to a new log."""

    def append() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            Log.create(Path(tmp) / "log").append(list(iter_lines(lines)), validated=True)

    return best(lambda: list(iter_lines(lines)), repeat), best(append, max(1, repeat // 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(
        "| history | records | walked | decode with check | without | cost per record | append with check | without |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for family in ("kraft", "s3stream"):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "h.jsonl"
            cli = [sys.executable, "-m", "kraftlake", "simulate", "--family", family, "--seed", "7"]
            subprocess.run([*cli, "--records", str(args.records), "--out", str(out)], check=True)
            lines = out.read_bytes().splitlines()
        walked = sum(
            b"\\" in x or codec._PLAIN_ENCODER.encode(codec._PLAIN_DECODER.decode(x)).count(b'":') != x.count(b'":')
            for x in lines
        )
        n = len(lines)
        with_check, append_with = measure(lines, args.repeat)
        with mock.patch.object(codec, "duplicate_key", lambda line: None):
            without, append_without = measure(lines, args.repeat)
        print(
            f"| {family} | {n:,} | {walked / n:.0%} | {n / with_check:,.0f}/s | {n / without:,.0f}/s"
            f" | {(with_check - without) / n * 1e6:.2f} us | {append_with:.2f} s | {append_without:.2f} s |"
        )


if __name__ == "__main__":
    main()
