"""The one base Struct every record type derives from, and the envelope all records share.

A record is a frozen, keyword-only msgspec Struct tagged by its class name in the ``type`` field.
The *envelope* (``version``, ``offset``, ``ts_ms``, ``source``, ``source_offset``) comes first; the
record type's own *payload* fields follow. One JSON Lines line is exactly one encoded record::

    {"type": "PartitionChange", "version": 2, "offset": 17, "ts_ms": 1700000000000,
     "source": "controller-1", "source_offset": null, "partition_id": 0, ...}

``version`` is the schema version the record was produced at (for KRaft types, Kafka's record
version, so an exporter can write the same bytes back). The fields always have the *current* shape:
older payloads are upcast on decode (``records.upcast``), never rewritten in place. A field that a
version does not have must be left at its default by a producer of that version (``SINCE``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from types import MappingProxyType
from typing import ClassVar

import msgspec
import msgspec.inspect as mi

from .types import Int64, check_uuid

_TRUSTED: ContextVar[bool] = ContextVar("kraftlake_trusted_decode", default=False)


@contextmanager
def trusted() -> Iterator[None]:
    """Skip the records' Python validation while decoding data kraftlake itself wrote and
    validated (its own log, its snapshots). msgspec still checks types and bounds."""
    token = _TRUSTED.set(True)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic GC around bulk decoding and replay. Records, views and their
    tuples form no reference cycles, yet allocating millions of them triggers collections that
    re-scan everything alive, a large share of a replay's time (bench/RESULTS.md). Reference
    counting still frees all."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _is_uuid(t: mi.Type) -> bool:
    if isinstance(t, mi.Metadata):
        t = t.type
    return isinstance(t, mi.StrType) and t.min_length == 22 and t.max_length == 22


def struct_info(cls: type[msgspec.Struct]) -> mi.StructType:
    """msgspec's description of a Struct type (``type_info`` is typed for any type)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return info


UUID, UUIDS, PART, PARTS = "uuid", "uuids", "part", "parts"


@cache
def uuid_fields(cls: type[msgspec.Struct]) -> tuple[tuple[str, str], ...]:
    """(field, kind) of every field of a Struct that is or holds a ``Uuid``: a uuid, a sequence
    of uuids, a nested ``Part`` or a sequence of them (optional or not)."""
    out = []
    for f in struct_info(cls).fields:
        t = f.type
        if isinstance(t, mi.UnionType):
            rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
            t = rest[0] if len(rest) == 1 else t
        item = t.item_type if isinstance(t, (mi.VarTupleType, mi.ListType)) else None
        if _is_uuid(t):
            out.append((f.name, UUID))
        elif item is not None and _is_uuid(item):
            out.append((f.name, UUIDS))
        elif isinstance(t, mi.StructType) and uuid_fields(t.cls):
            out.append((f.name, PART))
        elif isinstance(item, mi.StructType) and uuid_fields(item.cls):
            out.append((f.name, PARTS))
    return tuple(out)


def check_uuids(obj: msgspec.Struct, prefix: str = "") -> None:
    """Check every uuid in ``obj``, nested Structs included; errors name the path
    (``assignment[1].directory``)."""
    for name, kind in uuid_fields(type(obj)):
        value = getattr(obj, name)
        if value is None:
            continue
        path = prefix + name
        if kind == UUID:
            check_uuid(path, value)
        elif kind == UUIDS:
            for v in value:
                check_uuid(path, v)
        elif kind == PART:
            check_uuids(value, path + ".")
        else:
            for i, v in enumerate(value):
                check_uuids(v, f"{path}[{i}].")


class Part(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of the Structs nested in records (a replica's directory, an endpoint, ...).

    No ``__post_init__``: the record that holds one checks it (``check_uuids``), so decoding
    kraftlake's own log calls no Python per nested value.
    """


ENVELOPE_FIELDS: tuple[str, ...] = ("version", "offset", "ts_ms", "source", "source_offset")


class Record(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="type",
    tag=True,
    forbid_unknown_fields=True,
    gc=False,
):
    """Base of every record type. Subclasses set ``version``'s default to their current version."""

    version: int = 0
    """Schema version the record was produced at (Kafka's record version for KRaft types)."""
    offset: Int64 | None = None
    """Position in the log; assigned by the log on append, ``None`` before."""
    ts_ms: Int64 | None = None
    """Event time in ms since the epoch; the appender's clock when the producer gives none."""
    source: str | None = None
    """Who produced the record (service, importer, simulator)."""
    source_offset: Int64 | None = None
    """Offset in the log this record was imported or copied from, else ``None``."""

    FAMILY: ClassVar[str] = ""
    """Record family: ``kraft``, ``observation``, ``s3stream``, ``bookkeeper``."""
    MIN_VERSION: ClassVar[int] = 0
    KEY: ClassVar[str] = "cluster"
    """Entity key template over the record as ``r``: ``"partition/{r.topic_id}/{r.partition_id}"``.
    Spark partitions replay by it; records with no narrower entity belong to ``cluster``."""
    SINCE: ClassVar[dict[str, int]] = {}
    """Payload fields added after version 0, with the version that added them."""
    UNTIL: ClassVar[dict[str, int]] = {}
    """Payload fields a later version removed, with the version that removed them: a record of that
    version or newer leaves them at their default (AutoMQ dropped several when it grew)."""

    def __post_init__(self) -> None:
        if _TRUSTED.get():
            return
        current = current_version(type(self))
        if not self.MIN_VERSION <= self.version <= current:
            raise ValueError(
                f"`version`: {type(self).__name__} has versions {self.MIN_VERSION}..{current}, got {self.version}"
            )
        for name, until in self.UNTIL.items():
            if self.version >= until and getattr(self, name) != field_defaults(type(self))[name]:
                raise ValueError(
                    f"`{name}`: {type(self).__name__} v{self.version} has no such field (removed in v{until})"
                )
        check_uuids(self)
        self._validate()

    def _validate(self) -> None:
        """The record type's own rules (Kafka's replay checks that need no state); raise
        ``ValueError`` with a message that starts with the field in backquotes."""

    def entity_key(self) -> str:
        """The entity this record changes, from the type's ``KEY`` template."""
        return self.KEY.format(r=self)


_CURRENT: dict[type, int] = {}


def current_version(cls: type[Record]) -> int:
    """A record type's current schema version: the default of its ``version`` field."""
    try:
        return _CURRENT[cls]
    except KeyError:
        value = field_defaults(cls)["version"]
        assert isinstance(value, int)
        _CURRENT[cls] = value
        return value


@cache
def field_defaults(cls: type[msgspec.Struct]) -> Mapping[str, object]:
    """Defaults of a Struct's fields that have one (read-only; computed once per type)."""
    return MappingProxyType(
        {
            f.name: f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
            for f in msgspec.structs.fields(cls)
            if f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT
        }
    )


def type_name(cls: type[Record]) -> str:
    """The tag a record type is written with (its class name)."""
    return cls.__struct_config__.tag  # type: ignore[return-value]  # tag=True: the class name, a str


def payload_fields(cls: type[Record]) -> tuple[str, ...]:
    """The record type's own fields, without the envelope."""
    return tuple(f for f in cls.__struct_fields__ if f not in ENVELOPE_FIELDS)
