"""Commands to AutoMQ's S3Stream controller and its replies: the request side of AutoMQ's RPCs
(``clients/src/main/resources/common/message/*Request.json`` in AutoMQ/automq) plus the
controller's own periodic work (object lifecycle).

A command carries everything a decision needs that is not in the log: the time (``now_ms``) and
the node's requests. Errors are AutoMQ's codes (its ``Errors``); an error decides no records. A
command's ``Decision`` is every family's (``statemachine.decision``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from kraftlake.records.s3stream import StreamTag

from .. import decision

# Every family's, named here too (``c.NONE``, ``c.Decision``):
from ..decision import NONE as NONE
from ..decision import Decision as Decision

# AutoMQ error codes (AutoMQ's org.apache.kafka.common.protocol.Errors; NONE = 0, no error, is
# every family's).
UNSUPPORTED_VERSION = 35
STREAM_EXIST = 501
STREAM_NOT_EXIST = 502
STREAM_FENCED = 503
OBJECT_NOT_EXIST = 504
STREAM_NOT_OPENED = 505
STREAM_NOT_CLOSED = 506
REDUNDANT_OPERATION = 507
COMPACTED_OBJECTS_NOT_FOUND = 508
OFFSET_NOT_MATCHED = 509
NODE_EPOCH_EXPIRED = 510
NODE_EPOCH_NOT_EXIST = 511
KEY_EXIST = 512
KEY_NOT_EXIST = 513
NODE_FENCED = 514
NODE_LOCKED = 515
OBJECT_NOT_COMMITED = 516
STREAM_INNER_ERROR = 599
INVALID_REQUEST = 42

NO_EPOCH = -1
"""``CommitStreamObject.stream_epoch`` -1: no ownership check (compaction by any node)."""
DELETE_EPOCH = 2**63 - 1
"""The stream epoch AutoMQ's topic deletion sends (Long.MAX)."""
HOUR_MS = 3_600_000


class Command(decision.Command, frozen=True, kw_only=True):
    """Base of the S3Stream controller's commands."""


class CreateStream(Command, frozen=True, kw_only=True):
    node_id: int
    node_epoch: int
    tags: tuple[StreamTag, ...] = ()


class OpenStream(Command, frozen=True, kw_only=True):
    node_id: int
    node_epoch: int
    stream_id: int
    stream_epoch: int
    tags: tuple[StreamTag, ...] = ()


class CloseStream(Command, frozen=True, kw_only=True):
    """``end_offset`` >= 0 is V6's fast close: the node seals its range there."""

    node_id: int
    node_epoch: int
    stream_id: int
    stream_epoch: int
    end_offset: int = -1


class TrimStream(Command, frozen=True, kw_only=True):
    node_id: int
    node_epoch: int
    stream_id: int
    stream_epoch: int
    new_start_offset: int


class DeleteStream(Command, frozen=True, kw_only=True):
    stream_id: int
    stream_epoch: int = DELETE_EPOCH
    now_ms: int = 0


class PrepareObjects(Command, frozen=True, kw_only=True):
    node_id: int
    count: int
    ttl_ms: int = HOUR_MS
    now_ms: int


class CommitRange(msgspec.Struct, frozen=True, kw_only=True):
    """ObjectStreamRanges: one stream's offsets in a stream-set object."""

    stream_id: int
    stream_epoch: int
    start_offset: int
    end_offset: int


class CommitStreamObjectPart(msgspec.Struct, frozen=True, kw_only=True):
    """StreamObjects of a CommitStreamSetObject: a stream's data split out into its own object."""

    object_id: int
    object_size: int
    stream_id: int
    start_offset: int
    end_offset: int
    attributes: int = 0


class CommitStreamSetObject(Command, frozen=True, kw_only=True):
    """A WAL upload (no ``compacted_object_ids``), a stream-set compaction, or a "replace"
    (``compacted_object_ids == [object_id]``)."""

    node_id: int
    node_epoch: int
    object_id: int
    order_id: int
    object_size: int
    ranges: tuple[CommitRange, ...] = ()
    stream_objects: tuple[CommitStreamObjectPart, ...] = ()
    compacted_object_ids: tuple[int, ...] = ()
    failover_mode: bool = False
    attributes: int = 0
    now_ms: int


class CommitStreamObject(Command, frozen=True, kw_only=True):
    """Stream-object compaction (``source_object_ids`` into ``object_id``), or the cleanup of
    expired stream objects (``object_id`` -1)."""

    node_id: int
    node_epoch: int
    object_id: int
    object_size: int = 0
    stream_id: int
    start_offset: int
    end_offset: int
    source_object_ids: tuple[int, ...] = ()
    stream_epoch: int = NO_EPOCH
    attributes: int = 0
    operations: tuple[int, ...] = ()
    """CompactOperation per source (all DELETE when empty)."""
    now_ms: int


class GetOpeningStreams(Command, frozen=True, kw_only=True):
    """A node (re)registers its WAL at ``node_epoch``; ``failover_mode`` raises the failover barrier."""

    node_id: int
    node_epoch: int
    failover_mode: bool = False


class RegisterNode(Command, frozen=True, kw_only=True):
    """``NodeControlManager.register``: the node's metadata (epoch, WAL config, tags) as the KV
    ``__automq_node/<id>``; an epoch below the registered one is NODE_EPOCH_EXPIRED."""

    node_id: int
    node_epoch: int
    wal_config: str = ""
    tags: tuple[tuple[str, str], ...] = ()


class UnregisterNode(Command, frozen=True, kw_only=True):
    """``NodeControlManager.unregisterNodeRecord``: refused while the node has opening streams or
    is locked (circuit breaker)."""

    node_id: int


NodeState = Literal["ACTIVE", "FENCED", "CONTROLLED_SHUTDOWN", "UNKNOWN"]
"""AutoMQ's ``NodeState``: what the active controller's heartbeat manager says of a node."""


class GetNodes(Command, frozen=True, kw_only=True):
    """``NodeControlManager.getMetadata``: the registered nodes asked for (all when none).
    ``states`` is ``NodeRuntimeInfoManager.state`` of each node: the heartbeat manager's clock
    state (sessions, a controlled shutdown's last minute), not in the log, so it comes with the
    command; a node it does not name is UNKNOWN, as a controller that is not active answers."""

    node_ids: tuple[int, ...] = ()
    states: tuple[tuple[int, NodeState], ...] = ()


class DescribeStreams(Command, frozen=True, kw_only=True):
    """``StreamControlManager.describeStreams``: one stream by id, or the streams whose current range
    a node owns; neither is INVALID_REQUEST (kraftlake has no topic-partition lookup here)."""

    stream_id: int = -1
    node_id: int = -1


class CleanupScaleInNodes(Command, frozen=True, kw_only=True):
    """``StreamControlManager.cleanupScaleInNodes``: stream-set objects of nodes no longer active
    whose every stream range lies below its stream's start (or whose streams are gone) are removed
    and marked destroyed (``checkStreamSetObjectExpired``)."""

    active_nodes: tuple[int, ...]
    now_ms: int


class CheckObjectLifecycle(Command, frozen=True, kw_only=True):
    """The controller's periodic check: PREPARED objects past their deadline are marked destroyed,
    at most ``limit`` per round; skipped whole while the last storage deletion is still in flight
    (``deletion_in_flight``: AutoMQ's ``lastCleanCf`` not done)."""

    now_ms: int
    deletion_in_flight: bool = False
    limit: int = 2000


class DeleteMarkedObjects(Command, frozen=True, kw_only=True):
    """Physical deletion finished for MARK_DESTROYED objects older than ``retention_ms``."""

    now_ms: int
    retention_ms: int = 600_000
    limit: int = 2000
    deletion_in_flight: bool = False
    """The last storage deletion has not finished: no new one starts (AutoMQ's ``lastCleanCf``)."""


class PutKV(Command, frozen=True, kw_only=True):
    key: str
    value: bytes
    namespace: str | None = None
    overwrite: bool = False


class DeleteKV(Command, frozen=True, kw_only=True):
    key: str
    namespace: str | None = None


# -- replies -------------------------------------------------------------------------------------


class OpeningStream(msgspec.Struct, frozen=True, kw_only=True):
    stream_id: int
    epoch: int
    start_offset: int
    end_offset: int


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    node_id: int
    node_epoch: int
    wal_config: str
    tags: dict[str, str]
    has_opening_streams: bool
    state: NodeState = "UNKNOWN"


class StreamInfo(msgspec.Struct, frozen=True, kw_only=True):
    stream_id: int
    node_id: int
    epoch: int
    start_offset: int
    end_offset: int
    state: str
    tags: dict[str, str]


class Reply(decision.Reply, frozen=True, kw_only=True):
    """The S3Stream controller's replies: ``error_code`` is AutoMQ's (``Errors``), and the fields
    its RPCs answer."""

    error_code: int = NONE
    stream_id: int | None = None
    start_offset: int | None = None
    next_offset: int | None = None
    first_object_id: int | None = None
    streams: tuple[OpeningStream, ...] = ()
    value: bytes | None = None
    nodes: tuple[NodeInfo, ...] = ()
    described: tuple[StreamInfo, ...] = ()


def fail(error_code: int, message: str | None = None, **reply: Any) -> Decision:
    """A decision that errs: no records, the reply ``error_code``."""
    return Decision(reply=Reply(error_code=error_code, message=message, **reply))
