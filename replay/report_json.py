"""The JSON report written a piece at a time: the same bytes as ``msgspec.json.encode(report)``
without one buffer holding them all.

An audit of 10^7 records has a report of about 1 GB (1.7 million violations, the incidents'
effects, the partitions' availability); encoded whole it is a second copy of the report beside
the objects. Here a Struct is written field by field, and a long list in chunks of about
``CHUNK_BYTES``: the buffer held at once is one chunk.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from itertools import islice

import msgspec

from kraftlake.replay.columns import StructColumns

CHUNK_BYTES = 4 << 20
"""About how many bytes of a list (or dict) are encoded at once."""

PROBE = 64
"""Items encoded first, to size a list's chunks from their bytes per item."""


def _columns_as_list(value: object) -> object:
    """msgspec's hook for what it cannot encode by itself: Structs in columns become a list (a
    spilled list's pages are let go once read: an incident's effects, encoded inside it)."""
    if isinstance(value, array):  # a column of ints (``Availability.outage_incidents``)
        return value.tolist()
    if isinstance(value, StructColumns):
        rows = value.dicts(0, len(value)) if _plain(value.struct) else value[:]
        value.drop_pages()
        return rows
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


_encode = msgspec.json.Encoder(enc_hook=_columns_as_list).encode


def to_builtins(value: object) -> object:
    """``msgspec.to_builtins`` of a report or a part of it (its Structs in columns as lists)."""
    return msgspec.to_builtins(value, enc_hook=_columns_as_list)


def write_json(value: object, write: Callable[[bytes], object], *, chunk_bytes: int = CHUNK_BYTES) -> None:
    """Write ``value``'s JSON, byte for byte ``msgspec.json.encode(value)``, through ``write``."""
    if isinstance(value, msgspec.Struct) and _plain(type(value)):
        write(b"{")
        for i, name in enumerate(value.__struct_fields__):
            write(b'"' + name.encode() + b'":' if i == 0 else b',"' + name.encode() + b'":')
            write_json(getattr(value, name), write, chunk_bytes=chunk_bytes)
        write(b"}")
    elif isinstance(value, StructColumns) and len(value) > PROBE and _plain(value.struct):
        _chunks(len(value), value.dicts, b"[", b"]", write, chunk_bytes, after=value.drop_pages)
    elif isinstance(value, list | StructColumns) and len(value) > PROBE:
        _chunks(len(value), lambda lo, hi: value[lo:hi], b"[", b"]", write, chunk_bytes)
    elif isinstance(value, dict) and len(value) > PROBE:
        items = iter(value.items())
        _chunks(len(value), lambda lo, hi: dict(islice(items, hi - lo)), b"{", b"}", write, chunk_bytes)
    else:
        write(_encode(value))


def encode(value: object) -> bytes:
    """``write_json``'s bytes in one buffer (a report too small to be worth writing in pieces,
    or one holding ``StructColumns``)."""
    pieces: list[bytes] = []
    write_json(value, pieces.append)
    return b"".join(pieces)


def _chunks(n: int, take, opening: bytes, closing: bytes, write, chunk_bytes: int, after=None) -> None:
    """``n`` items of a list or dict, ``take(lo, hi)`` giving items lo..hi-1 in order (as a list
    or dict), encoded a chunk at a time, each chunk's own brackets dropped; ``after()`` after
    each chunk is taken (a spilled list's pages let go: ``StructColumns.drop_pages``)."""
    write(opening)
    lo, size = 0, PROBE
    while lo < n:
        hi = min(n, lo + size)
        doc = _encode(take(lo, hi))
        if after is not None:
            after()
        write(doc[1:-1] if lo == 0 else b"," + doc[1:-1])
        if lo == 0:
            # The probe's bytes per item size the rest: about chunk_bytes each.
            size = max(1, chunk_bytes * (hi - lo) // max(1, len(doc)))
        lo = hi
    write(closing)


def _plain(cls: type[msgspec.Struct]) -> bool:
    """Whether ``cls``'s fields are encoded as written here: an object, every field, its own
    name (no ``array_like``, ``omit_defaults``, renames or tags; such Structs go whole)."""
    config = cls.__struct_config__
    return (
        not config.array_like
        and not config.omit_defaults
        and config.tag is None
        and cls.__struct_encode_fields__ == cls.__struct_fields__
    )
