"""Records to and from JSON Lines and plain builtins, with errors that name line, type and field.

The fast path decodes a line straight into the tagged union. Only records produced at an older
version, or in another accepted shape (``upcast.SHAPES``: an ``ObjectWritten`` listing its ranges),
take the slow path (plain dict -> ``check_since`` -> ``upcast`` -> Struct).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec

from .base import Record, current_version, type_name
from .catalog import BY_NAME, JSON_DECODER, JSON_ENCODER, AnyRecord
from .errors import RecordError
from .s3stream import RENAMED, packed_fields
from .upcast import SHAPES, check_since, upcast

_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_NAMED = re.compile(r"^(?:Object missing required field|Object contains unknown field) `(?P<f>[^`]+)`")
_OWN = re.compile(r"^`(?P<f>[^`]+)`: ")


_UUID_LENGTH = ("Expected `str` of length >= 22", "Expected `str` of length <= 22")
"""msgspec's words for a string that cannot be a uuid (the only 22-character strings)."""


def _field_and_message(text: str) -> tuple[str | None, str]:
    """Split a msgspec validation message into (field path, message without the path)."""
    path = None
    m = _AT.search(text)
    if m:
        path = m.group("path") or None
        text = text[: m.start()]
    m = _NAMED.match(text)
    if m:
        path = f"{path}.{m.group('f')}" if path else m.group("f")
        text = "required field is missing" if "missing" in text else "unknown field"
    else:
        m = _OWN.match(text)
        if m:
            # A nested Struct's own check: "`directory`: ... - at `$.assignment[1]`".
            path = f"{path}.{m.group('f')}" if path else m.group("f")
            text = text[m.end() :]
    return path, text


def record_error(exc: Exception, *, line: int | None, record_type: str | None) -> RecordError:
    """A ``RecordError`` from a msgspec (or upcaster) error, naming the field when it can."""
    if isinstance(exc, RecordError):
        exc.line = line if exc.line is None else exc.line
        exc.record_type = exc.record_type or record_type
        return exc
    field, message = _field_and_message(str(exc))
    if message in _UUID_LENGTH:
        message = "is not a Kafka uuid (22 characters of URL-safe base64, no padding)"
    if field == "type" and record_type is not None and record_type not in BY_NAME:
        return RecordError(f"unknown record type {record_type!r}", line=line, record_type=record_type, field=None)
    return RecordError(message, line=line, record_type=record_type, field=field)


def from_builtins(raw: Any, *, line: int | None = None) -> Record:
    """A record from a decoded JSON object (dict), upcasting older versions."""
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise RecordError(f"expected a JSON object, got {kind}", line=line)
    name = raw.get("type")
    if not isinstance(name, str):
        raise RecordError("missing or non-string `type`", line=line, field="type")
    cls = BY_NAME.get(name)
    if cls is None and name in RENAMED:
        try:
            raw = RENAMED[name](raw)
        except ValueError as exc:
            raise RecordError(str(exc).removeprefix("`type`: "), line=line, record_type=name, field="type") from None
        name = raw["type"]
        cls = BY_NAME[name]
    if cls is None:
        raise RecordError(f"unknown record type {name!r}", line=line, record_type=name)
    try:
        version = raw.get("version", current_version(cls))
        if isinstance(version, int) and version < current_version(cls):
            check_since(cls, raw)
            raw = upcast(cls, dict(raw))
        elif name in SHAPES:
            raw = SHAPES[name](dict(raw))
        return msgspec.convert(raw, cls)
    except (msgspec.ValidationError, RecordError, ValueError, TypeError) as exc:
        raise record_error(exc, line=line, record_type=name) from None


# JSON tokens the checks below need: a whole string (so that braces and colons inside strings
# are skipped), followed by ``:`` when it is a key; a brace or bracket.
_TOKEN = re.compile(rb'("[^"\\]*+(?:\\.[^"\\]*+)*+")(\s*+:)?|[{}\[\]]')
_SPACED_COLON = re.compile(rb'"\s+:')
_PLAIN_DECODER = msgspec.json.Decoder()
_PLAIN_ENCODER = msgspec.json.Encoder()
MAX_DEPTH = 1000
"""Nesting reported when a line is too deep to decode (Python's recursion limit)."""


def duplicate_key(line: bytes) -> str | None:
    """The first key that appears twice in one object of the JSON text ``line``, or None.

    msgspec, like most JSON parsers, keeps the last of duplicate keys: ``{"type":"Bogus",
    "type":"NoOp"}`` would decode as a NoOp. Decoded and encoded again, a line loses its
    duplicates, and each takes a ``":`` with it: when the counts agree there is none (the
    common case, in C). A line with escapes (which encoding may change) or space before a colon
    (which it removes) is walked object by object."""
    if b"\\" not in line and not _SPACED_COLON.search(line):
        try:
            again = _PLAIN_ENCODER.encode(_PLAIN_DECODER.decode(line))
        except msgspec.DecodeError:
            return None  # not JSON: the decoder says so
        if again.count(b'":') == line.count(b'":'):
            return None
    stack: list[set[str]] = []
    seen: set[str] = set()
    for m in _TOKEN.finditer(line):
        tok = m.group(0)
        if tok == b"{":
            stack.append(seen)
            seen = set()
        elif tok == b"}":
            seen = stack.pop() if stack else set()
        elif m.group(2) is not None:
            raw = m.group(1)
            key = msgspec.json.decode(raw) if b"\\" in raw else raw[1:-1].decode("utf-8", "replace")
            if key in seen:
                return key
            seen.add(key)
    return None


def duplicate_key_error(key: object, kept: Any, *, line: int | None, wire: str = "JSON") -> RecordError:
    """The error for a record holding ``key`` twice: the CLI's and the service's words. ``kept``
    is what a decoder made of the record (its last ``type`` names it, unless ``type`` is the key
    twice); ``wire`` the format whose decoders keep the last."""
    name = kept.get("type") if key != "type" and isinstance(kept, dict) else None
    return RecordError(
        f"duplicate key {key!r} ({wire} keeps only the last)",
        line=line,
        record_type=name if isinstance(name, str) else None,
        field=key if isinstance(key, str) else repr(key),
    )


def _key_before(line: bytes, pos: int) -> str | None:
    """The key of the value at byte ``pos`` (the last key that starts before it)."""
    key = None
    for m in _TOKEN.finditer(line):
        if m.start() > pos:
            break
        if m.group(2) is not None:
            key = m.group(1)[1:-1].decode("utf-8", "replace")
    return key


def _too_deep(line: bytes, line_no: int | None) -> RecordError:
    depth, pos = 0, 0
    for m in _TOKEN.finditer(line):
        tok = m.group(0)
        if tok in (b"{", b"["):
            depth += 1
            if depth > MAX_DEPTH:
                pos = m.start()
                break
        elif tok in (b"}", b"]"):
            depth -= 1
    return RecordError(
        f"nested deeper than {MAX_DEPTH} levels (at byte {pos})", line=line_no, field=_key_before(line, pos)
    )


def invalid_utf8(data: bytes) -> int | None:
    """The position of the first byte of ``data`` that is not valid UTF-8, or None.

    Decoders disagree on which exception bad UTF-8 raises (msgspec raises ``UnicodeDecodeError``
    on some builds and ``DecodeError`` on others), so errors are worded from the bytes, not from
    the exception's type."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        return bad.start
    return None


def _not_utf8(line: bytes, line_no: int | None) -> RecordError | None:
    """The error for a line that is not valid UTF-8, naming the byte and the key it sits in."""
    pos = invalid_utf8(line)
    if pos is None:
        return None
    return RecordError(f"invalid UTF-8 at byte {pos}", line=line_no, field=_key_before(line, pos))


def decode_line(line: bytes | str, *, line_no: int | None = None) -> Record:
    """Decode one JSON Lines line into its record. Refused (``RecordError`` naming the line and,
    where there is one, the field): a duplicate key, invalid UTF-8, nesting too deep to decode."""
    data = line.encode() if isinstance(line, str) else line
    try:
        return _decode_line(data, line_no)
    except UnicodeDecodeError:
        raise (_not_utf8(data, line_no) or RecordError("invalid UTF-8", line=line_no)) from None
    except RecursionError:
        raise _too_deep(data, line_no) from None


def _decode_line(line: bytes, line_no: int | None) -> Record:
    dup = duplicate_key(line)
    if dup is not None:
        try:
            kept = msgspec.json.decode(line)
        except msgspec.DecodeError:
            kept = None
        raise duplicate_key_error(dup, kept, line=line_no)
    try:
        record = JSON_DECODER.decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        try:
            raw = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise (_not_utf8(line, line_no) or RecordError(f"not JSON: {exc}", line=line_no)) from None
        return from_builtins(raw, line=line_no)
    if record.version < current_version(type(record)):
        return from_builtins(msgspec.json.decode(line), line=line_no)
    return record


def iter_lines(lines: Iterable[bytes | str]) -> Iterator[Record]:
    """Decode JSON Lines, skipping blank lines; errors carry the 1-based line number."""
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        yield decode_line(line, line_no=no)


def json_form(record: Record) -> Record | dict[str, Any]:
    """What JSON shows of a record: the record, with its packed parts (``ObjectWritten``'s index
    block, ``StreamRanges``) listed, as a person reads and writes them. Decoding takes both forms."""
    packed = packed_fields(type(record))
    if not packed:
        return record
    out: dict[str, Any] = {"type": type_name(type(record))}
    for name in record.__struct_fields__:
        value = getattr(record, name)
        out[name] = tuple(value) if name in packed else value
    return out


def encode_line(record: Record) -> bytes:
    """One record as one JSON line (no trailing newline)."""
    return JSON_ENCODER.encode(json_form(record))


def encode_lines(records: Iterable[Record]) -> bytes:
    return b"".join(JSON_ENCODER.encode(json_form(r)) + b"\n" for r in records)


def encode_json_array(records: Iterable[Record]) -> bytes:
    """Records as one JSON array, each in its ``json_form``."""
    return JSON_ENCODER.encode([json_form(r) for r in records])


_MSGPACK = msgspec.msgpack.Encoder()
_BATCH_DECODER = msgspec.msgpack.Decoder(list[AnyRecord])


def normalize_batch(records: Sequence[Record]) -> list[Record]:
    """``normalize`` for a whole batch: one typed msgpack round trip when the batch is valid and
    current (faster than builtins + convert; bench/RESULTS.md).

    Only records produced at an older version (upcast) or a batch with an error (to name its
    index, type and field) take the per-record path.
    """
    try:
        out = _BATCH_DECODER.decode(_MSGPACK.encode(records))
    except (TypeError, msgspec.EncodeError, msgspec.ValidationError):
        return [normalize(r, index=i + 1) for i, r in enumerate(records)]
    for i, r in enumerate(out):
        if r.version < current_version(type(r)):
            out[i] = normalize(r, index=i + 1)
    return out


def normalize(record: Record, *, index: int | None = None) -> Record:
    """Validate a record built in Python and upcast it when it was produced at an older version.

    Structs built by calling the class skip msgspec's type checks (they are static), so records
    from Python callers go through one builtins round trip here: the same checks as JSON input.
    """
    try:
        raw = msgspec.to_builtins(record)
    except (TypeError, msgspec.EncodeError) as exc:
        raise RecordError(str(exc), line=index, record_type=type_name(type(record))) from None
    return from_builtins(raw, line=index)
