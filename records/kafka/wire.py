"""Kafka's flexible ("compact") encoding, read and write: the varints of ``ByteUtils`` and the
compact strings, arrays and tagged fields of KIP-482, as Kafka's generated messages read them
through ``Readable``.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; writers append to a ``bytearray``.
Plain functions on a bytes object and a position, with a fast path for one-byte varints: the
importer calls them a few million times per log, so no per-call objects. A read past the end
raises ``IndexError`` or ``struct.error``; the caller turns either into a ``KafkaFormatError``
that names the record.
"""

from __future__ import annotations

import base64
import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_F64 = struct.Struct(">d")
_UUID_CACHE: dict[bytes, str] = {}


# -- varints -------------------------------------------------------------------------------------


def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 (frame header, lengths, tags)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint/varlong (record framing inside a batch)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    v, pos = uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def write_uvarint(out: bytearray, v: int) -> None:
    if v < 0:
        raise ValueError(f"unsigned varint of a negative value {v}")
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def write_varint(out: bytearray, v: int) -> None:
    write_uvarint(out, (v << 1) ^ (v >> 63))


def uvarint_bytes(v: int) -> bytes:
    out = bytearray()
    write_uvarint(out, v)
    return bytes(out)


# -- fixed width ---------------------------------------------------------------------------------


def i8(buf: bytes, pos: int) -> tuple[int, int]:
    v = buf[pos]
    return (v - 256 if v > 127 else v), pos + 1


def boolean(buf: bytes, pos: int) -> tuple[bool, int]:
    v = buf[pos]
    if v > 1:
        raise ValueError(f"boolean byte {v}")
    return v == 1, pos + 1


def i16(buf: bytes, pos: int) -> tuple[int, int]:
    return _I16.unpack_from(buf, pos)[0], pos + 2


def u16(buf: bytes, pos: int) -> tuple[int, int]:
    return _U16.unpack_from(buf, pos)[0], pos + 2


def i32(buf: bytes, pos: int) -> tuple[int, int]:
    return _I32.unpack_from(buf, pos)[0], pos + 4


def i64(buf: bytes, pos: int) -> tuple[int, int]:
    return _I64.unpack_from(buf, pos)[0], pos + 8


def f64(buf: bytes, pos: int) -> tuple[float, int]:
    return _F64.unpack_from(buf, pos)[0], pos + 8


def uuid(buf: bytes, pos: int) -> tuple[str, int]:
    """16 bytes -> Kafka's text form (URL-safe base64, no padding). Ids repeat (topics,
    directories): a bounded cache saves the base64 work."""
    raw = buf[pos : pos + 16]
    if len(raw) != 16:
        raise IndexError("uuid past the end")
    text = _UUID_CACHE.get(raw)
    if text is None:
        text = base64.urlsafe_b64encode(raw)[:22].decode("ascii")
        if len(_UUID_CACHE) < 100_000:
            _UUID_CACHE[raw] = text
    return text, pos + 16


def _span(buf: bytes, pos: int) -> tuple[int, int]:
    """Where a compact string's or bytes' content lies: (start, end); start -1 = null."""
    n, pos = uvarint(buf, pos)
    if n == 0:
        return -1, pos
    end = pos + n - 1
    if end > len(buf):
        raise IndexError("value past the end")
    return pos, end


def compact_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    """Compact bytes: uvarint N+1 then N bytes; 0 = null."""
    start, end = _span(buf, pos)
    return (None if start < 0 else bytes(buf[start:end])), end


def string(buf: bytes, pos: int) -> tuple[str | None, int]:
    """Compact string: uvarint N+1 then N UTF-8 bytes; 0 = null."""
    start, end = _span(buf, pos)
    return (None if start < 0 else buf[start:end].decode("utf-8")), end


def int32_array(buf: bytes, pos: int) -> tuple[tuple[int, ...] | None, int]:
    """Compact array of int32 (replicas, ISR): one unpack for the whole array."""
    n, pos = uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + 4 * n
    if end > len(buf):
        raise IndexError("array past the end")
    return struct.unpack_from(f">{n}i", buf, pos), end


def uuid_array(buf: bytes, pos: int) -> tuple[tuple[str, ...] | None, int]:
    n, pos = uvarint(buf, pos)
    if n == 0:
        return None, pos
    out = []
    for _ in range(n - 1):
        u, pos = uuid(buf, pos)
        out.append(u)
    return tuple(out), pos


def skip_tagged(buf: bytes, pos: int) -> int:
    """Skip a tagged-field section (a struct with no tagged fields this reader knows)."""
    n, pos = uvarint(buf, pos)
    for _ in range(n):
        _, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        pos += size
    return pos


# -- writers -------------------------------------------------------------------------------------


def w_i8(out: bytearray, v: int) -> None:
    out.append(v & 0xFF)


def w_bool(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


def w_i16(out: bytearray, v: int) -> None:
    out += _I16.pack(v)


def w_u16(out: bytearray, v: int) -> None:
    out += _U16.pack(v)


def w_i32(out: bytearray, v: int) -> None:
    out += _I32.pack(v)


def w_i64(out: bytearray, v: int) -> None:
    out += _I64.pack(v)


def w_f64(out: bytearray, v: float) -> None:
    out += _F64.pack(v)


def w_uuid(out: bytearray, v: str) -> None:
    raw = base64.urlsafe_b64decode(v + "==")
    if len(raw) != 16:
        raise ValueError(f"{v!r} is not a Kafka uuid")
    out += raw


def w_string(out: bytearray, v: str | None) -> None:
    if v is None:
        out.append(0)
        return
    data = v.encode("utf-8")
    write_uvarint(out, len(data) + 1)
    out += data


def w_bytes(out: bytearray, v: bytes | None) -> None:
    if v is None:
        out.append(0)
        return
    write_uvarint(out, len(v) + 1)
    out += v


def w_int32_array(out: bytearray, v: tuple[int, ...] | None) -> None:
    if v is None:
        out.append(0)
        return
    write_uvarint(out, len(v) + 1)
    out += struct.pack(f">{len(v)}i", *v)


def w_uuid_array(out: bytearray, v: tuple[str, ...] | None) -> None:
    if v is None:
        out.append(0)
        return
    write_uvarint(out, len(v) + 1)
    for u in v:
        w_uuid(out, u)
