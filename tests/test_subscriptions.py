"""Subscriptions over HTTP against a real ``kraftlake serve`` (uvicorn on loopback): long polls
(``GET /v1/records?from=&wait_ms=``) answered when records are there or when one lands, empty when
none came; Server-Sent Events (``/v1/records/stream``) with catch-up, live records and
``Last-Event-ID``; the bound on waiting clients (429) and on ``wait_ms`` (400); the read role."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import httpx
import pytest

from kraftlake.records import Log

from helpers.http import config, eventually
from helpers.object_store import free_port


@pytest.fixture
def server(tmp_path):
    """Start ``kraftlake serve`` over a fresh log with extra options: (url, log path)."""
    procs = []

    def start(*options: str, tokens: str | None = None) -> str:
        path = tmp_path / "log"
        Log.create(path)
        port = free_port()
        args = [sys.executable, "-m", "kraftlake", "serve", str(path), "--port", str(port), *options]
        if tokens is not None:
            args += ["--tokens", tokens]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        url = f"http://127.0.0.1:{port}"

        def up():
            try:
                return httpx.get(f"{url}/healthz", headers=HEADERS, timeout=2).status_code in (200, 401)
            except httpx.HTTPError:
                return False

        eventually(up, "the service started")
        return url

    yield start
    for p in procs:
        p.terminate()
        p.wait(30)


HEADERS = {"authorization": "Bearer reader-token"}


def append(url: str, seq: int, n: int, headers=None) -> dict:
    body = {"producer": "p", "seq": seq, "records": [config(seq * 100 + i) for i in range(n)]}
    r = httpx.post(f"{url}/v1/records", json=body, headers=headers or {}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def waiting(url: str, n: int) -> None:
    eventually(lambda: httpx.get(f"{url}/healthz", timeout=10).json()["waiting"] == n, f"{n} clients waiting")


def test_long_poll_answers_when_records_are_there_or_land_and_empty_when_none_came(server):
    url = server()
    append(url, 1, 3)
    r = httpx.get(f"{url}/v1/records", params={"from": 1, "wait_ms": 60_000}, timeout=120)
    assert [x["offset"] for x in r.json()] == [1, 2]  # there already: no wait for more
    got = {}

    def poll():
        got["r"] = httpx.get(f"{url}/v1/records", params={"from": 3, "wait_ms": 60_000}, timeout=120)

    t = threading.Thread(target=poll)
    t.start()
    waiting(url, 1)
    append(url, 2, 2)
    t.join(120)
    assert [x["offset"] for x in got["r"].json()] == [3, 4]
    assert [x["value"] for x in got["r"].json()] == ["200", "201"]
    waiting(url, 0)
    empty = httpx.get(
        f"{url}/v1/records",
        params={"from": 5, "wait_ms": 50},
        headers={"accept": "application/x-ndjson"},
        timeout=60,
    )
    assert empty.status_code == 200 and empty.text == ""
    assert httpx.get(f"{url}/v1/records", params={"from": 5, "wait_ms": 50}, timeout=60).json() == []


def test_waiting_clients_are_bounded_and_wait_ms_too(server):
    url = server("--max-waiting", "1", "--max-poll-wait-ms", "60000")
    t = threading.Thread(
        target=lambda: httpx.get(f"{url}/v1/records", params={"from": 0, "wait_ms": 60_000}, timeout=120)
    )
    t.start()
    waiting(url, 1)
    refused = httpx.get(f"{url}/v1/records", params={"from": 0, "wait_ms": 1000}, timeout=60)
    assert refused.status_code == 429 and "--max-waiting" in refused.json()["error"]
    assert refused.headers["retry-after"]
    assert httpx.get(f"{url}/v1/records/stream", timeout=60).status_code == 429
    append(url, 1, 1)  # ends the waiting poll
    t.join(120)
    waiting(url, 0)
    too_long = httpx.get(f"{url}/v1/records", params={"from": 0, "wait_ms": 60_001}, timeout=60)
    assert too_long.status_code == 400 and "wait_ms" in too_long.text


def sse_records(lines, n: int) -> list[tuple[int, dict]]:
    """The next ``n`` record events of an SSE answer's lines: (id, data)."""
    out, event = [], {}
    while len(out) < n:
        line = next(lines)
        if line.startswith(":"):
            continue
        if not line:
            if event.get("event") == "record":
                out.append((int(event["id"]), json.loads(event["data"])))
            event = {}
            continue
        key, _, value = line.partition(": ")
        event[key] = value
    return out


def test_sse_stream_catches_up_follows_and_resumes_from_last_event_id(server):
    url = server()
    append(url, 1, 3)
    with httpx.stream("GET", f"{url}/v1/records/stream", params={"from": 1}, timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        got = sse_records(lines, 2)
        assert [i for i, _ in got] == [1, 2] and [d["offset"] for _, d in got] == [1, 2]
        append(url, 2, 2)
        append(url, 3, 1)
        assert [i for i, _ in sse_records(lines, 3)] == [3, 4, 5]
    waiting(url, 0)  # the client went: its place is given back
    with httpx.stream("GET", f"{url}/v1/records/stream", headers={"last-event-id": "3"}, timeout=120) as r:
        assert [d["value"] for _, d in sse_records(r.iter_lines(), 2)] == ["201", "300"]


def test_subscriptions_need_the_read_role(server, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": "reader-token", "producer": "r", "roles": ["read"]},
                    {"token": "writer-token", "producer": "p", "roles": ["append"]},
                ]
            }
        )
    )
    url = server(tokens=str(tokens))
    writer = {"authorization": "Bearer writer-token"}
    append(url, 1, 1, headers=writer)
    for path in ("/v1/records/stream", "/v1/records?from=0&wait_ms=10"):
        assert httpx.get(url + path, headers=writer, timeout=60).status_code == 403
    r = httpx.get(f"{url}/v1/records", params={"from": 0, "wait_ms": 10}, headers=HEADERS, timeout=60)
    assert [x["offset"] for x in r.json()] == [0]
    with httpx.stream("GET", f"{url}/v1/records/stream", headers=HEADERS, timeout=120) as s:
        assert [i for i, _ in sse_records(s.iter_lines(), 1)] == [0]


def test_serve_audit_exposes_open_violations_and_gauges_as_records_land(server):
    """``serve --audit``: a partition led from a failed directory, appended over HTTP, is open at
    /v1/audits/live and on /metrics once the grace ran out in record time; then fixed, closed."""
    from pathlib import Path

    import msgspec

    from kraftlake.records import iter_lines
    from kraftlake.replay.audit import Audit, AuditConfig

    path = Path(__file__).parent.parent / "fixtures" / "kraft" / "audit" / "elect-offline-leader.jsonl"
    records = list(iter_lines(path.open("rb")))
    batch = Audit(AuditConfig(grace_records=0, grace_ms=0))
    batch.feed([msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)])
    want = batch.report().violations
    assert any(v.last_offset is None for v in want)
    url = server("--audit", "--grace-records", "0", "--grace-ms", "0")
    assert httpx.get(f"{url}/v1/audits/live", timeout=60).json()["open"] == []
    body = {"producer": "p", "seq": 1, "records": [msgspec.to_builtins(r) for r in records]}
    assert httpx.post(f"{url}/v1/records", json=body, timeout=60).status_code == 200

    def caught_up():
        state = httpx.get(f"{url}/v1/audits/live", timeout=60).json()
        return state if state["last_offset"] == len(records) - 1 else None

    state = eventually(caught_up, "the following audit caught up")
    still_open = [msgspec.to_builtins(v) for v in want if v.last_offset is None]
    assert state["open"] == still_open and state["running"]
    assert state["closed"] == len(want) - len(still_open)
    metrics = httpx.get(f"{url}/metrics", timeout=60).text
    v = want[[x.last_offset for x in want].index(None)]
    assert f'kraftlake_audit_open_violations{{invariant="{v.invariant}",severity="{v.severity}"}}' in metrics
    assert f"kraftlake_audit_last_offset {float(len(records) - 1)}" in metrics


def test_audits_live_is_404_without_serve_audit(server):
    url = server()
    assert httpx.get(f"{url}/v1/audits/live", timeout=60).status_code == 404


# -- an admitted stream is never refused, and one that must end ends cleanly (issue 54, item 2) --


def _held_audit(monkeypatch):
    """Audits that hold their read until released: (entered, release) events."""
    import kraftlake.auditing as audit

    real = audit.audit
    entered, release = threading.Event(), threading.Event()

    def held(*args, **kwargs):
        entered.set()
        assert release.wait(120), "the test never released the audit"
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "audit", held)
    return entered, release


def test_a_stream_goes_on_while_the_same_client_holds_all_its_reads(tmp_path, monkeypatch):
    from kraftlake.service.app import create_app
    from kraftlake.service.limits import Limits

    from helpers.http import listening

    entered, release = _held_audit(monkeypatch)
    path = tmp_path / "log"
    Log.create(path)
    limits = Limits(read_workers=2, reads_per_client=1)
    with listening(create_app(path, limits=limits, commit_process=False)) as url:
        append(url, 1, 2)
        with httpx.stream("GET", f"{url}/v1/records/stream", timeout=30) as r:
            lines = r.iter_lines()
            assert [i for i, _ in sse_records(lines, 2)] == [0, 1]
            audit = threading.Thread(target=lambda: httpx.post(f"{url}/v1/audits", json={}, timeout=120))
            audit.start()  # the same address: its one read is taken
            try:
                assert entered.wait(60), "the audit never started"
                assert httpx.get(f"{url}/v1/records", timeout=60).status_code == 429  # a new read: refused
                append(url, 2, 1)
                assert [d["value"] for _, d in sse_records(lines, 1)] == ["200"]  # the stream: served
                assert httpx.get(f"{url}/healthz", timeout=60).json()["waiting"] == 1
            finally:
                release.set()
                audit.join(120)
            append(url, 3, 1)
            assert [i for i, _ in sse_records(lines, 1)] == [3]


def test_a_stream_that_cannot_go_on_says_why_and_ends(tmp_path, monkeypatch):
    from kraftlake.records import CorruptStoreError
    from kraftlake.records.store.follow import Follower
    from kraftlake.service.app import create_app

    from helpers.http import listening

    def damaged(self, *, force=False):
        raise CorruptStoreError("part-1.parquet cannot be read: a test's damage", file="part-1.parquet")
        yield  # a generator, as poll_once is

    path = tmp_path / "log"
    Log.create(path)
    with listening(create_app(path, commit_process=False)) as url:
        append(url, 1, 1)
        with httpx.stream("GET", f"{url}/v1/records/stream", timeout=30) as r:
            lines = r.iter_lines()
            assert [i for i, _ in sse_records(lines, 1)] == [0]
            monkeypatch.setattr(Follower, "poll_once", damaged)
            append(url, 2, 1)
            rest = list(lines)  # the answer ends (no broken chunk): an EventSource reconnects
        assert "event: error" in rest and 'data: {"error":"part-1.parquet cannot be read: a test\'s damage"}' in rest
        waiting(url, 0)
