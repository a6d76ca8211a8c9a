"""Time travel: ``Log.at``, the log as of a Delta version, a timestamp, a record offset or an
offset of the log it was imported from. This module chooses the version (and where to cut it);
``snapshot`` reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..errors import TimeTravelError
from ..times import time_ms
from .log_parts import LogParts
from .snapshot import LogSnapshot, open_table


class TimeTravelMixin(LogParts):
    """``Log.at``, over the ``Log``'s table once it caught up (``_fresh``, log.py)."""

    def at(
        self,
        *,
        version: int | None = None,
        timestamp: datetime | str | None = None,
        offset: int | None = None,
        source_offset: int | None = None,
    ) -> LogSnapshot:
        """The log as of a Delta ``version``, a ``timestamp`` (datetime or ISO string), a record
        ``offset`` (the latest version cut there), or a ``source_offset``: the latest version cut
        after the last record imported from that offset or before it (a Kafka offset, for a log
        made by ``import-kafka``). Give at most one."""
        given = [x is not None for x in (version, timestamp, offset, source_offset)]
        if sum(given) > 1:
            raise ValueError("give at most one of version, timestamp, offset, source_offset")
        if source_offset is not None:
            fresh = self._fresh()
            at = LogSnapshot(fresh, location=self.location).offset_of_source(source_offset)
            return LogSnapshot(fresh, to_offset=at, location=self.location)
        if version is not None:
            if version < 0 or version > self._fresh().version():
                raise TimeTravelError(f"{self.path} has versions 0..{self._dt.version()}, not {version}")
            return LogSnapshot(open_table(self.location, version), location=self.location)
        if timestamp is not None:
            return LogSnapshot(open_table(self.location, self._version_at(timestamp)), location=self.location)
        if offset is not None and offset < -1:
            raise TimeTravelError(f"offset {offset} is below -1 (the empty log)")
        return LogSnapshot(self._fresh(), to_offset=offset, location=self.location)

    def _version_at(self, timestamp: datetime | str) -> int:
        """The newest version committed at or before ``timestamp``, by the commit times that
        ``history`` shows (delta-rs's own resolution uses file modification times, which can
        differ from them by milliseconds)."""
        when = datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        limit_ms = time_ms(when)  # exact, unlike float seconds
        candidates = [h["version"] for h in self._fresh().history() if h["timestamp"] <= limit_ms]
        if not candidates:
            raise TimeTravelError(f"{self.path} has no version committed at or before {when.isoformat()}")
        return max(candidates)
