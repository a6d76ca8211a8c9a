"""kraftlake: an event-sourced metadata log with replayable state machines, on Delta Lake.

The public surface, delta-rs style: a few names over the packages that do the work::

    import kraftlake
    from kraftlake.records import PartitionChange

    log = kraftlake.init("/data/cluster-log")          # or kraftlake.open(path)
    appender = kraftlake.Appender(log, producer="controller-1")   # or "http://host:8080" (kraftlake serve)
    appender.append([PartitionChange(topic_id=..., partition_id=0, leader=2)])
    log.at(offset=41).records()                         # the log as it was at offset 41
    view = kraftlake.state_at(log, offset=41)           # the controller's view after offset 41
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kraftlake.records import (
        AppendConflictError,
        AppendResult,
        CorruptStoreError,
        KraftlakeError,
        Log,
        LogError,
        LogExistsError,
        LogNotFoundError,
        LogSnapshot,
        Record,
        RecordError,
        TimeTravelError,
    )
    from kraftlake.statemachine.kraft.view import ControllerView

    from ._appender import Appender
    from .auditing import AuditCapacityError, AuditUsageError, audit
    from .lake import AuditResult, Lake, PointInTime

# The facade's names load on first use (PEP 562): ``import kraftlake.statemachine…`` imports this
# package first, and must not load Delta, Arrow, pandas or an HTTP client on the way.
_LAZY = {
    "Appender": "kraftlake._appender",
    "audit": "kraftlake.auditing",
    "AuditCapacityError": "kraftlake.auditing",
    "AuditUsageError": "kraftlake.auditing",
    "AuditResult": "kraftlake.lake",
    "Lake": "kraftlake.lake",
    "PointInTime": "kraftlake.lake",
    **dict.fromkeys(
        [
            "AppendConflictError",
            "AppendResult",
            "CorruptStoreError",
            "KraftlakeError",
            "Log",
            "LogError",
            "LogExistsError",
            "LogNotFoundError",
            "LogSnapshot",
            "Record",
            "RecordError",
            "TimeTravelError",
        ],
        "kraftlake.records",
    ),
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def open(  # noqa: A001 - mirrors deltalake / builtins open
    path: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None
) -> Lake:
    """Open the log at ``path`` (a ``Lake``: the log's own methods, plus points in time, diffs,
    timelines, audits and plots as DataFrames for notebooks). ``path`` may be a URI
    (``s3://bucket/prefix``…); ``storage_options`` are delta-rs's (default: the environment's)."""
    from kraftlake.records.store.log import Log

    from .lake import Lake

    return Lake(Log.open(path, storage_options=storage_options))


def init(path: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None) -> Lake:
    """Create an empty log at ``path`` (a local path or a URI, as ``open``)."""
    from kraftlake.records.store.log import Log

    from .lake import Lake

    return Lake(Log.create(path, storage_options=storage_options))


def state_at(
    log: Lake | Log | str | os.PathLike[str],
    *,
    offset: int | None = None,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    source_offset: int | None = None,
    storage_options: dict[str, str] | None = None,
) -> ControllerView:
    """The KRaft controller's view after the record at ``offset``, at the end of Delta
    ``version``, at ``timestamp``, or after every record imported from Kafka offset
    ``source_offset`` or before (at most one; default: the end of the log). Uses the log's
    snapshots (``kraftlake snapshot``) when there are any.

    Inside an open metadata transaction this is what Kafka publishes: the state before its Begin
    record (``view.offset`` says which). ``view.image()`` is the canonical form (what ``kraftlake view`` prints);
    ``kraftlake.statemachine.kraft.broker_view.broker_view(view, b)`` is broker b's view.
    ``storage_options``: delta-rs's, for a log given by URI.
    """
    from kraftlake.records.store.log import Log
    from kraftlake.replay.state import state_at as _state_at

    from .lake import Lake

    if isinstance(log, Lake):
        opened = log.log
    else:
        opened = log if isinstance(log, Log) else Log.open(log, storage_options=storage_options)
    return _state_at(
        opened, offset=offset, version=version, timestamp=timestamp, source_offset=source_offset
    ).published()


__all__ = [*_LAZY, "init", "open", "state_at"]
