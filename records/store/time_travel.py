"""Time travel: ``Log.at``, the log as of a Delta version, a timestamp, a record offset or an
offset of the log it was imported from. This module chooses the version (and where to cut it);
``snapshot`` reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..errors import TimeTravelError
from .log_parts import LogParts
from .snapshot import LogSnapshot, open_table

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def time_ms(value: datetime | str | int) -> int:
    """Milliseconds since the epoch of ``value``: a datetime, an ISO 8601 text (UTC unless it
    carries an offset: ``2026-11-26T01:00:00+01:00``; a trailing ``Z`` is UTC) or an integer
    of milliseconds (as ``ts_ms`` is written)."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a time: give ISO 8601 (UTC unless it has an offset) or milliseconds since the epoch"
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)


def format_ms(ms: int | None) -> str:
    """``ts_ms`` as ISO 8601 UTC to the millisecond (``2023-11-14T22:13:20.000Z``)."""
    if ms is None:
        return "-"
    when = _EPOCH + timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


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
        limit_ms = (when - _EPOCH) // timedelta(milliseconds=1)  # exact, unlike float seconds
        candidates = [h["version"] for h in self._fresh().history() if h["timestamp"] <= limit_ms]
        if not candidates:
            raise TimeTravelError(f"{self.path} has no version committed at or before {when.isoformat()}")
        return max(candidates)
