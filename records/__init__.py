"""Record types, versions and upcasters, the Arrow schema, and the Delta log store.

Import the pieces from here::

    from kraftlake.records import Log, PartitionChange, ReplicaDirectory, UNASSIGNED

Importing the package loads the record types and their codecs (msgspec) only: the store's names
(``Log``, ``LogSnapshot``, ``AppendResult``…) load deltalake and pyarrow on first use, so that the
pure state machines, which import the record types, load no I/O library.
"""

from typing import TYPE_CHECKING

from .base import ENVELOPE_FIELDS, Record, current_version, payload_fields, type_name
from .bookkeeper import BOOKKEEPER_RECORDS
from .catalog import BY_NAME, RECORD_TYPES, AnyRecord, record_type
from .codec import decode_line, encode_line, encode_lines, from_builtins, iter_lines, normalize
from .errors import (
    AppendConflictError,
    CorruptStoreError,
    KraftlakeError,
    LogError,
    LogExistsError,
    LogNotFoundError,
    MaintenanceConflictError,
    RecordError,
    ReplayError,
    StorageError,
    TimeTravelError,
    UnsupportedLocationError,
)
from .kraft import *  # noqa: F403 - the KRaft record types and constants are the package's API
from .kraft import KRAFT_RECORDS
from .observations import (
    OBSERVATION_RECORDS,
    AssignReplicasToDirsRequest,
    DirectoryReplicas,
    HeartbeatOfflineDirs,
    LogDirFailed,
    LogDirsLoaded,
    ObjectWritten,
    TopicPartitions,
    UnfenceRequested,
)
from .producer import ProducerSeq
from .s3stream import S3STREAM_RECORDS

if TYPE_CHECKING:
    from .store.log import AppendResult, Commit, Log, LogSnapshot, MaintenanceReport

_STORAGE = frozenset({"AppendResult", "Commit", "Log", "LogSnapshot", "MaintenanceReport"})


def __getattr__(name: str) -> object:
    if name in _STORAGE:
        from .store import log

        return getattr(log, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
