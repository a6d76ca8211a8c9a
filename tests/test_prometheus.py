"""Prometheus: the report's metrics (``kraftlake audit --format prometheus``) and the following
audit's (``serve --audit``'s ``/metrics``) in Prometheus' conventions, as ``promtool check
metrics`` holds them (counters ``_total``, seconds, histograms, no quantile gauges), with a bounded
number of series; the alerting rules in examples/prometheus/ under ``promtool test rules``; and a
real Prometheus server scraping ``serve --audit`` while a directory fails, its alert firing.

promtool and prometheus are Debian's ``prometheus`` package (``make prometheus`` installs it), or
those in ``KRAFTLAKE_PROMETHEUS``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kraftlake.records import Log, iter_lines
from kraftlake.replay.incidents import TIME_BUCKETS_MS
from kraftlake.replay.live_audit import STATES, LiveAudit
from kraftlake.replay.prometheus import SHOWN, exposition, live_families, render
from kraftlake.replay.summary import bounded

from helpers.http import eventually
from helpers.object_store import free_port
from helpers.pictures import audited, simulated_records, times_of

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "prometheus"
FIXTURES = ROOT / "fixtures" / "kraft"


def tool(name: str) -> str:
    where = os.environ.get("KRAFTLAKE_PROMETHEUS")
    found = str(Path(where) / name) if where else shutil.which(name)
    assert found and Path(found).exists(), f"{name} not found: `make prometheus` installs Debian's prometheus"
    return found


def promtool_check(text: str) -> None:
    """``promtool check metrics``: the exposition parses and follows Prometheus' conventions."""
    done = subprocess.run([tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def named(got: dict, name: str) -> dict[tuple, float]:
    return {labels: value for (n, labels), value in got.items() if n == name}


def check_histogram(got: dict, name: str, labels: tuple, times_ms: list[int]) -> None:
    """The histogram ``name`` (of the series ``labels``) counts ``times_ms``: each bucket those at
    most its bound, +Inf and _count all of them, _sum their total, in seconds."""
    for bound in TIME_BUCKETS_MS:
        le = (("le", repr(bound / 1000)),)
        assert got[(f"{name}_bucket", tuple(sorted(labels + le)))] == sum(t <= bound for t in times_ms), bound
    assert got[(f"{name}_bucket", tuple(sorted((*labels, ("le", "+Inf")))))] == len(times_ms)
    assert got[(f"{name}_count", labels)] == len(times_ms)
    assert got[(f"{name}_sum", labels)] == pytest.approx(sum(times_ms) / 1000)


def test_the_reports_metrics_pass_promtool_with_histograms_and_a_bounded_number_of_series(monkeypatch):
    """``--format prometheus`` of a controller that ignores offline directories: more partitions
    unavailable than get a series (the longest do, the rest are counted, also where the summary
    itself kept fewer partitions); times to move as histograms whose buckets count the effects'
    own times; the causes add up to the total."""
    from kraftlake.replay import summary

    records = simulated_records(records=3000)
    report = audited(records)
    text = render(bounded(report, times=times_of(records)))
    promtool_check(text)
    got = samples(text)
    assert not any("quantile" in dict(labels) for _n, labels in got)
    unavailable = sorted((p.unavailable_ms for p in report.availability.partitions if p.unavailable_ms), reverse=True)
    assert len(unavailable) > SHOWN  # the bound is reached, so the test says something
    each = named(got, "kraftlake_partition_unavailable_seconds_total")
    assert sorted(each.values(), reverse=True) == [ms / 1000 for ms in unavailable[:SHOWN]]
    assert got[("kraftlake_partition_unavailable_omitted", ())] == len(unavailable) - SHOWN
    assert got[("kraftlake_unavailable_partitions", ())] == len(unavailable)
    total = got[("kraftlake_partition_state_seconds_total", (("state", "unavailable"),))]
    assert sum(named(got, "kraftlake_caused_unavailable_partition_seconds_total").values()) == pytest.approx(total)
    moved: dict[str, list[int]] = {"leader": [], "isr": []}
    for inc in report.incidents:
        for e in inc.effects:
            live_leader = e.role == "isr" or e.new_leader not in (-1, None)
            if e.ended_by is not None and live_leader and e.time_to_move_ms is not None:
                moved[e.role].append(e.time_to_move_ms)
    assert moved["leader"] and moved["isr"]
    check_histogram(got, "kraftlake_time_to_move_seconds", (("role", "leadership"),), moved["leader"])
    check_histogram(got, "kraftlake_time_to_move_seconds", (("role", "isr"),), moved["isr"])
    incidents = named(got, "kraftlake_incidents_total")
    assert incidents == {(("kind", k),): n for k, n in report.handling.by_kind.items()}
    # A summary that kept only the 4 worst partitions still counts every unavailable one, and
    # not those that only had an ISR member offline (a controller keeping one in the ISR).
    monkeypatch.setattr(summary, "PARTITIONS", 4)
    records = simulated_records(bug="keep-offline-replica-in-isr", records=2000)
    report = audited(records)
    unavailable = [p for p in report.availability.partitions if p.unavailable_ms]
    assert len(report.availability.partitions) > len(unavailable) > 4
    got = samples(render(bounded(report, times=times_of(records))))
    assert got[("kraftlake_unavailable_partitions", ())] == len(unavailable)
    assert len(named(got, "kraftlake_partition_unavailable_seconds_total")) == 4
    assert got[("kraftlake_partition_unavailable_omitted", ())] == len(unavailable) - 4


def test_the_following_audits_metrics_pass_promtool_and_name_few_partitions(monkeypatch):
    """``live_families`` after a controller left partitions led from offline directories: every
    state counted, at most ``SHOWN`` partitions named per state (the longest in it first), the
    rest counted; offline directories per broker; violations counted from 0 for every invariant
    checked."""
    from kraftlake.replay import live_audit

    monkeypatch.setattr(live_audit, "SHOWN", 3)
    records = simulated_records(records=3000)
    audit = LiveAudit()
    for i in range(0, len(records), 500):
        audit.feed(records[i : i + 500])
    now = audit.now()
    text = exposition(live_families(now, running=True)).decode()
    promtool_check(text)
    got = samples(text)
    assert got[("kraftlake_audit_up", ())] == 1 and got[("kraftlake_audit_last_offset", ())] == len(records) - 1
    assert got[("kraftlake_audit_last_record_timestamp_seconds", ())] == records[-1].ts_ms / 1000
    assert now.states["leader_offline"] > 3  # more than are named
    for state in STATES:
        n = now.states[state]
        assert got[("kraftlake_unhealthy_partitions", (("state", state),))] == n
        shown = {
            labels: t
            for labels, t in named(got, "kraftlake_unhealthy_partition_since_timestamp_seconds").items()
            if dict(labels)["state"] == state
        }
        assert len(shown) == min(n, 3)
        assert got[("kraftlake_unhealthy_partition_omitted", (("state", state),))] == n - len(shown)
    per_broker: dict[int, int] = {}
    for d in now.offline_dirs:
        per_broker[d.broker] = per_broker.get(d.broker, 0) + 1
    assert per_broker
    assert named(got, "kraftlake_offline_dirs") == {(("broker", str(b)),): n for b, n in per_broker.items()}
    violations = named(got, "kraftlake_audit_violations_total")
    assert (("invariant", "K1"), ("severity", "error")) in violations  # checked, never broken: 0
    assert violations[(("invariant", "K1"), ("severity", "error"))] == 0
    assert sum(violations.values()) == len(audit.said())


def test_serve_audit_metrics_pass_promtool(tmp_path):
    """The whole ``/metrics`` of the service running the following audit (its own metrics and
    the audit's) passes ``promtool check metrics``, and says what holds after the records."""
    from litestar.testing import TestClient

    from kraftlake.replay.audit import AuditConfig
    from kraftlake.service.app import create_app

    records = list(iter_lines((FIXTURES / "audit" / "elect-offline-leader.jsonl").open("rb")))
    log = Log.create(tmp_path / "log")
    log.append(records)
    app = create_app(log.path, audit=AuditConfig(grace_records=0, grace_ms=0), commit_process=False)
    with TestClient(app=app) as client:
        eventually(
            lambda: client.get("/v1/audits/live").json()["last_offset"] == len(records) - 1,
            "the following audit caught up",
            pause_s=0.02,
        )
        text = client.get("/metrics").text
        live = client.get("/v1/audits/live").json()
    promtool_check(text)
    got = samples(text)
    assert got[("kraftlake_audit_up", ())] == 1
    for state in STATES:
        assert got[("kraftlake_unhealthy_partitions", (("state", state),))] == live["now"]["states"][state]
    assert sum(named(got, "kraftlake_incidents_total").values()) == sum(live["now"]["incidents"].values()) > 0


def test_the_alerting_rules_pass_their_unit_tests_and_read_series_the_service_exposes():
    """examples/prometheus: ``promtool check rules`` and ``promtool test rules``; every
    ``kraftlake_*`` series a rule reads is one ``serve --audit`` exposes."""
    rules, tests = RULES / "kraftlake.rules.yml", RULES / "kraftlake.rules.test.yml"
    for args in (["check", "rules", str(rules)], ["test", "rules", tests.name]):
        done = subprocess.run([tool("promtool"), *args], capture_output=True, text=True, cwd=RULES)
        assert done.returncode == 0, done.stdout + done.stderr
    records = list(iter_lines((FIXTURES / "audit" / "elect-offline-leader.jsonl").open("rb")))
    audit = LiveAudit()
    audit.feed([msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)])
    exposed = set(samples(exposition(live_families(audit.now(), running=True)).decode()))
    exposed_names = {n for n, _labels in exposed}
    read = set(re.findall(r"\bkraftlake_[a-z_]+", rules.read_text()))
    assert read and read <= exposed_names, read - exposed_names


def _seconds(rfc3339: str) -> float:
    """Prometheus' RFC 3339 time (nanoseconds, Z) as seconds since the epoch."""
    from datetime import datetime

    whole, _, rest = rfc3339.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (rest or "0"))


def _alerts(url: str, name: str) -> list[dict]:
    alerts = httpx.get(f"{url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == name]


@pytest.mark.slow
def test_a_real_prometheus_fires_the_offline_directory_alert_when_a_failure_is_appended(tmp_path):
    """Prometheus (Debian's) scrapes ``kraftlake serve --audit`` every second and evaluates the
    shipped rules every second: no offline directory before Kafka's KIP-858 story fails one;
    once the failure is appended over HTTP, ``KraftlakeOfflineLogDirectory`` fires for broker 101."""
    records = list(iter_lines((FIXTURES / "jbod-dir-failure.jsonl").open("rb")))
    failed = next(i for i, r in enumerate(records) if type(r).__name__ == "LogDirFailed")
    Log.create(tmp_path / "log")
    port, prom_port = free_port(), free_port()
    serve = [sys.executable, "-m", "kraftlake", "serve", str(tmp_path / "log"), "--port", str(port), "--audit"]
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{RULES / 'kraftlake.rules.yml'}]\n"
        "scrape_configs:\n"
        f"  - {{job_name: kraftlake, static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}\n"
    )
    prometheus = [
        tool("prometheus"),
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ]
    url, prom = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{prom_port}"
    procs = []
    try:
        with (tmp_path / "serve.log").open("wb") as serve_log, (tmp_path / "prometheus.log").open("wb") as prom_log:
            procs.append(subprocess.Popen(serve, stdout=subprocess.DEVNULL, stderr=serve_log))
            procs.append(subprocess.Popen(prometheus, stdout=subprocess.DEVNULL, stderr=prom_log))

        def answers(address: str) -> bool:
            try:
                return httpx.get(address, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        eventually(lambda: answers(f"{url}/healthz"), "the service started", pause_s=0.05)
        eventually(lambda: answers(f"{prom}/-/ready"), "prometheus started", pause_s=0.05)

        def append(seq: int, batch: list) -> None:
            body = {"producer": "p", "seq": seq, "records": [msgspec.to_builtins(r) for r in batch]}
            assert httpx.post(f"{url}/v1/records", json=body, timeout=30).status_code == 200

        def scraped(query: str) -> tuple[float, float] | None:
            """(when Prometheus answered, the value) of ``query``'s first series."""
            got = httpx.get(f"{prom}/api/v1/query", params={"query": query}, timeout=10).json()["data"]["result"]
            return (float(got[0]["value"][0]), float(got[0]["value"][1])) if got else None

        def evaluated_since(t: float) -> bool:
            groups = httpx.get(f"{prom}/api/v1/rules", timeout=10).json()["data"]["groups"]
            last = next(g["lastEvaluation"] for g in groups if g["name"] == "kraftlake-cluster")
            return _seconds(last) > t

        append(1, records[:failed])
        # The audit read the records before the failure, Prometheus scraped it, then evaluated the
        # rules: no alert.
        caught_up = eventually(
            lambda: (got := scraped("kraftlake_audit_last_offset")) and got[1] == failed - 1 and got, "scraped"
        )
        eventually(lambda: evaluated_since(caught_up[0]), "rules evaluated since")
        assert _alerts(prom, "KraftlakeOfflineLogDirectory") == []
        append(2, records[failed:])
        firing = eventually(
            lambda: [a for a in _alerts(prom, "KraftlakeOfflineLogDirectory") if a["state"] == "firing"],
            "KraftlakeOfflineLogDirectory firing",
            attempts=200,
        )
        assert [a["labels"]["broker"] for a in firing] == ["101"]
        assert firing[0]["annotations"]["summary"] == "Broker 101 has 1 offline log directories"
        promtool_check(httpx.get(f"{url}/metrics", timeout=10).text)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
