"""Record time: ``ts_ms``, milliseconds since the epoch, read from what people write (ISO 8601,
a datetime, milliseconds) and written as ISO 8601 UTC. Pure: every layer shows record times, and
none of them should load the store to do it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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


__all__ = ["format_ms", "time_ms"]
