"""AutoMQ's ``StreamControlManagerTest``, case by case, on kraftlake's real decider and reducer
(``Ctl`` of ``tests/test_s3stream_scenarios.py``, which also holds earlier scenario ports of some
cases). AutoMQ's test mocks the object control manager (``mockSuccessfulObjectCommits``) and the
object readers; kraftlake models objects and their index blocks as real state, so the objects are
prepared and committed for real and the index blocks are the ranges the uploads wrote."""

from __future__ import annotations

import test_s3stream_scenarios as scenarios
from test_s3stream_scenarios import Ctl

from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveStreamSetObject,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamSetObject,
    StreamEndOffset,
    StreamRanges,
    StreamState,
    UncommittedOffset,
)
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.reducer import apply
from kraftlake.statemachine.s3stream.view import V5, V6

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


# -- V6 fast close and historical WAL duties -------------------------------------------------------


def _open0(k: Ctl) -> int:
    sid = k.create(0)
    assert k.open(sid, 0, 0).error_code == c.NONE
    return sid


def test_testV5RejectsFastCloseAndAcceptsLegacyClose():
    k = Ctl(version=V5)
    sid = _open0(k)
    fast = k.close(sid, 0, 0, 10)
    assert fast.error_code == c.UNSUPPORTED_VERSION and fast.records == ()
    legacy = k.close(sid, 0, 0)
    assert legacy.error_code == c.NONE and [type(r) for r in legacy.records] == [S3Stream]


def test_testV6AcceptsFastClose():
    k = Ctl(version=V6)
    sid = _open0(k)
    d = k.close(sid, 0, 0, 10)
    assert d.error_code == c.NONE and len(d.records) == 3


def test_testV6FastCloseAtLogicalEndSealsRangeWithoutEntry():
    k = Ctl()
    sid = _open0(k)
    apply(k.view, S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=sid, end_offset=10),)))
    d = k.close(sid, 0, 0, 10)
    assert d.error_code == c.NONE and len(d.records) == 2
    assert not any(isinstance(r, NodeWALUncommittedOffsets) for r in d.records)
    s = k.stream(sid)
    assert s.state == StreamState.CLOSED and s.end_offset == 10 and s.current_range().end_offset == 10
    assert k.view.nodes[0].uncommitted == {}


def test_testV6FastCloseRetryIsIdempotentAndFencedAfterReopen():
    k = Ctl()
    sid = _open0(k)
    assert k.close(sid, 0, 0, 100).error_code == c.NONE
    retry = k.close(sid, 0, 0, 100)
    assert retry.error_code == c.NONE and retry.records == ()
    conflicting = k.close(sid, 0, 0, 101)
    assert conflicting.error_code == c.OFFSET_NOT_MATCHED and conflicting.records == ()
    assert k.open(sid, 1, 1).error_code == c.NONE
    stale = k.close(sid, 0, 0, 100)
    assert stale.error_code == c.STREAM_FENCED and stale.records == ()


def test_testV6FastCloseRetryDoesNotRecreateAdvancedEntry():
    k = Ctl(objects=2)
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    assert k.sso(1, 0, ranges=((sid, 0, 40),)).error_code == c.NONE
    retry = k.close(sid, 0, 0, 100)
    assert retry.error_code == c.NONE and retry.records == ()
    e = k.view.nodes[0].uncommitted[sid]
    assert (e.start_offset, e.end_offset) == (40, 100)


def test_testOpenRejectsActiveHistoricalEntryForTargetNode():
    k = Ctl()
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    retry_open = k.open(sid, 0, 0)
    assert retry_open.error_code == c.STREAM_NOT_CLOSED and retry_open.records == ()
    assert k.open(sid, 1, 1).error_code == c.NONE
    assert k.close(sid, 1, 1).error_code == c.NONE
    normal_open = k.open(sid, 0, 2)
    assert normal_open.error_code == c.STREAM_NOT_CLOSED and normal_open.records == ()


def test_testOpenPermitsAndRetainsInactiveHistoricalEntry():
    k = Ctl()
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    assert k.open(sid, 1, 1).error_code == c.NONE
    assert k.trim(sid, 1, 1, 100).error_code == c.NONE
    assert k.close(sid, 1, 1).error_code == c.NONE
    inactive = k.view.nodes[0].uncommitted[sid]
    d = k.open(sid, 0, 2)
    assert d.error_code == c.NONE and d.reply.next_offset == 100
    assert not any(isinstance(r, NodeWALUncommittedOffsets) for r in d.records)
    assert k.view.nodes[0].uncommitted[sid] == inactive
    cur = k.stream(sid).current_range()
    assert (cur.start_offset, cur.end_offset) == (100, 100)


def test_testGetOpeningStreamsIncludesActiveHistoricalResponsibility():
    k = Ctl(objects=2)
    s0, s1 = _open0(k), _open0(k)
    k.close(s0, 0, 0, 100)
    assert k.open(s0, 1, 1).error_code == c.NONE
    assert k.sso(1, 0, ranges=((s0, 0, 40),)).error_code == c.NONE
    assert k.trim(s0, 1, 1, 60).error_code == c.NONE
    d = k.ok(c.GetOpeningStreams(node_id=0, node_epoch=0, failover_mode=True))
    streams = {o.stream_id: o for o in d.reply.streams}
    assert len(streams) == 2
    assert (streams[s0].epoch, streams[s0].start_offset, streams[s0].end_offset) == (0, 60, 60)
    assert (streams[s1].epoch, streams[s1].end_offset) == (0, 0)
    k.close(s1, 0, 0)
    assert k.view.active_duty(0, s0) is not None  # node 0 still has a stream to recover


def test_testGetOpeningStreamsRejectsMissingHistoricalRange():
    k = Ctl()
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    entry = UncommittedOffset(stream_id=sid, start_offset=0, end_offset=101)
    apply(k.view, NodeWALUncommittedOffsets(node_id=0, entries=(entry,)))
    d = k.do(c.GetOpeningStreams(node_id=0, node_epoch=0, failover_mode=True))
    assert d.error_code == c.STREAM_INNER_ERROR and d.reply.streams == () and d.records == ()


def test_testGetOpeningStreamsRejectsAmbiguousHistoricalRange():
    k = Ctl()
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    apply(k.view, Range(stream_id=sid, range_index=1, epoch=1, node_id=0, start_offset=0, end_offset=100))
    d = k.do(c.GetOpeningStreams(node_id=0, node_epoch=0, failover_mode=True))
    assert d.error_code == c.STREAM_INNER_ERROR and d.reply.streams == () and d.records == ()


def test_testGetOpeningStreamsFailoverBarrierFencesNormalCommit():
    k = Ctl(objects=4)
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    assert k.open(sid, 1, 1).error_code == c.NONE
    assert k.sso(1, 0, ranges=((sid, 0, 40),)).error_code == c.NONE
    assert k.trim(sid, 1, 1, 60).error_code == c.NONE
    barrier = k.ok(c.GetOpeningStreams(node_id=0, node_epoch=0, failover_mode=True))
    assert len(barrier.records) == 1 and [o.end_offset for o in barrier.reply.streams] == [60]
    normal = k.sso(2, 0, ranges=((sid, 60, 100),))
    assert normal.error_code == c.NODE_FENCED and normal.records == ()
    assert k.sso(3, 0, ranges=((sid, 60, 100),), failover=True).error_code == c.NONE
    assert k.view.active_duty(0, sid) is None and not k.view.opening_streams(0)


# -- commits -------------------------------------------------------------------------------------


def test_testCommitStreamSetObject_theSameStreamSetObject():
    """The object commit AutoMQ's test mocks is kraftlake's real one: REDUNDANT_OPERATION on a
    second commit, which the stream-set commit answers NONE with no records."""
    k = Ctl(objects=1)
    sid = _open0(k)
    assert k.sso(0, 0, ranges=((sid, 0, 100),)).error_code == c.NONE
    again = k.sso(0, 0, ranges=((sid, 0, 100),))
    assert again.error_code == c.NONE and again.records == ()


def test_testCommitStreamSetObject_theSameStreamObject():
    k = Ctl(objects=1)
    sid = _open0(k)

    def commit() -> c.Decision:
        return k.do(
            c.CommitStreamSetObject(
                node_id=0,
                node_epoch=0,
                object_id=-1,
                order_id=-1,
                object_size=0,
                stream_objects=(
                    c.CommitStreamObjectPart(
                        object_id=0, object_size=999, stream_id=sid, start_offset=0, end_offset=100
                    ),
                ),
                now_ms=NOW,
            )
        )

    assert commit().error_code == c.NONE and 0 in k.stream(sid).objects
    again = commit()
    assert again.error_code == c.NONE and again.records == ()


def test_testCrossedHistoricalOwnershipIsFailoverOrderIndependent():
    """Two nodes each hold the other's earlier stream in their WAL; recovering them in either order
    ends in the same state (AutoMQ compares the recovered metadata; kraftlake the state hash)."""

    def recover(order: tuple[int, int]) -> str:
        k = Ctl(objects=4)
        s0, s1 = _open0(k), k.create(1)
        assert k.open(s1, 1, 0).error_code == c.NONE
        k.close(s0, 0, 0, 100)
        k.close(s1, 1, 0, 100)
        assert k.open(s0, 1, 1).error_code == c.NONE and k.open(s1, 0, 1).error_code == c.NONE
        for node in order:
            mine = s0 if node == 0 else s1
            k.ok(c.GetOpeningStreams(node_id=node, node_epoch=0, failover_mode=True))
            assert k.sso(2 + node, node, ranges=((mine, 0, 100),), failover=True).error_code == c.NONE
        return k.view.state_hash()

    assert recover((0, 1)) == recover((1, 0))


# -- trims, ownership and the logical end ----------------------------------------------------------


def test_testCurrentOwnerCommitClassificationAfterTrim():
    k = Ctl(objects=6)
    sid = _open0(k)
    assert k.trim(sid, 0, 0, 100).error_code == c.NONE
    assert k.sso(1, 0, ranges=((sid, 0, 90),)).error_code == c.NONE and k.stream(sid).end_offset == 100
    assert k.sso(2, 0, ranges=((sid, 90, 110),)).error_code == c.NONE and k.stream(sid).end_offset == 110
    for obj, (a, b) in ((3, (95, 120)), (4, (120, 130))):
        d = k.sso(obj, 0, ranges=((sid, a, b),))
        assert d.error_code == c.OFFSET_NOT_MATCHED and d.records == ()
    assert k.sso(5, 0, ranges=((sid, 110, 120),)).error_code == c.NONE and k.stream(sid).end_offset == 120


def test_testCurrentOwnerFailoverCommitStartsAtTrimmedEnd():
    k = Ctl(objects=7)
    sid = _open0(k)
    assert k.trim(sid, 0, 0, 100).error_code == c.NONE
    d = k.ok(c.GetOpeningStreams(node_id=0, node_epoch=0, failover_mode=True))
    assert [o.end_offset for o in d.reply.streams] == [100]
    assert k.sso(6, 0, ranges=((sid, 100, 120),), failover=True).error_code == c.NONE
    assert k.stream(sid).end_offset == 120


def _duty(k: Ctl, node: int, sid: int) -> tuple[int, int] | None:
    e = k.view.nodes[node].uncommitted.get(sid)
    return None if e is None else (e.start_offset, e.end_offset)


def test_testHistoricalCommitCrossesTrimAtInitialWALProgress():
    k = Ctl(objects=16)
    sid = _open0(k)
    assert k.trim(sid, 0, 0, 40).error_code == c.NONE
    k.close(sid, 0, 0, 100)
    assert k.open(sid, 1, 1).error_code == c.NONE
    assert _duty(k, 0, sid) == (40, 100)
    assert k.sso(14, 0, ranges=((sid, 0, 60),)).error_code == c.NONE and _duty(k, 0, sid) == (60, 100)
    assert k.sso(15, 0, ranges=((sid, 0, 80),)).error_code == c.OFFSET_NOT_MATCHED


def test_testHistoricalCommitClassificationAfterTrim():
    k = Ctl(objects=24)
    s0, s1 = _open0(k), _open0(k)
    k.close(s0, 0, 0, 100)
    assert k.open(s0, 1, 1).error_code == c.NONE
    assert k.trim(s0, 1, 1, 40).error_code == c.NONE
    k.ok(c.GetOpeningStreams(node_id=0, node_epoch=1))
    fenced = k.sso(20, 0, ranges=((s0, 0, 30),))
    assert fenced.error_code == c.NODE_EPOCH_EXPIRED and fenced.records == ()
    d = k.sso(21, 0, ranges=((s0, 0, 30),), epoch=1)
    assert d.error_code == c.NONE and any(isinstance(r, S3StreamSetObject) for r in d.records)
    assert not any(isinstance(r, S3StreamEndOffsets) for r in d.records)
    assert k.stream(s0).end_offset == 100 and _duty(k, 0, s0) == (0, 100)
    assert k.sso(22, 0, ranges=((s0, 0, 60),), epoch=1).error_code == c.NONE
    assert k.stream(s0).end_offset == 100 and _duty(k, 0, s0) == (60, 100)
    assert k.trim(s0, 1, 1, 100).error_code == c.NONE
    assert k.sso(23, 0, ranges=((s1, 0, 10),), epoch=1).error_code == c.NONE
    assert _duty(k, 0, s0) is None


def test_testTrimDoesNotExpandLaterOwnershipRange():
    k = Ctl()
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    assert k.open(sid, 1, 1).error_code == c.NONE
    assert k.trim(sid, 1, 1, 40).error_code == c.NONE
    ranges = k.stream(sid).ranges
    assert (ranges[0].epoch, ranges[0].start_offset, ranges[0].end_offset, ranges[0].node_id) == (0, 40, 100, 0)
    assert (ranges[1].epoch, ranges[1].start_offset, ranges[1].end_offset, ranges[1].node_id) == (1, 100, 100, 1)


def test_testDeletedStreamRangeDoesNotFailSharedObject():
    k = Ctl(objects=41)
    s0 = _open0(k)
    k.close(s0, 0, 0, 100)
    assert k.do(c.DeleteStream(stream_id=s0, stream_epoch=0, now_ms=NOW)).error_code == c.NONE
    s1 = _open0(k)
    assert k.sso(40, 0, ranges=((s0, 0, 100), (s1, 0, 20))).error_code == c.NONE
    assert _duty(k, 0, s0) is None and k.stream(s1).end_offset == 20
    assert 40 in k.view.nodes[0].stream_set_objects


def test_testCompactionDoesNotAdvanceLogicalState():
    k = Ctl(objects=72)
    sid = _open0(k)
    k.close(sid, 0, 0, 100)
    assert k.open(sid, 1, 1).error_code == c.NONE
    other = UncommittedOffset(stream_id=999, start_offset=0, end_offset=50)
    apply(k.view, NodeWALUncommittedOffsets(node_id=0, entries=(other,)))
    # The stream-set object AutoMQ's test replays, its object committed (the test mocks the commit).
    apply(k.view, S3Object(object_id=70, object_size=999, object_state=ObjectState.COMMITTED, timestamp=NOW))
    apply(k.view, S3StreamSetObject(node_id=0, object_id=70, order_id=70, data_time_in_ms=1))
    d = k.sso(71, 0, ranges=((sid, 0, 40),), compacted=(70,))
    assert d.error_code == c.NONE
    assert k.stream(sid).end_offset == 100 and _duty(k, 0, sid) == (0, 100) and _duty(k, 0, 999) == (0, 50)


def test_testLogicalEndReplayIsMonotonic():
    from kraftlake.statemachine.s3stream.reducer import replay

    v = replay([S3Stream(offset=0, stream_id=0, epoch=0, range_index=0, start_offset=100)])
    assert v.streams[0].end_offset == 100
    replay([Range(offset=1, stream_id=0, epoch=0, range_index=0, start_offset=100, end_offset=150, node_id=0)], v)
    assert v.streams[0].end_offset == 150
    replay(
        [
            S3Stream(offset=2, stream_id=0, epoch=0, range_index=0, start_offset=80),
            Range(offset=3, stream_id=0, epoch=0, range_index=0, start_offset=80, end_offset=120, node_id=0),
        ],
        v,
    )
    assert (v.streams[0].start_offset, v.streams[0].end_offset) == (100, 150)


# -- cases ported earlier as scenarios (tests/test_s3stream_scenarios.py): each runs its scenario --


def test_testBasicCreateStream():
    scenarios.test_basic_create_open_close()


def test_testBasicOpenCloseStream():
    scenarios.test_basic_create_open_close()


def test_testV6FastCloseRecordsNodeWALResponsibility():
    scenarios.test_v6_fast_close_records_node_wal_responsibility()


def test_testHistoricalAndCurrentOwnerCommitsAreRoutedIndependently():
    scenarios.test_historical_and_current_owner_commits_are_routed_independently()


def test_testCommitStreamSetObjectBasic():
    scenarios.test_commit_stream_set_object_basic()


def test_testCommitStreamSetObject_compactWithDeletedStream():
    scenarios.test_compaction_with_deleted_stream_record_order()


def test_testTrimBeyondCommit():
    scenarios.test_trim_beyond_commit()


def test_testCommitWalCompacted():
    scenarios.test_commit_wal_compacted()


def test_testCommitWalWithStreamObject():
    scenarios.test_commit_with_stream_objects_and_stream_object_compaction()


def test_testCommitStreamObjectForFencedStream():
    scenarios.test_commit_stream_object_for_fenced_stream()


def test_testCommitStreamObject():
    scenarios.test_commit_with_stream_objects_and_stream_object_compaction()


def test_testTrim():
    scenarios.test_trim()


def test_testDelete():
    scenarios.test_delete()


def test_testGetOpeningStreams():
    scenarios.test_get_opening_streams_registration()
