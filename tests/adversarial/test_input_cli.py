"""Bad input to ``kraftlake append`` (issue 33, findings 5 and 10): each is refused with exit
code 2 and a message naming the line and the field, and nothing lands."""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, RecordError, codec, decode_line
from kraftlake.records.codec import duplicate_key

runner = CliRunner()
NOOP = b'{"type":"NoOp","version":0}\n'
PARTITION = (
    b'{"type":"Partition","version":1,"ts_ms":1700000003000,"partition_id":0,"topic_id":"YW6soxYeId5Lgf56lnEg3g",'
    b'"replicas":[101,102],"isr":[101,102],"leader":101,"leader_epoch":0,"partition_epoch":0,'
    b'"assignment":[{"broker":101,"directory":"AAAAAAAAAAAAAAAAAAAAAQ"},{"broker":102,"directory":"AAAAAAAAAAAAAAAAAAAAAQ"}]}'
)


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "log"
    Log.create(path)
    return path


def _append(log, data: bytes, *args: str):
    file = log.parent / "in.jsonl"
    file.write_bytes(data)
    return runner.invoke(app, ["append", str(log), str(file), *args])


def _refused(log, result, *words: str) -> str:
    message = result.stderr if result.stderr_bytes else result.output
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    for w in words:
        assert w in message, (w, message)
    assert Log.open(log).last_offset == -1
    return message


# Each case: the bytes of a second line after a valid one, and the words the error names.
BAD_LINES = {
    "duplicate key, last would win": (b'{"type":"Bogus","type":"NoOp"}', ["line 2", "duplicate key", "type"]),
    "duplicate key in a nested object": (
        PARTITION.replace(
            b'"directory":"AAAAAAAAAAAAAAAAAAAAAQ"}', b'"directory":"AAAAAAAAAAAAAAAAAAAAAQ","broker":7}', 1
        ),
        ["line 2", "duplicate key", "broker"],
    ),
    "duplicate field of a known type": (
        b'{"type":"FenceBroker","id":1,"epoch":2,"id":3}',
        ["line 2", "FenceBroker", "duplicate key", "id"],
    ),
    "invalid UTF-8 in a string": (
        b'{"type":"Config","resource_type":2,"resource_name":"\xff\xfe","name":"a","value":"b"}',
        ["line 2", "UTF-8", "resource_name"],
    ),
    "invalid UTF-8 in a key": (b'{"type":"NoOp","\xc3(":1}', ["line 2", "UTF-8"]),
    "10^5 nesting levels": (
        b'{"type":"NoOp","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ["line 2", "nest", "x"],
    ),
    "10^5 nesting in a known field": (
        b'{"type":"FenceBroker","id":' + b"[" * 100_000 + b"]" * 100_000 + b',"epoch":1}',
        ["line 2", "nest", "id"],
    ),
    "integer beyond 64 bits": (b'{"type":"FenceBroker","id":1,"epoch":18446744073709551616}', ["line 2", "epoch"]),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_line_is_refused_with_line_and_field(log, case):
    line, words = BAD_LINES[case]
    _refused(log, _append(log, NOOP + line + b"\n"), *words)


@pytest.mark.parametrize(
    "args, field",
    [
        (["--producer", "p", "--seq", str(2**63)], "seq"),
        (["--producer", "p", "--seq", str(2**64 + 5)], "seq"),
        (["--producer", "p" * 300, "--seq", "0"], "producer"),
        (["--producer", "", "--seq", "0"], "producer"),
        # What int() takes and the service refuses (test_http_validation: "not an integer").
        *((["--producer", "p", "--seq", seq], "seq") for seq in (" 21", "2_2", "+3", "٣", "021", "-1", "0x1", "1.0")),
    ],
)
def test_bad_producer_or_seq_is_refused(log, args, field):
    _refused(log, _append(log, NOOP, *args), f"--{field}")


def test_largest_seq_lands(log):
    result = _append(log, NOOP, "--producer", "p", "--seq", str(2**63 - 1))
    assert result.exit_code == 0, result.output
    assert Log.open(log).producer_seq("p") == 2**63 - 1


def _raising(exc: Exception):
    def decode(*_args, **_kwargs):
        raise exc

    return decode


BAD_UTF8_RAISED_AS = {
    "UnicodeDecodeError": UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    "DecodeError": msgspec.DecodeError("Invalid UTF-8 encoded string"),
}


@pytest.mark.parametrize("raised", sorted(BAD_UTF8_RAISED_AS))
def test_invalid_utf8_is_named_whichever_exception_the_decoder_raises(monkeypatch, raised):
    """msgspec raises ``UnicodeDecodeError`` for bad UTF-8 on some builds and ``DecodeError`` on
    others (issue 58): the message is built from the bytes, so both give the byte and the key."""
    line = b'{"type":"Config","resource_type":2,"resource_name":"\xff\xfe","name":"a","value":"b"}'
    monkeypatch.setattr(codec, "JSON_DECODER", SimpleNamespace(decode=_raising(BAD_UTF8_RAISED_AS[raised])))
    monkeypatch.setattr(msgspec.json, "decode", _raising(BAD_UTF8_RAISED_AS[raised]))
    with pytest.raises(RecordError) as info:
        decode_line(line, line_no=2)
    assert (info.value.line, info.value.field) == (2, "resource_name")
    assert "invalid UTF-8 at byte 52" in str(info.value)


def test_duplicate_keys_are_refused_by_the_decoder():
    with pytest.raises(RecordError) as info:
        decode_line(b'{"type":"Bogus","type":"NoOp"}', line_no=7)
    assert info.value.line == 7 and info.value.field == "type"


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"NoOp","version":0}',
        # The same key in sibling objects, and key-like text inside strings, are no duplicates.
        PARTITION,
        b'{"type":"Config","resource_type":2,"resource_name":"\\"type\\":","name":"type","value":"{\\"name\\":1}"}',
    ],
)
def test_lines_without_duplicates_decode(line):
    decode_line(line)


def _pairs_json(value, colon: str, ascii: bool) -> str:
    """JSON text of a value whose objects are lists of (key, value) pairs, duplicates kept."""
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        pairs = (f"{json.dumps(k, ensure_ascii=ascii)}{colon}{_pairs_json(v, colon, ascii)}" for k, v in value)
        return "{" + ",".join(pairs) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_pairs_json(v, colon, ascii) for v in value) + "]"
    return json.dumps(value, ensure_ascii=ascii)


_KEYS = st.sampled_from(["a", "b", "type", 'q"', "x\\y", "é", "{", ":"])
_VALUES = st.recursive(
    st.none()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "a", '"a":', "{}", "\\", "[", "é", "b :"]),
    lambda inner: st.lists(st.tuples(_KEYS, inner), min_size=1, max_size=4) | st.lists(inner, min_size=1, max_size=3),
    max_leaves=12,
)


@given(_VALUES, st.sampled_from([":", " :", ": ", "\t:"]), st.booleans())
def test_duplicate_key_agrees_with_json_object_pairs(value, colon, ascii):
    """``duplicate_key`` finds a duplicate exactly when Python's json sees one in some object."""
    text = _pairs_json(value, colon, ascii)
    dups: list[str] = []

    def hook(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            dups.append(keys)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    assert (duplicate_key(text.encode()) is not None) == bool(dups)
