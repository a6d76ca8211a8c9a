"""The report a person reads stays small, and every row is in the tables beside it
(``replay.summary``, ``replay.tables``): ``kraftlake audit --tables DIR`` writes the complete
violations, incidents, effects, outages and availability as Parquet in the documented schema,
which DuckDB and pandas read back to exactly the report's rows; the JSON summary holds bounded
lists whose size does not grow with the log, and says how many rows each leaves out."""

from __future__ import annotations

import json

import duckdb
import msgspec
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import Log
from kraftlake.replay import report_json, summary, tables
from kraftlake.replay.audit import audit_log
from kraftlake.statemachine.kraft.workload import FAULTS, WorkloadConfig, generate

runner = CliRunner()


def _log(tmp_path, records: int, bug: str | None = "elect-offline-leader") -> Log:
    cfg = WorkloadConfig(brokers=5, dirs_per_broker=2, topics=2, partitions=12, seed=3, bug=bug, faults=FAULTS[:3])
    log = Log.create(tmp_path / f"log-{records}")
    log.append([r for batch in generate(cfg, records=records) for r in batch])
    return log


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    log = _log(root, 6000)
    out = root / "tables"
    res = runner.invoke(app, ["audit", str(log.path), "--format", "json", "--tables", str(out)])
    assert res.exit_code == 1, res.output
    return audit_log(log.at()), json.loads(res.stdout), out, log


def test_the_tables_hold_every_row_of_the_report_in_the_documented_schema(audited):
    report, _doc, out, log = audited
    for name in tables.NAMES:
        assert pq.read_schema(out / f"{name}.parquet") == tables.SCHEMAS[name], name
    con = duckdb.connect()
    q = lambda sql: con.execute(sql.format(d=out)).fetchall()  # noqa: E731
    assert q("SELECT count(*) FROM '{d}/violations.parquet'") == [(report.violation_count,)]
    assert report.violation_count > summary.SAMPLE  # more than the summary shows
    first = pq.read_table(out / "violations.parquet").slice(0, 3).to_pylist()
    added = ("incident", "name", "first_ms", "last_ms")
    assert [{k: v for k, v in row.items() if k not in added} for row in first] == [
        msgspec.to_builtins(v) for v in report.violations[:3]
    ]
    # Each row carries the record times of its offsets and its entity's name beside its id.
    ts = {r.offset: r.ts_ms for r in log.at().records()}
    topics = report.topics
    for row in first:
        assert (row["first_ms"], row["last_ms"]) == (ts[row["first_offset"]], ts.get(row["last_offset"]))
        _, topic_id, p = row["entity"].split("/")
        assert row["name"] == f"{topics[topic_id]}/{p}"
    assert q("SELECT count(*) FROM '{d}/violations.parquet' WHERE first_ms IS NULL OR name IS NULL") == [(0,)]
    assert q(
        "SELECT count(*) FROM '{d}/effects.parquet' WHERE name IS NULL OR (ended_by IS NULL) <> (ended_ms IS NULL)"
    ) == [(0,)]
    assert q("SELECT count(*) FROM '{d}/outages.parquet' WHERE name IS NULL") == [(0,)]
    # The outages' incidents are those the report ties them to (``replay.attribution``).
    caused = dict(q("SELECT incident, count(*) FROM '{d}/outages.parquet' WHERE incident IS NOT NULL GROUP BY 1"))
    ids = [i.id for i in report.incidents]
    want: dict = {}
    for k in report.availability.outage_incidents:
        if k >= 0:
            want[ids[k]] = want.get(ids[k], 0) + 1
    assert caused == want and caused
    incidents = report.incidents
    assert q("SELECT count(*), sum(effects) FROM '{d}/incidents.parquet'") == [
        (len(incidents), sum(len(i.effects) for i in incidents))
    ]
    assert q("SELECT count(*) FROM '{d}/effects.parquet'") == [(sum(len(i.effects) for i in incidents),)]
    # Each violation an incident lists names it; the effects join their incident.
    linked = {i.id: len(i.violations) for i in incidents if i.violations}
    got = dict(q("SELECT incident, count(*) FROM '{d}/violations.parquet' WHERE incident IS NOT NULL GROUP BY 1"))
    assert sum(got.values()) <= sum(linked.values()) and set(got) <= set(linked) and got
    assert q(
        "SELECT count(*) FROM '{d}/effects.parquet' e LEFT JOIN '{d}/incidents.parquet' i ON i.id = e.incident"
        " WHERE i.id IS NULL"
    ) == [(0,)]
    a = report.availability
    assert a.partitions and a.outages
    assert q("SELECT count(*), sum(unavailable_ms) FROM '{d}/availability.parquet'") == [
        (len(a.partitions), sum(p.unavailable_ms for p in a.partitions))
    ]
    assert q("SELECT count(*) FROM '{d}/outages.parquet'") == [(len(a.outages),)]


def test_the_json_report_is_a_summary_that_says_what_it_left_out(audited):
    report, doc, out, log = audited
    omitted = doc["omitted"]
    assert omitted["tables"] == str(out)
    per = {}
    for v in doc["violations"]:
        per[v["invariant"]] = per.get(v["invariant"], 0) + 1
    counts = {i["id"]: i["violations"] for i in doc["invariants"] if i["violations"]}
    assert all(n <= summary.SAMPLE * (1 + summary.WORST) for n in per.values()) and set(per) == set(counts)
    assert {k: counts[k] - per[k] for k in counts if counts[k] > per[k]} == omitted["violations"]
    assert len(doc["incidents"]) <= summary.WORST and all(
        len(i["effects"]) <= summary.EFFECTS for i in doc["incidents"]
    )
    assert omitted["incidents"] == len(report.incidents) - len(doc["incidents"])
    # The worst incidents are shown: none left out has more violations than one shown.
    shown = {i["id"] for i in doc["incidents"]}
    fewest = min(len(i.violations) for i in report.incidents if i.id in shown)
    assert all(len(i.violations) <= fewest for i in report.incidents if i.id not in shown)
    # Each incident shown lists the first violations it caused (its card's), and counts them all;
    # each violation shown is named, timed and tied to its incident.
    full = {i.id: i for i in report.incidents}
    for inc in doc["incidents"]:
        assert len(inc["violations"]) == min(summary.SAMPLE, len(full[inc["id"]].violations))
        assert sum(inc["invariants"].values()) == len(full[inc["id"]].violations)
        assert all(doc["violations"][k]["incident"] == inc["id"] for k in inc["violations"])
    ts = {r.offset: r.ts_ms for r in log.at().records()}
    for v in doc["violations"]:
        assert v["name"] and v["first_ms"] == ts[v["first_offset"]]


def test_the_summary_does_not_grow_with_the_log(tmp_path):
    sizes = []
    for records in (3000, 12000):
        full = audit_log(_log(tmp_path, records).at())
        sizes.append((len(report_json.encode(full)), len(report_json.encode(summary.bounded(full)))))
    (small_full, small_sum), (big_full, big_sum) = sizes
    assert big_full > 3 * small_full  # the complete report grows with the log...
    assert big_sum < 1.5 * small_sum  # ...its summary does not


def test_the_notebook_facade_reads_the_tables_as_dataframes(tmp_path):
    import kraftlake

    log = _log(tmp_path, 3000)
    result = kraftlake.open(log.path).audit()
    frame = result.table("effects")
    # The table's columns, then each record time as a timezone-aware datetime beside its ms.
    assert list(frame.columns) == [*tables.SCHEMAS["effects"].names, "ended_time"] and len(frame)
    assert str(frame["ended_time"].dtype) == "datetime64[ns, UTC]"
    assert str(frame["ended_by"].dtype) == "Int64"
    assert len(result.violations) == result.report.violation_count
    with pytest.raises(ValueError, match="one of violations"):
        result.table("nope")
