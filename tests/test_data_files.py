"""The log's data files as ``records.data_files`` writes them: the row groups keep the offset and
time statistics that range reads and the ``add`` action rely on, whatever the other columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kraftlake.records.store import data_files
from kraftlake.records.store.data_files import STATISTICS_COLUMNS, write_data_file


def _rows(n: int) -> pa.Table:
    return pa.table(
        {
            "offset": pa.array(range(n), pa.int64()),
            "ts_ms": pa.array([1_000 + i // 7 for i in range(n)], pa.int64()),
            "type": pa.array(["Topic" if i % 3 else "Partition" for i in range(n)]),
            "record": pa.array([i.to_bytes(4, "big") * 3 for i in range(n)], pa.binary()),
        }
    )


def test_every_row_group_carries_offset_and_time_statistics(tmp_path, monkeypatch):
    monkeypatch.setattr(data_files, "ROW_GROUP_ROWS", 1_000)
    rows = _rows(3_500)
    written = tmp_path / write_data_file(str(tmp_path), rows, "part.parquet").path
    meta = pq.ParquetFile(written).metadata
    assert meta.num_row_groups == 4
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        by_name = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
        first, count = g * 1_000, group.num_rows
        offset = by_name["offset"].statistics
        assert (offset.min, offset.max) == (first, first + count - 1)
        ts = by_name["ts_ms"].statistics
        assert (ts.min, ts.max) == (1_000 + first // 7, 1_000 + (first + count - 1) // 7)
        # the other columns' statistics are not written (nothing reads them)
        assert {name for name, c in by_name.items() if c.is_stats_set} == set(STATISTICS_COLUMNS)
    assert pq.read_table(written).equals(rows)


def test_a_range_read_skips_the_row_groups_outside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(data_files, "ROW_GROUP_ROWS", 1_000)
    written = write_data_file(str(tmp_path), _rows(3_500), "part.parquet").path
    (fragment,) = ds.dataset(str(tmp_path / written), format="parquet").get_fragments()
    kept = fragment.split_by_row_group(filter=ds.field("offset") >= 3_200)
    assert [g.id for f in kept for g in f.row_groups] == [3]
