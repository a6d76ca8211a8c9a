"""HTTP abuse, bad input (issue 33, findings 7 and 11): one client's bad request is refused alone,
before it joins a group commit, with a 400 naming the parameter; a commit that still fails
because of one request's content fails that request only; every 500 is logged with its cause."""

from __future__ import annotations

import threading

import msgspec
import msgspec.inspect as mi
import pytest

from kraftlake.records import Log, NoOp
from kraftlake.records.bookkeeper import RecoveryDelayChanged
from kraftlake.records.catalog import BY_NAME
from kraftlake.records.log import AppendResult
from kraftlake.service.commit_process import CommitProcess
from kraftlake.service.committer import CommitConfig, GroupCommitter

from helpers.http import config, eventually, served

BIG = 2**63


def test_a_seq_past_int64_is_refused_before_it_joins_a_group(tmp_path):
    # Commits wait for two records: a request that joined the queue would share the next commit.
    path, client = served(tmp_path, config=CommitConfig(min_records=2, max_wait_ms=20_000))
    answers: dict[str, object] = {}

    def post(producer: str, seq: int) -> None:
        r = client.post("/v1/records", json={"producer": producer, "seq": seq, "records": [config(seq)]})
        answers[producer] = (r.status_code, r.json())

    with client:
        bad = threading.Thread(target=post, args=("x", BIG))
        bad.start()
        eventually(lambda: "x" in answers or client.get("/healthz").json()["queued_records"], "x answered or queued")
        good = [threading.Thread(target=post, args=(p, 0)) for p in ("y", "z")]
        for t in good:
            t.start()
        for t in [bad, *good]:
            t.join()
    assert answers["x"] == (400, {"error": f"seq must be <= {BIG - 1} (2^63 - 1)", "field": "seq"})
    assert answers["y"][0] == answers["z"][0] == 200
    assert sorted(r.resource_name for r in Log.open(path).read()) == ["c", "c"]


def _bad_record() -> RecoveryDelayChanged:
    """A record whose content fails its commit (too big for its int64 column): built directly,
    which skips the checks the service makes, as a check the service lacked would let it pass."""
    return RecoveryDelayChanged(delay_ms=2**70)


@pytest.mark.parametrize("where", ["in-process", "commit-process"])
def test_a_commit_failed_by_one_requests_content_fails_that_request_only(tmp_path, where):
    path = tmp_path / "log"
    Log.create(path)
    target = Log.open(path) if where == "in-process" else CommitProcess(str(path))
    Log.open(path).append([NoOp()], producer="old", seq=5)
    # The committer waits for all five records, so they share one commit.
    committer = GroupCommitter(target, CommitConfig(min_records=5, max_wait_ms=60_000))
    try:
        futures = {
            "a": committer.submit([NoOp(), NoOp()], "a", 0),
            "bad": committer.submit([_bad_record()], "bad", 0),
            "stale": committer.submit([NoOp()], "old", 3),  # below the stored seq 5, never sent
            "b": committer.submit([NoOp()], "b", 0),
        }
        outcomes = {k: f.exception(timeout=120) or f.result() for k, f in futures.items()}
    finally:
        committer.close()
    assert isinstance(outcomes["a"], AppendResult) and isinstance(outcomes["b"], AppendResult)
    assert isinstance(outcomes["bad"], Exception) and "int" in str(outcomes["bad"])
    assert "sent seq 3 after seq 5" in str(outcomes["stale"])
    log = Log.open(path)
    assert log.last_offset == 3 and log.producer_seq("a") == 0 and log.producer_seq("b") == 0
    assert log.producer_seq("bad") is None


def _unbounded_ints(t: mi.Type, path: str, seen: frozenset) -> list[str]:
    if isinstance(t, mi.IntType):
        return [] if t.ge is not None and t.le is not None and t.le <= 2**63 - 1 else [path]
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return []
        return [x for f in t.fields for x in _unbounded_ints(f.type, f"{path}.{f.name}", seen | {t.cls})]
    inner = []
    for name in ("item_type", "key_type", "value_type"):
        if hasattr(t, name):
            inner.append(getattr(t, name))
    inner += list(getattr(t, "types", ())) + list(getattr(t, "item_types", ()))
    return [x for i in inner for x in _unbounded_ints(i, path, seen)]


def test_every_integer_a_client_sends_is_bounded_by_its_column():
    """What the service decodes is what the commit can store: every integer field of every
    record type has bounds within int64 (``version`` is checked against the type's versions)."""
    found = [p for name, cls in BY_NAME.items() for p in _unbounded_ints(mi.type_info(cls), name, frozenset())]
    assert [p for p in found if not p.endswith(".version")] == []


def _deep(n: int) -> bytes:
    return b'{"producer": "p", "seq": 1, "records": [' + b"[" * n + b"]" * n + b"]}"


BAD_APPENDS = {
    "utf8-in-record": (
        b'{"producer": "p", "seq": 1, "records": [{"type": "Config", "resource_type": 4,'
        b' "resource_name": "\xff\xfe", "name": "n", "value": "v"}]}',
        {"field": "records", "index": 0},
    ),
    "utf8-in-producer": (b'{"producer": "\xc3\x28", "seq": 1, "records": []}', {"field": "body"}),
    "deep-nesting": (_deep(100_000), {"field": "body"}),
    "seq-2^63": (msgspec.json.encode({"producer": "p", "seq": BIG, "records": [config(1)]}), {"field": "seq"}),
    "seq-10^30": (msgspec.json.encode({"producer": "p", "seq": 10**30, "records": [config(1)]}), {"field": "seq"}),
    "seq-negative": (msgspec.json.encode({"producer": "p", "seq": -1, "records": [config(1)]}), {"field": "seq"}),
    "int-past-column": (
        msgspec.json.encode(
            {"producer": "p", "seq": 1, "records": [{"type": "RecoveryDelayChanged", "delay_ms": BIG}]}
        ),
        {"field": "delay_ms", "index": 0},
    ),
}

BAD_READS = {
    "type-unknown": ("GET", "/v1/records?type=Config,Bogus", None, "type"),
    "from-minus-10^20": ("GET", "/v1/records?from=-100000000000000000000", None, "from"),
    "from-negative": ("GET", "/v1/records?from=-1", None, "from"),
    "to-past-int64": ("GET", f"/v1/records?to={BIG}", None, "to"),
    "from-not-a-number": ("GET", "/v1/records?from=abc", None, "from"),
    "timestamp-garbage": ("GET", "/v1/views/controller?timestamp=garbage", None, "timestamp"),
    "offset-minus-10^20": ("GET", "/v1/views/controller?offset=-100000000000000000000", None, "offset"),
    "broker-version-negative": ("GET", "/v1/views/brokers/1?version=-1", None, "version"),
    "broker-timestamp-garbage": ("GET", "/v1/views/brokers/1?timestamp=yesterday", None, "timestamp"),
    "audit-from-beyond": ("POST", "/v1/audits", {"from_offset": 10**6}, "from_offset"),
    "audit-from-negative": ("POST", "/v1/audits", {"from_offset": -3}, "from_offset"),
    "audit-fail-on-bogus": ("POST", "/v1/audits", {"fail_on": "bogus"}, "fail_on"),
    "audit-grace-negative": ("POST", "/v1/audits", {"grace_ms": -1}, "grace_ms"),
    "audit-to-below-from": ("POST", "/v1/audits", {"from_offset": 1, "to_offset": 0}, "to_offset"),
    "audit-to-past-int64": ("POST", "/v1/audits", {"to_offset": BIG}, "to_offset"),
    "audit-body-utf8": ("POST", "/v1/audits", b'{"fail_on": "\xff"}', "body"),
    "audit-body-deep": ("POST", "/v1/audits", b'{"fail_on": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body"),
    "bookie-state-utf8": ("PUT", "/v1/bookies/b1/state", b'{"state": "\xc3\x28"}', "body"),
    "broker-id-past-int32": ("GET", f"/v1/views/brokers/{2**31}", None, "broker_id"),
}


def test_bad_requests_get_400_naming_the_parameter_and_append_nothing(tmp_path, capsys):
    path, client = served(tmp_path)
    with client:
        assert client.post(
            "/v1/records", json={"producer": "p", "seq": 0, "records": [config(0), config(1)]}
        ).is_success
        for name, (body, where) in BAD_APPENDS.items():
            for content_type in ("application/json", "application/msgpack"):
                if content_type == "application/msgpack":
                    try:
                        body = msgspec.msgpack.encode(msgspec.json.decode(body))
                    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError, OverflowError):
                        continue  # not JSON, or past what msgpack holds: no msgpack twin
                r = client.post("/v1/records", content=body, headers={"content-type": content_type})
                assert r.status_code == 400, (name, content_type, r.text)
                assert r.json()["error"] and {k: r.json().get(k) for k in where} == where, (name, r.json())
        for name, (method, url, body, parameter) in BAD_READS.items():
            if isinstance(body, bytes):
                r = client.request(method, url, content=body, headers={"content-type": "application/json"})
            else:
                r = client.request(method, url, json=body)
            assert r.status_code == 400, (name, r.text)
            assert r.json()["parameter"] == parameter and parameter in r.json()["error"], (name, r.json())
    assert Log.open(path).last_offset == 1
    assert "internal_error" not in capsys.readouterr().err


@pytest.mark.parametrize("raised", ["UnicodeDecodeError", "DecodeError"])
def test_invalid_utf8_is_named_whichever_exception_the_decoder_raises(tmp_path, monkeypatch, raised):
    """msgspec raises ``UnicodeDecodeError`` for bad UTF-8 on some builds and ``DecodeError`` on
    others (issue 58): both doors, the append path and Litestar's routes, word the 400 from the
    body's bytes, whichever the decoder raises."""
    real = msgspec.json.decode

    def decode(data, *args, **kwargs):
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError as bad:
            if raised == "DecodeError":
                raise msgspec.DecodeError("Invalid UTF-8 encoded string") from None
            raise bad from None
        return real(data, *args, **kwargs)

    monkeypatch.setattr(msgspec.json, "decode", decode)
    path, client = served(tmp_path)
    cases = [
        ("POST", "/v1/records", b'{"producer": "\xc3\x28", "seq": 1, "records": []}', "field", 14),
        ("POST", "/v1/audits", b'{"fail_on": "\xff"}', "parameter", 13),
    ]
    with client:
        for method, url, body, key, at in cases:
            r = client.request(method, url, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400, (url, r.text)
            assert r.json()[key] == "body" and f"not valid UTF-8 at byte {at}" in r.json()["error"], (url, r.json())
    assert Log.open(path).last_offset == -1


def test_every_500_is_logged_with_its_cause(tmp_path, monkeypatch, capsys):
    def broken(*_a, **_kw):
        raise ZeroDivisionError("a bug in the read path")

    monkeypatch.setattr("kraftlake.service.reads.ReadPool.reader", broken)
    _, client = served(tmp_path)
    with client:
        r = client.get("/v1/views/controller")
    assert r.status_code == 500 and r.json() == {"error": "internal error: ZeroDivisionError: a bug in the read path"}
    err = capsys.readouterr().err
    assert "service.internal_error" in err and "Traceback" in err and 'raise ZeroDivisionError("a bug' in err
