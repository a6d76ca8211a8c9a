"""S3 objects' lifecycle: prepare, commit, mark destroyed, expire, delete, as AutoMQ's
``S3ObjectControlManager`` does (``prepareObject``, ``commitObject``, ``markDestroyObjects``,
``checkS3ObjectsLifecycle``). Record versions follow ``automq.version``: from V2 an
object carries one ``timestamp`` and its ``attributes``; before, the four legacy time fields.
"""

from __future__ import annotations

from typing import TypedDict

from kraftlake.records.s3stream import (
    MATCH_ALL_BUCKET,
    NOOP_OBJECT_ID,
    AssignedS3ObjectId,
    CompactOperation,
    ObjectState,
    RemoveS3Object,
    S3Object,
    attribute_deep_delete,
    attributes,
)

from . import commands as c
from .view import V2, ObjectMeta, StreamsView


class LegacyTimes(TypedDict, total=False):
    """The time fields of an S3Object record before V2."""

    prepared_time_in_ms: int
    expired_time_in_ms: int
    committed_time_in_ms: int
    mark_destroyed_time_in_ms: int


def object_record(
    view: StreamsView,
    obj: ObjectMeta,
    state: int,
    *,
    timestamp: int,
    size: int | None = None,
    attrs: int | None = None,
    legacy: LegacyTimes | None = None,
    ts_ms: int | None = None,
) -> S3Object:
    """The S3Object record for ``obj`` in ``state``, at the version ``automq.version`` chooses;
    ``ts_ms``, when given, is the record's time (the decision's)."""
    size = obj.size if size is None else size
    if view.version >= V2:
        return S3Object(
            object_id=obj.object_id,
            object_size=size,
            object_state=state,
            timestamp=timestamp,
            attributes=obj.attributes if attrs is None else attrs,
            ts_ms=ts_ms,
        )
    return S3Object(
        version=0,
        object_id=obj.object_id,
        object_size=size,
        object_state=state,
        timestamp=timestamp,
        ts_ms=ts_ms,
        **(legacy or {}),
    )


def prepare(view: StreamsView, cmd: c.PrepareObjects) -> c.Decision:
    """4.7: ``count`` new ids from the high-water mark, PREPARED until now + ttl."""
    if cmd.count <= 0:
        return c.fail(c.NONE, "nothing to prepare", first_object_id=view.next_object_id)
    first = view.next_object_id
    deadline = cmd.now_ms + cmd.ttl_ms
    records: list = [AssignedS3ObjectId(assigned_s3_object_id=first + cmd.count - 1)]
    for i in range(cmd.count):
        fresh = ObjectMeta(first + i, 0, ObjectState.PREPARED, deadline, 0)
        records.append(
            object_record(
                view,
                fresh,
                ObjectState.PREPARED,
                timestamp=deadline,
                size=0,
                legacy={"prepared_time_in_ms": cmd.now_ms, "expired_time_in_ms": deadline},
            )
        )
    return c.Decision(records=tuple(records), reply=c.Reply(first_object_id=first))


def commit(
    view: StreamsView, object_id: int, size: int, ts: int, attrs: int, pending: dict[int, ObjectMeta]
) -> tuple[int, list]:
    """4.8: (error, records) of committing a PREPARED object. -1 commits nothing; an object
    already COMMITTED is REDUNDANT_OPERATION (the caller answers NONE with no records).
    ``pending`` holds objects this same decision changed already."""
    if object_id == NOOP_OBJECT_ID:
        return c.NONE, []
    obj = pending.get(object_id) or view.objects.get(object_id)
    if obj is None:
        return c.OBJECT_NOT_EXIST, []
    if obj.state == ObjectState.COMMITTED:
        return c.REDUNDANT_OPERATION, []
    if obj.state != ObjectState.PREPARED:
        return c.OBJECT_NOT_EXIST, []
    committed = ObjectMeta(object_id, size, ObjectState.COMMITTED, ts, attrs)
    pending[object_id] = committed
    # Before V2 the commit time written is the object's stored timestamp: its prepare deadline.
    legacy_ts = obj.timestamp
    rec = object_record(
        view,
        obj,
        ObjectState.COMMITTED,
        timestamp=ts if view.version >= V2 else legacy_ts,
        size=size,
        attrs=attrs,
        legacy={"committed_time_in_ms": legacy_ts},
    )
    return c.NONE, [rec]


def mark_destroy(
    view: StreamsView,
    ids: list[int] | tuple[int, ...],
    ops: list[int] | tuple[int, ...],
    now_ms: int,
    pending: dict[int, ObjectMeta],
) -> list | None:
    """4.9: the records marking ``ids`` destroyed, or None when any is missing or already
    MARK_DESTROYED (all or nothing). KEEP_DATA drops the metadata at once."""
    objs = []
    for i in ids:
        obj = pending.get(i) or view.objects.get(i)
        if obj is None or obj.state == ObjectState.MARK_DESTROYED:
            return None
        objs.append(obj)
    out: list = []
    for n, obj in enumerate(objs):
        op = ops[n] if n < len(ops) else CompactOperation.DELETE
        if op == CompactOperation.KEEP_DATA:
            out.append(RemoveS3Object(object_id=obj.object_id))
            continue
        attrs = obj.attributes
        if obj.state == ObjectState.PREPARED:
            attrs = attributes(object_type=attrs & 3, bucket=MATCH_ALL_BUCKET, deep_delete=attribute_deep_delete(attrs))
        if op == CompactOperation.DEEP_DELETE:
            attrs |= 1 << 18
        pending[obj.object_id] = ObjectMeta(obj.object_id, obj.size, ObjectState.MARK_DESTROYED, now_ms, attrs)
        out.append(
            object_record(
                view,
                obj,
                ObjectState.MARK_DESTROYED,
                timestamp=now_ms,
                attrs=attrs,
                legacy={"mark_destroyed_time_in_ms": now_ms},
            )
        )
    return out


def check_lifecycle(view: StreamsView, cmd: c.CheckObjectLifecycle) -> c.Decision:
    """4.15: PREPARED objects whose deadline passed are marked destroyed (V2+: timestamp 0, bucket
    MATCH_ALL; before: the deadline as mark-destroy time), oldest ids first, ``limit`` per round;
    nothing while the last storage deletion is in flight (``checkS3ObjectsLifecycle`` returns at
    once while ``lastCleanCf`` is not done: one deletion in flight at a time).

    Neither timestamp says when the object was marked, and AutoMQ keeps a marked object one to
    two retention periods from its marking (its generations of marked ids, on the controller's
    clock), so each record carries the check's time as its own (``ts_ms``): the view's
    ``marked_at`` then holds whether or not a log stamped the record, and ``delete_marked`` never
    deletes it a millisecond after the check."""
    if cmd.deletion_in_flight:
        return c.Decision()
    out: list = []
    for obj in view.prepared():
        if len(out) >= cmd.limit:
            break
        if cmd.now_ms <= obj.timestamp:
            continue
        attrs = attributes(object_type=obj.attributes & 3, bucket=MATCH_ALL_BUCKET)
        out.append(
            object_record(
                view,
                obj,
                ObjectState.MARK_DESTROYED,
                timestamp=0 if view.version >= V2 else obj.timestamp,
                attrs=attrs,
                legacy={"mark_destroyed_time_in_ms": obj.timestamp},
                ts_ms=cmd.now_ms,
            )
        )
    return c.Decision(records=tuple(out))


def delete_marked(view: StreamsView, cmd: c.DeleteMarkedObjects, *, by_timestamp: bool = False) -> c.Decision:
    """4.15: the objects marked destroyed at least ``retention_ms`` ago (``view.marked_at``: AutoMQ
    deletes them after one to two retention periods from when they were marked) are deleted from
    storage. ``by_timestamp``: the faulty check of ``bugs`` ages them by the record's timestamp,
    0 for an expired PREPARED object from V2, so those go at the next check."""
    if cmd.deletion_in_flight:
        return c.Decision()
    objects = view.objects

    def marked(i: int) -> int:
        return objects[i].timestamp if by_timestamp else view.marked_at.get(i, objects[i].timestamp)

    due = sorted(i for i in view.marked_ids if cmd.now_ms - marked(i) >= cmd.retention_ms)
    return c.Decision(records=tuple(RemoveS3Object(object_id=i) for i in due[: cmd.limit]))
