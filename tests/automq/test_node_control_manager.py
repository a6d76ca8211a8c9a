"""AutoMQ's ``NodeControlManagerTest``, case by case, read at AutoMQ/automq f1ce98ec (the nightly
after tag 1.7.3; the class last changed at 4596c269). All 3 methods are here. AutoMQ's test mocks
``NodeRuntimeInfoManager`` (whether a node has opening streams, its runtime state); kraftlake
models the opening streams as real state, so the test opens a stream on the node instead. The
runtime state (fenced, active, in controlled shutdown) is the active controller's heartbeat
manager's, not in the log: ``GetNodes`` takes it with the command, as the mock hands it over.

AutoMQ keeps its node registry in KVRecords (``__automq_node/<id>``), and so does kraftlake: the
registry needs no record type of its own."""

from __future__ import annotations

import msgspec
from test_s3stream_scenarios import Ctl

from kraftlake.records.s3stream import KV, RemoveKV
from kraftlake.replay.audit import Audit
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.cluster import node_metadata


def test_testRegister():
    k = Ctl()
    d = k.ok(c.RegisterNode(node_id=0, node_epoch=1, wal_config="wal1", tags=(("k1", "v1"),)))
    (kv,) = d.records
    assert isinstance(kv, KV) and kv.key_values[0].key == "__automq_node/0"
    assert msgspec.json.decode(kv.key_values[0].value) == {"i": 0, "e": 1, "w": "wal1", "t": {"k1": "v1"}}
    assert k.err(c.RegisterNode(node_id=0, node_epoch=0, wal_config="wal1")) == c.NODE_EPOCH_EXPIRED
    k.ok(c.RegisterNode(node_id=0, node_epoch=2, wal_config="wal2", tags=(("k1", "v2"),)))
    sid = k.create(0)
    k.open(sid, 0, 0)  # the node has an opening stream (AutoMQ's test mocks it)
    nodes = k.ok(c.GetNodes(node_ids=(0, 1), states=((0, "FENCED"),))).reply.nodes
    assert [(n.node_id, n.node_epoch, n.wal_config, n.tags, n.has_opening_streams, n.state) for n in nodes] == [
        (0, 2, "wal2", {"k1": "v2"}, True, "FENCED")
    ]
    # A controller that is not active has no heartbeat manager: every state is UNKNOWN.
    assert [n.state for n in k.ok(c.GetNodes()).reply.nodes] == ["UNKNOWN"]


def test_testUnregister():
    k = Ctl()
    k.ok(c.RegisterNode(node_id=0, node_epoch=0, wal_config="wal1", tags=(("k1", "v1"),)))
    (rm,) = k.ok(c.UnregisterNode(node_id=0)).records
    assert isinstance(rm, RemoveKV) and rm.keys == ("__automq_node/0",)
    assert node_metadata(k.view, 0) is None and k.ok(c.GetNodes()).reply.nodes == ()


def test_testUnregisterNodeWithOpenStreams():
    k = Ctl()
    k.ok(c.RegisterNode(node_id=0, node_epoch=0, wal_config="wal1"))
    k.open(k.create(0), 0, 0)
    assert k.err(c.UnregisterNode(node_id=0)) == c.STREAM_INNER_ERROR
    assert node_metadata(k.view, 0) is not None


def test_a_locked_node_is_not_unregistered():
    """``unregisterNodeRecord`` refuses a node its circuit breaker locked (NodeLockedException)."""
    k = Ctl()
    k.ok(c.RegisterNode(node_id=0, node_epoch=0, tags=(("CIRCUIT_BREAKER", "OPEN"),)))
    assert k.err(c.UnregisterNode(node_id=0)) == c.NODE_LOCKED


def test_the_audit_names_a_registration_that_goes_back_an_epoch():
    """S14: a registration written below the node's epoch (what register refuses)."""

    def reg(offset: int, epoch: int) -> KV:
        doc = msgspec.json.encode({"i": 3, "e": epoch, "w": "", "t": {}})
        return msgspec.convert(
            {"offset": offset, "key_values": [{"key": "__automq_node/3", "value": doc}]}, KV, from_attributes=True
        )

    a = Audit()
    a.feed([reg(0, 5), reg(1, 6), reg(2, 4)])
    found = [(v.invariant, v.entity, v.first_offset) for v in a.report().violations]
    assert found == [("S14", "node/3", 2)]
