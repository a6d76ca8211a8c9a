"""The record column encoded from Arrow columns (records.msgpack_columns) is msgspec's own
encoding of each record, byte for byte: on generated batches of every record type, on the
integer and length boundaries where msgpack changes form, and on nulls."""

from __future__ import annotations

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import RECORD_TYPES, NoOp, PartitionChange, ReplicaDirectory, arrow, columnar, type_name
from kraftlake.records.base import ENVELOPE_FIELDS
from kraftlake.records.msgpack_columns import Stampable, encode_rows, head_length, stamp_blank
from kraftlake.records.s3stream import packed_fields
from kraftlake.testing import batches

from helpers.tiers import examples

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
DIR_A = "yHzNFVl5RoS2TvJfCqg0lw"


def _encoded_by_type(table: pa.Table) -> dict[str, tuple[list, list]]:
    """Per record type in ``table``: (the column encoder's bytes, the reference bytes)."""
    out = {}
    types = table.column("type")
    for name in pc.unique(types).to_pylist():
        cls = next(c for c in RECORD_TYPES if type_name(c) == name)
        rows = pc.indices_nonzero(pc.equal(types, name))
        envelope = {k: table.column(k).take(rows) for k in ENVELOPE_FIELDS}
        column = arrow.column_name(cls)
        payload = table.column(column).take(rows).combine_chunks() if column in table.column_names else None
        got = encode_rows(cls, envelope, payload, len(rows))
        want = table.column(arrow.RECORD_COLUMN).take(rows).to_pylist()
        if got is None:
            assert packed_fields(cls), f"{name} has nothing the encoder cannot write"
            continue
        out[name] = (got.to_pylist(), want)
    return out


@settings(max_examples=examples(200))
@given(batch=batches(max_size=25), first=st.sampled_from((0, 5, 127, 128, 255, 256, 65_535, 2**32, 2**40)))
def test_every_record_type_encodes_as_msgspec_does(batch, first):
    table = arrow.to_table(batch, first_offset=first, ts_ms=1_700_000_000_000)
    for name, (got, want) in _encoded_by_type(table).items():
        assert got == want, name


INTS = [0, 1, 31, 32, 127, 128, 255, 256, 65_535, 65_536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1]
NEGATIVE = [-1, -2, -31, -32, -33, -127, -128, -129, -32_767, -32_768, -32_769, -(2**31), -(2**31) - 1, -(2**63)]


@pytest.mark.parametrize("value", INTS + NEGATIVE)
def test_an_integer_at_each_boundary_of_its_msgpack_form(value):
    record = NoOp(ts_ms=value, source_offset=None if value % 2 else value)
    table = arrow.to_table([record], first_offset=max(value, 0), ts_ms=0)
    got, want = _encoded_by_type(table)["NoOp"]
    assert got == want == [msgspec.msgpack.encode(msgspec.structs.replace(record, offset=max(value, 0)))]


@pytest.mark.parametrize("length", [0, 1, 31, 32, 255, 256, 65_535, 65_536])
def test_a_string_at_each_boundary_of_its_msgpack_form(length):
    record = NoOp(source="é" * (length // 2) + "x" * (length % 2))
    got, want = _encoded_by_type(arrow.to_table([record], first_offset=0, ts_ms=0))["NoOp"]
    assert got == want


@pytest.mark.parametrize("count", [0, 1, 15, 16, 300])
def test_a_list_at_each_boundary_of_its_msgpack_form(count):
    brokers = tuple(range(count))
    record = PartitionChange(
        topic_id=TOPIC,
        partition_id=3,
        replicas=brokers,
        isr=None,
        assignment=tuple(ReplicaDirectory(broker=b, directory=DIR_A) for b in brokers),
    )
    got, want = _encoded_by_type(arrow.to_table([record, record], first_offset=0, ts_ms=0))["PartitionChange"]
    assert got == want


def test_a_type_with_packed_fields_is_left_to_the_structs():
    cls = next(c for c in RECORD_TYPES if packed_fields(c))
    assert encode_rows(cls, {}, None, 0) is None


@settings(max_examples=examples(100))
@given(batch=batches(max_size=25), first=st.sampled_from((0, 100, 2**20, 2**40)), ts=st.sampled_from((0, 5, 2**41)))
def test_records_encoded_once_are_stamped_with_any_offsets_and_times(batch, first, ts):
    """``Stampable``: encoded at the offsets a batch arrived with, then stored at others."""
    arrived = arrow.to_table(batch, first_offset=7, ts_ms=1)
    stored = arrow.to_table(batch, first_offset=first, ts_ms=ts)
    types = arrived.column("type")
    for name in pc.unique(types).to_pylist():
        cls = next(c for c in RECORD_TYPES if type_name(c) == name)
        rows = pc.indices_nonzero(pc.equal(types, name))
        column = arrow.column_name(cls)
        payload = arrived.column(column).take(rows).combine_chunks() if column in arrived.column_names else None
        envelope = {k: arrived.column(k).take(rows) for k in ENVELOPE_FIELDS}
        encoded = Stampable.of(cls, envelope, payload, len(rows))
        if encoded is None:
            assert packed_fields(cls)
            continue
        got = encoded.column(*[stored.column(k).take(rows) for k in ("offset", "ts_ms", "source_offset")])
        assert got.to_pylist() == stored.column(arrow.RECORD_COLUMN).take(rows).to_pylist()


def _blank(record):
    return msgspec.structs.replace(record, offset=None, ts_ms=None, source=None, source_offset=None)


@settings(max_examples=examples(100))
@given(batch=batches(max_size=25), first=st.sampled_from((0, 127, 128, 65_536, 2**40)), blank=st.booleans())
def test_python_records_stamped_into_their_round_trip_encoding(batch, first, blank):
    """``from_python`` keeps the batch's msgpack; the ``record`` column stamped into it is the one
    encoded from stamped copies, byte for byte (or, where a record has an offset, time or
    source of its own, or a type the stamping does not write, that column itself)."""
    batch = [_blank(r) for r in batch] if blank else batch
    checked = columnar.from_python(batch)
    want = arrow.record_column(list(checked), first_offset=first, ts_ms=1_700_000_000_000)
    assert checked.columns.record_column(first, 1_700_000_000_000).equals(want)
    heads = np.array([head_length(type(r)) or 0 for r in checked], np.int64)
    stamped = stamp_blank(msgspec.msgpack.encode(list(checked)), heads, np.arange(first, first + len(batch)), 5)
    if blank and all(head_length(type(r)) for r in checked):
        assert stamped is not None
        assert stamped.equals(arrow.record_column(list(checked), first_offset=first, ts_ms=5))
    elif stamped is not None:  # stamped where every record was blank anyway
        assert all(r.offset is r.ts_ms is r.source is r.source_offset is None for r in checked)
        assert stamped.equals(arrow.record_column(list(checked), first_offset=first, ts_ms=5))


def test_records_not_as_decoded_are_encoded_from_copies():
    """A field given as a list where the record holds a tuple encodes alike, but the records
    decoded from the round trip are not the ones given: the batch's msgpack is not kept."""
    record = PartitionChange(topic_id=TOPIC, partition_id=3, isr=[1, 2])  # type: ignore[arg-type]
    checked = columnar.from_python([record])
    assert checked.columns.message is None
    assert checked.columns.record_column(0, 1).equals(arrow.record_column(list(checked), first_offset=0, ts_ms=1))
    kept = columnar.from_python([PartitionChange(topic_id=TOPIC, partition_id=3, isr=(1, 2))])
    assert kept.columns.message is not None
