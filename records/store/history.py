"""The table's history as kraftlake reads it: ``Commit``, one per Delta version, with the offsets,
producer and sequence (or a group commit's batches) its commit metadata records.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from .log_parts import LogParts


@dataclass(frozen=True)
class Commit:
    """One entry of the table's history."""

    version: int
    timestamp_ms: int
    operation: str
    first_offset: int | None = None
    last_offset: int | None = None
    records: int | None = None
    producer: str | None = None
    seq: int | None = None
    batches: tuple[tuple[str | None, int | None, int, int], ...] = ()
    """A group commit's batches: (producer, seq, first offset, last offset) each."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class HistoryMixin(LogParts):
    """``Log.history``, read from the ``Log``'s table once it caught up (``_fresh``, log.py)."""

    def history(self, limit: int | None = None) -> list[Commit]:
        """Commits, newest first."""
        out = []
        for h in self._fresh().history(limit):

            def num(key: str, h: dict = h) -> int | None:
                v = h.get(key)
                return None if v is None else int(v)

            out.append(
                Commit(
                    version=h["version"],
                    timestamp_ms=h["timestamp"],
                    operation=h.get("kraftlake.operation") or h.get("operation", "?").lower(),
                    first_offset=num("kraftlake.first_offset"),
                    last_offset=num("kraftlake.last_offset"),
                    records=num("kraftlake.records"),
                    producer=h.get("kraftlake.producer"),
                    seq=num("kraftlake.seq"),
                    batches=tuple(tuple(b) for b in json.loads(h["kraftlake.batches"]))
                    if "kraftlake.batches" in h
                    else (),
                )
            )
        return out
