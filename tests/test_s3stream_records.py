"""S3Stream records (issue 6): the catalogue, AutoMQ's versions and renames, packed payloads."""

from __future__ import annotations

import msgspec
import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kraftlake.records import RecordError, decode_line, encode_line
from kraftlake.records.arrow import _from_struct_columns, from_table, to_table
from kraftlake.records.base import trusted
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    API_KEYS,
    KV,
    S3STREAM_RECORDS,
    KeyValue,
    NodeWALMetadata,
    ObjectState,
    RemoveKV,
    S3Object,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamEndOffset,
    StreamRange,
    StreamRanges,
    attribute_bucket,
    attribute_deep_delete,
    attributes,
    pack_end_offsets,
    pack_ranges,
    unpack_end_offsets,
    unpack_ranges,
)
from kraftlake.statemachine.s3stream.view import StreamsView

DESIGN_S3STREAM = (
    "S3Stream RemoveS3Stream Range RemoveRange S3StreamObject RemoveS3StreamObject S3StreamSetObject"
    " RemoveStreamSetObject S3Object RemoveS3Object AssignedStreamId AssignedS3ObjectId NodeWALMetadata"
    " S3StreamEndOffsets KV RemoveKV"
).split()


def test_catalogue_has_the_designs_types_and_every_automq_api_key():
    names = [c.__name__ for c in S3STREAM_RECORDS]
    assert set(DESIGN_S3STREAM) <= set(names)
    assert sorted(API_KEYS.values()) == [*range(501, 519), 600]
    assert API_KEYS[S3StreamEndOffsets] == 515 and API_KEYS[NodeWALMetadata] == 513


def test_s3_object_v0_is_upcast_to_one_timestamp_per_state():
    for state, field in ((1, "expired_time_in_ms"), (2, "committed_time_in_ms"), (3, "mark_destroyed_time_in_ms")):
        line = (
            f'{{"type":"S3Object","version":0,"object_id":9,"object_state":{state},"prepared_time_in_ms":1,'
            f'"{field}":4242}}'
        )
        r = decode_line(line)
        assert (r.version, r.timestamp, r.prepared_time_in_ms) == (0, 4242, 1)
        assert decode_line(encode_line(r)) == r


def test_removed_and_added_fields_are_refused_at_the_wrong_version():
    with pytest.raises(RecordError) as exc:
        decode_line('{"type":"S3Object","version":1,"object_id":1,"object_state":2,"committed_time_in_ms":3}')
    assert (exc.value.record_type, exc.value.field) == ("S3Object", "committed_time_in_ms")
    with pytest.raises(RecordError) as exc:
        decode_line(
            '{"type":"S3StreamSetObject","version":1,"node_id":1,"object_id":1,"order_id":1,'
            '"ranges":[{"stream_id":1,"start_offset":0,"end_offset":1}]}'
        )
    assert exc.value.field == "ranges"
    with pytest.raises(RecordError) as exc:
        decode_line('{"type":"S3Object","version":0,"object_id":1,"object_state":2,"attributes":5}')
    assert exc.value.field == "attributes"
    with pytest.raises(RecordError) as exc:
        decode_line('{"type":"KV","version":0,"key_values":[{"key":"a","value":"","namespace":"n"}]}')
    assert exc.value.field == "key_values"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"type":"S3Object","object_id":1,"object_state":4}', "object_state"),
        (
            '{"type":"S3Stream","stream_id":1,"epoch":0,"range_index":0,"start_offset":0,"stream_state":2}',
            "stream_state",
        ),
        (
            '{"type":"Range","stream_id":1,"epoch":0,"range_index":0,"start_offset":5,"end_offset":4,"node_id":1}',
            "end_offset",
        ),
        ('{"type":"S3StreamObject","stream_id":-1,"start_offset":0,"end_offset":1,"object_id":1}', "stream_id"),
        ('{"type":"RemoveKV","keys":["a","b"],"namespaces":["n"]}', "namespaces"),
    ],
)
def test_bad_records_name_type_and_field(line, field):
    with pytest.raises(RecordError) as exc:
        decode_line(line)
    assert exc.value.field == field
    assert exc.value.record_type == decode_line.__globals__["msgspec"].json.decode(line)["type"]


def test_renamed_records_decode_into_todays_types():
    r = decode_line('{"type":"BrokerWALMetadata","broker_id":4,"broker_epoch":7}')
    assert r == NodeWALMetadata(version=0, node_id=4, node_epoch=7)
    for old in ("WALObject", "S3SSTObject"):
        r = decode_line(
            f'{{"type":"{old}","node_id":1,"object_id":5,"order_id":5,"data_time_in_ms":3,'
            '"streams_index":[{"stream_id":2,"start_offset":10,"end_offset":20}]}'
        )
        assert isinstance(r, S3StreamSetObject) and r.version == 0
        assert r.ranges == (StreamRange(stream_id=2, start_offset=10, end_offset=20),)
    with pytest.raises(RecordError) as exc:
        decode_line('{"type":"AdvanceRange","start_offset":0,"end_offset":1}')
    assert exc.value.field == "type" and "S3StreamEndOffsets" in exc.value.message


ranges = st.lists(
    st.tuples(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**31 - 1)),
    max_size=120,
    unique_by=lambda t: t[0],
).map(lambda xs: [StreamRange(stream_id=s, start_offset=o, end_offset=o + n) for s, o, n in xs])


@given(ranges)
def test_packed_ranges_round_trip_sorted_by_stream_and_compress_above_50(rs):
    data = pack_ranges(rs)
    assert data[0] == 1 and (data[1] == 2) == (len(rs) > 50)
    assert unpack_ranges(data) == tuple(sorted(rs, key=lambda r: r.stream_id))


@given(st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=40))
def test_packed_end_offsets_round_trip(pairs):
    ends = [StreamEndOffset(stream_id=s, end_offset=e) for s, e in pairs]
    data = pack_end_offsets(ends)
    assert len(data) == 1 + 16 * len(ends)
    assert unpack_end_offsets(data) == tuple(ends)
    with pytest.raises(ValueError):
        unpack_end_offsets(data + b"x")


@given(st.sampled_from([0, 1]), st.integers(-(2**15), 2**15 - 1), st.booleans())
def test_object_attributes_bitfield(kind, bucket, deep):
    a = attributes(object_type=kind, bucket=bucket, deep_delete=deep)
    assert a & 3 == kind and attribute_bucket(a) == bucket and attribute_deep_delete(a) == deep


def test_entity_keys():
    assert KV(key_values=(KeyValue(key="k", value=b"v", namespace="ns"),)).entity_key() == "kv/ns/k"
    assert RemoveKV(keys=("a",)).entity_key() == "kv/-/a"
    assert S3Object(object_id=3, object_state=ObjectState.PREPARED).entity_key() == "object/3"
    assert S3StreamObject(stream_id=2, start_offset=0, end_offset=1, object_id=3).entity_key() == "stream/2"


# -- an object's index block, packed (ObjectWritten v1) ---------------------------------------------


MANY = [StreamRange(stream_id=i, start_offset=1000 * i, end_offset=1000 * i + 7) for i in range(60)]


@given(ranges)
@example(MANY)
def test_stream_ranges_read_back_the_ranges_they_pack(rs):
    packed = StreamRanges.of(rs)
    assert len(packed) == len(rs) and bool(packed) == bool(rs)
    # zstd above 50 ranges, as AutoMQ's inline ranges; the triplets themselves below
    assert (packed.raw_size > 0) == (len(rs) > 50) and len(packed.raw()) == 24 * len(rs)
    assert len(packed.packed) == 24 * len(rs) if len(rs) <= 50 else len(packed.packed) < 24 * len(rs)
    plain = packed.uncompressed()
    assert plain.raw_size == 0 and plain.packed == packed.raw() and tuple(plain) == tuple(packed)
    # a view's state hash is of the ranges, not of their compression
    a, b = StreamsView(), StreamsView()
    a.object_index[1], b.object_index[1] = packed, plain
    assert a.state_hash() == b.state_hash()
    assert (
        tuple(packed) == tuple(rs)
        and StreamRanges.of((r.stream_id, r.start_offset, r.end_offset) for r in rs) == packed
    )
    ids, starts, ends = packed.columns()
    assert list(zip(ids, starts, ends)) == [(r.stream_id, r.start_offset, r.end_offset) for r in rs]
    for i, r in enumerate(rs):
        assert packed[i] == r and packed[i - len(rs)] == r and packed.find(r.stream_id) == r
    assert packed.find(2**41) is None
    with pytest.raises(IndexError):
        packed[len(rs)]
    assert eval(repr(packed), {"StreamRanges": StreamRanges}) == packed


@given(ranges, st.booleans())
@example(MANY, False)
def test_object_written_round_trips_through_json_msgpack_and_the_logs_columns(rs, listed):
    """JSON lists the ranges (either form decodes); the log's blob holds them packed; its struct
    column unpacked, for SQL; all three give the same record back."""
    r = ObjectWritten(node_id=1, object_id=7, object_size=9, ranges=rs if listed else StreamRanges.of(rs))
    assert isinstance(r.ranges, StreamRanges) and tuple(r.ranges) == tuple(rs)
    line = encode_line(r)
    assert msgspec.json.decode(line)["ranges"] == [msgspec.to_builtins(x) for x in rs]
    assert decode_line(line) == r
    packed_line = msgspec.json.encode(r)  # the Struct's own JSON: ranges as {"packed": base64}
    assert decode_line(packed_line) == r
    table = to_table([r], first_offset=5, ts_ms=1)
    column = table.column("object_written").to_pylist()[0]["ranges"]
    assert column == [msgspec.to_builtins(x) for x in rs]
    back = from_table(table)[0]
    assert back.ranges == r.ranges and back.offset == 5
    with trusted():
        assert _from_struct_columns(table.drop_columns(["record"]))[0] == back


def test_a_v0_index_block_is_upcast_from_json_and_from_an_older_logs_blobs():
    v0 = {
        "type": "ObjectWritten",
        "version": 0,
        "offset": 3,
        "ts_ms": 1,
        "source": None,
        "source_offset": None,
        "node_id": 0,
        "object_id": 1,
        "object_size": 0,
        "ranges": [{"stream_id": 4, "start_offset": 1, "end_offset": 5}],
    }
    want = StreamRanges.of([(4, 1, 5)])
    r = decode_line(msgspec.json.encode(v0))
    assert r.version == 0 and r.ranges == want
    # A log written before v1 holds the v0 record in its blob column: read record by record.
    table = pa.table(
        {"offset": pa.array([3], pa.int64()), "record": pa.array([msgspec.msgpack.encode(v0)], pa.binary())}
    )
    assert from_table(table) == [r]


@pytest.mark.parametrize(
    ("ranges_json", "field", "words"),
    [
        ('{"packed":"AAAA"}', "ranges", "not a whole number of 24-byte ranges"),
        ('{"packed":"AAAA","raw_size":24}', "ranges", "not a zstd frame of 24 bytes"),
        ('{"packed":"AAAA","raw_size":-24}', "ranges.raw_size", ">= 0"),
        ('[{"stream_id":1,"start_offset":5,"end_offset":3}]', "ranges", "end offset 3 is below start offset 5"),
        (
            '[{"stream_id":1,"start_offset":0,"end_offset":3},{"stream_id":1,"start_offset":3,"end_offset":4}]',
            "ranges",
            "lists a stream twice",
        ),
        ('[{"stream_id":-1,"start_offset":0,"end_offset":3}]', "ranges[0].stream_id", ">= 0"),
        ('[{"stream_id":1,"start_offset":0}]', "ranges[0].end_offset", "missing"),
    ],
)
def test_a_bad_index_block_names_the_record_and_field(ranges_json, field, words):
    with pytest.raises(RecordError) as exc:
        decode_line('{"type":"ObjectWritten","node_id":0,"object_id":1,"ranges":%s}' % ranges_json)
    assert exc.value.record_type == "ObjectWritten" and exc.value.field == field and words in exc.value.message
    # packed by hand with a negative offset: the record's own check, not msgspec's bounds
    bad = StreamRanges.of([(1, -4, 3)])
    with pytest.raises(ValueError, match="never negative"):
        ObjectWritten(node_id=0, object_id=1, ranges=bad)
