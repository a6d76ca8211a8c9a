"""AutoMQ's ``S3StreamsMetadataImageTest``, case by case: the image written as records
(``statemachine.s3stream.snapshot.image_records``, AutoMQ's ``image.write``) and loaded back
(``snapshot.load``, a delta from ``EMPTY`` or ``finishSnapshot``), on kraftlake's real reducer.
The read-path cases run against the fixture ``tests/test_s3stream_replay.py`` builds for them."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_s3stream_replay import _read_fixture

from kraftlake.records.s3stream import (
    AssignedStreamId,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    Range,
    S3Stream,
    UncommittedOffset,
)
from kraftlake.statemachine.s3stream.read import ReadPathError, objects_for
from kraftlake.statemachine.s3stream.reducer import replay
from kraftlake.statemachine.s3stream.snapshot import image_records, load
from kraftlake.statemachine.s3stream.view import StreamsView
from kraftlake.statemachine.s3stream.workload import WorkloadConfig, generate

from helpers.tiers import examples


def _offsets(records):
    return [msgspec.structs.replace(r, offset=i) for i, r in enumerate(records)]


def _round_trip(view: StreamsView) -> StreamsView:
    return load(_offsets(image_records(view)))


def test_testAssignedChange():
    v = replay([AssignedStreamId(offset=0, assigned_stream_id=0)])
    assert v.next_stream_id == 1 and _round_trip(v).state_hash() == v.state_hash()
    replay([AssignedStreamId(offset=1, assigned_stream_id=10)], v)
    assert v.next_stream_id == 11 and _round_trip(v).next_stream_id == 11


def test_testImage_compatible():
    """Cannot apply: it reads AutoMQ's Java image classes of older versions (kraftlake upcasts records, tested in test_s3stream_replay)."""


def test_testLogicalEndReplayAndSnapshot():
    v = replay(
        _offsets(
            [
                S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=100),
                Range(stream_id=0, epoch=0, range_index=0, start_offset=100, end_offset=150, node_id=0),
            ]
        )
    )
    assert v.streams[0].end_offset == 150 and _round_trip(v).streams[0].end_offset == 150


def test_testNodeWALUncommittedOffsetReplay():
    v = replay(
        _offsets(
            [
                NodeWALMetadata(node_id=0, node_epoch=0),
                NodeWALUncommittedOffsets(
                    node_id=0, entries=(UncommittedOffset(stream_id=0, start_offset=0, end_offset=10),)
                ),
                NodeWALUncommittedOffsets(
                    node_id=0, entries=(UncommittedOffset(stream_id=0, start_offset=5, end_offset=10),)
                ),
            ]
        )
    )
    assert {s: (u.start_offset, u.end_offset) for s, u in v.nodes[0].uncommitted.items()} == {0: (5, 10)}


def test_testNodeWALUncommittedOffsetSnapshotRoundTripAndChunking():
    """10,003 duties (kraftlake's record holds 10,000 at most, so they arrive in two) are written
    back in chunks of 10,000 and 3."""
    entries = [UncommittedOffset(stream_id=s, start_offset=0, end_offset=50 if s == 1 else 200) for s in range(10_002)]
    entries.append(UncommittedOffset(stream_id=20_000, start_offset=0, end_offset=200))
    v = replay(
        _offsets(
            [
                NodeWALMetadata(node_id=0, node_epoch=0),
                NodeWALUncommittedOffsets(node_id=0, entries=tuple(entries[:10_000])),
                NodeWALUncommittedOffsets(node_id=0, entries=tuple(entries[10_000:])),
            ]
        )
    )
    written = [r for r in image_records(v) if isinstance(r, NodeWALUncommittedOffsets)]
    assert [len(r.entries) for r in written] == [10_000, 3]
    back = _round_trip(v).nodes[0].uncommitted
    assert len(back) == 10_003 and (back[0].start_offset, back[0].end_offset) == (0, 200)
    assert (back[1].end_offset, back[20_000].end_offset) == (50, 200)


def test_testNodeWALUncommittedOffsetSnapshotCompletionRemovesAbsentEntries():
    before = replay(
        _offsets(
            [
                NodeWALMetadata(node_id=0, node_epoch=0),
                NodeWALUncommittedOffsets(
                    node_id=0,
                    entries=tuple(UncommittedOffset(stream_id=s, start_offset=0, end_offset=10) for s in (0, 1)),
                ),
            ]
        )
    )
    snapshot = _offsets(
        [
            NodeWALMetadata(node_id=0, node_epoch=0),
            NodeWALUncommittedOffsets(
                node_id=0, entries=(UncommittedOffset(stream_id=1, start_offset=5, end_offset=10),)
            ),
        ]
    )
    after = load(snapshot)
    assert sorted(before.nodes[0].uncommitted) == [0, 1]
    assert {s: (u.start_offset, u.end_offset) for s, u in after.nodes[0].uncommitted.items()} == {1: (5, 10)}


@settings(max_examples=examples(8), deadline=None)
@given(seed=st.integers(0, 10_000), version=st.sampled_from([1, 3, 7]), cut=st.floats(0.05, 1.0))
def test_testToImageAndBack(seed, version, cut):
    """Any state a simulated history reaches, written as records and loaded, has its state hash."""
    records = [
        r for b in generate(WorkloadConfig(seed=seed, automq_version=version, streams=6), records=1200) for r in b
    ]
    view = replay(records[: max(1, int(len(records) * cut))])
    assert _round_trip(view).state_hash() == view.state_hash()


def test_testGetObjects():
    got = objects_for(_read_fixture(False), 0, 10, 600)
    assert got is not None and [o.object_id for o in got.objects] == [8, 0, 1, 5, 6, 2, 9, 10, 3, 7, 4]


def test_testGetObjectsSanityCheck():
    """The check ``getObjects`` runs on its answer: the first object starts at or before the
    start, each next one where the last ended, no more than the limit."""
    from kraftlake.statemachine.s3stream.read import ObjectRef, _sanity_check

    def ref(i, a, b):
        return ObjectRef(object_id=i, object_type="STREAM", start_offset=a, end_offset=b)

    _sanity_check(0, 10, 5, [ref(1, 5, 20), ref(2, 20, 30)])
    for bad, limit in (([ref(1, 11, 20)], 5), ([ref(1, 10, 20), ref(2, 21, 30)], 5), ([ref(1, 10, 20)] * 2, 1)):
        with pytest.raises(ReadPathError):
            _sanity_check(0, 10, limit, bad)


def test_testGetObjectsWithFirstStreamObject():
    got = objects_for(_read_fixture(True), 0, 20, 550, 5)
    assert got is not None and got.objects[0].object_id == 8 and got.start_offset == 10


def test_testGetObjectsWithFirstStreamSetObject():
    got = objects_for(_read_fixture(True), 0, 401, 519)
    assert got is not None and [o.object_id for o in got.objects] == [3, 7] and got.start_offset == 400


def test_testConcurrentFetchMetadataWithoutConcurrentModificationException():
    """Cannot apply: kraftlake's view is not shared between threads while it changes."""


def test_testGetTopicPartitionStreamRelation():
    """Cannot apply: topic names live in the KRaft family's view, not the S3Stream one."""
