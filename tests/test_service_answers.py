"""The service's answers and metrics as a client and Prometheus see them: every status of
``POST /v1/records`` through both doors (the fast path and Litestar's route) in one error shape,
errors of the other routes in the same shape, and counters and histograms that keep counting
for the life of the process."""

from __future__ import annotations

import json

import msgspec
import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from kraftlake.records import AppendConflictError, Config, Log
from kraftlake.records.store.log import AppendResult
from kraftlake.service.app import create_app
from kraftlake.service.committer import CommitConfig, GroupCommitter, Overloaded
from kraftlake.service.limits import Limits

MAX_BODY = Limits().max_body_bytes


def config(i: int) -> dict:
    return {"type": "Config", "resource_type": 4, "resource_name": "c", "name": "n", "value": str(i)}


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a /metrics answer: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


FAILURES = {
    "overloaded": Overloaded(1.5),
    "disk-full": OSError(28, "No space left on device"),
    "lost-race": AppendConflictError("gave up after 1000 attempts: other writers kept committing first"),
    "bug": ZeroDivisionError("division by zero"),
}
"""Commit outcomes a test cannot provoke on a healthy local disk, by producer name: the
committer raises them for that producer (its real code path for every other producer)."""


@pytest.fixture
def failing_commits(monkeypatch):
    real = GroupCommitter.append

    async def append(self, records, producer=None, seq=None):
        if producer in FAILURES:
            raise FAILURES[producer]
        return await real(self, records, producer, seq)

    monkeypatch.setattr(GroupCommitter, "append", append)


def _conversation(c: TestClient) -> list[tuple[int, dict, dict]]:
    """Every status an append can get, in order: (status, JSON body, the headers a client acts on)."""
    token = {"Authorization": "Bearer t-writer"}
    out = []

    def post(headers=None, **kw):
        r = c.post("/v1/records", headers={**token, **(headers or {})}, **kw)
        kept = {k: r.headers[k] for k in ("content-type", "retry-after", "www-authenticate") if k in r.headers}
        out.append((r.status_code, r.json(), kept))

    post(json={"producer": "w", "seq": 5, "records": [config(0)]})  # 200
    post(json={"producer": "w", "seq": 6, "records": [config(1), {"type": "Topic", "name": "t"}]})  # 400
    post(json={"producer": "w", "seq": 6, "records": [config(1)]}, headers={"Authorization": ""})  # 401
    post(json={"producer": "w", "seq": 6, "records": [config(1)]}, headers={"Authorization": "Bearer t-reader"})
    post(json={"producer": "w", "seq": 3, "records": [config(1)]})  # 409: seq 3 after 5, never sent
    post(content=b"x" * (MAX_BODY + 1), headers={"content-type": "application/json"})  # 413
    post(
        content=json.dumps({"producer": "w", "seq": 6, "records": [config(1)]}), headers={"content-type": "text/plain"}
    )
    post(content=b"producer=w&seq=6", headers={"content-type": "application/x-www-form-urlencoded"})  # curl -d
    post(
        content=msgspec.msgpack.encode({"producer": "w", "seq": 6, "records": [config(1)]}),
        headers={"content-type": "application/msgpack"},
    )
    post(
        json={"producer": "w", "seq": 7, "records": [config(2)]},
        headers={"content-type": "application/json; charset=utf-8"},
    )
    for producer in FAILURES:  # 429, 503, 503, 500
        tok = {"Authorization": f"Bearer t-{producer}"}
        post(json={"producer": producer, "seq": 0, "records": [config(3)]}, headers=tok)
    return out


def test_every_append_status_the_same_through_both_doors(tmp_path, failing_commits):
    tokens_file = tmp_path / "tokens.json"
    entries = [
        {"token": "t-writer", "producer": "w", "roles": ["append", "admin"]},
        {"token": "t-reader", "producer": "r", "roles": ["read"]},
    ]
    entries += [{"token": f"t-{p}", "producer": p, "roles": ["append"]} for p in FAILURES]
    tokens_file.write_text(json.dumps({"tokens": entries}))
    from kraftlake.service.auth import load_tokens

    answers, counts = {}, {}
    for fast in (True, False):
        path = tmp_path / f"log-{fast}"
        Log.create(path)
        with TestClient(app=create_app(path, tokens=load_tokens(tokens_file), fast=fast, commit_process=False)) as c:
            answers[fast] = _conversation(c)
            metrics = samples(c.get("/metrics", headers={"Authorization": "Bearer t-writer"}).text)
        counts[fast] = {
            dict(k[1])["reason"]: v for k, v in metrics.items() if k[0] == "kraftlake_rejected_requests_total"
        }
        assert [r.value for r in Log.open(path).read()] == ["0", "1", "2"]  # only the three 200s landed
    assert answers[True] == answers[False]
    assert counts[True] == counts[False]

    statuses = [a[0] for a in answers[True]]
    assert statuses == [200, 400, 401, 403, 409, 413, 415, 415, 200, 200, 429, 503, 503, 500]
    assert all(h["content-type"].startswith("application/json") for _, _, h in answers[True])
    assert all(set(body) >= {"error"} for status, body, _ in answers[True] if status >= 400)
    by_status = {status: (body, headers) for status, body, headers in answers[True]}
    assert by_status[400][0]["field"] == "topic_id" and by_status[400][0]["index"] == 1
    assert by_status[401][1]["www-authenticate"] == "Bearer"
    assert "text/plain" in answers[True][6][1]["error"] and "application/json" in answers[True][6][1]["error"]
    assert str(MAX_BODY) in by_status[413][0]["error"]
    assert answers[True][10][2]["retry-after"] == "2"  # 1.5 s, rounded
    disk, lost = answers[True][11], answers[True][12]
    assert "No space left on device" in disk[1]["error"] and disk[2]["retry-after"] == "1"
    assert "AppendConflictError" in lost[1]["error"] and lost[2]["retry-after"] == "1"
    assert "ZeroDivisionError: division by zero" in by_status[500][0]["error"]
    assert counts[True] == {
        "bad_request": 1,
        "unauthorized": 1,
        "forbidden": 1,
        "conflict": 1,
        "too_large": 1,
        "unsupported_media_type": 2,
        "overloaded": 1,
        "commit_failed": 2,
        "internal_error": 1,
    }


def test_the_other_routes_answer_errors_in_the_same_shape(tmp_path, monkeypatch):
    Log.create(tmp_path / "log")
    with TestClient(app=create_app(tmp_path / "log", commit_process=False), raise_server_exceptions=False) as c:
        missing = c.get("/v1/nothing-here")
        assert missing.status_code == 404 and set(missing.json()) == {"error"}
        wrong_type = c.get("/v1/views/controller", params={"offset": "abc"})
        assert wrong_type.status_code == 400 and "error" in wrong_type.json()
        not_found = c.get("/v1/views/controller", params={"version": 99})
        assert not_found.status_code == 404 and "version" in not_found.json()["error"]

        from kraftlake.replay import state

        def broken(*_a, **_k):
            raise RuntimeError("the snapshot table is unreadable")

        monkeypatch.setattr(state, "state_at", broken)
        failed = c.get("/v1/views/controller")
        assert failed.status_code == 500 and failed.headers["content-type"].startswith("application/json")
        assert failed.json() == {"error": "internal error: RuntimeError: the snapshot table is unreadable"}


class _InstantLog:
    """A log whose commits cost nothing: the committer's bookkeeping alone, many thousand times."""

    def __init__(self) -> None:
        self.next = 0
        self.version = 0

    def append_group(self, batches):
        out = []
        self.version += 1
        for b in batches:
            out.append(AppendResult(self.next, self.next + len(b.records) - 1, self.version))
            self.next += len(b.records)
        return out

    def upkeep_in_background(self, compact_after=None):
        class _Idle:
            def close(self, timeout=None):
                pass

        return _Idle()


def test_metrics_keep_counting_past_ten_thousand_commits():
    """Counters and histogram counts grow with every commit for the life of the process (they
    once came from the last 10 000 samples and stopped rising there)."""
    committer = GroupCommitter(_InstantLog(), CommitConfig(max_wait_ms=0))  # type: ignore[arg-type]
    record = Config(resource_type=4, resource_name="c", name="n", value="v")
    commits, records = 10_500, 0
    for i in range(commits):
        size = 1 + i % 3
        committer.submit([record] * size).result(10)  # one at a time: one commit each
        records += size
    committer.close()
    m = samples(committer.metrics.render().decode())
    assert m[("kraftlake_commits_total", ())] == commits
    assert m[("kraftlake_appended_records_total", ())] == records
    assert m[("kraftlake_commit_records_count", ())] == commits
    assert m[("kraftlake_commit_records_sum", ())] == records
    assert m[("kraftlake_commit_duration_seconds_count", ())] == commits
    assert m[("kraftlake_append_latency_seconds_count", ())] == commits
    assert m[("kraftlake_append_requests_total", ())] == commits
    buckets = sorted((float(dict(k[1])["le"]), v) for k, v in m.items() if k[0] == "kraftlake_commit_records_bucket")
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    assert dict(buckets)[1.0] == commits // 3 and dict(buckets)[10.0] == commits == dict(buckets)[float("inf")]


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "litestar"])
def test_a_measured_msgpack_batch_lands_and_is_refused_as_json_is(tmp_path, fast, monkeypatch):
    """A msgpack body over ``max_record_bytes`` is decoded typed in one call
    (``columnar.from_msgpack_items``): its records land as the same batch sent as JSON does, and
    a bad record gets the JSON body's answer (status, message, index, type and field)."""
    from kraftlake.service import append as append_module

    typed = []
    real = append_module.from_msgpack_items
    monkeypatch.setattr(append_module, "from_msgpack_items", lambda items: typed.append(real(items)) or typed[-1])
    good = [config(i) for i in range(40)]
    bad = [*good[:7], {"type": "Topic", "name": "t"}, *good[7:]]
    answers = {}
    for kind in ("json", "msgpack"):
        path = tmp_path / kind
        Log.create(path)
        app = create_app(path, limits=Limits(max_record_bytes=300), fast=fast, commit_process=False)
        with TestClient(app=app) as c:
            for seq, records in enumerate((good, bad)):
                body = {"producer": "p", "seq": seq, "records": records}
                if kind == "json":
                    r = c.post("/v1/records", json=body)
                else:
                    packed = msgspec.msgpack.encode(body)
                    r = c.post("/v1/records", content=packed, headers={"content-type": "application/msgpack"})
                answers[kind, seq] = (r.status_code, r.json())
        answers[kind] = Log.open(path).read()
    assert answers["json", 0][0] == 200 and answers["json", 1][0] == 400
    assert answers["msgpack", 0] == answers["json", 0]
    assert answers["msgpack", 1] == answers["json", 1]
    assert answers["json", 1][1]["index"] == 7 and answers["json", 1][1]["field"] == "topic_id"
    assert [r.value for r in answers["msgpack"]] == [str(i) for i in range(40)]
    assert [msgspec.structs.replace(r, ts_ms=None) for r in answers["msgpack"]] == [
        msgspec.structs.replace(r, ts_ms=None) for r in answers["json"]
    ]
    assert len(typed) == 2 and typed[0] is not None and typed[1] is None  # the good batch decoded typed
