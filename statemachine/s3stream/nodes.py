"""Nodes and KV: WAL (re)registration with the opening streams and V6 historical duties, the
failover barrier (AutoMQ's ``StreamControlManager.getOpeningStreams``), the circuit-breaker lock
(the ``CIRCUIT_BREAKER`` tag ``NodeControlManager`` reads from a node's registration), and the KV
store (``KVControlManager.putKV``, ``deleteKV``)."""

from __future__ import annotations

import msgspec

from kraftlake.records.s3stream import KV, KeyValue, NodeWALMetadata, RemoveKV

from . import commands as c
from .view import V5, V6, StreamsView

NODE_KEY_PREFIX = "__automq_node/"
CIRCUIT_BREAKER = "CIRCUIT_BREAKER"


def registration_epoch(e: KeyValue) -> tuple[int, int] | None:
    """(node id, node epoch) of a KV entry that registers a node: key ``__automq_node/<id>`` in
    no namespace, its JSON value with the epoch at ``e`` (as ``NodeMetadataCodec`` writes it).
    None for any other entry, and for one AutoMQ could not read either (it logs and skips it)."""
    if e.namespace is not None or not e.key.startswith(NODE_KEY_PREFIX):
        return None
    try:
        return int(e.key[len(NODE_KEY_PREFIX) :]), int(msgspec.json.decode(e.value).get("e"))
    except (ValueError, TypeError, AttributeError, msgspec.DecodeError):
        return None


def is_locked(view: StreamsView, node_id: int) -> bool:
    """A node's registration (KV ``__automq_node/<id>``, JSON) has tag CIRCUIT_BREAKER != CLOSED."""
    raw = view.kv.get(None, {}).get(f"{NODE_KEY_PREFIX}{node_id}")
    if raw is None:
        return False
    try:
        tags = msgspec.json.decode(raw).get("t") or {}
    except (msgspec.DecodeError, AttributeError):
        return False
    state = tags.get(CIRCUIT_BREAKER)
    return state is not None and state != "CLOSED"


def get_opening_streams(view: StreamsView, cmd: c.GetOpeningStreams) -> c.Decision:
    """4.14: register (or re-register) the node's WAL and list what it must recover: the streams
    it owns, then (V6) each active historical duty, which must match exactly one sealed range."""
    n = view.nodes.get(cmd.node_id)
    if n is not None and cmd.node_epoch < n.node_epoch:
        return c.fail(c.NODE_EPOCH_EXPIRED)
    streams: list[c.OpeningStream] = []
    for sid in view.opening_streams(cmd.node_id):
        s = view.streams[sid]
        cur = s.current_range()
        assert cur is not None
        streams.append(
            c.OpeningStream(
                stream_id=sid,
                epoch=cur.epoch,
                start_offset=s.start_offset,
                end_offset=max(s.end_offset, s.start_offset),
            )
        )
    if n is not None and view.version >= V6:
        listed = {o.stream_id for o in streams}
        for sid in sorted(n.uncommitted):
            if view.active_duty(cmd.node_id, sid) is None:
                continue
            e = n.uncommitted[sid]
            s = view.streams[sid]
            at = max(s.start_offset, e.start_offset)
            sealed = [
                r
                for r in s.ranges.values()
                if r.node_id == cmd.node_id and r.start_offset <= at < r.end_offset and r.end_offset == e.end_offset
            ]
            if len(sealed) != 1 or sid in listed:
                return c.fail(
                    c.STREAM_INNER_ERROR,
                    f"stream {sid}: duty [{e.start_offset}, {e.end_offset}) matches {len(sealed)} sealed range(s)",
                )
            streams.append(
                c.OpeningStream(stream_id=sid, epoch=sealed[0].epoch, start_offset=s.start_offset, end_offset=at)
            )
    record = NodeWALMetadata(node_id=cmd.node_id, node_epoch=cmd.node_epoch, failover_mode=cmd.failover_mode)
    return c.Decision(records=(record,), reply=c.Reply(streams=tuple(streams)))


def put_kv(view: StreamsView, cmd: c.PutKV) -> c.Decision:
    """4.17: namespaces count from V5; an existing key needs ``overwrite``."""
    ns = cmd.namespace if view.version >= V5 else None
    old = view.kv.get(ns, {}).get(cmd.key)
    if old is not None and not cmd.overwrite:
        return c.fail(c.KEY_EXIST, value=old)
    record = KV(
        version=1 if view.version >= V5 else 0, key_values=(KeyValue(key=cmd.key, value=cmd.value, namespace=ns),)
    )
    return c.Decision(records=(record,), reply=c.Reply(value=cmd.value))


def delete_kv(view: StreamsView, cmd: c.DeleteKV) -> c.Decision:
    ns = cmd.namespace if view.version >= V5 else None
    old = view.kv.get(ns, {}).get(cmd.key)
    if old is None:
        return c.fail(c.KEY_NOT_EXIST)
    if view.version >= V5:
        record = RemoveKV(keys=(cmd.key,), namespaces=None if ns is None else (ns,))
    else:
        record = RemoveKV(version=0, keys=(cmd.key,))
    return c.Decision(records=(record,), reply=c.Reply(value=old))
