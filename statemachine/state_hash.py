"""The state hash every family's view is compared by: sha256 of its image's canonical JSON (keys
sorted, ``msgspec``'s deterministic order), the offset left out so that equal states hash equal.
Same prefix of records, same hash, on every engine and in every process."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import msgspec

CANONICAL = msgspec.json.Encoder(order="deterministic")
"""The canonical encoding the hash is taken of."""


def state_hash_of(image_without_hash: Any) -> str:
    """sha256 of the canonical JSON encoding (offset excluded: equal states hash equal)."""
    return hashlib.sha256(CANONICAL.encode(image_without_hash)).hexdigest()


def streamed_state_hash(fields: dict[str, Any], key: str, items: Iterable[Any], batch: int = 4096) -> str:
    """``state_hash_of({**fields, key: tuple(items)})``, the items encoded and hashed a batch at a
    time: the same bytes are hashed, but the millions of partitions a long history ends with are
    never held together (the columnar audit reads them from its engine)."""
    rest = iter(items)

    def encoded() -> Iterator[bytes]:
        sep = b""
        while chunk := list(islice(rest, batch)):
            yield sep + CANONICAL.encode(chunk)[1:-1]
            sep = b","

    return spliced_state_hash(fields, key, encoded())


def spliced_state_hash(fields: dict[str, Any], key: str, encoded: Iterable[Any]) -> str:
    """``state_hash_of({**fields, key: items})`` for items given already encoded: the pieces of
    ``encoded`` (bytes-like) end to end are the items' canonical encodings, a comma between two.
    An engine that writes the canonical form itself hands its column's bytes over as they are."""
    # The canonical encoding sorts a dict's keys: the fields before ``key``, then the items'
    # array, then the fields after it, each piece spliced without its braces.
    before = CANONICAL.encode({k: v for k, v in fields.items() if k < key})
    after = CANONICAL.encode({k: v for k, v in fields.items() if k > key})
    h = hashlib.sha256(before[:-1] + (b"," if len(before) > 2 else b"") + CANONICAL.encode(key) + b":[")
    for piece in encoded:
        h.update(piece)
    h.update(b"]" + (b"," + after[1:] if len(after) > 2 else b"}"))
    return h.hexdigest()


__all__ = ["CANONICAL", "spliced_state_hash", "state_hash_of", "streamed_state_hash"]
