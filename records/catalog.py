"""The catalogue of every record type kraftlake knows, across families.

One tuple, one name index, one union alias and one decoder for the tagged union: a family adds
its types to ``RECORD_TYPES`` and every layer (JSON Lines, Arrow schema, Delta log) picks them up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, Union

import msgspec

from .base import Record, type_name
from .bookkeeper import BOOKKEEPER_RECORDS
from .kraft import KRAFT_RECORDS
from .observations import OBSERVATION_RECORDS
from .s3stream import S3STREAM_RECORDS

RECORD_TYPES: tuple[type[Record], ...] = KRAFT_RECORDS + OBSERVATION_RECORDS + S3STREAM_RECORDS + BOOKKEEPER_RECORDS
BY_NAME: dict[str, type[Record]] = {type_name(cls): cls for cls in RECORD_TYPES}

if TYPE_CHECKING:
    # A union built from a tuple at run time is no type to a checker: every member is a Record.
    AnyRecord: TypeAlias = Record
else:
    AnyRecord = Union[RECORD_TYPES]  # noqa: UP007 - a union of a tuple's types
"""The tagged union of every record type, decoded by the ``type`` field."""

JSON_DECODER = msgspec.json.Decoder(AnyRecord)
JSON_ENCODER = msgspec.json.Encoder()


def record_type(name: str) -> type[Record]:
    """The record class written with tag ``name``; ``KeyError`` if there is none."""
    return BY_NAME[name]
