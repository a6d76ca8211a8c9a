"""The error tree of kraftlake's record layer. Every error names what it is about.

``KraftlakeError``
 ├── ``RecordError``      a record is invalid: names line (or index), record type and field
 └── ``LogError``         the Delta log cannot do what was asked
      ├── ``LogNotFoundError``   no log at that path
      ├── ``LogExistsError``     ``init`` on a path that already holds a table
      ├── ``AppendConflictError`` gave up after too many concurrent commits won the race
      └── ``TimeTravelError``    a version, timestamp or offset the log cannot resolve
"""

from __future__ import annotations


class KraftlakeError(Exception):
    """Base of every error kraftlake raises on purpose."""


class RecordError(KraftlakeError, ValueError):
    """An invalid record. ``line`` is 1-based (a JSON Lines line or a batch index + 1)."""

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        record_type: str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.record_type = record_type
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
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


class LogError(KraftlakeError):
    """The log cannot do what was asked."""


class LogNotFoundError(LogError):
    pass


class LogExistsError(LogError):
    pass


class AppendConflictError(LogError):
    pass


class TimeTravelError(LogError):
    pass
