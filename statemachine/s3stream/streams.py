"""Stream commands: create, open, close (incl. V6 fast close), trim, delete, as AutoMQ's
``StreamControlManager`` decides them (``createStream``, ``openStream``, ``closeStream``,
``trimStream``, ``deleteStream``). Each answers an AutoMQ error code; an error decides no
records. Checks run in AutoMQ's order, because the order decides which error a client sees.
"""

from __future__ import annotations

from typing import Any

from kraftlake.records.s3stream import (
    AssignedStreamId,
    CompactOperation,
    NodeWALUncommittedOffsets,
    Range,
    RemoveRange,
    RemoveS3Stream,
    S3Stream,
    StreamState,
    StreamTag,
    UncommittedOffset,
)

from . import commands as c
from .nodes import is_locked
from .objects import mark_destroy
from .view import V1, V2, V6, RangeMeta, Stream, StreamsView


def node_epoch_check(view: StreamsView, node_id: int, epoch: int, check_failover: bool) -> int:
    """4.0: the node registered (GetOpeningStreams), at an epoch not above the request's, and not
    behind the failover barrier unless the check is off."""
    n = view.nodes.get(node_id)
    if n is None:
        return c.NODE_EPOCH_NOT_EXIST
    if n.node_epoch > epoch:
        return c.NODE_EPOCH_EXPIRED
    if check_failover and n.failover_mode:
        return c.NODE_FENCED
    return c.NONE


def ownership_check(view: StreamsView, stream_id: int, node_id: int, epoch: int) -> int:
    """4.1: the requester owns the stream's current range at the stream's epoch."""
    s = view.streams.get(stream_id)
    if s is None:
        return c.STREAM_NOT_EXIST
    if s.epoch > epoch:
        return c.STREAM_FENCED
    if s.epoch < epoch:
        return c.STREAM_INNER_ERROR
    cur = s.current_range()
    if cur is None:
        return c.STREAM_INNER_ERROR
    if cur.node_id != node_id:
        return c.STREAM_FENCED
    return c.NONE


def stream_record(
    view: StreamsView,
    s: Stream,
    *,
    epoch: int | None = None,
    range_index: int | None = None,
    start: int | None = None,
    state: int | None = None,
    tags: tuple[StreamTag, ...] = (),
) -> S3Stream:
    """An S3Stream record rewriting ``s`` (v1 with tags from V1, v0 before)."""
    return S3Stream(
        version=1 if view.version >= V1 else 0,
        stream_id=s.stream_id,
        epoch=s.epoch if epoch is None else epoch,
        range_index=s.range_index if range_index is None else range_index,
        start_offset=s.start_offset if start is None else start,
        stream_state=s.state if state is None else state,
        tags=tags if view.version >= V1 else (),
    )


def range_record(r: RangeMeta, stream_id: int, **changes: int) -> Range:
    fields: dict[str, Any] = {
        "epoch": r.epoch,
        "range_index": r.range_index,
        "start_offset": r.start_offset,
        "end_offset": r.end_offset,
        "node_id": r.node_id,
        **changes,
    }
    return Range(stream_id=stream_id, **fields)


def create(view: StreamsView, cmd: c.CreateStream) -> c.Decision:
    """4.2: the next stream id, CLOSED at epoch -1 with no range."""
    err = node_epoch_check(view, cmd.node_id, cmd.node_epoch, True)
    if err:
        return c.fail(err)
    sid = view.next_stream_id
    fresh = Stream(stream_id=sid)
    return c.Decision(
        records=(AssignedStreamId(assigned_stream_id=sid), stream_record(view, fresh, tags=cmd.tags)),
        reply=c.Reply(stream_id=sid),
    )


def removable_ranges(s: Stream) -> list[RangeMeta]:
    """``checkRemovableRanges``: every range but the last (by index) that lies inside the first
    contiguous run of stream objects, or is empty (only when the stream has stream objects)."""
    run_start = run_end = -1
    for o in sorted(s.objects.values(), key=lambda o: o.start_offset):
        if run_start == -1:
            run_start, run_end = o.start_offset, o.end_offset
        elif o.start_offset != run_end:
            break
        else:
            run_end = o.end_offset
    if run_start == -1:
        return []
    ranges = [r for _, r in sorted(s.ranges.items())]
    return [
        r
        for r in ranges[:-1]
        if (run_start <= r.start_offset and r.end_offset <= run_end) or r.start_offset == r.end_offset
    ]


def open_stream(view: StreamsView, cmd: c.OpenStream) -> c.Decision:
    """4.3: a higher epoch opens a new range at the logical end, sealing the previous one there."""
    err = node_epoch_check(view, cmd.node_id, cmd.node_epoch, True)
    if err:
        return c.fail(err)
    s = view.streams.get(cmd.stream_id)
    if s is None:
        return c.fail(c.STREAM_NOT_EXIST)
    if s.epoch > cmd.stream_epoch:
        return c.fail(c.STREAM_FENCED)
    duty = view.version >= V6 and view.active_duty(cmd.node_id, s.stream_id) is not None
    if s.epoch == cmd.stream_epoch:
        cur = s.current_range()
        if cur is None:
            return c.fail(c.STREAM_INNER_ERROR)
        if cur.node_id != cmd.node_id:
            return c.fail(c.STREAM_FENCED)
        if duty:
            return c.fail(c.STREAM_NOT_CLOSED)
        reopen = () if s.state == StreamState.OPENED else (stream_record(view, s, state=StreamState.OPENED),)
        return c.Decision(records=reopen, reply=c.Reply(start_offset=s.start_offset, next_offset=s.end_offset))
    if s.state == StreamState.OPENED:
        return c.fail(c.STREAM_NOT_CLOSED)
    if duty:
        return c.fail(c.STREAM_NOT_CLOSED)
    owner = s.owner()
    if owner is not None and owner != cmd.node_id and is_locked(view, owner):
        return c.fail(c.NODE_LOCKED)
    index = s.range_index
    end = s.end_offset
    records: list = [
        stream_record(view, s, epoch=cmd.stream_epoch, range_index=index + 1, state=StreamState.OPENED, tags=cmd.tags)
    ]
    old = s.ranges.get(index)
    if index + 1 > 0 and old is not None:
        records.append(range_record(old, s.stream_id, end_offset=end))
    records.append(
        Range(
            stream_id=s.stream_id,
            epoch=cmd.stream_epoch,
            range_index=index + 1,
            start_offset=end,
            end_offset=end,
            node_id=cmd.node_id,
        )
    )
    records += [RemoveRange(stream_id=s.stream_id, range_index=r.range_index) for r in removable_ranges(s)]
    return c.Decision(records=tuple(records), reply=c.Reply(start_offset=s.start_offset, next_offset=end))


def close_stream(view: StreamsView, cmd: c.CloseStream) -> c.Decision:
    """4.4: CLOSED at the same epoch; a fast close (V6) seals the range at ``end_offset`` and
    records the node's duty for what it has not committed yet."""
    if cmd.end_offset >= 0 and view.version < V6:
        return c.fail(c.UNSUPPORTED_VERSION, "close with an end offset needs automq.version V6")
    err = node_epoch_check(view, cmd.node_id, cmd.node_epoch, False) or ownership_check(
        view, cmd.stream_id, cmd.node_id, cmd.stream_epoch
    )
    if err:
        return c.fail(err)
    s = view.streams[cmd.stream_id]
    cur = s.current_range()
    assert cur is not None  # ownership_check
    if s.state == StreamState.CLOSED:
        if cmd.end_offset >= 0 and cmd.end_offset != cur.end_offset:
            return c.fail(c.OFFSET_NOT_MATCHED, f"closed at {cur.end_offset}, retried with {cmd.end_offset}")
        return c.Decision()
    if cmd.end_offset >= 0 and cmd.end_offset < s.end_offset:
        return c.fail(c.OFFSET_NOT_MATCHED, f"end offset {cmd.end_offset} is below the logical end {s.end_offset}")
    records: list = [stream_record(view, s, state=StreamState.CLOSED)]
    if cmd.end_offset >= 0 and cur.end_offset != cmd.end_offset:
        records.append(range_record(cur, s.stream_id, end_offset=cmd.end_offset))
    if cmd.end_offset > s.end_offset:
        records.append(
            NodeWALUncommittedOffsets(
                node_id=cmd.node_id,
                entries=(
                    UncommittedOffset(stream_id=s.stream_id, start_offset=s.end_offset, end_offset=cmd.end_offset),
                ),
            )
        )
    return c.Decision(records=tuple(records))


def trim_stream(view: StreamsView, cmd: c.TrimStream) -> c.Decision:
    """4.5: a new start offset; ranges below it are removed or cut, the current one may move past
    the logical end ("trim beyond end")."""
    err = node_epoch_check(view, cmd.node_id, cmd.node_epoch, True) or ownership_check(
        view, cmd.stream_id, cmd.node_id, cmd.stream_epoch
    )
    if err:
        return c.fail(err)
    s = view.streams[cmd.stream_id]
    if s.state == StreamState.CLOSED:
        return c.fail(c.STREAM_NOT_OPENED)
    new = cmd.new_start_offset
    if new < s.start_offset:
        return c.fail(c.OFFSET_NOT_MATCHED, f"new start {new} is below the start {s.start_offset}")
    if new == s.start_offset:
        return c.Decision()
    records: list = [stream_record(view, s, start=new)]
    for _, r in sorted(s.ranges.items()):
        if new <= r.start_offset:
            break
        if r.range_index == s.range_index:
            records.append(range_record(r, s.stream_id, start_offset=new, end_offset=max(new, s.end_offset)))
            break
        if new >= r.end_offset:
            records.append(RemoveRange(stream_id=s.stream_id, range_index=r.range_index))
            continue
        records.append(range_record(r, s.stream_id, start_offset=new))
        break
    return c.Decision(records=tuple(records))


def delete_stream(view: StreamsView, cmd: c.DeleteStream) -> c.Decision:
    """4.6: a CLOSED stream goes with its ranges; its stream objects are marked destroyed (deep
    delete from V2). Unknown stream: nothing to do."""
    s = view.streams.get(cmd.stream_id)
    if s is None:
        return c.Decision()
    if s.state != StreamState.CLOSED:
        return c.fail(c.STREAM_NOT_CLOSED)
    ids = sorted(s.objects)
    op = CompactOperation.DEEP_DELETE if view.version >= V2 else CompactOperation.DELETE
    marks = mark_destroy(view, ids, [op] * len(ids), cmd.now_ms, {})
    if marks is None:
        return c.fail(c.STREAM_INNER_ERROR, "a stream object cannot be marked destroyed")
    return c.Decision(records=(RemoveS3Stream(stream_id=s.stream_id), *marks))
