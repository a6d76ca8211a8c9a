"""One audit behind every door (``kraftlake.audit``, ``kraftlake/auditing.py``): the engines it
picks give the same report; windows by offset, record time and Kafka offset; refusals that name
what cannot go together; a memory limit too small for the work is said, not a traceback."""

from __future__ import annotations

import pytest

import kraftlake
from kraftlake.records import Log, iter_lines
from kraftlake.replay import report_json
from kraftlake.statemachine.kraft.workload import FAULTS, WorkloadConfig, generate

from helpers.kraft import without_offsets


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=2, topics=2, partitions=12, seed=5, bug="elect-offline-leader", faults=FAULTS[:3]
    )
    log = Log.create(tmp_path_factory.mktemp("entry") / "log")
    log.append(without_offsets([r for batch in generate(cfg, records=3000) for r in batch]))
    return log


def _doc(report) -> dict:
    return {k: v for k, v in report_json.to_builtins(report).items() if k != "engine"}


def test_every_engine_gives_the_same_report_and_auto_picks_the_plan(log):
    reports = {e: kraftlake.audit(log.path, engine=e) for e in ("python", "duckdb", "auto")}
    assert reports["python"].engine == "python" and reports["auto"].engine.startswith("duckdb")
    assert reports["python"].violations and reports["python"].incidents
    assert _doc(reports["python"]) == _doc(reports["duckdb"]) == _doc(reports["auto"])


def test_a_window_that_starts_later_runs_per_record_from_the_state_before_it(log):
    whole = kraftlake.audit(log, engine="python")
    late = kraftlake.audit(log, from_offset=1000, to_offset=2000)
    assert late.engine == "python" and (late.first_offset, late.last_offset) == (1000, 2000)
    assert {
        (v.invariant, v.entity)
        for v in late.violations
        if v.first_offset >= 1000 and v.last_offset is not None and v.last_offset <= 2000
    } <= {(v.invariant, v.entity) for v in whole.violations}
    records = log.at().records()
    by_time = kraftlake.audit(log, from_time=records[1000].ts_ms, to_time=records[2000].ts_ms)
    assert by_time.first_offset <= 1000 and by_time.last_offset >= 2000


def test_what_cannot_go_together_is_refused_in_words(log):
    cases = {
        "engine 'gpu'": dict(engine="gpu"),
        "fail_on 'fatal'": dict(fail_on="fatal"),
        "at most one of version, timestamp": dict(version=0, timestamp="2026-01-01"),
        "engine python for a later start": dict(engine="duckdb", from_offset=5),
        "past the end of the log": dict(from_offset=10**9),
        "at most one of from_offset, from_time": dict(from_offset=3, from_time=0),
        "at most one of to_offset, to_source_offset": dict(to_offset=3, to_source_offset=3),
        "not with engine 'python'": dict(engine="python", master="local[1]"),
    }
    for words, kwargs in cases.items():
        with pytest.raises(kraftlake.AuditUsageError, match=words):
            kraftlake.audit(log, **kwargs)


def test_a_memory_limit_too_small_for_the_work_is_said(log):
    with pytest.raises(kraftlake.AuditCapacityError, match="raise it with --memory-limit"):
        kraftlake.audit(log, engine="duckdb", memory_limit="2MB")


def test_a_log_with_s3stream_records_goes_per_record_on_auto(tmp_path):
    from pathlib import Path

    fixture = Path(__file__).parent.parent / "fixtures" / "s3stream" / "audit" / "compaction.jsonl"
    log = Log.create(tmp_path / "s3")
    log.append(list(iter_lines(fixture.open("rb"))))
    assert kraftlake.audit(log).engine == "python"


def test_every_door_gives_the_report_of_kraftlake_audit(log):
    """The CLI, the HTTP service and the notebook facade are thin callers of ``kraftlake.audit``:
    with the same arguments, each gives its report (the doors show the bounded summary)."""
    import json

    from litestar.testing import TestClient
    from typer.testing import CliRunner

    from kraftlake.cli import app
    from kraftlake.replay.summary import bounded
    from kraftlake.service.app import create_app

    def summary(report) -> dict:
        # Each door's rows carry the record times of the offsets they name, read from the log.
        return json.loads(report_json.encode(bounded(report, times=log.at().record_times)))

    for engine in ("auto", "python"):
        expected = summary(kraftlake.audit(log, engine=engine, grace_ms=500, to_offset=2500))
        assert expected["violations"], "a history whose doors agree on nothing proves nothing"
        cli = CliRunner().invoke(
            app,
            ["audit", str(log.path), "--format", "json", "--engine", engine, "--grace-ms", "500", "--to", "2500"],
        )
        assert cli.exit_code == 1 and json.loads(cli.stdout) == expected
        with TestClient(app=create_app(log.path)) as client:
            served = client.post("/v1/audits", json={"engine": engine, "grace_ms": 500, "to_offset": 2500})
        assert served.status_code == 200 and served.json() == expected
        notebook = kraftlake.open(log.path).audit(engine=engine, grace_ms=500, to_offset=2500)
        assert summary(notebook.report) == expected
