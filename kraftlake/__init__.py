"""kraftlake: an event-sourced metadata log with replayable state machines, on Delta Lake.

The public surface, delta-rs style: a few names over the packages that do the work::

    import kraftlake
    from kraftlake.records import PartitionChange

    log = kraftlake.init("/data/cluster-log")          # or kraftlake.open(path)
    appender = kraftlake.Appender(log, producer="controller-1")
    appender.append([PartitionChange(topic_id=..., partition_id=0, leader=2)])
    log.at(offset=41).records()                         # the log as it was at offset 41
"""

from __future__ import annotations

import os

from kraftlake.records import (
    AppendConflictError,
    AppendResult,
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

from ._appender import Appender

__version__ = "0.1.0"


def open(path: str | os.PathLike[str]) -> Log:  # noqa: A001 - mirrors deltalake / builtins open
    """Open the log at ``path``."""
    return Log.open(path)


def init(path: str | os.PathLike[str]) -> Log:
    """Create an empty log at ``path``."""
    return Log.create(path)


__all__ = [
    "Appender",
    "AppendConflictError",
    "AppendResult",
    "KraftlakeError",
    "Log",
    "LogError",
    "LogExistsError",
    "LogNotFoundError",
    "LogSnapshot",
    "Record",
    "RecordError",
    "TimeTravelError",
    "init",
    "open",
]
