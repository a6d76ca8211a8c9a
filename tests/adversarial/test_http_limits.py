"""HTTP abuse, big or slow requests (issue 33, finding 13): record and body sizes are capped
(413 naming the record), a body that does not arrive in time is 408 through both doors, large
reads are streamed in chunks (JSON Lines or a JSON array, the same records), and ``serve --help``
says the defaults."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from typer.testing import CliRunner

from kraftlake.cli import app as cli
from kraftlake.records import Config, Log
from kraftlake.service.app import create_app
from kraftlake.service.limits import Limits

from helpers.http import config, served


def test_a_record_past_its_limit_is_413_naming_it_and_nothing_lands(tmp_path):
    path, client = served(tmp_path, limits=Limits(max_record_bytes=500, max_body_bytes=4_000))
    big = {**config(1), "value": "x" * 600}
    with client:
        for content_type, encode in (
            ("application/json", msgspec.json.encode),
            ("application/msgpack", msgspec.msgpack.encode),
        ):
            body = encode({"producer": "p", "seq": 0, "records": [config(0), big]})
            r = client.post("/v1/records", content=body, headers={"content-type": content_type})
            assert r.status_code == 413 and r.json()["index"] == 1, r.text
            assert "--max-record-bytes" in r.json()["error"]
        many = msgspec.json.encode({"producer": "p", "seq": 0, "records": [config(i) for i in range(100)]})
        r = client.post("/v1/records", content=many, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "4000 bytes (--max-body-bytes)" in r.json()["error"]
        ok = client.post("/v1/records", json={"producer": "p", "seq": 0, "records": [config(0), config(1)]})
        assert ok.status_code == 200
    assert Log.open(path).last_offset == 1


async def _call(app, method: str, path: str, receive, headers=()) -> tuple[int, bytes, int]:
    """One request straight through ASGI: (status, body, body messages sent). ``receive`` None:
    an empty body, then the disconnect once the answer is complete (as uvicorn reports it);
    ``headers`` beside its Content-Type."""
    sent: list = []
    answered = asyncio.Event()

    async def send(message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            answered.set()

    async def once_answered() -> dict:
        await answered.wait()
        return {"type": "http.disconnect"}

    if receive is None:
        receive = _empty_body(once_answered)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"test"), *headers],
        "client": ("127.0.0.1", 1234),
        "server": ("test", 80),
        "state": {},
    }
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    bodies = [m.get("body", b"") for m in sent if m["type"] == "http.response.body"]
    return status, b"".join(bodies), len(bodies)


def _empty_body(then):
    """A client's ``receive``: an empty body, then what ``await then()`` gives (its disconnect)."""
    asked = False

    async def receive():
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await then()

    return receive


def _slow_client():
    """A client that sends the start of a body and then nothing."""
    first = True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"producer": "p", ', "more_body": True}
        await asyncio.Event().wait()

    return receive


@pytest.mark.parametrize(("fast", "path"), [(True, "/v1/records"), (False, "/v1/records"), (True, "/v1/audits")])
def test_a_body_that_does_not_arrive_in_time_is_408(tmp_path, fast, path):
    log = tmp_path / "log"
    Log.create(log)
    app = create_app(log, limits=Limits(body_timeout_s=0.2), fast=fast, commit_process=False)
    status, body, _ = asyncio.run(_call(app, "POST", path, _slow_client()))
    assert (status, msgspec.json.decode(body)) == (408, {"error": "the request body did not arrive within 0.2 s"})
    assert Log.open(log).last_offset == -1


@pytest.mark.parametrize(("fast", "path"), [(True, "/v1/records"), (False, "/v1/records"), (False, "/v1/audits")])
def test_a_body_declared_past_the_limit_is_413_before_it_is_read(tmp_path, fast, path):
    """Content-Length over --max-body-bytes: 413 from the header, not 408 once the body, which
    this client never sends, failed to arrive (issue 54, item 11)."""
    log = tmp_path / "log"
    Log.create(log)
    app = create_app(log, limits=Limits(body_timeout_s=0.5, max_body_bytes=1_000), fast=fast, commit_process=False)

    async def never() -> dict:
        await asyncio.Event().wait()

    declared = [(b"content-length", b"99999999999")]
    status, body, _ = asyncio.run(_call(app, "POST", path, never, declared))
    assert status == 413, body
    if path == "/v1/records":
        assert msgspec.json.decode(body)["error"] == (
            "the body is larger than 1000 bytes (--max-body-bytes): send smaller batches"
        )
    assert Log.open(log).last_offset == -1


def test_large_reads_are_streamed_in_chunks_as_json_lines_or_an_array(tmp_path):
    log = Log.create(tmp_path / "log")
    for lo in range(0, 9_000, 3_000):
        log.append([Config(resource_type=4, resource_name="r", name="n", value=str(lo + i)) for i in range(3_000)])
    app = create_app(tmp_path / "log", limits=Limits(max_read_records=7_000), commit_process=False)

    status, body, messages = asyncio.run(_call(app, "GET", "/v1/records", None))
    rows = msgspec.json.decode(body)
    assert status == 200 and [r["offset"] for r in rows] == list(range(7_000))  # capped at 7 000 offsets
    assert messages >= 4  # one chunk per 2 000 records at most, and the end

    async def at_once() -> dict:
        return {"type": "http.disconnect"}

    async def gone_at_once():  # the client asks, then leaves before the answer is sent
        for _ in range(5):  # more than one client's share: a leak would refuse the later ones
            status, _, _ = await _call(app, "GET", "/v1/records", _empty_body(at_once))
            assert status == 200
        await asyncio.sleep(0.1)  # the event loop closes what the cancelled answers left
        _, health, _ = await _call(app, "GET", "/healthz", None)
        return msgspec.json.decode(health)["reads"]

    assert asyncio.run(gone_at_once()) == 0
    from litestar.testing import TestClient

    with TestClient(app) as c:
        lines = c.get("/v1/records", params={"from": 10, "to": 12}, headers={"accept": "application/x-ndjson"})
        assert lines.headers["content-type"].startswith("application/x-ndjson")
        assert [msgspec.json.decode(x) for x in lines.text.splitlines()] == rows[10:13]
        typed = c.get("/v1/records", params={"from": 8_990, "type": "Config"}, headers={"accept": "application/jsonl"})
        assert [msgspec.json.decode(x)["value"] for x in typed.text.splitlines()] == [
            str(i) for i in range(8_990, 9_000)
        ]
        assert c.get("/v1/records", params={"from": 9_000}).json() == []
        assert c.get("/v1/records", params={"from": 9_000}, headers={"accept": "application/x-ndjson"}).text == ""


def test_serve_help_says_the_limits_and_their_defaults():
    out = CliRunner().invoke(cli, ["serve", "--help"], env={"COLUMNS": "200"}).output
    defaults = Limits()
    for option, value in (
        ("--max-body-bytes", defaults.max_body_bytes),
        ("--max-record-bytes", defaults.max_record_bytes),
        ("--body-timeout", defaults.body_timeout_s),
        ("--max-read-records", defaults.max_read_records),
        ("--read-workers", defaults.read_workers),
        ("--reads-per-client", defaults.reads_per_client),
        ("--max-reads", defaults.max_reads),
    ):
        line = next(x for x in out.splitlines() if x.lstrip("│ ").startswith(option + " "))
        assert f"[default: {value}]" in line, line
