"""Upcasters: one pure function per version step, turning a payload of version k into the shape
of version k + 1. A step that only adds defaulted fields needs no function.

They run on plain dicts (a decoded JSON line, or a row read from an older table), before the dict
is converted into the record's Struct. The record keeps the ``version`` it was produced at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .base import Record, current_version, field_defaults, type_name
from .errors import RecordError
from .kraft import MIGRATING
from .s3stream import StreamRange, StreamRanges

Payload = dict[str, Any]
Step = Callable[[Payload], Payload]


def _partition_v0_to_v1(raw: Payload) -> Payload:
    # PartitionRecord v0 has no Directories; Kafka reads that as MIGRATING for every replica
    # (PartitionRegistration: "defaultToMigrating").
    if not raw.get("assignment"):
        replicas = raw.get("replicas") or []
        raw["assignment"] = [{"broker": b, "directory": MIGRATING} for b in replicas]
    return raw


def _s3_object_v0_to_v1(raw: Payload) -> Payload:
    # S3ObjectRecord v1 keeps one Timestamp; replay of a v0 record takes the time field of its
    # state, as AutoMQ's ``S3Object.of`` does (PREPARED -> ExpiredTimeInMs, COMMITTED ->
    # CommittedTimeInMs, MARK_DESTROYED -> MarkDestroyedTimeInMs).
    if not raw.get("timestamp"):
        legacy = _S3_OBJECT_TIME.get(raw.get("object_state"))
        raw["timestamp"] = (raw.get(legacy) or 0) if legacy else 0
    return raw


def _listed_ranges(raw: Payload) -> Payload:
    # v1 packs the index block's ranges (``StreamRanges``); v0 listed StreamRange objects, the
    # form a person or a JSON client writes, accepted at every version.
    ranges = raw.get("ranges")
    if isinstance(ranges, (list, tuple)):
        try:
            listed = msgspec.convert(ranges, tuple[StreamRange, ...], from_attributes=True)
        except msgspec.ValidationError as exc:
            message, _, at = str(exc).partition(" - at `$")
            raise msgspec.ValidationError(f"{message} - at `$.ranges{at}") from None
        packed = StreamRanges.of(listed)
        raw["ranges"] = {"packed": packed.packed, "raw_size": packed.raw_size}
    return raw


_S3_OBJECT_TIME: dict[Any, str] = {1: "expired_time_in_ms", 2: "committed_time_in_ms", 3: "mark_destroyed_time_in_ms"}

STEPS: dict[tuple[str, int], Step] = {
    ("Partition", 0): _partition_v0_to_v1,
    ("S3Object", 0): _s3_object_v0_to_v1,
    ("ObjectWritten", 0): _listed_ranges,
}
"""(record type, from version) -> step to version + 1."""

SHAPES: dict[str, Step] = {
    "ObjectWritten": _listed_ranges,
}
"""Record type -> what turns another accepted input shape into the current one, at any version."""


def check_since(cls: type[Record], raw: Payload) -> None:
    """A producer of version k cannot set a field that version k does not have.

    Such a field may still appear with its default, or with exactly the value the upcasters give
    it (a v0 ``Partition`` read back from a log carries MIGRATING directories).
    """
    version = raw.get("version", current_version(cls))
    newer = [n for n, since in cls.SINCE.items() if version < since and n in raw]
    if not newer:
        return
    defaults = field_defaults(cls)
    upcast_form = upcast(cls, {k: v for k, v in raw.items() if k not in newer})
    for name in newer:
        allowed = [_plain(defaults[name])] if name in defaults else []
        if name in upcast_form:
            allowed.append(_plain(upcast_form[name]))
        if _plain(raw[name]) not in allowed:
            raise RecordError(
                f"{type_name(cls)} v{version} has no such field (added in v{cls.SINCE[name]})",
                record_type=type_name(cls),
                field=name,
            )


def upcast(cls: type[Record], raw: Payload) -> Payload:
    """Apply every step from the payload's version up to the type's current one."""
    version = raw.get("version", current_version(cls))
    name = type_name(cls)
    for v in range(version, current_version(cls)):
        step = STEPS.get((name, v))
        if step is not None:
            raw = step(raw)
    return raw


def _plain(value: object) -> object:
    """A default as it reads back from JSON (tuples become lists)."""
    return msgspec.json.decode(msgspec.json.encode(value))
