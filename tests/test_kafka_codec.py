"""Kafka's binary formats (records.kafka): primitives, every metadata record type at every
version, control records, RecordBatch framing and its failure modes."""

from __future__ import annotations

import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlake.records.kafka import (
    KafkaFormatError,
    MetadataDecoder,
    decode_control,
    decode_fields,
    encode_batch,
    encode_control,
    encode_value,
    iter_batches,
    read_checkpoint,
)
from kraftlake.records.kafka import wire as w
from kraftlake.records.kafka.importer import ImportStats, batch_records
from kraftlake.records.kafka.metadata import SCHEMAS, SnapshotFooter, SnapshotHeader
from kraftlake.records.kraft import (
    CONTROL_TYPES,
    BeginTransaction,
    EndTransaction,
    FeatureLevel,
    KafkaOpaque,
    NoOp,
    Partition,
    PartitionChange,
    ReplicaDirectory,
    Topic,
    ZkMigrationState,
)
from kraftlake.testing import records_of

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
DIR = "yHzNFVl5RoS2TvJfCqg0lw"


# -- primitives ----------------------------------------------------------------------------------


@given(st.integers(0, 2**63 - 1))
def test_uvarint_round_trip(v):
    out = bytearray()
    w.write_uvarint(out, v)
    assert w.uvarint(bytes(out) + b"\xff", 0) == (v, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varint_round_trip(v):
    out = bytearray()
    w.write_varint(out, v)
    assert w.varint(bytes(out), 0) == (v, len(out))


def test_zigzag_known_values():
    # protobuf's table: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3; -1 is the absent key of every record
    for v, enc in ((0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (64, b"\x80\x01")):
        out = bytearray()
        w.write_varint(out, v)
        assert bytes(out) == enc


@given(st.none() | st.text(max_size=40))
def test_compact_string_round_trip(s):
    out = bytearray()
    w.w_string(out, s)
    assert w.string(bytes(out), 0) == (s, len(out))


@given(st.binary(min_size=16, max_size=16))
def test_uuid_text_form_round_trips_and_is_kafkas(raw):
    from kraftlake.records.types import uuid_from_bytes

    text, pos = w.uuid(raw, 0)
    assert pos == 16 and text == uuid_from_bytes(raw)
    out = bytearray()
    w.w_uuid(out, text)
    assert bytes(out) == raw


# -- every metadata record type at every version ---------------------------------------------------

CASES = [(s.cls, v) for s in SCHEMAS for v in range(s.versions[0], s.versions[1] + 1)]


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
@given(data=st.data())
def test_every_type_and_version_round_trips(cls, version, data):
    """encode_value then decode gives the same record; re-encoding gives the same bytes."""
    record = data.draw(records_of(cls, envelope=False, version=version))
    record = msgspec.structs.replace(record, ts_ms=5, source="t", offset=9, source_offset=9)
    value = encode_value(record)
    dec = MetadataDecoder()
    if cls is PartitionChange and record.assignment is not None and record.replicas is None:
        # Directories without Replicas: the decoder pairs them with the replicas it has seen.
        dec.replicas[record.topic_id] = {record.partition_id: tuple(p.broker for p in record.assignment)}
    back = dec.decode(value, offset=9, ts_ms=5, source="t")
    assert back == record
    assert encode_value(back) == value


def test_versions_a_field_does_not_exist_in_refuse_it():
    r = Partition(
        version=0,
        partition_id=0,
        topic_id=TOPIC,
        replicas=(1,),
        isr=(1,),
        leader=1,
        assignment=(ReplicaDirectory(broker=1, directory=DIR),),
    )
    with pytest.raises(KafkaFormatError, match="v0 has no Directories"):
        encode_value(r)


def test_the_annotated_example_of_the_codecrafters_log():
    """Values from the 311-byte log of codecrafters-io/kafka-tester (fixtures/kafka/codecrafters-single,
    see its PROVENANCE.md), decoded by hand: the bootstrap transaction's records; then a NoOpRecord."""
    dec = MetadataDecoder()
    begin = bytes.fromhex("01170001001212") + b"Bootstrap records"
    assert dec.decode(begin, offset=1, ts_ms=0, source=None) == BeginTransaction(
        name="Bootstrap records", offset=1, ts_ms=0, source_offset=1
    )
    mv = bytes.fromhex("010c0011") + b"metadata.version" + bytes.fromhex("001400")
    assert dec.decode(mv, offset=2, ts_ms=0, source=None).feature_level == 20
    assert type(dec.decode(bytes.fromhex("0115000000"), offset=3, ts_ms=0, source=None)) is ZkMigrationState
    assert type(dec.decode(bytes.fromhex("01180000"), offset=4, ts_ms=0, source=None)) is EndTransaction
    assert dec.decode(b"\x01\x14\x00\x00", offset=5, ts_ms=0, source=None) == NoOp(offset=5, ts_ms=0, source_offset=5)


def test_partition_change_directories_pair_with_the_known_replicas():
    dec = MetadataDecoder()
    p = Partition(
        version=1,
        partition_id=0,
        topic_id=TOPIC,
        replicas=(3, 1),
        isr=(3, 1),
        leader=3,
        assignment=(ReplicaDirectory(broker=3, directory=DIR), ReplicaDirectory(broker=1, directory=DIR)),
    )
    dec.decode(encode_value(p), offset=0, ts_ms=0, source=None)
    lost = "AAAAAAAAAAAAAAAAAAAAAg"
    change = PartitionChange(
        version=1,
        partition_id=0,
        topic_id=TOPIC,
        assignment=(ReplicaDirectory(broker=3, directory=lost), ReplicaDirectory(broker=1, directory=DIR)),
    )
    value = encode_value(change)
    assert dec.decode(value, offset=1, ts_ms=0, source=None).assignment == change.assignment
    with pytest.raises(KafkaFormatError, match="replicas this import has not seen") as exc:
        MetadataDecoder().decode(value, offset=7, ts_ms=0, source=None)
    assert exc.value.offset == 7 and exc.value.field == "directories"


def test_unknown_api_keys_and_versions_are_kept_opaque():
    dec = MetadataDecoder()
    for value in (b"\x01\x1e\x00\x00", b"\x01\x0c\x07\x00", b"\x01\x06\x00\x05abc"):  # key 30, FeatureLevel v7, key 6
        r = dec.decode(value, offset=3, ts_ms=1, source=None)
        assert type(r) is KafkaOpaque and not r.control and r.value == value
        assert encode_value(r) == value
    assert decode_fields(b"\x01\x1e\x00\x00") == (30, 0, None)


@pytest.mark.parametrize(
    "value",
    [b"\x00\x0c\x00", b"\x01\x02\x00\x04ab", b"\x01\x02\x00\x02a" + bytes(16) + b"\x00\xff"],
    ids=["frame-0", "truncated", "trailing-bytes"],
)
def test_malformed_values_name_the_record_and_offset(value):
    with pytest.raises(KafkaFormatError) as exc:
        MetadataDecoder().decode(value, offset=42, ts_ms=0, source=None)
    assert exc.value.offset == 42 and "42" in str(exc.value)


# -- control records -----------------------------------------------------------------------------


@pytest.mark.parametrize("cls", list(CONTROL_TYPES), ids=lambda c: c.__name__)
@given(data=st.data())
def test_control_records_round_trip(cls, data):
    record = data.draw(records_of(cls, envelope=False))
    record = msgspec.structs.replace(record, version=0, offset=4, source_offset=4, ts_ms=2, source=None)
    if hasattr(record, "epoch"):
        record = msgspec.structs.replace(record, epoch=7)
    key, value = encode_control(record)
    back = decode_control(key, value, epoch=7, offset=4, ts_ms=2, source=None)
    assert back == record and encode_control(back) == (key, value)


def test_snapshot_framing_and_unknown_control_types():
    for framing in (SnapshotHeader(0, 123), SnapshotFooter(0)):
        key, value = encode_control(framing)
        assert decode_control(key, value, epoch=1, offset=None, ts_ms=0, source=None) == framing
    r = decode_control(b"\x00\x00\x00\x09", b"\x00\x00\x01", epoch=1, offset=5, ts_ms=0, source=None)
    assert type(r) is KafkaOpaque and r.control and r.api_key == 9
    assert encode_control(r) == (b"\x00\x00\x00\x09", b"\x00\x00\x01")


# -- batches -------------------------------------------------------------------------------------


def _segment() -> bytes:
    values = [
        encode_value(FeatureLevel(name="metadata.version", feature_level=20)),
        encode_value(Topic(name="t", topic_id=TOPIC)),
        b"\x01\x14\x00\x00",
    ]
    first = encode_batch(
        [(0, 1000, None, values[0]), (1, 1000, None, values[1])], base_offset=0, partition_leader_epoch=1
    )
    second = encode_batch([(2, 1500, None, values[2])], base_offset=2, partition_leader_epoch=1)
    return first + second


def test_batches_read_back_what_was_written():
    data = _segment()
    batches = list(iter_batches(data))
    assert [(b.base_offset, b.last_offset, b.position, b.size) for b in batches] == [
        (0, 1, 0, batches[0].size),
        (2, 2, batches[0].size, len(data) - batches[0].size),
    ]
    assert [r[:2] for b in batches for r in b.records] == [(0, 1000), (1, 1000), (2, 1500)]
    assert not batches[0].is_control and batches[0].compression == "none"


def test_a_crc_mismatch_names_file_and_byte_and_can_be_skipped():
    data = bytearray(_segment())
    second = list(iter_batches(bytes(data)))[1].position
    data[second + 70] ^= 0xFF  # a byte inside the second batch's records
    with pytest.raises(KafkaFormatError, match=f"seg.log at byte {second}: CRC-32C mismatch"):
        list(iter_batches(bytes(data), file="seg.log"))
    skipped: list[str] = []
    kept = list(iter_batches(bytes(data), file="seg.log", skip_corrupt=True, skipped=skipped))
    assert [b.base_offset for b in kept] == [0] and len(skipped) == 1 and f"byte {second}" in skipped[0]


def test_a_truncated_tail_is_reported():
    data = _segment()[:-5]
    with pytest.raises(KafkaFormatError, match="truncated batch"):
        list(iter_batches(data, file="seg.log"))
    skipped: list[str] = []
    assert len(list(iter_batches(data, skip_corrupt=True, skipped=skipped))) == 1 and "truncated" in skipped[0]


def test_gzip_batches_are_read_and_other_codecs_named():
    import gzip

    import google_crc32c

    plain = encode_batch([(0, 0, None, b"\x01\x14\x00\x00")], base_offset=0, partition_leader_epoch=1)
    body = gzip.compress(plain[61:])
    after = bytearray(plain[21:61] + body)
    struct.pack_into(">h", after, 0, 1)  # attributes: gzip
    crc = google_crc32c.value(bytes(after))
    batch = struct.pack(">qiibI", 0, 9 + len(after), 1, 2, crc) + after
    assert [r[3] for b in iter_batches(batch) for r in b.records] == [b"\x01\x14\x00\x00"]
    struct.pack_into(">h", after, 0, 4)  # zstd
    crc = google_crc32c.value(bytes(after))
    batch = struct.pack(">qiibI", 0, 9 + len(after), 1, 2, crc) + after
    with pytest.raises(KafkaFormatError, match="zstd compression is not supported"):
        list(iter_batches(batch))


def test_a_checkpoint_needs_its_header_and_footer():
    hk, hv = encode_control(SnapshotHeader(0, 77))
    fk, fv = encode_control(SnapshotFooter(0))
    mv = encode_value(FeatureLevel(name="metadata.version", feature_level=19))
    header = encode_batch([(0, 0, hk, hv)], base_offset=0, partition_leader_epoch=3, control=True)
    body = encode_batch([(1, 0, None, mv)], base_offset=1, partition_leader_epoch=3)
    footer = encode_batch([(2, 0, fk, fv)], base_offset=2, partition_leader_epoch=3, control=True)
    cp = read_checkpoint(header + body + footer, source_offset=99)
    assert cp.header.last_contained_log_timestamp == 77 and cp.epoch == 3
    assert cp.records == [FeatureLevel(name="metadata.version", feature_level=19, ts_ms=0, source_offset=99)]
    with pytest.raises(KafkaFormatError, match="incomplete"):
        read_checkpoint(header + body, file="x.checkpoint")
    with pytest.raises(KafkaFormatError, match="before the snapshot header"):
        read_checkpoint(body + footer, file="x.checkpoint")


def test_snapshot_framing_in_a_log_segment_is_not_imported():
    # decode_control gives the header and footer as framing objects, never None: the importer
    # once tested for None and passed them on as records.
    hk, hv = encode_control(SnapshotHeader(0, 77))
    mv = encode_value(FeatureLevel(name="metadata.version", feature_level=19))
    data = encode_batch([(0, 0, hk, hv)], base_offset=0, partition_leader_epoch=3, control=True)
    data += encode_batch([(1, 0, None, mv)], base_offset=1, partition_leader_epoch=3)
    stats = ImportStats()
    out = [r for b in iter_batches(data) for r in batch_records(b, MetadataDecoder(), stats)]
    assert [type(r) for r in out] == [FeatureLevel]
    assert dict(stats.by_type) == {"FeatureLevel": 1}


def test_a_truncated_control_record_is_an_error_not_an_unknown_one():
    from kraftlake.records.kraft import LeaderChange

    key, value = encode_control(LeaderChange(epoch=3, leader_id=1, voters=(1, 2), granting_voters=(1,)))
    with pytest.raises(KafkaFormatError, match="LEADER_CHANGE control record does not decode") as exc:
        decode_control(key, value[:5], epoch=3, offset=12, ts_ms=0, source=None)
    assert exc.value.offset == 12
