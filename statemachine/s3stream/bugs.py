"""Faulty variants of the S3Stream controller's decider, for proving the audits catch them.

Each bug is ``decide`` with one small, named mistake of the kind AutoMQ's controller made (its
issue tracker has them, e.g. #2040 below) or could make; the simulator runs one in place of the
correct decider (and, where a mistake needs a misbehaving node to show, has its nodes misbehave
too). They are test equipment.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from kraftlake.records.s3stream import RemoveStreamSetObject, S3StreamEndOffsets, StreamEndOffset

from . import commands as c
from .commits import commit_stream_set_object
from .decider import decide
from .objects import delete_marked
from .view import StreamsView

Decide = Callable[[StreamsView, c.Command], c.Decision]


def commit_gap(view: StreamsView, cmd: c.Command) -> c.Decision:
    """WAL uploads are accepted without the offset continuity check (a gap or overlap at the end lands)."""
    if isinstance(cmd, c.CommitStreamSetObject) and not cmd.compacted_object_ids:
        return commit_stream_set_object(view, cmd, offsets=False)
    return decide(view, cmd)


def end_offset_regress(view: StreamsView, cmd: c.Command) -> c.Decision:
    """A stream-set compaction also writes the compacted ranges' ends as end offsets (AutoMQ
    #2040: the end moved back when an SSO compaction record was replayed)."""
    d = decide(view, cmd)
    if d.error_code or not isinstance(cmd, c.CommitStreamSetObject) or not cmd.compacted_object_ids or not cmd.ranges:
        return d
    ends = tuple(StreamEndOffset(stream_id=r.stream_id, end_offset=r.end_offset) for r in cmd.ranges)
    return msgspec.structs.replace(d, records=(*d.records, S3StreamEndOffsets(end_offsets=ends)))


def leak_prepared_object(view: StreamsView, cmd: c.Command) -> c.Decision:
    """The lifecycle check never expires PREPARED objects (uploads that never committed leak)."""
    if isinstance(cmd, c.CheckObjectLifecycle):
        return c.Decision()
    return decide(view, cmd)


def reference_destroyed_object(view: StreamsView, cmd: c.Command) -> c.Decision:
    """A stream-set compaction marks the compacted objects destroyed but leaves them in the node's
    metadata (the RemoveStreamSetObject records are lost)."""
    d = decide(view, cmd)
    if d.error_code or not isinstance(cmd, c.CommitStreamSetObject) or not cmd.compacted_object_ids:
        return d
    return msgspec.structs.replace(d, records=tuple(r for r in d.records if not isinstance(r, RemoveStreamSetObject)))


def stale_epoch_commit(view: StreamsView, cmd: c.Command) -> c.Decision:
    """A WAL upload from a node that lost its streams (an older stream epoch, a fenced node epoch)
    is accepted: no node epoch, failover or ownership check (offsets are still checked)."""
    if isinstance(cmd, c.CommitStreamSetObject) and not cmd.compacted_object_ids:
        return commit_stream_set_object(view, cmd, owners=False)
    return decide(view, cmd)


def delete_marked_at_once(view: StreamsView, cmd: c.Command) -> c.Decision:
    """Physical deletion ages a MARK_DESTROYED object by its record's timestamp: an expired PREPARED
    object, written with timestamp 0 from V2, is deleted at the next check, not after the retention."""
    if isinstance(cmd, c.DeleteMarkedObjects):
        return delete_marked(view, cmd, by_timestamp=True)
    return decide(view, cmd)


BUGS: dict[str, Decide] = {
    "commit-gap": commit_gap,
    "end-offset-regress": end_offset_regress,
    "leak-prepared-object": leak_prepared_object,
    "reference-destroyed-object": reference_destroyed_object,
    "stale-epoch-commit": stale_epoch_commit,
    "delete-marked-at-once": delete_marked_at_once,
}
"""Bug name -> faulty decider."""

CAUGHT_BY: dict[str, str] = {
    "commit-gap": "S12",
    "end-offset-regress": "S4",
    "leak-prepared-object": "S11",
    "reference-destroyed-object": "S7",
    "stale-epoch-commit": "S12",
    "delete-marked-at-once": "S13",
}
"""Bug name -> the invariant that catches it."""
