"""Where the audit plan's memory goes: the process's RSS when each step of the plan on DuckDB
begins (``audit_snapshot``'s ``step``), and its peak, on an existing log.

    python bench/audit_memory.py LOG [--memory-limit 1GB] [--threads N]

Prints a table (step, seconds into the run, RSS at its start, growth over the step) and the
peak (VmHWM). The plan runs in this process as ``kraftlake audit`` runs it, without the report's
writing (``replay.report_json``, after DuckDB has closed).
"""

from __future__ import annotations

import argparse
import time


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in MB (VmRSS: now; VmHWM: the peak since start)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    raise KeyError(field)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log")
    p.add_argument("--memory-limit", default=None, help="DuckDB's (default: the plan's, 1GB)")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()

    from rich.console import Console
    from rich.table import Table

    from kraftlake.records import Log
    from kraftlake.replay.plan import audit_snapshot

    started = time.perf_counter()
    marks: list[tuple[str, float, int]] = []

    def step(name: str) -> None:
        marks.append((name, time.perf_counter() - started, _status("VmRSS")))

    step("opening the log")
    report = audit_snapshot(Log.open(args.log).at(), step=step, threads=args.threads, memory_limit=args.memory_limit)
    step("done")
    table = Table(title=f"the plan's memory, {report.records:,} records, {len(report.violations):,} violations")
    for col in ("step", "s", "RSS at start MB", "growth MB"):
        table.add_column(col, justify="left" if col == "step" else "right")
    for (name, at, rss), (_next, _at, after) in zip(marks, marks[1:]):
        table.add_row(name, f"{at:.1f}", f"{rss:,}", f"{after - rss:+,}")
    console = Console()
    console.print(table)
    console.print(f"peak RSS (VmHWM): {_status('VmHWM'):,} MB; {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
