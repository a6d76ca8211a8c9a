"""Incidents benchmark: what the incident and availability tracker costs the per-record audit,
and what the standalone pass (``replay.incidents.find_incidents``, the one another engine's
report runs) takes on its own, on a generated JBOD history (``bench/_histories.py``).

Usage::

    python bench/incidents.py                      # 10^5 records, 1 000 brokers x 4 dirs
    python bench/incidents.py --records 1000000
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--brokers", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=2)
    args = p.parse_args()

    from _histories import generated_log
    from rich.console import Console
    from rich.table import Table

    from kraftlake.records import Log
    from kraftlake.replay.audit import Audit
    from kraftlake.replay.incidents import find_incidents

    console = Console()
    with generated_log(args.records, brokers=args.brokers, partitions=args.partitions, console=console) as path:
        snap = Log.open(path).at()
        rows = []
        for run in range(args.runs):
            for what in ("audit without incidents", "audit with incidents", "find_incidents alone"):
                t = time.perf_counter()
                if what == "find_incidents alone":
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
                rows.append((str(run + 1), what, f"{n:,}", f"{s:.2f}", f"{n / s:,.0f}", detail))
    table = Table(title=f"incidents, {args.records:,} records, {args.brokers:,} brokers")
    for col in ("run", "pass", "records", "seconds", "records/s", "found"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
