"""Node registration and the controller's cluster-wide housekeeping, as AutoMQ has them: a node's
metadata written as the KV ``__automq_node/<id>`` (``NodeControlManager.register``, JSON with keys
i, e, w, t as ``NodeMetadataCodec`` writes it) with its epoch rule, unregistration and its
refusals, the registered nodes (``getMetadata``; the runtime state of a node, fenced or active,
lives in ``NodeRuntimeInfoManager`` outside the log and comes with the command), ``describeStreams``,
and the clean-up of nodes scaled in (``cleanupScaleInNodes``)."""

from __future__ import annotations

from typing import Any

import msgspec

from kraftlake.records.s3stream import KV, KeyValue, RemoveKV, RemoveStreamSetObject, StreamState, attribute_bucket

from . import commands as c
from .nodes import NODE_KEY_PREFIX, is_locked
from .objects import mark_destroy
from .view import ObjectMeta, StreamsView

LOCAL_FILE_BUCKET = -2
"""``LocalFileObjectStorage.BUCKET_ID``: data the node wrote to its local disk while the main
storage's circuit breaker was open; its node is not cleaned up."""


def node_metadata(view: StreamsView, node_id: int) -> dict[str, Any] | None:
    """The registration of ``node_id`` (decoded JSON), or None when unregistered or unreadable."""
    raw = view.kv.get(None, {}).get(f"{NODE_KEY_PREFIX}{node_id}")
    if raw is None:
        return None
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def register(view: StreamsView, cmd: c.RegisterNode) -> c.Decision:
    old = node_metadata(view, cmd.node_id)
    if old is not None and int(old.get("e", -1)) > cmd.node_epoch:
        return c.fail(c.NODE_EPOCH_EXPIRED, f"node {cmd.node_id}: epoch {cmd.node_epoch} is below {old.get('e')}")
    doc = {"i": cmd.node_id, "e": cmd.node_epoch, "w": cmd.wal_config, "t": dict(cmd.tags)}
    kv = KeyValue(key=f"{NODE_KEY_PREFIX}{cmd.node_id}", value=msgspec.json.encode(doc), namespace=None)
    return c.Decision(records=(KV(version=0, key_values=(kv,)),))


def unregister(view: StreamsView, cmd: c.UnregisterNode) -> c.Decision:
    # AutoMQ throws (UnregisterNodeWithOpenStreamsException, NodeLockedException); kraftlake answers
    # with STREAM_INNER_ERROR and NODE_LOCKED.
    if view.opening_streams(cmd.node_id):
        return c.fail(c.STREAM_INNER_ERROR, f"Node {cmd.node_id} has opening streams")
    if is_locked(view, cmd.node_id):
        return c.fail(c.NODE_LOCKED, f"Node {cmd.node_id} is locked")
    return c.Decision(records=(RemoveKV(version=0, keys=(f"{NODE_KEY_PREFIX}{cmd.node_id}",)),))


def get_nodes(view: StreamsView, cmd: c.GetNodes) -> c.Decision:
    ids = cmd.node_ids or tuple(
        sorted(int(k[len(NODE_KEY_PREFIX) :]) for k in view.kv.get(None, {}) if k.startswith(NODE_KEY_PREFIX))
    )
    states = dict(cmd.states)
    out = []
    for i in ids:
        doc = node_metadata(view, i)
        if doc is None:
            continue  # AutoMQ logs "cannot find NodeMetadata" and leaves it out
        out.append(
            c.NodeInfo(
                node_id=i,
                node_epoch=int(doc.get("e", 0)),
                wal_config=str(doc.get("w") or ""),
                tags=dict(doc.get("t") or {}),
                has_opening_streams=bool(view.opening_streams(i)),
                state=states.get(i, "UNKNOWN"),
            )
        )
    return c.Decision(reply=c.Reply(nodes=tuple(out)))


def describe_streams(view: StreamsView, cmd: c.DescribeStreams) -> c.Decision:
    if cmd.stream_id >= 0:
        s = view.streams.get(cmd.stream_id)
        found = [] if s is None else [s]
    elif cmd.node_id >= 0:
        found = [s for _, s in sorted(view.streams.items()) if s.range_index >= 0 and s.owner() == cmd.node_id]
    else:
        return c.fail(c.INVALID_REQUEST, "no stream id, node id or topic partition")
    return c.Decision(
        reply=c.Reply(
            described=tuple(
                c.StreamInfo(
                    stream_id=s.stream_id,
                    node_id=-1 if (owner := s.owner()) is None else owner,
                    epoch=s.epoch,
                    start_offset=s.start_offset,
                    end_offset=s.end_offset,
                    state=StreamState(s.state).name,
                    tags=dict(s.tags),
                )
                for s in found
            )
        )
    )


def cleanup_scale_in_nodes(view: StreamsView, cmd: c.CleanupScaleInNodes) -> c.Decision:
    records: list = []
    pending: dict[int, ObjectMeta] = {}
    active = set(cmd.active_nodes)
    for node_id, node in sorted(view.nodes.items()):
        if node_id in active or not node.stream_set_objects:
            continue
        ssos = [o for _, o in sorted(node.stream_set_objects.items())]
        if any(
            (obj := view.objects.get(o.object_id)) is not None and attribute_bucket(obj.attributes) == LOCAL_FILE_BUCKET
            for o in ssos
        ):
            continue
        for sso in ssos:
            ranges = view.sso_ranges(node_id, sso)
            if not ranges:
                break  # its index block is unknown: AutoMQ's reader is missing and the node's clean-up stops
            alive = any(
                (s := view.streams.get(r.stream_id)) is not None and s.start_offset < r.end_offset for r in ranges
            )
            if alive:
                continue
            marks = mark_destroy(view, [sso.object_id], [], cmd.now_ms, pending)
            if marks is None:
                continue  # its object is gone or marked already: markDestroyObjects fails, nothing is written
            records += [RemoveStreamSetObject(node_id=node_id, object_id=sso.object_id), *marks]
    return c.Decision(records=tuple(records))
