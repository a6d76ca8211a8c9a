"""Incidents benchmark: what the incident and availability tracker costs the per-record audit,
what the standalone pass (``replay.incidents.find_incidents``, the per-record reference) takes
on its own, and what the audit plan's incidents stage (``spark.plan.incidents``: the broker side
on the driver, the partition side in SQL) takes inside the plan on DuckDB, on a generated JBOD
history (``bench/_histories.py``) or an existing log (``--log``). Seconds are wall time; CPU s
are the process's (every thread), the stage's from its start to the report.

Usage::

    python bench/incidents.py                      # 10^5 records, 1 000 brokers x 4 dirs
    python bench/incidents.py --records 1000000
    python bench/incidents.py --log /tmp/i31perf/h6/log --passes find_incidents,plan
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time


def _mark(marks: dict[str, tuple[float, float]], name: str) -> None:
    """The plan's ``step``: when each stage began, wall and CPU."""
    marks.setdefault(name, (time.perf_counter(), time.process_time()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--brokers", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--log", help="an existing log instead of a generated history")
    p.add_argument("--passes", default="audit,find_incidents,plan", help="audit, find_incidents, plan")
    args = p.parse_args()
    passes = set(args.passes.split(","))

    from _histories import generated_log
    from rich.console import Console
    from rich.table import Table

    from kraftlake.records import Log
    from kraftlake.replay.audit import Audit
    from kraftlake.replay.incidents import find_incidents
    from kraftlake.spark.plan import audit_snapshot

    console = Console()
    history = (
        contextlib.nullcontext(args.log)
        if args.log
        else generated_log(args.records, brokers=args.brokers, partitions=args.partitions, console=console)
    )
    whats = [("audit", "audit without incidents"), ("audit", "audit with incidents")]
    whats += [("find_incidents", "find_incidents alone"), ("plan", "the plan's incidents stage (DuckDB)")]
    with history as path:
        snap = Log.open(path).at()
        rows = []
        for run in range(args.runs):
            for _pass, what in [w for w in whats if w[0] in passes]:
                t, cpu = time.perf_counter(), time.process_time()
                if what.startswith("the plan"):
                    marks: dict[str, tuple[float, float]] = {}
                    report = audit_snapshot(snap, step=functools.partial(_mark, marks))
                    n, detail = report.records, f"{len(report.incidents):,} incidents"
                    t, cpu = marks["incidents and availability"]
                elif what == "find_incidents alone":
                    found = find_incidents(snap.iter_records())
                    n, detail = snap.last_offset + 1, f"{found.handling.incidents:,} incidents"
                else:
                    a = Audit()
                    if what == "audit without incidents":
                        a.tracker = None
                    for batch in snap.iter_records():
                        a.feed(batch)
                    report = a.report()
                    n, detail = report.records, f"{len(report.violations):,} violations"
                s = time.perf_counter() - t
                c = time.process_time() - cpu
                rows.append((str(run + 1), what, f"{n:,}", f"{s:.2f}", f"{c:.2f}", f"{n / s:,.0f}", detail))
    table = Table(title=f"incidents, {args.log or f'{args.records:,} records, {args.brokers:,} brokers'}")
    for col in ("run", "pass", "records", "seconds", "CPU s", "records/s", "found"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
