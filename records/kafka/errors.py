"""The error malformed Kafka bytes raise: it names the file and byte position (or the record,
its Kafka offset and field), so an operator can look at the same bytes with ``kafka-dump-log.sh``."""

from __future__ import annotations

from kraftlake.records.errors import RecordError


class KafkaFormatError(RecordError):
    """Bytes that are not what Kafka writes: a CRC mismatch, a truncated batch, a record value
    that does not decode, Directories that do not fit the replicas."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        position: int | None = None,
        offset: int | None = None,
        record_type: str | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.position = position
        self.offset = offset
        super().__init__(message, record_type=record_type, field=field)

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file + (f" at byte {self.position}" if self.position is not None else ""))
        if self.offset is not None:
            where.append(f"Kafka offset {self.offset}")
        if self.record_type is not None:
            where.append(self.record_type + (f".{self.field}" if self.field else ""))
        return ": ".join([*where, self.message])
