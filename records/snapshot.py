"""Reading the log as it was at one Delta version: ``LogSnapshot``, and opening the table.

delta-rs resolves the snapshot (its version, its file list, its app transactions); the rows are
read from exactly its Parquet files with pyarrow (the same file list Spark reads), a file at a
time where a long log replays in bounded memory. Choosing the version is ``time_travel``'s job.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from .arrow import RECORD_COLUMN, column_name, from_table
from .base import Record
from .catalog import BY_NAME
from .delta_commit import listed
from .errors import LogError, LogNotFoundError, RecordError, TimeTravelError

OFFSET_TXN = "kraftlake.offset"

ENVELOPE = ("offset", "ts_ms", "type", "version", "key", "source", "source_offset")


def arrow_schema(dt: DeltaTable) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


def open_table(path: str, version: int | None = None) -> DeltaTable:
    try:
        return listed(lambda: DeltaTable(path, version=version))
    except TableNotFoundError:
        if version is None:
            raise LogNotFoundError(f"no kraftlake log at {path} (create one with `kraftlake init`)") from None
        raise TimeTravelError(f"{path} has no version {version}") from None


class LogSnapshot:
    """The log as of one Delta version, optionally cut at an offset. Read-only."""

    def __init__(self, dt: DeltaTable, *, to_offset: int | None = None) -> None:
        self._dt = dt
        self.version: int = dt.version()
        stored = dt.transaction_version(OFFSET_TXN)
        last = -1 if stored is None else stored
        self.last_offset: int = last if to_offset is None else min(last, to_offset)
        protocol = dt.protocol()
        if protocol.reader_features or dt.metadata().partition_columns:
            raise LogError(
                "this table uses Delta reader features or partition columns that kraftlake's"
                f" file-list reader does not support: {protocol.reader_features}"
            )

    def schema(self) -> pa.Schema:
        """The table's Arrow schema at this version (every column, struct fields included)."""
        return arrow_schema(self._dt)

    def files(self) -> list[str]:
        """The snapshot's Parquet files (absolute paths): exactly what Spark reads on this machine."""
        return list(self._dt.file_uris())

    def _file_ranges(self) -> list[tuple[str, int | None, int | None]]:
        actions = pa.table(self._dt.get_add_actions(flatten=True))
        root = self._dt.table_uri.removeprefix("file://")
        paths = actions.column("path").to_pylist()
        cols = actions.column_names
        lo = actions.column("min.offset").to_pylist() if "min.offset" in cols else [None] * len(paths)
        hi = actions.column("max.offset").to_pylist() if "max.offset" in cols else [None] * len(paths)
        return [(os.path.join(root, p), a, b) for p, a, b in zip(paths, lo, hi)]

    def table(
        self,
        from_offset: int | None = None,
        to_offset: int | None = None,
        types: Iterable[str] | None = None,
    ) -> pa.Table:
        """Rows with ``from_offset <= offset <= to_offset`` (and of the given types), by offset."""
        lo = 0 if from_offset is None else from_offset
        hi = self.last_offset if to_offset is None else min(to_offset, self.last_offset)
        schema = arrow_schema(self._dt)
        wanted = None
        if types is not None:
            wanted = sorted(set(types))
            unknown = [t for t in wanted if t not in BY_NAME]
            if unknown:
                raise RecordError(f"unknown record type {unknown[0]!r}", record_type=unknown[0])
            keep = set(ENVELOPE) | {"producer", "producer_seq", RECORD_COLUMN}
            keep |= {column_name(BY_NAME[t]) for t in wanted}
            schema = pa.schema([f for f in schema if f.name in keep])
        files = [
            path
            for path, a, b in self._file_ranges()
            if hi >= lo and not (a is not None and b is not None and (b < lo or a > hi))
        ]
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise TimeTravelError(
                f"version {self.version} refers to {os.path.basename(missing[0])}, which was"
                " vacuumed; read the latest version cut at an offset instead"
            )
        # One multi-threaded scan of exactly the snapshot's files; files written before a column
        # or struct field existed read it as null (conformed to defaults in from_table).
        dataset = ds.dataset(files, schema=schema, format="parquet")
        where = (ds.field("offset") >= lo) & (ds.field("offset") <= hi)
        if wanted is not None:
            where &= ds.field("type").isin(wanted)
        result = dataset.to_table(filter=where)
        return result.sort_by("offset")

    def records(
        self,
        from_offset: int | None = None,
        to_offset: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Record]:
        """Records with ``from_offset <= offset <= to_offset`` (and of the given types), by offset."""
        return from_table(self.table(from_offset, to_offset, types))

    def offset_of_source(self, source_offset: int) -> int:
        """The last offset whose record came from ``source_offset`` or before in the log it was
        imported from (Kafka's offsets, for an imported ``__cluster_metadata``); -1 if none.

        Imports keep the source's order, so this is where "state after Kafka offset X" ends."""
        table = self.iter_tables(columns=("offset", "source_offset"))
        best = -1
        for t in table:
            if "source_offset" not in t.column_names:
                continue
            mask = pc.less_equal(t.column("source_offset"), source_offset)
            hit = pc.max(pc.filter(t.column("offset"), pc.fill_null(mask, False))).as_py()
            if hit is not None and hit > best:
                best = hit
        return best

    def offset_at_time(self, ts_ms: int, *, first: bool = False) -> int | None:
        """By record time (``ts_ms``; Kafka's batch time after an import), not commit time: the
        last offset whose record is at or before ``ts_ms`` (-1 if none), or with ``first`` the
        first offset at or after it (None if none). Records are in time order within a log
        written by one controller; this reads the times, it does not assume the order."""
        best: int | None = None if first else -1
        for t in self.iter_tables(columns=("offset", "ts_ms")):
            times = t.column("ts_ms")
            if first:
                mask = pc.fill_null(pc.greater_equal(times, ts_ms), False)
                hit = pc.min(pc.filter(t.column("offset"), mask)).as_py()
                if hit is not None and (best is None or hit < best):
                    best = hit
            else:
                mask = pc.fill_null(pc.less_equal(times, ts_ms), False)
                hit = pc.max(pc.filter(t.column("offset"), mask)).as_py()
                if hit is not None and hit > best:  # type: ignore[operator]
                    best = hit
        return best

    def iter_tables(
        self,
        from_offset: int | None = None,
        to_offset: int | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> Iterator[pa.Table]:
        """The rows of ``[from_offset, to_offset]`` in offset order, one Parquet file at a time, so
        that a long log replays in bounded memory. Falls back to one table when files' offset
        ranges overlap (a compaction that merged non-adjacent files)."""
        lo = 0 if from_offset is None else from_offset
        hi = self.last_offset if to_offset is None else min(to_offset, self.last_offset)
        if hi < lo:
            return
        ranges = [
            (a, b, path)
            for path, a, b in self._file_ranges()
            if not (a is not None and b is not None and (b < lo or a > hi))
        ]
        if any(a is None or b is None for a, b, _ in ranges):
            yield self.table(lo, hi)
            return
        ranges.sort()
        if any(ranges[i][1] >= ranges[i + 1][0] for i in range(len(ranges) - 1)):
            yield self.table(lo, hi)
            return
        schema = arrow_schema(self._dt)
        if columns is not None and all(c in schema.names for c in columns):
            schema = pa.schema([schema.field(c) for c in columns])
        where = (ds.field("offset") >= lo) & (ds.field("offset") <= hi)
        for a, b, path in ranges:
            if not os.path.exists(path):
                raise TimeTravelError(f"version {self.version} refers to {os.path.basename(path)}, which was vacuumed")
            whole = lo <= a and b <= hi
            table = ds.dataset([path], schema=schema, format="parquet").to_table(filter=None if whole else where)
            if table.num_rows == 0:
                continue
            offsets = table.column("offset")
            # Appends write their rows in offset order; sort only what is not (compacted files).
            if table.num_rows > 1 and not pc.all(pc.less(offsets[:-1], offsets[1:])).as_py():
                table = table.sort_by("offset")
            yield table

    def iter_records(self, from_offset: int | None = None, to_offset: int | None = None) -> Iterator[list[Record]]:
        """``iter_tables`` decoded: lists of records in offset order. Reads only the ``record``
        column where every row has one (the struct columns are for SQL engines)."""
        for table in self.iter_tables(from_offset, to_offset, columns=("offset", RECORD_COLUMN)):
            # A table without the column comes back whole (from_table then uses the struct
            # columns); rows written before it was added are null there: re-read them whole.
            if RECORD_COLUMN in table.column_names and table.column(RECORD_COLUMN).null_count:
                table = self.table(table.column("offset")[0].as_py(), table.column("offset")[-1].as_py())
            yield from_table(table)
