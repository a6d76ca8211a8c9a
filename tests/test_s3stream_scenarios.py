"""AutoMQ's controller unit tests as scenarios (StreamControlManagerTest, S3ObjectControlManagerTest,
StreamRuntimeMetadataTest, KVControlManagerTest): exact errors, records and states from the S3Stream
deciders and reducer. A comment names the AutoMQ test a scenario follows."""

from __future__ import annotations

from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.s3stream import (
    KV,
    AssignedS3ObjectId,
    AssignedStreamId,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveKV,
    RemoveRange,
    RemoveS3Stream,
    RemoveS3StreamObject,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamState,
    attribute_deep_delete,
)
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.decider import decide
from kraftlake.statemachine.s3stream.reducer import apply
from kraftlake.statemachine.s3stream.streams import removable_ranges
from kraftlake.statemachine.s3stream.view import V0, V6, RangeMeta, Stream, StreamObjectMeta, StreamsView

NOW = 1_000_000


class Ctl:
    """A controller: decide, then (no error) replay the records, like AutoMQ's ControllerResult."""

    def __init__(self, version: int = V6, nodes=(0, 1, 2), objects: int = 0) -> None:
        self.view = StreamsView()
        apply(self.view, FeatureLevel(name="automq.version", feature_level=version))
        for n in nodes:
            self.ok(c.GetOpeningStreams(node_id=n, node_epoch=-1))
        if objects:
            self.ok(c.PrepareObjects(node_id=0, count=objects, ttl_ms=60_000, now_ms=NOW))

    def do(self, cmd) -> c.Decision:
        d = decide(self.view, cmd)
        if d.error_code == c.NONE:
            for r in d.records:
                apply(self.view, r)
        else:
            assert d.records == ()
        return d

    def ok(self, cmd) -> c.Decision:
        d = self.do(cmd)
        assert d.error_code == c.NONE, (cmd, d.reply)
        return d

    def err(self, cmd) -> int:
        return self.do(cmd).error_code

    def stream(self, sid: int) -> Stream:
        return self.view.streams[sid]

    # shorthands (node epoch 0 passes: nodes registered at -1)
    def create(self, node=0):
        return self.ok(c.CreateStream(node_id=node, node_epoch=0)).reply.stream_id

    def open(self, sid, node, epoch, node_epoch=0):
        return self.do(c.OpenStream(node_id=node, node_epoch=node_epoch, stream_id=sid, stream_epoch=epoch))

    def close(self, sid, node, epoch, end=-1):
        return self.do(c.CloseStream(node_id=node, node_epoch=0, stream_id=sid, stream_epoch=epoch, end_offset=end))

    def trim(self, sid, node, epoch, start):
        return self.do(
            c.TrimStream(node_id=node, node_epoch=0, stream_id=sid, stream_epoch=epoch, new_start_offset=start)
        )

    def sso(self, obj, node, ranges=(), sos=(), compacted=(), order=None, failover=False, epoch=0):
        return self.do(
            c.CommitStreamSetObject(
                node_id=node,
                node_epoch=epoch,
                object_id=obj,
                order_id=obj if order is None else order,
                object_size=100,
                ranges=tuple(
                    c.CommitRange(stream_id=s, stream_epoch=0, start_offset=a, end_offset=b) for s, a, b in ranges
                ),
                stream_objects=tuple(
                    c.CommitStreamObjectPart(object_id=o, object_size=10, stream_id=s, start_offset=a, end_offset=b)
                    for o, s, a, b in sos
                ),
                compacted_object_ids=tuple(compacted),
                failover_mode=failover,
                now_ms=NOW,
            )
        )


def test_basic_create_open_close():  # testBasicCreateStream, testBasicOpenCloseStream
    k = Ctl()
    d = k.ok(c.CreateStream(node_id=0, node_epoch=0))
    assert d.reply.stream_id == 0
    assert d.records == (
        AssignedStreamId(assigned_stream_id=0),
        S3Stream(stream_id=0, epoch=-1, range_index=-1, start_offset=0, stream_state=StreamState.CLOSED),
    )
    assert k.create() == 1 and k.view.next_stream_id == 2
    d = k.open(0, 0, 0)
    assert (d.error_code, d.reply.start_offset, d.reply.next_offset) == (c.NONE, 0, 0)
    assert d.records == (
        S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=StreamState.OPENED),
        Range(stream_id=0, epoch=0, range_index=0, start_offset=0, end_offset=0, node_id=0),
    )
    assert k.open(1, 0, 0).error_code == c.NONE
    assert k.open(0, 1, 0).error_code == c.STREAM_FENCED
    d = k.open(1, 0, 0)
    assert (d.error_code, d.records) == (c.NONE, ())
    assert k.open(1, 0, 1).error_code == c.STREAM_NOT_CLOSED
    assert k.open(1, 1, 0).error_code == c.STREAM_FENCED
    assert k.open(1, 1, 1).error_code == c.STREAM_NOT_CLOSED
    assert k.close(1, 1, 0).error_code == c.STREAM_FENCED
    assert k.close(1, 0, 1).error_code == c.STREAM_INNER_ERROR
    d = k.close(1, 0, 0)
    assert d.error_code == c.NONE and len(d.records) == 1 and d.records[0].stream_state == StreamState.CLOSED
    d = k.close(1, 0, 0)
    assert (d.error_code, d.records) == (c.NONE, ())
    assert k.open(1, 1, 1).error_code == c.NONE
    s = k.stream(1)
    assert s.epoch == 1 and s.owner() == 1 and s.current_range().epoch == 1


def test_commit_stream_set_object_basic():  # testCommitStreamSetObjectBasic
    k = Ctl(objects=1)
    k.create()
    k.open(0, 0, 0)
    assert k.sso(0, 0, [(0, 0, 100)]).error_code == c.NONE
    assert k.stream(0).end_offset == 100 and list(k.view.nodes[0].stream_set_objects) == [0]
    assert k.sso(1, 0, [(0, 100, 200)]).error_code == c.OBJECT_NOT_EXIST
    k.close(0, 0, 0)
    d = k.open(0, 1, 1)
    assert (d.reply.start_offset, d.reply.next_offset) == (0, 100)
    k.ok(c.PrepareObjects(node_id=1, count=6, ttl_ms=60_000, now_ms=NOW))
    assert k.sso(6, 1, [(0, 100, 300)]).error_code == c.NONE
    s = k.stream(0)
    assert [(r.range_index, r.start_offset, r.end_offset, r.node_id) for r in s.ranges.values()] == [
        (0, 0, 100, 0),
        (1, 100, 100, 1),
    ]
    assert s.end_offset == 300 and list(k.view.nodes[1].stream_set_objects) == [6]
    assert k.ok(c.GetOpeningStreams(node_id=1, node_epoch=0)).reply.streams == (
        c.OpeningStream(stream_id=0, epoch=1, start_offset=0, end_offset=300),
    )
    assert k.ok(c.GetOpeningStreams(node_id=0, node_epoch=0)).reply.streams == ()


def test_commit_wal_compacted():  # testCommitWalCompacted
    k = Ctl(objects=3)
    k.create(), k.create()
    k.open(0, 0, 0), k.open(1, 0, 0)
    assert k.sso(0, 0, [(0, 0, 100), (1, 0, 200)]).error_code == c.NONE
    assert k.sso(1, 0, [(0, 100, 200), (1, 200, 300)]).error_code == c.NONE
    assert (k.stream(0).end_offset, k.stream(1).end_offset) == (200, 300)
    data_time = k.view.nodes[0].stream_set_objects[0].data_time_in_ms
    assert (
        k.sso(2, 0, [(0, 0, 200), (1, 0, 300)], compacted=[0, 1, 10], order=0).error_code
        == c.COMPACTED_OBJECTS_NOT_FOUND
    )
    d = k.sso(2, 0, [(0, 0, 200), (1, 0, 300)], compacted=[0, 1], order=0)
    assert d.error_code == c.NONE
    assert [type(r).__name__ for r in d.records] == [
        "S3Object",
        "S3Object",
        "S3Object",
        "S3StreamSetObject",
        "RemoveStreamSetObject",
        "RemoveStreamSetObject",
    ]
    assert [r.object_state for r in d.records[:3]] == [
        ObjectState.COMMITTED,
        ObjectState.MARK_DESTROYED,
        ObjectState.MARK_DESTROYED,
    ]
    assert (k.stream(0).end_offset, k.stream(1).end_offset) == (200, 300)
    ssos = k.view.nodes[0].stream_set_objects
    assert list(ssos) == [2] and ssos[2].order_id == 0 and ssos[2].data_time_in_ms == data_time


def test_compaction_with_deleted_stream_record_order():
    # testCommitStreamSetObject_compactWithDeletedStream: COMMITTED(2), MD(0), MD(1), SSO(2), MD(SO of
    # the deleted stream), RemoveSSO(0), RemoveSSO(1).
    k = Ctl(objects=4)
    k.create(), k.create()
    k.open(0, 0, 0), k.open(1, 0, 0)
    k.sso(0, 0, [(0, 0, 10), (1, 0, 10)])
    k.sso(1, 0, [(0, 10, 20), (1, 10, 20)])
    k.close(1, 0, 0)
    k.ok(c.DeleteStream(stream_id=1))
    d = k.sso(2, 0, [(0, 0, 20)], sos=[(3, 1, 0, 20)], compacted=[0, 1])
    assert d.error_code == c.NONE
    assert [(type(r).__name__, getattr(r, "object_id", None), getattr(r, "object_state", None)) for r in d.records] == [
        ("S3Object", 2, ObjectState.COMMITTED),
        ("S3Object", 0, ObjectState.MARK_DESTROYED),
        ("S3Object", 1, ObjectState.MARK_DESTROYED),
        ("S3StreamSetObject", 2, None),
        ("S3Object", 3, ObjectState.MARK_DESTROYED),
        ("RemoveStreamSetObject", 0, None),
        ("RemoveStreamSetObject", 1, None),
    ]
    assert attribute_deep_delete(d.records[4].attributes)


# testCommitWalWithStreamObject and testCommitStreamObject
def test_commit_with_stream_objects_and_stream_object_compaction():
    k = Ctl(objects=6)
    k.create(), k.create()
    k.open(0, 0, 0), k.open(1, 0, 0)
    assert k.sso(0, 0, [(0, 0, 100)], sos=[(1, 1, 0, 200)]).error_code == c.NONE
    assert (k.stream(0).end_offset, k.stream(1).end_offset, list(k.stream(1).objects)) == (100, 200, [1])
    assert k.sso(2, 0, [(0, 99, 200)], sos=[(3, 1, 200, 400)]).error_code == c.OFFSET_NOT_MATCHED
    assert k.sso(2, 0, [(0, 100, 200)], sos=[(3, 1, 200, 400)], order=1).error_code == c.NONE
    d = k.do(
        c.CommitStreamObject(
            node_id=0,
            node_epoch=0,
            object_id=4,
            object_size=5,
            stream_id=1,
            start_offset=0,
            end_offset=400,
            source_object_ids=(1, 3),
            now_ms=NOW,
        )
    )
    assert d.error_code == c.NONE
    assert [type(r) for r in d.records] == [
        S3Object,
        S3Object,
        S3Object,
        S3StreamObject,
        RemoveS3StreamObject,
        RemoveS3StreamObject,
    ]
    assert {o: (m.start_offset, m.end_offset) for o, m in k.stream(1).objects.items()} == {4: (0, 400)}
    assert [(s.stream_id, s.end_offset) for s in k.ok(c.GetOpeningStreams(node_id=0, node_epoch=0)).reply.streams] == [
        (0, 200),
        (1, 400),
    ]
    assert (
        k.do(
            c.CommitStreamObject(
                node_id=0,
                node_epoch=0,
                object_id=5,
                stream_id=1,
                start_offset=400,
                end_offset=1000,
                source_object_ids=(10,),
                now_ms=NOW,
            )
        ).error_code
        == c.COMPACTED_OBJECTS_NOT_FOUND
    )


def test_commit_stream_object_for_fenced_stream():  # testCommitStreamObjectForFencedStream
    k = Ctl(objects=2)
    k.create()
    k.open(0, 0, 1)
    assert (
        k.do(
            c.CommitStreamObject(
                node_id=0,
                node_epoch=0,
                object_id=0,
                stream_id=0,
                start_offset=0,
                end_offset=1,
                stream_epoch=0,
                now_ms=NOW,
            )
        ).error_code
        == c.STREAM_FENCED
    )


def _mock_data0() -> Ctl:
    k = Ctl(objects=5)
    k.create(), k.create()
    k.open(0, 0, 0), k.open(1, 0, 0)
    assert k.sso(0, 0, [(0, 0, 10)]).error_code == c.NONE
    assert k.sso(1, 0, [(0, 10, 20), (1, 0, 10)]).error_code == c.NONE
    assert k.sso(-1, 0, sos=[(2, 0, 20, 40)]).error_code == c.NONE
    k.close(0, 0, 0)
    assert k.open(0, 1, 1).error_code == c.NONE
    assert k.sso(3, 1, [(0, 40, 70)]).error_code == c.NONE
    return k


def test_trim():  # testTrim
    k = _mock_data0()
    s = k.stream(0)
    assert [(r.range_index, r.start_offset, r.end_offset) for r in s.ranges.values()] == [(0, 0, 40), (1, 40, 40)]
    d = k.trim(0, 1, 1, 60)
    assert d.error_code == c.NONE and RemoveRange(stream_id=0, range_index=0) in d.records
    assert s.start_offset == 60
    assert [(r.range_index, r.start_offset, r.end_offset, r.node_id) for r in s.ranges.values()] == [(1, 60, 70, 1)]
    assert len(s.objects) == 1
    assert k.trim(0, 1, 1, 100).error_code == c.NONE
    assert (s.start_offset, s.end_offset, (s.ranges[1].start_offset, s.ranges[1].end_offset)) == (100, 100, (100, 100))
    assert k.sso(4, 1, [(0, 70, 100)]).error_code == c.NONE
    assert (s.start_offset, s.end_offset) == (100, 100)


def test_delete():  # testDelete
    k = _mock_data0()
    assert k.do(c.DeleteStream(stream_id=0)).error_code == c.STREAM_NOT_CLOSED
    k.close(0, 1, 1)
    d = k.ok(c.DeleteStream(stream_id=0, now_ms=NOW))
    assert d.records[0] == RemoveS3Stream(stream_id=0)
    assert [(r.object_id, r.object_state) for r in d.records[1:]] == [(2, ObjectState.MARK_DESTROYED)]
    assert 0 not in k.view.streams and len(k.view.nodes[0].stream_set_objects) == 2
    d = k.ok(c.DeleteStream(stream_id=0))
    assert d.records == ()


# testCurrentOwnerCommitClassificationAfterTrim, one commit after another
def test_current_owner_commit_classification_after_trim():
    k = Ctl(objects=6)
    k.create()
    k.open(0, 0, 0)
    k.trim(0, 0, 0, 100)
    assert k.stream(0).end_offset == 100
    table = [
        ((0, 90), c.NONE, 100),
        ((90, 110), c.NONE, 110),
        ((95, 120), c.OFFSET_NOT_MATCHED, 110),
        ((120, 130), c.OFFSET_NOT_MATCHED, 110),
        ((110, 120), c.NONE, 120),
    ]
    for i, (rng, want, want_end) in enumerate(table):
        assert k.sso(i, 0, [(0, *rng)]).error_code == want, rng
        assert k.stream(0).end_offset == want_end, rng


def test_trim_beyond_commit():  # testTrimBeyondCommit
    k = Ctl(objects=1)
    k.create()
    k.open(0, 0, 0)
    k.trim(0, 0, 0, 100)
    assert k.sso(0, 0, [(0, 0, 10)]).error_code == c.NONE and k.stream(0).end_offset == 100


def _fast_close(k: Ctl, end: int) -> c.Decision:
    k.create()
    k.open(0, 0, 0)
    return k.close(0, 0, 0, end)


def test_v6_fast_close_records_node_wal_responsibility():  # testV6FastCloseRecordsNodeWALResponsibility
    k = Ctl()
    k.create()
    k.open(0, 0, 0)
    apply(k.view, S3StreamEndOffsets(end_offsets=(dict_end(0, 10),)))
    assert k.close(0, 0, 0, 9).error_code == c.OFFSET_NOT_MATCHED
    d = decide(k.view, c.CloseStream(node_id=0, node_epoch=0, stream_id=0, stream_epoch=0, end_offset=10))
    assert (
        d.error_code == c.NONE and [type(r) for r in d.records] == [S3Stream, Range] and d.records[1].end_offset == 10
    )
    d = k.close(0, 0, 0, 20)
    assert [type(r) for r in d.records] == [S3Stream, Range, NodeWALUncommittedOffsets]
    assert d.records[2].entries[0].start_offset == 10 and d.records[2].entries[0].end_offset == 20
    s = k.stream(0)
    assert (s.end_offset, s.ranges[0].end_offset) == (20, 20)
    assert k.view.nodes[0].uncommitted[0].start_offset == 10


def dict_end(sid, end):
    from kraftlake.records.s3stream import StreamEndOffset

    return StreamEndOffset(stream_id=sid, end_offset=end)


# testHistoricalAndCurrentOwnerCommitsAreRoutedIndependently, with the close retries of
# testV6FastCloseRetryIsIdempotentAndFencedAfterReopen and the open refused by
# testOpenRejectsActiveHistoricalEntryForTargetNode
def test_historical_and_current_owner_commits_are_routed_independently():
    k = Ctl(objects=6)
    assert _fast_close(k, 100).error_code == c.NONE
    assert k.close(0, 0, 0, 100).records == ()  # the same retry
    assert k.close(0, 0, 0, 101).error_code == c.OFFSET_NOT_MATCHED
    assert k.open(0, 0, 0).error_code == c.STREAM_NOT_CLOSED  # its historical duty is active
    assert k.open(0, 1, 1).error_code == c.NONE
    s = k.stream(0)
    assert (s.ranges[1].start_offset, s.ranges[1].end_offset) == (100, 100)
    assert k.close(0, 0, 0, 100).error_code == c.STREAM_FENCED
    assert k.sso(0, 0, [(0, 0, 40)]).error_code == c.NONE
    assert s.end_offset == 100 and k.view.nodes[0].uncommitted[0].start_offset == 40
    assert k.sso(1, 1, [(0, 100, 120)]).error_code == c.NONE
    assert s.end_offset == 120 and k.view.nodes[0].uncommitted[0].start_offset == 40
    assert k.sso(2, 0, [(0, 40, 101)]).error_code == c.OFFSET_NOT_MATCHED
    assert k.sso(2, 0, [(0, 40, 100)]).error_code == c.NONE
    assert k.view.nodes[0].uncommitted == {} and s.end_offset == 120
    assert k.close(0, 1, 1).error_code == c.NONE
    assert k.open(0, 0, 2).error_code == c.NONE  # the duty is done: N0 may own it again


def test_fast_close_needs_v6():
    k = Ctl(version=V0 + 4)  # V4
    k.create()
    k.open(0, 0, 0)
    assert k.close(0, 0, 0, 10).error_code == c.UNSUPPORTED_VERSION


def test_get_opening_streams_registration():  # testGetOpeningStreams
    k = Ctl(nodes=())
    assert k.err(c.CreateStream(node_id=0, node_epoch=0)) == c.NODE_EPOCH_NOT_EXIST
    d = k.ok(c.GetOpeningStreams(node_id=0, node_epoch=1))
    assert d.reply.streams == () and d.records == (NodeWALMetadata(node_id=0, node_epoch=1),)
    assert k.err(c.GetOpeningStreams(node_id=0, node_epoch=0)) == c.NODE_EPOCH_EXPIRED
    k.ok(c.GetOpeningStreams(node_id=0, node_epoch=2))
    assert k.view.nodes[0].node_epoch == 2
    assert k.err(c.CreateStream(node_id=0, node_epoch=0)) == c.NODE_EPOCH_EXPIRED
    k.ok(c.CreateStream(node_id=0, node_epoch=2))
    k.ok(c.CreateStream(node_id=0, node_epoch=2))
    k.ok(c.GetOpeningStreams(node_id=1, node_epoch=0))
    k.open(0, 0, 0, node_epoch=2), k.open(1, 0, 0, node_epoch=2)

    def opening(n, e):
        return [s.stream_id for s in k.ok(c.GetOpeningStreams(node_id=n, node_epoch=e)).reply.streams]

    assert opening(0, 2) == [0, 1]
    k.do(c.CloseStream(node_id=0, node_epoch=2, stream_id=1, stream_epoch=0))
    assert opening(0, 2) == [0]
    k.open(1, 1, 1)
    assert opening(1, 0) == [1]
    k.close(1, 1, 1)
    k.open(1, 0, 2, node_epoch=2)
    assert opening(0, 2) == [0, 1] and opening(1, 0) == []


def test_failover_barrier_fences_normal_commit():  # testGetOpeningStreamsFailoverBarrierFencesNormalCommit
    k = Ctl(objects=4)
    _fast_close(k, 100)
    k.open(0, 1, 1)
    k.sso(0, 0, [(0, 0, 40)])
    assert k.trim(0, 1, 1, 60).error_code == c.NONE
    e = k.view.nodes[0].uncommitted[0]
    assert (e.start_offset, e.end_offset) == (40, 100)
    d = k.ok(c.GetOpeningStreams(node_id=0, node_epoch=0, failover_mode=True))
    assert len(d.records) == 1 and d.records[0].failover_mode
    assert d.reply.streams == (c.OpeningStream(stream_id=0, epoch=0, start_offset=60, end_offset=60),)
    assert k.sso(1, 0, [(0, 60, 100)]).error_code == c.NODE_FENCED
    assert k.sso(1, 0, [(0, 60, 100)], failover=True).error_code == c.NONE
    assert k.view.active_duty(0, 0) is None


# S3ObjectControlManagerTest.testPrepareObject, testCommitObject and testExpiredCheck
def test_prepare_commit_and_expire_objects():
    k = Ctl()
    d = k.ok(c.PrepareObjects(node_id=0, count=3, ttl_ms=60_000, now_ms=NOW))
    assert d.reply.first_object_id == 0
    assert d.records[0] == AssignedS3ObjectId(assigned_s3_object_id=2)
    assert [(r.object_id, r.object_state, r.timestamp) for r in d.records[1:]] == [
        (i, ObjectState.PREPARED, NOW + 60_000) for i in range(3)
    ]
    assert k.view.next_object_id == 3
    d = k.ok(c.PrepareObjects(node_id=0, count=5, ttl_ms=60_000, now_ms=NOW))
    assert d.reply.first_object_id == 3 and len(d.records) == 6 and k.view.next_object_id == 8
    k.create()
    k.open(0, 0, 0)
    assert k.sso(9, 0, [(0, 0, 1)]).error_code == c.OBJECT_NOT_EXIST
    assert k.sso(0, 0, [(0, 0, 1)]).error_code == c.NONE
    o = k.view.objects[0]
    assert (o.state, o.size, o.timestamp) == (ObjectState.COMMITTED, 100, NOW)
    d = k.sso(0, 0, [(0, 0, 1)])  # a retried commit: idempotent, checked before continuity
    assert (d.error_code, d.records) == (c.NONE, ())
    assert k.ok(c.CheckObjectLifecycle(now_ms=NOW + 60_000)).records == ()
    d = k.ok(c.CheckObjectLifecycle(now_ms=NOW + 60_001, limit=5))
    assert [(r.object_id, r.object_state, r.timestamp) for r in d.records] == [
        (i, ObjectState.MARK_DESTROYED, 0) for i in range(1, 6)
    ]
    d = k.ok(c.CheckObjectLifecycle(now_ms=NOW + 60_001))
    assert [r.object_id for r in d.records] == [6, 7]
    # Marked at NOW + 60_001 (the check's time; their timestamp 0 says nothing): not a millisecond
    # before the retention from then.
    assert k.ok(c.DeleteMarkedObjects(now_ms=NOW + 60_002, retention_ms=1_000)).records == ()
    d = k.ok(c.DeleteMarkedObjects(now_ms=NOW + 61_001, retention_ms=1_000))
    assert [r.object_id for r in d.records] == list(range(1, 8))
    assert sorted(k.view.objects) == [0]


def test_pre_v2_records_use_legacy_fields_and_inline_ranges():
    k = Ctl(version=V0)
    d = k.ok(c.PrepareObjects(node_id=0, count=1, ttl_ms=10, now_ms=NOW))
    assert d.records[1].version == 0 and (d.records[1].prepared_time_in_ms, d.records[1].expired_time_in_ms) == (
        NOW,
        NOW + 10,
    )
    k.create()
    assert k.view.streams[0].tags == {} and d.records[1].timestamp == NOW + 10
    k.open(0, 0, 0)
    d = k.sso(0, 0, [(0, 0, 5)])
    sso = [r for r in d.records if isinstance(r, S3StreamSetObject)][0]
    assert sso.version == 0 and sso.ranges[0].end_offset == 5
    assert not any(isinstance(r, S3StreamEndOffsets) for r in d.records)
    assert k.view.streams[0].end_offset == 5


def test_check_removable_ranges():  # StreamRuntimeMetadataTest.testCheckRemovableRanges
    s = Stream(stream_id=0, ranges={i: RangeMeta(i, i, i * 100, i * 100 + 100, 0) for i in range(4)})
    s.objects = {1: StreamObjectMeta(1, 0, 120), 2: StreamObjectMeta(2, 120, 220)}
    assert [r.range_index for r in removable_ranges(s)] == [0, 1]
    s.objects[3] = StreamObjectMeta(3, 220, 400)
    assert [r.range_index for r in removable_ranges(s)] == [0, 1, 2]


def test_open_removes_ranges_covered_by_stream_objects():
    k = Ctl(objects=3)
    k.create()
    k.open(0, 0, 0)
    k.sso(-1, 0, sos=[(0, 0, 0, 100)])
    k.close(0, 0, 0)
    k.open(0, 1, 1)
    k.sso(-1, 1, sos=[(1, 0, 100, 200)])
    k.close(0, 1, 1)
    d = k.open(0, 0, 2)
    # Evaluated on the state before the open: the then-current range 1 is never removable.
    assert [r for r in d.records if isinstance(r, RemoveRange)] == [RemoveRange(stream_id=0, range_index=0)]
    assert sorted(k.stream(0).ranges) == [1, 2]
    assert (k.stream(0).ranges[1].start_offset, k.stream(0).ranges[1].end_offset) == (100, 200)


def test_kv():  # KVControlManagerTest
    k = Ctl()
    d = k.ok(c.PutKV(key="k1", value=b"v1"))
    assert len(d.records) == 1 and isinstance(d.records[0], KV)
    d = k.do(c.PutKV(key="k1", value=b"v2"))
    assert (d.error_code, d.reply.value) == (c.KEY_EXIST, b"v1")
    assert len(k.ok(c.PutKV(key="k1", value=b"v2", overwrite=True)).records) == 1
    assert k.err(c.DeleteKV(key="nope")) == c.KEY_NOT_EXIST
    d = k.ok(c.DeleteKV(key="k1"))
    assert d.reply.value == b"v2" and d.records == (RemoveKV(keys=("k1",)),)
    k.ok(c.PutKV(key="k", value=b"a", namespace="ns1"))
    k.ok(c.PutKV(key="k", value=b"b", namespace="ns2"))
    assert k.err(c.DeleteKV(key="k")) == c.KEY_NOT_EXIST  # the null namespace does not see them
    assert k.ok(c.DeleteKV(key="k", namespace="ns1")).reply.value == b"a"
    assert k.view.kv == {"ns2": {"k": b"b"}}


def test_node_locked_by_circuit_breaker():
    k = Ctl()
    k.create()
    k.open(0, 0, 0)
    k.close(0, 0, 0)
    k.ok(c.PutKV(key="__automq_node/0", value=b'{"i":0,"e":0,"w":"","t":{"CIRCUIT_BREAKER":"OPEN"}}'))
    assert k.open(0, 1, 1).error_code == c.NODE_LOCKED
    assert k.open(0, 0, 1).error_code == c.NONE
