"""``ProducerSeq``: what makes a batch exactly-once, its producer id and sequence number, and the
one check that they are given together and that the sequence fits the log's int64 ``producer_seq``
column (0 .. 2^63 - 1). The log, the HTTP
service and the CLI all ask it, so each refuses the same requests for the same reason.
"""

from __future__ import annotations

import msgspec

from .errors import RecordError

MAX_SEQ = 2**63 - 1


class ProducerSeq(msgspec.Struct, frozen=True):
    """A producer id and the sequence number of one of its batches (``RecordError`` naming the
    field ``seq`` when the sequence is negative or does not fit in 64 bits)."""

    producer: str
    seq: int

    def __post_init__(self) -> None:
        if self.seq < 0:
            raise RecordError("seq must be >= 0", field="seq")
        if self.seq > MAX_SEQ:
            raise RecordError(f"seq must be <= {MAX_SEQ} (2^63 - 1)", field="seq")

    @classmethod
    def of(cls, producer: str | None, seq: int | None) -> ProducerSeq | None:
        """The pair, or None when neither is given (a batch that is not exactly-once);
        ``RecordError`` when only one is."""
        if producer is None and seq is None:
            return None
        if producer is None or seq is None:
            raise RecordError("give both producer and seq, or neither", field="seq")
        return cls(producer, seq)
