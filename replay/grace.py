"""The grace: how long a transient wrong state may last before it counts, written once.

A controller reacts in record time (milliseconds, within a heartbeat), whatever the number of
records it writes meanwhile: a burst that creates 100 000 partitions is thousands of records in
200 ms. So a graced wrong state counts once it has lasted more than ``GRACE_MS`` of record time
(``ts_ms``). A grace in records applies besides where one is asked for, and alone where a record
has no time (a table another writer made): ``UNTIMED_GRACE_RECORDS`` unless asked otherwise.
Every engine applies ``past_grace``: the per-record books (``replay.books``) record by record,
the plan's SQL (``held``) on intervals.
"""

from __future__ import annotations

GRACE_MS = 5_000
UNTIMED_GRACE_RECORDS = 1000


def past_grace(grace_ms: int, grace_records: int | None, records: int, ms: int | None) -> bool:
    """Whether a wrong state has outlasted the grace at a record ``records`` records and ``ms``
    ms of record time after the one that began it (None: one of the two has no time)."""
    if ms is None:
        return records > (UNTIMED_GRACE_RECORDS if grace_records is None else grace_records)
    return ms > grace_ms or (grace_records is not None and records > grace_records)


def grace_words(grace_ms: int, grace_records: int | None) -> str:
    """The grace as a report says it."""
    if grace_records is None:
        return f"{grace_ms:,} ms of record time ({UNTIMED_GRACE_RECORDS:,} records where a record has no time)"
    return f"{grace_ms:,} ms of record time or {grace_records:,} records"
