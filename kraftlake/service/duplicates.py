"""Duplicate keys in an append's body, refused as the CLI refuses them (``codec.decode_line``).

msgspec, like most decoders of JSON and msgpack, keeps the last of an object's duplicate keys,
into a dict or a Struct alike: ``{"type": "NoOp", "type": "FeatureLevel", ...}`` would land a
FeatureLevel, and a request's second ``producer`` would switch who appends. What a body's
decoder kept is checked against the body, cheaply, where a second parse would cost as much as
the first (the append path is the service's hot path):

- JSON with no colon written as an escape (``\\u003a``): a colon is either where a key ends
  (whatever the spaces around it) or a colon of some string, which the kept value encoded again
  holds as often. So the two hold as many colons unless a key was dropped: one count of a byte
  each, and an encoding in C of what was decoded (``codec.duplicate_key``'s argument, counting
  colons where it counts ``":``, which escapes and spaces change). Records with no object
  inside and no colon in their strings, the usual ones, need not be encoded: the body then
  holds a colon per key the records and the request kept, and no more.
- msgpack: the request's map header says how many keys it holds; the records encoded again are
  the bytes sent, unless the sender encoded them otherwise (not minimally) or a key was dropped.

A body that fails its check is walked key by key (``codec.duplicate_key``, ``msgpack_duplicate``):
the words name the record (``line`` = index + 1, its type, the key), as the CLI's do, or the
request's own key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kraftlake.records import RecordError
from kraftlake.records.codec import duplicate_key, duplicate_key_error

REQUEST_KEYS = ("records", "producer", "seq")
_JSON = msgspec.json.Encoder()
_MSGPACK = msgspec.msgpack.Encoder()


class _Records(msgspec.Struct):
    """The records of a request as sent, the rest skipped."""

    records: list[msgspec.Raw]


class _RecordsArray(msgspec.Struct):
    """The array of a request's records as sent, the rest skipped."""

    records: msgspec.Raw


def json_duplicate(body: bytes, request: dict[str, Any], raws: Sequence[Any]) -> RecordError | None:
    """The duplicate key of a JSON append ``body``, or None. ``request``: the request's own keys
    as decoded (those it holds); ``raws``: its records as decoded."""
    if not _escaped_colon(body):
        colons = body.count(b":")
        # A body has at least a colon per key kept and per key dropped: as many as the records'
        # own keys and the request's, and no key was dropped (nor any other key or colon there).
        if colons == sum(map(len, raws)) + len(request) and set(map(type, raws)) == {dict}:
            return None
        if colons == _JSON.encode(request).count(b":") + _JSON.encode(raws).count(b":"):
            return None
    for i, raw in enumerate(msgspec.json.decode(body, type=_Records).records):
        key = duplicate_key(bytes(raw))
        if key is not None:
            return duplicate_key_error(key, raws[i], line=i + 1)
    return _request_duplicate(duplicate_key(body), "JSON")


def _escaped_colon(body: bytes) -> bool:
    """Whether ``body`` may hold a colon written as an escape (``\\u003a``): encoded again it is
    a colon, and the counts would not compare. One search, in C, on the usual body."""
    at = body.find(b"\\u003")
    while at >= 0:
        if body[at + 5 : at + 6] in (b"a", b"A"):
            return True
        at = body.find(b"\\u003", at + 1)
    return False


def msgpack_duplicate_in(
    body: bytes, present: int, raws: Sequence[Any] | None, *, records_checked: bool = False
) -> RecordError | None:
    """The duplicate key of a msgpack append ``body``, or None. ``present``: how many of the
    request's own keys it holds; ``raws``: its records as decoded (None: not decoded, as those
    ``columnar.from_msgpack_items`` typed); ``records_checked``: the records are known to hold
    no key twice (they are exactly their typed encoding)."""
    whole = _map_size(body) == present
    if whole and records_checked:
        return None
    sent = bytes(msgspec.msgpack.decode(body, type=_RecordsArray).records)
    kept = msgspec.msgpack.decode(sent) if raws is None else raws
    if whole and sent == _MSGPACK.encode(kept):  # the usual encoding, whole: no key was dropped
        return None
    for i, raw in enumerate(msgspec.msgpack.decode(sent, type=list[msgspec.Raw])):
        if bytes(raw) == _MSGPACK.encode(kept[i]):
            continue
        # Encoded otherwise: walked (what a sender that does not encode minimally pays, per record).
        key = msgpack_duplicate(raw)
        if key is not None:
            return duplicate_key_error(key, kept[i], line=i + 1, wire="msgpack")
    return None if whole else _request_duplicate(_map_duplicate(memoryview(body)), "msgpack")


def _request_duplicate(key: object, wire: str) -> RecordError | None:
    """The error for a key twice in the request itself, its records having none: ``key`` is the
    first one twice in the body, which, when it is none of the request's own keys, was in the
    records of a ``records`` the body holds twice (the decoder kept the other)."""
    if key is None:
        return None
    field = key if key in REQUEST_KEYS else "records"
    return RecordError(f"duplicate key {field!r} ({wire} keeps only the last)", field=field)


def _map_size(body: bytes) -> int | None:
    """The number of keys of the map ``body`` starts with."""
    first = body[0]
    if 0x80 <= first <= 0x8F:
        return first & 0x0F
    if first in (0xDE, 0xDF):
        width = 2 if first == 0xDE else 4
        return int.from_bytes(body[1 : 1 + width], "big")
    return None


# msgpack's formats by first byte: scalars of a fixed size (the bytes after the first), sized ones
# (bytes holding the size, bytes before the payload: an extension's type), containers (bytes holding
# the count, whether a map).
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED |= {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1)}
_SIZED |= {0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)}
_CONTAINERS = {0xDC: (2, False), 0xDD: (4, False), 0xDE: (2, True), 0xDF: (4, True)}


def _header(data: bytes | memoryview, pos: int) -> tuple[int, int, bool]:
    """The item at ``pos``: (where its header ends, which for a scalar is where it ends; its
    items, two per key of a map; whether it is a map)."""
    b = data[pos]
    if b <= 0x7F or b >= 0xE0:
        return pos + 1, 0, False
    if b <= 0x8F:
        return pos + 1, 2 * (b & 0x0F), True
    if b <= 0x9F:
        return pos + 1, b & 0x0F, False
    if b <= 0xBF:
        return pos + 1 + (b & 0x1F), 0, False
    if b in _FIXED:
        return pos + 1 + _FIXED[b], 0, False
    if b in _SIZED:
        width, extra = _SIZED[b]
        size = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        return pos + 1 + width + extra + size, 0, False
    if b in _CONTAINERS:
        width, is_map = _CONTAINERS[b]
        count = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        return pos + 1 + width, count * (2 if is_map else 1), is_map
    raise ValueError(f"0x{b:02x} at byte {pos} starts no msgpack item")


def _end(data: memoryview, pos: int) -> int:
    """Where the item at ``pos`` ends."""
    left = 1
    while left:
        pos, items, _ = _header(data, pos)
        left += items - 1
    return pos


def _map_duplicate(data: memoryview) -> object | None:
    """The first key twice among the keys of the map ``data`` starts with (not those of the maps
    inside it)."""
    pos, items, _ = _header(data, 0)
    seen = set()
    for _ in range(items // 2):
        end = _end(data, pos)
        key = _key(data[pos:end])
        if key in seen:
            return key
        seen.add(key)
        pos = _end(data, end)
    return None


def msgpack_duplicate(data: bytes | memoryview) -> object | None:
    """The first key that appears twice in one map of the msgpack item ``data``, or None (keys
    compared as decoded: a string sent in two encodings is one key)."""
    data = memoryview(data)
    frames: list[list] = []  # per open container: [its start, items left, keys seen (a map), items seen]
    pos = 0
    while True:
        start = pos
        pos, items, is_map = _header(data, pos)
        if items:
            frames.append([start, items, set() if is_map else None, 0])
            continue
        while frames:  # the item [start, pos) is whole: it may end its container, and that one's
            frame = frames[-1]
            if frame[2] is not None and frame[3] % 2 == 0:
                key = _key(data[start:pos])
                if key in frame[2]:
                    return key[1] if isinstance(key, tuple) else key
                frame[2].add(key)
            frame[3] += 1
            frame[1] -= 1
            if frame[1]:
                break
            frames.pop()
            start = frame[0]
        else:
            return None


def _key(raw: memoryview) -> object:
    key = msgspec.msgpack.decode(raw)
    try:
        hash(key)
    except TypeError:  # an array or a map as a key: compared by its encoding
        return ("encoded", _MSGPACK.encode(key))
    return key
