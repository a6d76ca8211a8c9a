"""Incidents benchmark: what the incident and availability tracker costs the per-record audit,
what the standalone pass (``replay.incidents.find_incidents``, the per-record reference) takes
on its own, and what the audit plan's incidents stage (``replay.plan.incidents``: the broker side
on the driver, the partition side in SQL) takes inside the plan on DuckDB, on a generated JBOD
history (``bench/_histories.py``) or an existing log (``--log``). Seconds are wall time; CPU s
are the process's (every thread), the stage's from its start to the report.

Usage::

    python bench/incidents.py                      # 10^5 records, 1 000 brokers x 4 dirs
    python bench/incidents.py --records 1000000
    python bench/incidents.py --log /tmp/i31perf/h6/log --passes find_incidents,plan
    python bench/incidents.py --log /tmp/i31perf/h6/log --passes replay --runs 5

The ``replay`` pass times the driver's part of the plan's incidents stage alone: the incident
rules replayed over the broker side's events (``_Incidents.run``) with the partition side's
answers. Its inputs (the events, topic lifetimes, each request's effects and departures) are
caught from one run of the plan on DuckDB, then the replay runs ``--runs`` times on them; the
row is the run with the least CPU. No SQL runs in it, so the rules' own cost is measured apart
from the engine's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time
from unittest import mock


def _mark(marks: dict[str, tuple[float, float]], name: str) -> None:
    """The plan's ``step``: when each stage began, wall and CPU."""
    marks.setdefault(name, (time.perf_counter(), time.process_time()))


def _captured(snap) -> dict:
    """The inputs of the plan's incidents replay, caught in one run of the plan on DuckDB:
    ``events``, ``lives``, ``names``, and per request its ``effects`` and ``departures`` (Arrow
    tables: the rows the replay was given, kept past the statement that read them)."""
    from kraftlake.replay.plan import audit_snapshot
    from kraftlake.replay.plan import incidents as plan

    got: dict = {"effects": {}, "departures": {}}
    real_get, real_init, real_run = plan._Streamed.get, plan._Incidents.__init__, plan._Incidents.run

    def get(self, key):
        rows = real_get(self, key)
        if rows is not None:
            got["effects"][key] = rows.table.slice(rows.lo, rows.hi - rows.lo)
        return rows

    def init(self, lives, names, found_effects, found_departures, *rest):
        real_init(self, lives, names, found_effects, found_departures, *rest)
        got["lives"], got["names"] = lives, dict(names)
        got["departures"] = {k: v.table.slice(v.lo, v.hi - v.lo) for k, v in found_departures.items()}

    def run(self, events):
        got["events"] = list(events)
        return real_run(self, events)

    with (
        mock.patch.object(plan._Streamed, "get", get),
        mock.patch.object(plan._Incidents, "__init__", init),
        mock.patch.object(plan._Incidents, "run", run),
    ):
        audit_snapshot(snap)
    return got


def _replayed(got: dict, runs: int) -> tuple[float, float, int, int]:
    """The replay of ``_captured``'s inputs ``runs`` times: (wall s, CPU s) of the run with the
    least CPU, its incidents and effects."""
    from kraftlake.replay.plan import incidents as plan

    best = None
    for _ in range(runs):
        effects = {k: plan._Rows(t, 0, t.num_rows) for k, t in got["effects"].items()}
        departures = {k: plan._Rows(t, 0, t.num_rows) for k, t in got["departures"].items()}
        replay = plan._Incidents(got["lives"], got["names"], effects, departures)
        t, cpu = time.perf_counter(), time.process_time()
        replay.run(got["events"])
        took = (time.perf_counter() - t, time.process_time() - cpu)
        if replay.ask_effects or replay.ask_departures:
            raise AssertionError("the captured inputs do not answer every request of the replay")
        if best is None or took[1] < best[1]:
            best = took
        found = replay.incidents
    assert best is not None
    return best[0], best[1], len(found), sum(len(i.effects) for i in found)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--brokers", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--log", help="an existing log instead of a generated history")
    p.add_argument(
        "--passes", default="audit,find_incidents,plan", help="audit, find_incidents, plan, replay (see above)"
    )
    args = p.parse_args()
    passes = set(args.passes.split(","))

    from _histories import generated_log
    from rich.console import Console
    from rich.table import Table

    from kraftlake.records import Log
    from kraftlake.replay.audit import Audit
    from kraftlake.replay.incidents import find_incidents
    from kraftlake.replay.plan import audit_snapshot

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
        if "replay" in passes:
            got = _captured(snap)
            s, c, incidents, effects = _replayed(got, args.runs)
            n = snap.last_offset + 1
            rows.append(
                (
                    f"best of {args.runs}",
                    "the plan's incidents replay alone (captured inputs)",
                    f"{n:,}",
                    f"{s:.3f}",
                    f"{c:.3f}",
                    f"{n / s:,.0f}",
                    f"{incidents:,} incidents, {effects:,} effects",
                )
            )
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
