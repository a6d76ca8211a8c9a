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

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import ClassVar

import msgspec

from .types import Int64

ENVELOPE_FIELDS: tuple[str, ...] = ("version", "offset", "ts_ms", "source", "source_offset")


class Record(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="type",
    tag=True,
    forbid_unknown_fields=True,
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

    def __post_init__(self) -> None:
        current = current_version(type(self))
        if not self.MIN_VERSION <= self.version <= current:
            raise ValueError(
                f"`version`: {type(self).__name__} has versions {self.MIN_VERSION}..{current},"
                f" got {self.version}"
            )

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
        _CURRENT[cls] = value
        return value


@lru_cache(maxsize=None)
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
    return cls.__struct_config__.tag  # type: ignore[return-value]


def payload_fields(cls: type[Record]) -> tuple[str, ...]:
    """The record type's own fields, without the envelope."""
    return tuple(f for f in cls.__struct_fields__ if f not in ENVELOPE_FIELDS)
