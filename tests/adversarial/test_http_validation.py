"""HTTP abuse, bad input (issue 33, findings 7 and 11): one client's bad request is refused alone,
before it joins a group commit, with a 400 naming the parameter; a commit that still fails
because of one request's content fails that request only; every 500 is logged with its cause."""

from __future__ import annotations

import json
import threading

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import Log, NoOp, RecordError
from kraftlake.records.bookkeeper import RecoveryDelayChanged
from kraftlake.records.catalog import BY_NAME
from kraftlake.records.store.log import AppendResult
from kraftlake.service.commit_process import CommitProcess
from kraftlake.service.committer import CommitConfig, GroupCommitter

from helpers.http import config, eventually, served
from helpers.tiers import examples

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


# -- duplicate keys (issue 54, item 5): refused as the CLI refuses them, in JSON and msgpack ------


class Pairs(list):
    """An object as (key, value) pairs, duplicates kept (no dict can hold them)."""


def _json(value) -> bytes:
    if isinstance(value, Pairs):
        return b"{" + b",".join(msgspec.json.encode(k) + b":" + _json(v) for k, v in value) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(_json(v) for v in value) + b"]"
    return msgspec.json.encode(value)


def _msgpack(value) -> bytes:
    if isinstance(value, Pairs):
        assert len(value) < 16
        return bytes([0x80 | len(value)]) + b"".join(_msgpack(k) + _msgpack(v) for k, v in value)
    if isinstance(value, list):
        assert len(value) < 16
        return bytes([0x90 | len(value)]) + b"".join(_msgpack(v) for v in value)
    return msgspec.msgpack.encode(value)


def _record(*pairs) -> Pairs:
    return Pairs(pairs)


GOOD = _record(("type", "Config"), ("resource_type", 4), ("resource_name", "c"), ("name", "n"), ("value", "v"))
TYPE_TWICE = _record(("type", "NoOp"), ("type", "FeatureLevel"), ("name", "f"), ("feature_level", 1))
NAME_TWICE = _record(
    ("type", "Config"), ("resource_type", 4), ("resource_name", "c"), ("name", "a"), ("value", "1"), ("name", "b")
)
ESCAPED_TWICE = _record(
    ("type", "Config"), ("resource_type", 4), ("resource_name", 'é"\\'), ("name", "a"), ("value", "1"), ("name", "b")
)
DUPLICATES = {  # request -> (index of the record at fault or None, the key)
    "type": (Pairs([("producer", "p"), ("seq", 0), ("records", [TYPE_TWICE])]), 0, "type"),
    "field-of-the-second": (Pairs([("producer", "p"), ("seq", 0), ("records", [GOOD, NAME_TWICE])]), 1, "name"),
    "escaped": (Pairs([("producer", "p"), ("seq", 0), ("records", [GOOD, GOOD, ESCAPED_TWICE])]), 2, "name"),
    "producer": (Pairs([("producer", "p"), ("seq", 0), ("producer", "q"), ("records", [GOOD])]), None, "producer"),
    "seq": (Pairs([("seq", 0), ("records", [GOOD]), ("producer", "p"), ("seq", 1)]), None, "seq"),
}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("max_record_bytes", [1_000_000, 100])  # records decoded with the body, or one by one
def test_duplicate_keys_are_refused_with_the_clis_words(tmp_path, fast, max_record_bytes):
    from kraftlake.records.codec import decode_line
    from kraftlake.service.limits import Limits

    path, client = served(tmp_path, fast=fast, commit_process=False, limits=Limits(max_record_bytes=max_record_bytes))
    with client:
        for name, (request, index, key) in DUPLICATES.items():
            for kind, encode, label in (("json", _json, "JSON"), ("msgpack", _msgpack, "msgpack")):
                body = encode(request)
                r = client.post("/v1/records", content=body, headers={"content-type": f"application/{kind}"})
                assert r.status_code == 400, (name, kind, r.text)
                if index is None:
                    assert r.json() == {"error": f"duplicate key {key!r} ({label} keeps only the last)", "field": key}
                    continue
                line = _json(dict(request)["records"][index])
                with pytest.raises(RecordError) as cli:  # the CLI's words for the same record
                    decode_line(line, line_no=index + 1)
                assert r.json()["error"] == str(cli.value).replace("JSON", label), (name, kind)
                assert (r.json()["index"], r.json()["field"]) == (index, key), (name, kind)
        # Keys and colons inside strings are no duplicates, escaped or not.
        tricky = _record(("type", "Config"), ("resource_type", 4), ("resource_name", '":x'), ("name", '"a":'))
        tricky.append(("value", '\\":é'))
        for seq, kind, encode in ((0, "json", _json), (1, "msgpack", _msgpack)):
            body = encode(Pairs([("records", [GOOD, tricky]), ("producer", "p"), ("seq", seq)]))
            r = client.post("/v1/records", content=body, headers={"content-type": f"application/{kind}"})
            assert r.status_code == 200, (kind, r.text)
    assert [(r.resource_name, r.name) for r in Log.open(path).read()] == [("c", "n"), ('":x', '"a":')] * 2


_KEYS = st.sampled_from(["type", "name", "a", "é", 'q"', "x\\y", ":", '":'])
_STRINGS = st.sampled_from(["", "v", '":', ":", '"a":', "\\", '\\":', "é", "{", "a\\u0022"])
_VALUES = st.recursive(
    st.none() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False) | _STRINGS,
    lambda inner: st.lists(st.tuples(_KEYS, inner), min_size=1, max_size=3).map(Pairs) | st.lists(inner, max_size=3),
    max_leaves=8,
)
_RECORD = st.lists(st.tuples(_KEYS, _VALUES), min_size=1, max_size=4).map(Pairs)
_OWN = st.lists(st.sampled_from(["producer", "seq", "records"]), min_size=1, max_size=4).filter(
    lambda keys: "records" in keys
)


def _json_text(value, colon: str, escape) -> str:
    """JSON text of ``value`` (``Pairs`` kept as written), strings written by ``escape``."""
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{escape(k)}{colon}{_json_text(v, colon, escape)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v, colon, escape) for v in value) + "]"
    return escape(value) if isinstance(value, str) else msgspec.json.encode(value).decode()


def _escaper(style: str):
    """Strings as JSON: as msgspec writes them, all ASCII, or quotes and colons as \\u escapes."""
    if style != "masking":
        return lambda s: json.dumps(s, ensure_ascii=style == "ascii")
    table = {'"': "\\u0022", ":": "\\u003a", "\\": "\\\\"}
    return lambda s: '"' + "".join(table.get(c, json.dumps(c)[1:-1]) for c in s) + '"'


def _has_duplicate(value) -> bool:
    if isinstance(value, Pairs):
        keys = [k for k, _ in value]
        return len(keys) != len(set(keys)) or any(_has_duplicate(v) for _, v in value)
    return isinstance(value, list) and any(_has_duplicate(v) for v in value)


@settings(max_examples=examples(100))  # pure CPU: no service, no log
@given(
    _OWN,
    st.lists(_RECORD, min_size=1, max_size=4),
    st.sampled_from([":", " :", ": "]),
    st.sampled_from(["plain", "ascii", "masking"]),
)
def test_a_duplicate_is_found_exactly_when_a_body_holds_one(own_keys, records, colon, style):
    """Whatever the escapes and spaces, the cheap checks and the walks together find a key twice
    in a body exactly when some object of it holds one (JSON), or some map (msgpack)."""
    from kraftlake.service.duplicates import json_duplicate, msgpack_duplicate_in

    values = {"producer": "p", "seq": 3, "records": records}
    request = Pairs([(k, values[k]) for k in own_keys])
    expected = _has_duplicate(request)
    for body, decode, find in (
        (_json_text(request, colon, _escaper(style)).encode(), msgspec.json.decode, None),
        (_msgpack(request), msgspec.msgpack.decode, msgpack_duplicate_in),
    ):
        kept = decode(body)
        own = {k: kept[k] for k in ("producer", "seq") if k in kept} | {"records": None}
        if find is None:
            assert (json_duplicate(body, own, kept["records"]) is not None) == expected, body
        else:
            assert (find(body, len(own), kept["records"]) is not None) == expected, body
            assert (find(body, len(own), None) is not None) == expected, body


@pytest.mark.parametrize("fast", [True, False])
def test_an_arrow_streams_seq_is_a_json_integer(tmp_path, fast):
    """``kraftlake.seq`` in an Arrow stream's metadata is read as a JSON body's seq is: what
    Python's int() also takes (spaces, underscores, a plus sign, other scripts' digits) is 400."""
    import pyarrow as pa

    from kraftlake.records import from_builtins
    from kraftlake.records.arrow import to_table

    derived = ["offset", "ts_ms", "key", "producer", "producer_seq", "record"]
    rows = to_table([from_builtins(config(0))], first_offset=0, ts_ms=1).drop_columns(derived)

    def stream(seq: str) -> bytes:
        table = rows.replace_schema_metadata({"kraftlake.producer": "p", "kraftlake.seq": seq})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()

    path, client = served(tmp_path, fast=fast, commit_process=False)
    arrow = {"content-type": "application/vnd.apache.arrow.stream"}
    with client:
        for seq in (" 21", "21 ", "2_2", "+3", "٣", "021", "0x1", "", "1.0"):
            r = client.post("/v1/records", content=stream(seq), headers=arrow)
            assert r.status_code == 400 and r.json() == {
                "error": "kraftlake.seq in the stream's metadata is not an integer",
                "field": "seq",
            }, (seq, r.text)
        assert client.post("/v1/records", content=stream("-1"), headers=arrow).json()["error"] == "seq must be >= 0"
        assert client.post("/v1/records", content=stream("21"), headers=arrow).status_code == 200
    assert Log.open(path).producer_seq("p") == 21


def test_a_record_that_is_no_object_does_not_hide_a_duplicate():
    """A string or an array among the records has a length, and no keys: it makes up for no key
    dropped elsewhere."""
    from kraftlake.service.duplicates import json_duplicate

    body = b'{"records":[{"a":1,"a":2},"x"]}'
    assert json_duplicate(body, {"records": None}, [{"a": 2}, "x"]).field == "a"
