"""The error tree of kraftlake's record layer. Every error names what it is about.

``KraftlakeError``
 ├── ``RecordError``      a record is invalid: names line (or index), record type and field
 │    └── ``KafkaFormatError`` (records.kafka) Kafka bytes that do not decode: file, byte, offset
 ├── ``ReplayError``      a reducer met a record the real system would reject: names offset and rule
 └── ``LogError``         the Delta log cannot do what was asked
      ├── ``LogNotFoundError``   no log at that path
      ├── ``LogExistsError``     ``init`` on a path that already holds a table
      ├── ``AppendConflictError`` gave up after too many concurrent commits won the race
      ├── ``MaintenanceConflictError`` ``maintain`` gave up: appends kept committing first
      ├── ``TimeTravelError``    a version, timestamp or offset the log cannot resolve
      └── ``CorruptStoreError``  a file of the table is missing or damaged: names it and what is wrong
"""

from __future__ import annotations


class KraftlakeError(Exception):
    """Base of every error kraftlake raises on purpose."""


class RecordError(KraftlakeError, ValueError):
    """An invalid record. ``line`` is 1-based (a JSON Lines line, a batch index + 1, or an Arrow
    row + 1); ``unit`` says which it counts in the message (``line 3`` or, for Arrow, ``row 3``)."""

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        record_type: str | None = None,
        field: str | None = None,
        unit: str = "line",
    ) -> None:
        self.message = message
        self.line = line
        self.record_type = record_type
        self.field = field
        self.unit = unit
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"{self.unit} {self.line}")
        what = self.record_type or "record"
        if self.field:
            what += f".{self.field}"
        where.append(what)
        return f"{': '.join(where)}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "type": self.record_type,
            "field": self.field,
            "message": self.message,
        }


class ReplayError(KraftlakeError, ValueError):
    """A record a reducer cannot apply, because the real system would have rejected it.

    ``rule`` names the replay-validation rule broken (``R-REPLAY-*``: the checks Kafka makes when it
    replays a record, e.g. ``ClusterControlManager.replay`` and ``ReplicationControlManager.replay``),
    ``entity`` the entity key (``broker/101``, ``partition/<topic>/<p>``).
    """

    def __init__(
        self,
        message: str,
        *,
        rule: str,
        offset: int | None = None,
        record_type: str | None = None,
        entity: str | None = None,
    ) -> None:
        self.message = message
        self.rule = rule
        self.offset = offset
        self.record_type = record_type
        self.entity = entity
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"offset {self.offset}" if self.offset is not None else "record"
        what = self.record_type or "record"
        entity = f" ({self.entity})" if self.entity else ""
        return f"{where}: {what}{entity}: {self.rule}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {
            "offset": self.offset,
            "type": self.record_type,
            "rule": self.rule,
            "entity": self.entity,
            "message": self.message,
        }


class LogError(KraftlakeError):
    """The log cannot do what was asked."""


class LogNotFoundError(LogError):
    pass


class LogExistsError(LogError):
    pass


class AppendConflictError(LogError):
    pass


class MaintenanceConflictError(LogError):
    """``maintain`` gave up a step that delta-rs commits (the vacuum) because appends kept
    committing first; what landed before stays, nothing is lost."""


class TimeTravelError(LogError):
    pass


class UnsupportedLocationError(LogError):
    """A log location that is neither a local path nor a URI kraftlake can use."""


class CorruptStoreError(LogError):
    """A file the table needs is missing or damaged (a data file that is truncated, fails its
    checksums or disagrees with itself; a commit file missing or not JSON): ``file`` names it."""

    def __init__(self, message: str, *, file: str | None = None) -> None:
        self.file = file
        super().__init__(message)


class StorageError(LogError):
    """The store holding a log refused or could not be reached (no bucket, no or wrong
    credentials, access denied, endpoint unreachable). Nothing was changed."""
