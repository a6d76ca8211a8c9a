"""AutoMQ's ``StreamControlManagerTest``: the cases issue 35 added operations for (the rest are
ported as scenarios in ``tests/test_s3stream_scenarios.py``, which names each Java test). AutoMQ's
test mocks the object control manager and the object readers; kraftlake models objects and their
index blocks as real state, so the objects are prepared and committed for real and the index
blocks are the ranges the commit wrote."""

from __future__ import annotations

from test_s3stream_scenarios import Ctl

from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import ObjectState, RemoveStreamSetObject, S3Object, StreamRanges
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.reducer import apply
from kraftlake.statemachine.s3stream.view import V6

NOW = 1_000_000


def test_testDescribeStreams():
    k = Ctl()
    assert k.ok(c.DescribeStreams(stream_id=0)).reply.described == ()
    sid = k.create(0)
    (info,) = k.ok(c.DescribeStreams(stream_id=sid)).reply.described
    assert (info.stream_id, info.node_id, info.state) == (sid, -1, "CLOSED")
    assert k.ok(c.DescribeStreams(node_id=2)).reply.described == ()
    other = k.create(1)
    k.open(other, 1, 0)
    (info,) = k.ok(c.DescribeStreams(node_id=1)).reply.described
    assert (info.stream_id, info.node_id, info.state) == (other, 1, "OPENED")
    # Topic partitions: cannot apply (the topic names are the KRaft family's view), so neither id
    # is INVALID_REQUEST here.
    assert k.err(c.DescribeStreams()) == c.INVALID_REQUEST


def test_testCleanupScaleInNodes():
    k = Ctl(version=V6, objects=4)
    s0, s1 = k.create(0), k.create(0)
    k.open(s0, 0, 0)
    k.open(s1, 0, 0)
    # The index blocks the object readers return (mocked in AutoMQ's test), as the uploads wrote them.
    for obj, node, ranges in ((1, 0, [(s0, 0, 100), (s1, 0, 100)]), (2, 1, [(s0, 100, 200)]), (3, 1, [(s0, 200, 300)])):
        apply(k.view, ObjectWritten(node_id=node, object_id=obj, ranges=StreamRanges.of(ranges)))
    k.sso(1, 0, ranges=((s0, 0, 100), (s1, 0, 100)))
    k.close(s0, 0, 0)
    k.open(s0, 1, 1)
    for obj, (a, b) in ((2, (100, 200)), (3, (200, 300))):
        k.do(
            c.CommitStreamSetObject(
                node_id=1,
                node_epoch=0,
                object_id=obj,
                order_id=obj,
                object_size=100,
                ranges=(c.CommitRange(stream_id=s0, stream_epoch=1, start_offset=a, end_offset=b),),
                now_ms=NOW,
            )
        )
    k.trim(s0, 1, 1, 200)
    d = k.ok(c.CleanupScaleInNodes(active_nodes=(0, 2), now_ms=NOW))
    # Node 1 is gone: object 2 lies below stream 0's start, object 3 does not; node 0 is active.
    assert [type(r) for r in d.records] == [RemoveStreamSetObject, S3Object]
    assert (d.records[0].node_id, d.records[0].object_id) == (1, 2)
    assert d.records[1].object_state == ObjectState.MARK_DESTROYED
    assert sorted(k.view.nodes[1].stream_set_objects) == [3] and sorted(k.view.nodes[0].stream_set_objects) == [1]
    assert k.ok(c.CleanupScaleInNodes(active_nodes=(0, 2), now_ms=NOW)).records == ()


def test_a_node_whose_index_blocks_are_unknown_is_left_alone():
    """AutoMQ's clean-up stops at an object it has no reader for; kraftlake at an unknown index block."""
    k = Ctl(version=V6, objects=2)
    sid = k.create(0)
    k.open(sid, 0, 0)
    k.sso(1, 0, ranges=((sid, 0, 100),))
    k.trim(sid, 0, 0, 100)
    assert k.ok(c.CleanupScaleInNodes(active_nodes=(), now_ms=NOW)).records == ()
