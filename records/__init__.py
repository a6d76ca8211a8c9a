"""Record types, versions and upcasters, the Arrow schema, and the Delta log store.

Import the pieces from here::

    from kraftlake.records import Log, PartitionChange, ReplicaDirectory, UNASSIGNED
"""

from .base import ENVELOPE_FIELDS, Record, current_version, payload_fields, type_name
from .catalog import BY_NAME, RECORD_TYPES, AnyRecord, record_type
from .codec import decode_line, encode_line, encode_lines, from_builtins, iter_lines, normalize
from .errors import (
    AppendConflictError,
    KraftlakeError,
    LogError,
    LogExistsError,
    LogNotFoundError,
    RecordError,
    ReplayError,
    TimeTravelError,
    UnsupportedLocationError,
)
from .kraft import *  # noqa: F403 - the KRaft record types and constants are the package's API
from .kraft import KRAFT_RECORDS
from .log import AppendResult, Commit, Log, LogSnapshot, MaintenanceReport
from .s3stream import S3STREAM_RECORDS
from .bookkeeper import BOOKKEEPER_RECORDS
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
