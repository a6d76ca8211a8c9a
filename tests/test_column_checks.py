"""msgspec's decode checks as Arrow compute (records.column_checks) agree with msgspec's decode:
on generated rows of every record type, each with one value changed to a bound, past a bound,
a null or a string of another length, the columns break exactly when decoding their msgpack
fails. And an append of Arrow rows decodes no Struct, even when it loses a race and stamps
its rows again."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from kraftlake.records import RECORD_TYPES, Log, PartitionChange, arrow, arrow_input, type_name
from kraftlake.records.base import ENVELOPE_FIELDS
from kraftlake.records.column_checks import Uncovered, record_breaks
from kraftlake.records.columnar import ColumnBatch, from_builtins_batch
from kraftlake.records.msgpack_columns import Stampable
from kraftlake.testing import batches

from helpers.tiers import examples

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
EDGES = [
    None,
    -(2**31),
    -3,
    -2,
    -1,
    0,
    1,
    127,
    255,
    2**15,
    2**16,
    2**31 - 1,
    2**31,
    2**32,
    2**63 - 1,
    -(2**63),
    "",
    "x",
    "x" * 21,
    "x" * 22,
    "é" * 22,
    "x" * 23,
    "MvDrH8r1Q_2n6tPo0bqGnQ",
    [],
    [0],
    [-1, 3],
    [None],
    True,
    1.5,
]
"""Values to put in a field: bounds of the log's integers and of the records' Meta, nulls,
strings about a uuid's length, lists."""


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for k in path[:-1]:
        value = value[k]
    value[path[-1]] = new


def _groups(table: pa.Table) -> list[tuple[type, dict[str, pa.Array], pa.StructArray | None]]:
    out = []
    types = table.column("type")
    for name in pc.unique(types).to_pylist():
        cls = next(c for c in RECORD_TYPES if type_name(c) == name)
        rows = pc.indices_nonzero(pc.equal(types, name))
        envelope = {k: table.column(k).take(rows).combine_chunks() for k in ENVELOPE_FIELDS}
        column = arrow.column_name(cls)
        payload = table.column(column).take(rows).combine_chunks() if column in table.column_names else None
        out.append((cls, envelope, payload))
    return out


def _decode_fails(cls: type, envelope: dict[str, pa.Array], payload: pa.StructArray | None, n: int) -> bool | None:
    encoded = Stampable.of(cls, envelope, payload, n)
    if encoded is None:
        return None
    blobs = encoded.column(envelope["offset"], envelope["ts_ms"], envelope["source_offset"])
    return arrow_input._decode(cls, blobs) is None


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(batch=batches(max_size=8), data=st.data())
def test_the_column_checks_refuse_exactly_what_msgspec_refuses(batch, data):
    table = arrow.to_table(batch, first_offset=0, ts_ms=5)
    cls, envelope, payload = data.draw(st.sampled_from(_groups(table)))
    n = len(envelope["version"])
    if payload is not None and data.draw(st.booleans()):  # a change inside the record type's own fields
        rows = payload.to_pylist()
        at = data.draw(st.integers(0, n - 1))
        paths = _paths(rows[at])
        if paths:
            _set(rows[at], data.draw(st.sampled_from(paths)), data.draw(st.sampled_from(EDGES)))
        try:
            payload = pa.array(rows, payload.type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            assume(False)  # a value the log's column type cannot hold: refused before any check
    else:  # or in the envelope
        name = data.draw(st.sampled_from(("offset", "ts_ms", "source", "source_offset")))
        values = envelope[name].to_pylist()
        values[data.draw(st.integers(0, n - 1))] = data.draw(st.sampled_from(EDGES))
        try:
            envelope = {**envelope, name: pa.array(values, envelope[name].type)}
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            assume(False)
    fails = _decode_fails(cls, envelope, payload, n)
    assume(fails is not None)  # a type the column encoder does not write (packed fields)
    event(f"decoding fails: {fails}")
    try:
        assert record_breaks(cls, envelope, payload) == fails
    except Uncovered:
        pytest.fail(f"{type_name(cls)} has a field the column checks do not model")


def _rows(batch: list) -> pa.Table:
    return arrow.to_table(batch, first_offset=0, ts_ms=0).drop_columns(["key", "producer", "producer_seq", "record"])


def test_an_append_of_arrow_rows_decodes_no_struct(monkeypatch):
    monkeypatch.setattr(arrow_input, "COLUMNS_FROM", 0)
    batch = [PartitionChange(partition_id=i, topic_id=TOPIC, leader=1, isr=(1, 2)) for i in range(30)]
    rows = _rows(batch)
    got = arrow_input.from_arrow(rows, decode=False)
    assert isinstance(got, ColumnBatch) and len(got) == 30
    assert all(g._records is None for g in got.columns.groups)
    assert got.decoded() == from_builtins_batch(arrow_input.rows(rows))  # when asked for: the reference's records


def test_a_retried_append_of_arrow_rows_stamps_its_new_offsets(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow_input, "COLUMNS_FROM", 0)
    decoded = []
    monkeypatch.setattr(arrow_input, "_decode", lambda *a: decoded.append(a))
    batch = [PartitionChange(partition_id=i, topic_id=TOPIC, leader=1, isr=(1, 2)) for i in range(30)]
    Log.create(tmp_path / "log")
    mine, other = Log.open(tmp_path / "log"), Log.open(tmp_path / "log")
    assert mine.last_offset == -1
    other.append(batch[:3])  # takes offsets 0..2 under mine's feet: mine's first commit is lost
    result = mine.append(_rows(batch))
    assert (result.first_offset, result.last_offset) == (3, 32)
    assert decoded == []
    stored = Log.open(tmp_path / "log").at().table()
    for i, blob in enumerate(stored.column("record").to_pylist()):
        assert blob == msgspec.msgpack.encode(Log.open(tmp_path / "log").read()[i]), i
