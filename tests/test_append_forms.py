"""One batch, four forms: appended as Python Structs, JSON Lines, msgpack (as the HTTP service
receives it) and Arrow rows, it lands as the same data file, byte for byte, and reads back as the
same records. Each form has its own columnar path (``records.columnar``, ``records.arrow_input``);
this is their differential test."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgspec
import pyarrow as pa
import pytest
from hypothesis import given, settings

from kraftlake.records import Log, PartitionChange, arrow, arrow_input, columnar, encode_lines
from kraftlake.records.arrow_input import from_arrow
from kraftlake.records.base import field_defaults, payload_fields
from kraftlake.records.codec import json_form
from kraftlake.records.store import appending as appending_module
from kraftlake.testing import batches

from helpers.tiers import examples

NOW_MS = 1_700_000_000_000
TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"


def _arrow_rows(batch: list) -> pa.Table:
    """The batch as Arrow rows: the log's columns, with each record's own offset and time (null
    where it has none) instead of the ones the log would stamp."""
    table = arrow.to_table(batch, first_offset=0, ts_ms=0).drop_columns(["key", "producer", "producer_seq", "record"])
    for name in ("offset", "ts_ms"):
        own = pa.array([getattr(r, name) for r in batch], pa.int64())
        table = table.set_column(table.schema.get_field_index(name), name, own)
    return table


def _forms(batch: list) -> dict[str, object]:
    return {
        "structs": lambda log: log.append(batch),
        "json lines": lambda log: log.append(columnar.from_lines(encode_lines(batch).splitlines()), validated=True),
        "msgpack": lambda log: log.append(
            columnar.from_builtins_batch(msgspec.msgpack.decode(msgspec.msgpack.encode([json_form(r) for r in batch]))),
            validated=True,
        ),
        "arrow": lambda log: log.append(_arrow_rows(batch)),
        "arrow, column by column": lambda log: _append_by_columns(log, _arrow_rows(batch)),
    }


def _append_by_columns(log: Log, rows: pa.Table) -> None:
    """Arrow rows through ``arrow_input``'s column path (``msgpack_columns``), whatever their number."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrow_input, "COLUMNS_FROM", 0)
        log.append(rows)


def _landed(root: Path, batch: list) -> dict[str, tuple[bytes, list]]:
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(appending_module, "now_ms", lambda: NOW_MS)  # the stamped time, alike in every log
        for name, append in _forms(batch).items():
            log = Log.create(root / name)
            append(log)
            (file,) = [f for f in os.listdir(root / name) if f.endswith(".parquet")]
            out[name] = ((root / name / file).read_bytes(), log.read())
    return out


@settings(max_examples=examples(40))
@given(batch=batches(max_size=12))
def test_every_form_of_a_batch_lands_as_the_same_file(batch):
    with tempfile.TemporaryDirectory() as tmp:
        landed = _landed(Path(tmp), batch)
    (data, records) = landed.pop("structs")
    assert records[0].ts_ms is not None and [r.offset for r in records] == list(range(len(batch)))
    for name, (other_data, other_records) in landed.items():
        assert other_records == records, name
        assert other_data == data, name


@pytest.mark.parametrize(
    ("rows", "own_column"), [("wider types", True), ("a field left out", False), ("a null for a default", False)]
)
def test_arrow_rows_of_other_types_land_as_the_structs_do(rows, own_column):
    """Rows whose struct column is not the log's own type (wider integers, large strings: used
    as the table's column, cast), lacks a field (the record's default) or holds a null where the
    default is meant (both: the column is built from the records)."""
    batch = [PartitionChange(partition_id=i, topic_id=TOPIC, leader=1, isr=(1, 2)) for i in range(20)]
    full = [{n: getattr(r, n) for n in payload_fields(PartitionChange)} for r in batch]
    if rows == "wider types":
        wide = {pa.int8(): pa.int64(), pa.int16(): pa.int64(), pa.int32(): pa.int64(), pa.string(): pa.large_string()}
        kind = pa.struct(
            [
                (
                    f.name,
                    pa.list_(wide.get(f.type.value_type, f.type.value_type))
                    if pa.types.is_list(f.type)
                    else wide.get(f.type, f.type),
                )
                for f in arrow.payload_type(PartitionChange)
            ]
        )
        column = pa.array(full, kind)
    elif rows == "a field left out":
        column = pa.array([{k: v for k, v in f.items() if k != "leader"} for f in full])
        batch = [msgspec.structs.replace(r, leader=field_defaults(PartitionChange)["leader"]) for r in batch]
    else:
        column = pa.array([{**f, "leader_recovery_state": None} for f in full])
    assert (arrow_input._own_column(PartitionChange, column.type, column.flatten()) is not None) == own_column
    table = pa.table({"type": ["PartitionChange"] * len(batch), "partition_change": column})
    got = from_arrow(table)
    assert got == columnar.from_python(batch)
    assert columnar.to_table(got, first_offset=0, ts_ms=1).equals(arrow.to_table(batch, first_offset=0, ts_ms=1))
