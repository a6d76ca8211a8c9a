"""The audit engine on canonical stories: the KIP-858 dir failure handled (pass), ignored or
handled late (K6), leadership on an offline dir (K4, K7), leader outside the ISR (K1), missing
epoch bump (K3), stale epochs and gaps (L1, L4); no false positives on generated histories."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import BrokerRegistrationChange, Log, NoOp, PartitionChange, iter_lines
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
RECORDS = list(iter_lines(FIXTURE.open("rb")))
HEARTBEAT = 24  # HeartbeatOfflineDirs; the controller's three records follow
A0, B0 = RECORDS[14].topic_id, RECORDS[15].topic_id
runner = CliRunner()


def audit(records, **config):
    a = Audit(AuditConfig(**config))
    a.feed(records)
    return a.report()


def later(n: int, after: int = HEARTBEAT):
    """``n`` NoOps, half a second apart (the active controller's heartbeat), after record ``after``."""
    ts = RECORDS[after].ts_ms
    return [NoOp(ts_ms=ts + 500 * (i + 1)) for i in range(n)]


def test_the_kip_858_story_passes():
    report = audit(RECORDS + later(1200, after=27))
    assert report.verdict == "pass" and report.violations == []
    checked = {i.id: i.checked for i in report.invariants}
    # K1, K4, K5 count partition states (the catalogue's ``counts``): one per partition record,
    # whatever moved; K7 one per directory removed.
    states = sum(type(r).__name__ in ("Partition", "PartitionChange") for r in RECORDS)
    assert checked["K6"] >= 1 and checked["K7"] == 1
    assert checked["K1"] == checked["K4"] == checked["K5"] == states > 6


def test_an_ignored_dir_failure_is_an_open_k6_violation():
    """ignore-offline-dirs: the broker reported A1 offline, the controller never acted."""
    report = audit(RECORDS[: HEARTBEAT + 1] + later(1200))
    assert report.verdict == "fail"
    [v] = report.violations
    assert (v.invariant, v.entity, v.first_offset, v.last_offset) == (
        "K6",
        f"dir/101/{RECORDS[23].directory}",
        23,
        None,
    )
    assert v.evidence == [23]


def test_a_late_reaction_is_a_closed_interval_and_within_the_grace_none():
    slow = RECORDS[: HEARTBEAT + 1] + later(1200) + RECORDS[HEARTBEAT + 1 :]
    [v] = audit(slow).violations
    fix = HEARTBEAT + 1 + 1200 + 2  # the BrokerRegistrationChange that removes A1
    assert (v.invariant, v.first_offset, v.last_offset, v.evidence) == ("K6", 23, fix - 1, [23, fix])
    quick = RECORDS[: HEARTBEAT + 1] + later(4) + RECORDS[HEARTBEAT + 1 :]
    assert audit(quick).violations == []  # 2 s, 7 records: within the grace
    # The grace is in records or in milliseconds: exceeding either one counts.
    assert audit(slow, grace_records=5000, grace_ms=20 * 60_000).violations == []
    assert audit(quick, grace_records=5000, grace_ms=1000).violations != []
    assert audit(quick, grace_records=3).violations != []


def test_removing_a_dir_without_moving_leadership_breaks_k7_and_k4():
    """The controller writes the BRCR but not the partition changes (skip the leader moves)."""
    bad = RECORDS[: HEARTBEAT + 1] + [RECORDS[-1]] + later(5, after=27)
    report = audit(bad, grace_records=2, grace_ms=0)
    got = {(v.invariant, v.entity) for v in report.violations}
    assert {("K7", f"partition/{A0}/0"), ("K7", f"partition/{B0}/0")} <= got
    assert {("K4", f"partition/{A0}/0"), ("K4", f"partition/{B0}/0")} <= got
    assert {("K5", f"partition/{A0}/0"), ("K5", f"partition/{B0}/0")} <= got
    k4 = next(v for v in report.violations if v.invariant == "K4")
    assert k4.first_offset == HEARTBEAT + 1 and k4.last_offset is None and "offline" in k4.message


def test_leader_outside_the_isr_is_k1_from_cause_to_fix():
    bad = PartitionChange(topic_id=A0, partition_id=1, leader=102, isr=(101,))
    fix = PartitionChange(topic_id=A0, partition_id=1, isr=(101, 102))
    report = audit(RECORDS + [bad, NoOp(), fix])
    [v] = report.violations
    assert (v.invariant, v.first_offset, v.last_offset, v.evidence) == ("K1", 28, 29, [28, 30])
    assert "leader 102 is not in the ISR" in v.message


def test_a_replica_leaving_without_a_leader_epoch_bump_is_k3():
    bad = PartitionChange(topic_id=A0, partition_id=1, replicas=(101,), isr=(101,))
    [v] = audit(RECORDS + [bad]).violations
    assert (v.invariant, v.first_offset, v.last_offset) == ("K3", 28, 28) and "[102]" in v.message
    good = msgspec.structs.replace(bad, leader=101)
    assert audit(RECORDS + [good]).violations == []


def test_stale_epochs_and_gaps_are_log_violations_and_the_audit_goes_on():
    stale = BrokerRegistrationChange(broker_id=101, broker_epoch=7, fenced=1)
    report = audit(RECORDS + [stale, NoOp()])
    [v] = report.violations
    assert (v.invariant, v.first_offset, v.entity) == ("L4", 28, "broker/101")
    assert report.last_offset == 29 and not report.state_hash == ""
    gap = [msgspec.structs.replace(r, offset=i if i < 5 else i + 3) for i, r in enumerate(RECORDS)]
    [g] = audit(gap).violations
    assert (g.invariant, g.first_offset) == ("L1", 8)


@pytest.mark.parametrize("seed", range(5))
def test_no_false_positives_on_generated_histories(seed):
    cfg = WorkloadConfig(brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=seed)
    records = [r for batch in generate(cfg, records=2500) for r in batch]
    report = audit(records)
    assert report.verdict == "pass", report.violations[:3]
    assert {i.id: i.checked for i in report.invariants}["K6"] > 0  # dir failures did happen


def test_cli_audit_exit_codes_formats_and_ranges(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    for path, records in ((good, RECORDS), (bad, RECORDS[: HEARTBEAT + 1] + later(1200))):
        runner.invoke(app, ["init", str(path)])
        lines = tmp_path / f"{path.name}.jsonl"
        lines.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
        assert runner.invoke(app, ["append", str(path), str(lines)]).exit_code == 0
    res = runner.invoke(app, ["audit", str(good)])
    assert res.exit_code == 0 and "PASS" in res.stdout
    out = tmp_path / "report.json"
    res = runner.invoke(app, ["audit", str(bad), "--format", "json", "--out", str(out)])
    assert res.exit_code == 1
    assert res.stdout == ""  # the report goes to the file instead (10^7 records: 1 GB)
    assert f"FAIL: JSON report in {out}" in " ".join(res.stderr.split())
    res = runner.invoke(app, ["audit", str(bad), "--format", "json"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert json.loads(out.read_text()) == doc
    assert list(doc) == [
        "verdict",
        "records",
        "first_offset",
        "last_offset",
        "state_hash",
        "fail_on",
        "grace_records",
        "grace_ms",
        "invariants",
        "violations",
        "streams_state_hash",
        "bookies_state_hash",
        "incidents",
        "handling",
        "availability",
        "topics",
        "dir_paths",
        "fail_on_unavailable_ms",
        "engine",
        "omitted",
        "incident_index",
    ]
    assert doc["verdict"] == "fail" and doc["violations"][0]["invariant"] == "K6"
    assert set(doc["violations"][0]) == {
        "invariant",
        "severity",
        "entity",
        "first_offset",
        "last_offset",
        "message",
        "evidence",
        "name",
        "first_ms",
        "last_ms",
        "incident",
    }
    # A row a person reads: the entity's name and the record times beside offsets and ids.
    v = doc["violations"][0]
    ts = {r.offset: r.ts_ms for r in Log.open(bad).at().records()}
    assert v["name"].startswith("broker 101 ") and (v["first_ms"], v["last_ms"]) == (
        ts[v["first_offset"]],
        ts.get(v["last_offset"]),
    )
    # A grace of 3 records: the brokers' directory reports (AssignReplicasToDirs) come 9 and 14
    # records after their replicas were created, too late (K10, an error); the same states break
    # KIP-858's policy (K8, a warning, which alone would not fail the audit); the controller's
    # 3-record reaction to the dir failure stays within the grace.
    strict = ["audit", str(good), "--grace-records", "3", "--grace-ms", "60000", "-f", "json"]
    res = runner.invoke(app, strict)
    assert res.exit_code == 1
    found = sorted(
        (v["invariant"], v["severity"], v["entity"], v["first_offset"], v["last_offset"])
        for v in json.loads(res.stdout)["violations"]
    )
    assert found == [
        ("K10", "error", "broker/101", 8, 16),
        ("K10", "error", "broker/102", 8, 21),
        ("K8", "warning", "broker/101", 8, 16),
        ("K8", "warning", "broker/102", 8, 21),
    ]
    assert runner.invoke(app, [*strict, "--grace-records", "20"]).exit_code == 0
    # A range: the state before --from is replayed, not audited.
    res = runner.invoke(app, ["audit", str(good), "--from", "20", "--to", "26", "-f", "json"])
    doc = json.loads(res.stdout)
    assert (doc["records"], doc["first_offset"], doc["last_offset"]) == (7, 20, 26)
    assert runner.invoke(app, ["audit", str(good), "--from", "99"]).exit_code == 2
    assert runner.invoke(app, ["audit", str(tmp_path / "nothing")]).exit_code == 2


def test_cli_audit_html_is_one_self_contained_page(tmp_path):
    log = tmp_path / "log"
    lines = tmp_path / "bad.jsonl"
    lines.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in RECORDS[: HEARTBEAT + 1] + later(1200)))
    runner.invoke(app, ["init", str(log)])
    runner.invoke(app, ["append", str(log), str(lines)])
    page = tmp_path / "report.html"
    res = runner.invoke(app, ["audit", str(log), "--format", "html", "--out", str(page)])
    assert res.exit_code == 1 and str(page) in res.stderr
    text = page.read_text()
    assert text.startswith("<!doctype html>") and "FAIL" in text and "<svg" in text
    # Self-contained: its one script is inline (the filter), nothing is fetched.
    assert f"dir/101/{RECORDS[23].directory}" in text and "<script src" not in text and "http" not in text


AUDIT_FIXTURES = Path(__file__).parent.parent / "fixtures" / "kraft" / "audit"
EXPECTED = json.loads((AUDIT_FIXTURES / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_canonical_histories_get_their_expected_verdict(name):
    """Each fixture's verdict, and the invariant its story is about among the violations (the
    correct ones: none at all; a broker asking to be unfenced early breaks a warning only)."""
    expected = EXPECTED[name]
    report = audit(list(iter_lines((AUDIT_FIXTURES / name).open("rb"))))
    assert report.verdict == expected["verdict"]
    found = {v.invariant for v in report.violations}
    assert set(expected["caught_by"]) <= found
    if expected["verdict"] == "pass":
        assert {v.severity for v in report.violations} <= {"warning"}
        if not expected["caught_by"]:
            assert report.violations == []


def test_the_audit_fixtures_are_what_the_simulator_writes(tmp_path):
    """The fixtures are regenerated, not hand-edited: simulate with the README's options
    reproduces them byte for byte."""
    out = tmp_path / "x.jsonl"
    args = [
        "simulate",
        "--seed",
        "1",
        "--brokers",
        "4",
        "--dirs-per-broker",
        "2",
        "--partitions",
        "6",
        "--topics",
        "2",
        "--replication",
        "3",
        "--records",
        "200",
        "--bug",
        "elect-offline-leader",
        "--out",
        str(out),
    ]
    assert runner.invoke(app, args).exit_code == 0
    assert out.read_bytes() == (AUDIT_FIXTURES / "elect-offline-leader.jsonl").read_bytes()


def test_counts_a_reader_can_reconcile():
    """L3-L5 hold every record as it is applied: they count the records audited, as L1 does
    (not "checked 0"). Where one check finds several violations (K7: one directory removed
    with several partitions still on it), the text and HTML reports say what a violation is
    beside what a check is, so that violations above checks add up."""
    from kraftlake.cli.report_text import render as text
    from kraftlake.replay.html import render as html
    from kraftlake.statemachine.invariants import CHECKED, FINDS

    path = Path(__file__).parent.parent / "fixtures" / "kraft" / "audit" / "elect-offline-leader.jsonl"
    records = [msgspec.structs.replace(r, offset=i) for i, r in enumerate(iter_lines(path.open("rb")))]
    report = audit(records)
    by_id = {i.id: i for i in report.invariants}
    assert [by_id[i].checked for i in ("L1", "L3", "L4", "L5")] == [len(records)] * 4
    k7 = by_id["K7"]
    assert k7.violations > k7.checked > 0  # one removal, several partitions left on it
    import io

    from rich.console import Console

    out = Console(width=400, record=True, file=io.StringIO())  # wide enough that no cell wraps
    text(report, out, out)
    said = out.export_text()
    assert f"{k7.checked:,} {CHECKED['K7']}" in said and f"(a violation: {FINDS['K7']})" in said
    page = html(report)
    assert f"<td class=num>{k7.checked:,}</td><td>{CHECKED['K7']}</td>" in page and FINDS["K7"] in page
