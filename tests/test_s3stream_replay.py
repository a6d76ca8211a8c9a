"""The S3Stream reducer (as the replay methods of AutoMQ's ``StreamControlManager``,
``S3ObjectControlManager`` and ``KVControlManager`` apply records) and the read path
(``S3StreamsMetadataImage.getObjects``, with the cases of ``S3StreamsMetadataImageTest.testGetObjects``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    KV,
    KeyValue,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveKV,
    RemoveS3Stream,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamEndOffset,
    StreamRange,
    UncommittedOffset,
)
from kraftlake.statemachine.s3stream import StreamsView, objects_for, replay
from kraftlake.statemachine.s3stream.read import ReadPathError, range_position
from kraftlake.statemachine.s3stream.view import RangeMeta


def test_logical_end_replay_is_monotonic_and_missing_parents_are_ignored():
    v = replay(
        [
            S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1),
            S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=0, end_offset=300),)),
            Range(stream_id=0, epoch=0, range_index=0, start_offset=0, end_offset=100, node_id=1),
            S3StreamObject(stream_id=0, start_offset=0, end_offset=200, object_id=1),
            S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=50, stream_state=1),
            S3StreamObject(stream_id=9, start_offset=0, end_offset=5, object_id=2),  # no stream 9
            S3StreamSetObject(node_id=4, object_id=3, order_id=3),  # no node 4
            S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=0, end_offset=250),)),
        ]
    )
    s = v.streams[0]
    assert (s.start_offset, s.end_offset) == (50, 300)
    assert 9 not in v.streams and 4 not in v.nodes
    assert sorted(s.objects) == [1]


def test_image_compatible_v0_ranges_and_end_offsets_max_merge():
    # testImage_compatible: S3Stream(233) + v0 SSO range [100,200) + end offsets 300 -> 300, and
    # replaying the same SSO again after a snapshot keeps 300.
    records = [
        NodeWALMetadata(node_id=1, node_epoch=0),
        S3Stream(stream_id=233, epoch=0, range_index=0, start_offset=0, stream_state=1),
        S3StreamSetObject(
            version=0,
            node_id=1,
            object_id=5,
            order_id=5,
            ranges=(StreamRange(stream_id=233, start_offset=100, end_offset=200),),
        ),
        S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=233, end_offset=300),)),
    ]
    v = replay(records)
    assert v.streams[233].end_offset == 300
    again = StreamsView.from_image(v.image())
    assert again.state_hash() == v.state_hash()
    replay([records[2]], again)
    assert again.streams[233].end_offset == 300


def test_uncommitted_entries_upsert_tombstone_and_ignore():
    v = replay(
        [
            NodeWALMetadata(node_id=0, node_epoch=1),
            NodeWALUncommittedOffsets(
                node_id=0,
                entries=(
                    UncommittedOffset(stream_id=1, start_offset=0, end_offset=10),
                    UncommittedOffset(stream_id=2, start_offset=5, end_offset=9),
                ),
            ),
            NodeWALUncommittedOffsets(
                node_id=0,
                entries=(
                    UncommittedOffset(stream_id=1, start_offset=10, end_offset=10),  # tombstone
                    UncommittedOffset(stream_id=2, start_offset=9, end_offset=3),  # ignored
                ),
            ),
            NodeWALUncommittedOffsets(
                node_id=7, entries=(UncommittedOffset(stream_id=1, start_offset=0, end_offset=1),)
            ),
        ]
    )
    assert list(v.nodes[0].uncommitted) == [2] and v.nodes[0].uncommitted[2].start_offset == 5
    assert 7 not in v.nodes


def test_kv_namespaces_and_feature_gate():
    v = replay(
        [
            FeatureLevel(name="automq.version", feature_level=7),
            KV(key_values=(KeyValue(key="k", value=b"1"), KeyValue(key="k", value=b"2", namespace="ns"))),
            RemoveKV(keys=("k",), namespaces=("ns",)),
        ]
    )
    assert v.automq_version == 7 and v.kv == {None: {"k": b"1"}}
    replay([RemoveKV(version=0, keys=("k",))], v)
    assert v.kv == {}


def test_remove_stream_keeps_stream_set_objects_and_objects():
    v = replay(
        [
            NodeWALMetadata(node_id=0, node_epoch=0),
            S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1),
            S3Object(object_id=0, object_size=10, object_state=ObjectState.COMMITTED, timestamp=1),
            S3StreamSetObject(node_id=0, object_id=0, order_id=0),
            RemoveS3Stream(stream_id=0),
        ]
    )
    assert v.streams == {} and list(v.nodes[0].stream_set_objects) == [0] and list(v.objects) == [0]


# -- read path: S3StreamsMetadataImageTest.testGetObjects -------------------------------------------

RANGES = [(0, 10, 140, 0), (1, 140, 180, 1), (2, 180, 420, 0), (3, 420, 520, 1), (4, 520, 600, 0), (5, 600, 888, 1)]
SOS = {8: (10, 100), 9: (200, 300), 10: (300, 400)}
SSOS = {
    0: (0, 100, 120),
    1: (0, 120, 140),
    2: (0, 180, 200),
    3: (0, 400, 420),
    4: (0, 520, 600),
    5: (1, 140, 160),
    6: (1, 160, 180),
    7: (1, 420, 520),
    9: (1, 600, 888),
}


def _read_fixture(inline: bool) -> StreamsView:
    records = [
        NodeWALMetadata(node_id=0, node_epoch=0),
        NodeWALMetadata(node_id=1, node_epoch=0),
        S3Stream(stream_id=0, epoch=5, range_index=5, start_offset=10, stream_state=1),
    ]
    records += [
        Range(stream_id=0, epoch=i, range_index=i, start_offset=a, end_offset=b, node_id=n) for i, a, b, n in RANGES
    ]
    records += [S3StreamObject(stream_id=0, start_offset=a, end_offset=b, object_id=o) for o, (a, b) in SOS.items()]
    for o, (node, a, b) in SSOS.items():
        rng = (StreamRange(stream_id=0, start_offset=a, end_offset=b),)
        if inline:
            records.append(S3StreamSetObject(version=0, node_id=node, object_id=o, order_id=o, ranges=rng))
        else:
            records.append(ObjectWritten(node_id=node, object_id=o, ranges=rng))
            records.append(S3StreamSetObject(node_id=node, object_id=o, order_id=o))
    return replay(records)


@pytest.mark.parametrize("inline", [True, False], ids=["inline-ranges", "huge-cluster"])
@pytest.mark.parametrize(
    ("start", "end", "limit", "ids", "covered"),
    [
        (10, 600, 2**31 - 1, [8, 0, 1, 5, 6, 2, 9, 10, 3, 7, 4], (10, 600)),
        (20, 550, 2**31 - 1, [8, 0, 1, 5, 6, 2, 9, 10, 3, 7, 4], (10, 600)),
        (20, 550, 5, [8, 0, 1, 5, 6], (10, 180)),
        (400, 520, 2**31 - 1, [3, 7], (400, 520)),
        (401, 519, 2**31 - 1, [3, 7], (400, 520)),
        (399, 521, 2**31 - 1, [10, 3, 7, 4], (300, 600)),
        (399, 1000, 2**31 - 1, [10, 3, 7, 4, 9], (300, 888)),
        (101, 400, 2**31 - 1, [0, 1, 5, 6, 2, 9, 10], (100, 400)),
        (10, -1, 9, [8, 0, 1, 5, 6, 2, 9, 10, 3], (10, 420)),
        (550, -1, 9, [4, 9], (520, 888)),
    ],
)
def test_get_objects(inline, start, end, limit, ids, covered):
    v = _read_fixture(inline)
    got = objects_for(v, 0, start, end, limit)
    assert got is not None
    assert [o.object_id for o in got.objects] == ids
    assert (got.start_offset, got.end_offset) == covered


def test_get_objects_invalid():
    v = _read_fixture(True)
    assert objects_for(v, 1, 0, 100) is None  # no stream 1
    assert objects_for(v, 0, 0, 600) is None  # below the stream's start
    assert objects_for(v, 0, 20, 10) is None
    assert objects_for(v, 0, 20, 30, -1) is None


def test_get_objects_stalls_at_a_gap():
    v = _read_fixture(True)
    # Replace SSO 1 [120,140) by one starting later: the SO/SSO chain has a gap the scan cannot cross
    # unless the first object may start early, which only the first may.
    replay(
        [
            S3StreamSetObject(
                version=0,
                node_id=0,
                object_id=1,
                order_id=1,
                ranges=(StreamRange(stream_id=0, start_offset=125, end_offset=140),),
            )
        ],
        v,
    )
    got = objects_for(v, 0, 10, 600)
    assert got is not None and [o.object_id for o in got.objects] == [8, 0]  # stalls at the gap
    assert got.end_offset == 120


def test_range_contains_offset():
    # StreamRuntimeMetadataImageTest.testGetRangeContainsOffset
    ranges = [
        RangeMeta(1, 0, 0, 10, 0),
        RangeMeta(2, 0, 10, 10, 0),
        RangeMeta(3, 0, 10, 20, 0),
        RangeMeta(4, 0, 20, 0, 0),
    ]
    assert [range_position(ranges, o) for o in (0, 5, 10, 100)] == [0, 0, 2, 3]


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.data())
def test_reads_of_a_contiguous_chain_are_contiguous_and_cover_the_request(sizes, data):
    # Any chain of SOs and SSOs that covers a stream contiguously reads back contiguously: every
    # [start, end) inside it is covered by objects in offset order, within the limit.
    records = [
        NodeWALMetadata(node_id=0, node_epoch=0),
        S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1),
    ]
    at = 0
    for i, n in enumerate(sizes):
        if data.draw(st.booleans()):
            records.append(S3StreamObject(stream_id=0, start_offset=at, end_offset=at + n, object_id=i))
        else:
            records.append(
                S3StreamSetObject(
                    version=0,
                    node_id=0,
                    object_id=i,
                    order_id=i,
                    ranges=(StreamRange(stream_id=0, start_offset=at, end_offset=at + n),),
                )
            )
        at += n
    records.append(Range(stream_id=0, epoch=0, range_index=0, start_offset=0, end_offset=at, node_id=0))
    v = replay(records)
    start = data.draw(st.integers(0, at - 1))
    end = data.draw(st.integers(start + 1, at))
    limit = data.draw(st.integers(1, len(sizes) + 1))
    got = objects_for(v, 0, start, end, limit)
    assert got is not None and 0 < len(got.objects) <= limit
    assert got.start_offset <= start
    assert all(a.end_offset == b.start_offset for a, b in zip(got.objects, got.objects[1:]))
    assert got.end_offset >= end or len(got.objects) == limit


def test_sanity_check_rejects_what_getObjectsSanityCheck_rejects():
    from kraftlake.statemachine.s3stream.read import ObjectRef, _sanity_check

    def ref(i, a, b):
        return ObjectRef(object_id=i, object_type="STREAM", start_offset=a, end_offset=b)

    _sanity_check(0, 10, 5, [])
    _sanity_check(0, 10, 5, [ref(1, 5, 20), ref(2, 20, 30)])
    for bad, limit in (
        ([ref(1, 11, 20)], 5),
        ([ref(1, 10, 20), ref(2, 21, 30)], 5),
        ([ref(1, 10, 20), ref(2, 20, 30)], 1),
    ):
        with pytest.raises(ReadPathError):
            _sanity_check(0, 10, limit, bad)
