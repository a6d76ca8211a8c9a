"""Field types shared by every record family: Kafka's fixed-width integers and Kafka uuids.

Each alias carries its value range as msgspec ``Meta`` bounds, so the same declaration validates
input on decode *and* tells ``records.arrow`` which Arrow integer width to use: there is no second,
hand-kept schema.

Uuids are written the way Kafka prints them: the 16 bytes (most significant long, then least
significant long, big-endian) as URL-safe base64 without padding, 22 characters.
"""

from __future__ import annotations

import base64
import re
import struct
from functools import lru_cache
from typing import Annotated

from msgspec import Meta

Int8 = Annotated[int, Meta(ge=-(2**7), le=2**7 - 1)]
Int16 = Annotated[int, Meta(ge=-(2**15), le=2**15 - 1)]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
UInt16 = Annotated[int, Meta(ge=0, le=2**16 - 1)]
UInt63 = Annotated[int, Meta(ge=0, le=2**63 - 1)]
"""A count or a duration that is never negative, stored as Arrow int64 (so at most 2^63 - 1)."""

BrokerId = Annotated[int, Meta(ge=0, le=2**31 - 1, description="a broker (node) id, never negative")]
PartitionIndex = Annotated[int, Meta(ge=0, le=2**31 - 1)]

# 22 base64url characters; the last one carries only 2 significant bits, so it is one of A, Q, g, w.
# The type checks only the length (in C, on every decode); the characters are checked by the
# records' validation (``check_uuid``), which reads of kraftlake's own log skip: a regex in the
# type would cost every uuid of every replayed record (bench/RESULTS.md).
_UUID_RE = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")
Uuid = Annotated[
    str,
    Meta(min_length=22, max_length=22, description="Kafka uuid: 22-character URL-safe base64, no padding"),
]

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def uuid_to_ints(text: str) -> tuple[int, int]:
    """Return Kafka's (most significant, least significant) signed longs of a uuid's text form."""
    return struct.unpack(">qq", base64.urlsafe_b64decode(text + "=="))


def uuid_from_ints(msb: int, lsb: int) -> str:
    """The text form of the uuid made of two signed (or unsigned) 64-bit halves."""
    raw = struct.pack(">QQ", msb & 0xFFFFFFFFFFFFFFFF, lsb & 0xFFFFFFFFFFFFFFFF)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_bytes(raw: bytes) -> str:
    if len(raw) != 16:
        raise ValueError(f"a uuid has 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@lru_cache(maxsize=65536)
def is_reserved(text: str) -> bool:
    """Kafka's ``DirectoryId.reserved``: most significant long 0 and least significant below 100.

    Covers ZERO (MIGRATING), ONE (UNASSIGNED, also the metadata topic id) and LOST, and is the
    range ``DirectoryId.random()`` and ``Uuid.randomUuid()`` never return.
    """
    msb, lsb = uuid_to_ints(text)
    return msb == 0 and 0 <= lsb < 100


def check_uuid(field: str, value: str) -> None:
    """Raise ``ValueError`` naming ``field`` unless ``value`` is a Kafka uuid's text form."""
    if _UUID_RE.fullmatch(value) is None:
        raise ValueError(f"`{field}`: {value!r} is not a Kafka uuid (22 characters of URL-safe base64, no padding)")


def check_real_uuid(field: str, value: str) -> None:
    """Raise ``ValueError`` naming ``field`` unless ``value`` is a uuid and not a reserved id."""
    check_uuid(field, value)
    if is_reserved(value):
        raise ValueError(f"`{field}`: {value} is a reserved id, a real one is needed here")
