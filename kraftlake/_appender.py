"""``Appender``: one producer's exactly-once batches, numbered for the caller."""

from __future__ import annotations

import os
from collections.abc import Sequence

from kraftlake.records import AppendResult, Log, Record


class Appender:
    """Appends batches for one producer; each batch gets the next sequence number.

    The sequence resumes from what the log stored for this producer, so a restarted service
    continues where it left off. To retry a batch whose acknowledgement was lost, call
    ``append(records, seq=n)`` with the same ``n``: it lands once and returns the same offsets.
    """

    def __init__(self, log: Log | str | os.PathLike[str], producer: str) -> None:
        self.log = log if isinstance(log, Log) else Log.open(log)
        self.producer = producer
        stored = self.log.producer_seq(producer)
        self.next_seq = 0 if stored is None else stored + 1

    def append(self, records: Sequence[Record], *, seq: int | None = None) -> AppendResult:
        use = self.next_seq if seq is None else seq
        result = self.log.append(records, producer=self.producer, seq=use)
        self.next_seq = max(self.next_seq, use + 1)
        return result
