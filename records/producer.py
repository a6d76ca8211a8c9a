"""``ProducerSeq``: what makes a batch exactly-once, its producer id and sequence number, and the
one check that they are given together and that the sequence fits the log's int64 ``producer_seq``
column (0 .. 2^63 - 1). The log, the HTTP service and the CLI all ask it, so each refuses the same requests for the same reason.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from .errors import RecordError


class ProducerSeq(msgspec.Struct, frozen=True):
    """A producer id and the sequence number of one of its batches (``RecordError`` naming the
    field ``seq`` when the sequence is negative or beyond int64, ``producer`` when the id is empty
    or longer than ``MAX_PRODUCER_LENGTH``)."""

    producer: str
    seq: int

    MAX_PRODUCER_LENGTH: ClassVar[int] = 256
    """Characters in a producer id: it is stored in every commit of its batches (four app
    transactions and the commit's metadata)."""
    MAX_SEQ: ClassVar[int] = 2**63 - 1
    """Sequences are Delta app transaction versions: signed 64-bit integers."""

    def __post_init__(self) -> None:
        if not self.producer:
            raise RecordError("producer must not be empty", field="producer")
        if len(self.producer) > self.MAX_PRODUCER_LENGTH:
            raise RecordError(
                f"producer id is {len(self.producer)} characters long; at most {self.MAX_PRODUCER_LENGTH}",
                field="producer",
            )
        if self.seq < 0:
            raise RecordError("seq must be >= 0", field="seq")
        if self.seq > self.MAX_SEQ:
            raise RecordError(f"seq must be <= {self.MAX_SEQ} (2^63 - 1)", field="seq")

    @classmethod
    def of(cls, producer: str | None, seq: int | None) -> ProducerSeq | None:
        """The pair, or None when neither is given (a batch that is not exactly-once);
        ``RecordError`` when only one is."""
        if producer is None and seq is None:
            return None
        if producer is None or seq is None:
            raise RecordError("give both producer and seq, or neither", field="seq")
        return cls(producer, seq)
