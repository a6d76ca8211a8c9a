"""JSON Lines and msgpack batches stamp their ``record`` column into one encoding of their
records (``Columns.encodes``, ``columnar._keep_encoding``), and JSON Lines skip counting record
starts where no record type can hold a ``type`` key (``columnar._starts_only_records``): each
path against the reference (records, ``record`` column, table and errors)."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import PartitionChange, RecordError, arrow, codec, columnar
from kraftlake.records.codec import encode_lines, iter_lines, json_form, normalize_batch
from kraftlake.records.msgpack_columns import head_length, stamp_blank
from kraftlake.testing import batches

from helpers.tiers import examples

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
FIRSTS = st.sampled_from((0, 127, 128, 65_536, 2**32, 2**40))


def _blank(record):
    return msgspec.structs.replace(record, offset=None, ts_ms=None, source=None, source_offset=None)


def _outcome(fn):
    try:
        return ("ok", list(fn()))
    except RecordError as exc:
        return ("error", exc.line, exc.record_type, exc.field, exc.message)


def _stampable(records) -> bool:
    return all(head_length(type(r)) and r.offset is r.ts_ms is r.source is r.source_offset is None for r in records)


def _same_record_column(got, want, first: int) -> None:
    for ts in (5, 1_700_000_000_000):
        assert got.columns.record_column(first, ts).equals(arrow.record_column(want, first_offset=first, ts_ms=ts))
    table = columnar.to_table(got, first_offset=first, ts_ms=9, producer="p", producer_seq=3)
    assert table.equals(arrow.to_table(want, first_offset=first, ts_ms=9, producer="p", producer_seq=3))


@settings(max_examples=examples(150))
@given(batch=batches(max_size=25), blank=st.booleans(), first=FIRSTS)
def test_json_lines_stamp_the_record_column_into_their_encoding(batch, blank, first):
    batch = [_blank(r) for r in batch] if blank else batch
    lines = encode_lines(batch).splitlines()
    want = list(iter_lines(lines))
    got = columnar.from_lines(lines)
    assert got == want and got.columns is not None and got.columns.encodes
    _same_record_column(got, want, first)
    if _stampable(want):  # the stamped path, not the copies
        assert got.columns.message == msgspec.msgpack.encode(want)


@settings(max_examples=examples(150))
@given(batch=batches(max_size=25), blank=st.booleans(), first=FIRSTS, reorder=st.booleans())
def test_msgpack_items_stamp_the_record_column_into_their_encoding(batch, blank, first, reorder):
    """Items as msgspec writes the records: their lengths are the records' (no decode for
    them). Items with their keys in another order (a client's encoder): encoded again, and the
    stamped column is the same."""
    batch = [_blank(r) for r in batch] if blank else batch
    raws = [msgspec.json.decode(msgspec.json.encode(json_form(r))) for r in batch]  # as a client sends them
    if reorder:
        raws = [dict(reversed(raw.items())) for raw in raws]
        items = [msgspec.msgpack.encode(raw) for raw in raws]
    else:
        items = [msgspec.msgpack.encode(r) for r in batch]
    got = columnar.from_msgpack_items([msgspec.Raw(i) for i in items])
    want = columnar.from_builtins_batch([msgspec.msgpack.decode(i) for i in items])
    if got is None:  # the typed decode refuses the JSON form (packed fields, bytes): the old path
        return
    assert list(got) == list(want)
    assert got.columns.message == msgspec.msgpack.encode(list(got))
    canonical = b"".join(items) == msgspec.msgpack.encode(list(got))[-sum(map(len, items)) :]
    assert (got.columns.lengths is not None) == canonical
    if got.columns.lengths is not None:
        assert got.columns.lengths.tolist() == [len(i) for i in items]
    _same_record_column(got, list(want), first)


@settings(max_examples=examples(100))
@given(batch=batches(max_size=25), first=FIRSTS, ts=st.sampled_from((0, 5, 2**41)))
def test_stamp_blank_with_lengths_given_stamps_as_without(batch, first, ts):
    records = normalize_batch([_blank(r) for r in batch])
    message = msgspec.msgpack.encode(records)
    heads = np.array([head_length(type(r)) or 0 for r in records], np.int64)
    lengths = np.array([len(msgspec.msgpack.encode(r)) for r in records], np.int64)
    offsets = np.arange(first, first + len(records))
    found = stamp_blank(message, heads, offsets, ts)
    given_ = stamp_blank(message, heads, offsets, ts, lengths)
    assert (found is None) == (given_ is None)
    if found is not None:
        assert given_.equals(found)
        assert found.equals(arrow.record_column(records, first_offset=first, ts_ms=ts))


class _Inner(msgspec.Struct):
    broker: int
    type: str = "x"


class _Tagged(msgspec.Struct, tag="inner", tag_field="type"):
    broker: int


class _Outer(msgspec.Struct, tag="outer", tag_field="type"):
    items: list[int]
    name: str | None = None


def test_an_inner_type_key_is_seen_at_any_depth():
    def inner_key(t):
        return not columnar._no_inner_type_key(msgspec.inspect.type_info(t), top=True)

    assert not inner_key(_Outer)  # its own tag is the record's start
    assert inner_key(_Inner) is False  # at the top a field named type is the record's own
    assert inner_key(list[_Inner]) and inner_key(dict[str, int]) and inner_key(list[_Tagged])
    assert inner_key(tuple[int, _Inner | None]) and inner_key(msgspec.Raw)
    assert columnar._starts_only_records()  # every record type today


@settings(max_examples=examples(100))
@given(batch=batches(max_size=15), counted=st.booleans(), data=st.data())
def test_a_repeated_key_gives_the_reference_error_counted_or_not(batch, counted, data):
    """A key written twice in one line (the record's own or a nested object's): the error of
    ``iter_lines`` (line, type, field), whether record starts are counted or known."""
    lines = encode_lines(batch).splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    keys = [k for k in (b'"version":', b'"broker":', b'"leader":', b'"type":') if k in lines[i]]
    key = data.draw(st.sampled_from(keys))
    at = lines[i].index(key)
    value_end = at + len(key) + len(lines[i][at + len(key) :].split(b",", 1)[0].split(b"}", 1)[0])
    lines[i] = lines[i][:value_end] + b"," + lines[i][at:value_end] + lines[i][value_end:]
    want = _outcome(lambda: iter_lines(lines))
    assert want[0] == "error" and want[1] == i + 1 and "duplicate key" in want[4]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(columnar, "_starts_only_records", lambda: not counted)
        assert _outcome(lambda: columnar.from_lines(lines)) == want
        good = encode_lines(batch).splitlines()
        assert columnar.from_lines(good) == list(iter_lines(good))  # and valid lines pass either way


def test_a_repeated_key_among_many_lines_names_its_line_type_and_field():
    good = [codec.encode_line(PartitionChange(partition_id=i, topic_id=TOPIC, leader=1)) for i in range(50)]
    bad = good[17].replace(b'"leader":1', b'"leader":1,"leader":2')
    with pytest.raises(RecordError) as exc:
        columnar.from_lines([*good[:17], bad, *good[18:]])
    assert (exc.value.line, exc.value.record_type, exc.value.field) == (18, "PartitionChange", "leader")
    assert "duplicate key" in exc.value.message


@given(body=st.lists(st.binary(max_size=8), max_size=6))
def test_lines_join_as_one_json_array(body):
    assert columnar._json_array(body) == b"[" + b",".join(body) + b"]"
