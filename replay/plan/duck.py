"""The plan on DuckDB, in this process: the log is the snapshot delta-rs resolves, exactly its
Parquet files, checked first (``read_snapshot``: DuckDB checks no checksum itself) and scanned by
DuckDB's reader (an object store's files copied into the spill directory as they are checked:
DuckDB's own extensions cannot be downloaded here, and none is needed), on every core, spilling
to a temporary directory when a query's state outgrows the memory limit."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence

import pyarrow as pa

from kraftlake.logging import get_logger
from kraftlake.records.store import digests
from kraftlake.statemachine.sql_dialect import DIR_TYPE, DUCKDB

log = get_logger(__name__)

PLAN_COLUMNS = {
    "offset",
    "ts_ms",
    "type",
    "key",
    "record",
    "partition",
    "partition_change",
    "assign_replicas_to_dirs_request",
}
"""The log's columns the plan reads."""

MEMORY_LIMIT = "1GB"
"""The memory DuckDB may hold by default (its own default is 80% of the machine's): beyond it the
tables the plan keeps and the states of its joins, windows, sorts and aggregates spill to the
temporary directory. The plan's kept tables grow with the history (250 MB per 10^6 records) while
the driver's Python objects are the rest of the process: at 3 x 10^6 records the limit took the
process's peak from 2 962 MB to 2 346 MB, the same report, for 3% more CPU (bench/RESULTS.md,
session 4)."""


ALLOCATOR_FLUSH: dict[str, str | bool] = {"allocator_background_threads": True, "allocator_flush_threshold": "16MB"}
"""DuckDB's allocator purges freed pages in background threads and flushes a thread's cache past
16 MB (DuckDB's default: at 128 MB, and purged only as it allocates again)."""


def cores() -> int:
    """The cores this process may run on (its CPU affinity, where the platform says it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_TYPES = {
    "BIGINT": pa.int64(),
    "INT": pa.int32(),
    "STRING": pa.string(),
    "DIR": pa.string(),
    "ARRAY<BIGINT>": pa.list_(pa.int64()),
}


class DuckEngine:
    """A DuckDB connection that runs the plan: ``log`` is a relation of the log's rows; the
    driver adds small tables (``table``), views (``view``) and computed tables (``keep``)."""

    dialect = DUCKDB
    name = "duckdb"

    def __init__(self, *, threads: int | None = None, memory_limit: str | None = None, temp_directory=None):
        """``threads``: default every core (``cores``); ``memory_limit``: DuckDB's spelling
        (``2GB``, ``512MB``), default ``MEMORY_LIMIT``; ``temp_directory``: where it spills,
        default a new directory removed on ``close``."""
        import duckdb

        if temp_directory is None:
            _remove_orphaned_spills()
        self._copies: str | None = None
        """Where an object store's data files were copied to be scanned (``read_snapshot``)."""
        self._tmp = None if temp_directory is not None else tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-")
        spill = temp_directory if temp_directory is not None else self._tmp
        self.spill = str(spill)
        """Where DuckDB spills beyond its memory limit, and the driver its report's columns
        (``columns.spill``)."""
        config: dict[str, str | bool | int | float | list[str]] = {
            "threads": threads or cores(),
            "temp_directory": str(spill),
            "memory_limit": memory_limit or MEMORY_LIMIT,
        }
        # Rows come out of windows and joins in no particular order; the driver sorts what it
        # collects, so DuckDB need not keep insertion order (less memory, more parallelism).
        config["preserve_insertion_order"] = False
        # What a statement freed goes back to the kernel as it ends, not at the connection's
        # close: DuckDB's allocator keeps freed pages (its threads' caches up to 128 MB each,
        # dirty pages until a purge) outside its own memory account, and the driver's tables
        # and rows sat beside them (ALLOCATOR_FLUSH, bench/RESULTS.md).
        config.update(ALLOCATOR_FLUSH)
        try:
            self.con = duckdb.connect(config=config)
        except duckdb.Error:  # e.g. a memory limit DuckDB cannot read
            self._remove_tmp()
            raise
        # DuckDB draws its own progress bar on standard output for a query past two seconds (a
        # session setting, not one of ``connect``'s): a library call writes nothing there
        # (``kraftlake audit --format json`` writes the report there); progress is the caller's.
        try:
            self.con.execute("SET enable_progress_bar = false")
            self.con.execute("SET enable_progress_bar_print = false")  # should a query turn it on
        except duckdb.Error as exc:
            # In a Jupyter kernel DuckDB draws the bar as a widget, not on standard output, and
            # refuses any change to its settings without ipywidgets: left as it is there.
            log.debug("duckdb.progress_bar_settings_kept", reason=str(exc))
        self._held: list = []  # Arrow objects DuckDB scans: they must outlive their registration

    def read(self, dataset, last_offset: int) -> None:
        """The log's rows: ``dataset`` (a pyarrow dataset or table) cut after ``last_offset``."""
        self._held.append(dataset)
        self.con.register("log_rows", dataset)
        self.con.execute(f'CREATE OR REPLACE TEMP VIEW log AS SELECT * FROM log_rows WHERE "offset" <= {last_offset}')

    def read_snapshot(self, snap) -> None:
        """A ``LogSnapshot``'s rows, cut at its ``last_offset``: its Parquet files scanned by
        DuckDB's own reader (union by name: a file holds the columns of its record types) when
        every column of every file has the table's type and the columns the plan reads are in
        some file (14x the Arrow dataset's scan of a column on a 10^6-record log,
        bench/RESULTS.md); else through an Arrow dataset of the table's schema (a file written
        before a column or struct field existed reads it as null).

        DuckDB checks no page checksum: every file is checked before it scans them, against the
        digest in its name (``records.digests``), or, for a file named without one, by reading
        its pages with pyarrow's page checksums. An object store's files are copied into the
        spill directory as they are checked (one read each), and scanned there."""
        from kraftlake.records.store.data_files import check_pages, parquet_schema

        location = getattr(snap, "location", None)
        if location is not None and not location.is_local:
            self._copies = tempfile.mkdtemp(prefix="log-", dir=self.spill)
            files = snap.local_copies(self._copies)
        else:
            files = snap.files()
            snap.verify(files)  # CorruptStoreError naming a damaged file
        for f in files:
            if digests.expected(f) is None:
                check_pages(f)
        table = {f.name: f.type for f in snap.schema()}
        seen: set[str] = set()
        for f in files:
            for field in parquet_schema(f):  # CorruptStoreError naming a damaged file
                if table.get(field.name) != field.type:
                    self.read(snapshot_dataset(snap, files), snap.last_offset)
                    return
                seen.add(field.name)
        if not files or not PLAN_COLUMNS <= seen:
            self.read(snapshot_dataset(snap, files), snap.last_offset)
            return
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        columns = ", ".join(f'"{c}"' for c in sorted(seen))
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW log AS SELECT {columns} FROM read_parquet([{listed}], union_by_name = true)"
            f' WHERE "offset" <= {snap.last_offset}'
        )

    def table(self, name: str, rows: list[tuple], columns: list[tuple[str, str]]) -> None:
        """A small table from the driver: ``columns`` (name, BIGINT | INT | STRING | ARRAY<BIGINT> |
        DIR: a directory id, of the dictionary ``directories`` made)."""
        cols: list[Sequence] = list(zip(*rows)) if rows else [[] for _ in columns]
        t = pa.table({c: pa.array(list(v), type=_TYPES[ty]) for (c, ty), v in zip(columns, cols)})
        del cols
        self.con.register(f"{name}_arrow", t)
        select = ", ".join(f"CAST({c} AS {DIR_TYPE}) AS {c}" if ty == "DIR" else c for c, ty in columns)
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {select} FROM {name}_arrow")
        finally:
            # The table is DuckDB's copy now (within its memory limit, spilled beyond it): the
            # Arrow one would be held to the end beside it (the grace's candidates alone are
            # 3 columns x 17 million rows at 10^8 records).
            self.con.unregister(f"{name}_arrow")

    def directories(self, sql: str) -> None:
        """The plan's directory type (``dialect.DIR_TYPE``): an ENUM of the ids ``sql`` gives
        (column ``dir``), in string order (so that it compares as the strings do)."""
        self.con.execute(
            f"CREATE OR REPLACE TYPE {DIR_TYPE} AS ENUM"
            f" (SELECT DISTINCT dir FROM ({sql}) x WHERE dir IS NOT NULL ORDER BY dir)"
        )

    def arrow_table(self, name: str, table: pa.Table) -> None:
        """A table from the driver's Arrow columns (``table``'s names and types)."""
        self.con.register(f"{name}_arrow", table)
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {name}_arrow")
        finally:
            self.con.unregister(f"{name}_arrow")

    def view(self, name: str, sql: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")

    def keep(self, name: str, sql: str, *, sides_as_written: bool = False) -> None:
        """``sql`` computed once, kept as a table (read by several queries). ``sides_as_written``:
        each join's hash table built on its right side, as the statement writes it."""
        if not sides_as_written:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
            return
        # DuckDB swaps a join's sides where it estimates the left one smaller; its estimate of
        # an exploded, joined relation can be a few rows for tens of millions, and the hash
        # table is then built on those, beyond the memory limit (K4/K5's overlaps at 10^8
        # records under 1 GB, bench/RESULTS.md). Only for a statement written for it: elsewhere
        # the swap is what keeps a join within the limit (the incidents' effects).
        self.con.execute("SET disabled_optimizers = 'build_side_probe_side'")
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
        finally:
            self.con.execute("RESET disabled_optimizers")

    def drop(self, *names: str) -> None:
        """Let go of kept tables (``keep``, ``table``) no statement reads any more: their
        buffers go back to DuckDB's pool for the statements after them (below its memory limit,
        not added to it)."""
        for name in names:
            self.con.execute(f"DROP TABLE IF EXISTS {name}")

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def iter_rows(self, sql: str, batch: int = 10_000) -> Iterator[tuple]:
        """``rows`` a batch at a time, for a caller that keeps less than the rows (no other query
        may run on the connection until the rows are all read)."""
        result = self.con.execute(sql)
        while chunk := result.fetchmany(batch):
            yield from chunk

    def arrow(self, sql: str) -> pa.Table:
        return self.con.sql(sql).to_arrow_table()

    def arrow_batches(self, sql: str, rows: int = 100_000) -> pa.RecordBatchReader:
        """``arrow`` a batch of about ``rows`` at a time, streamed (no other statement may run
        on the connection until the batches are all read)."""
        return self.con.sql(sql).to_arrow_reader(rows)

    def close(self) -> None:
        self.con.close()
        self._held.clear()
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self._copies is not None:
            shutil.rmtree(self._copies, ignore_errors=True)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> DuckEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


SPILL_PREFIX = "kraftlake-duckdb-"
"""The engine's own spill directories: ``kraftlake-duckdb-<pid>-<random>`` under the system's
temporary directory."""


def _remove_orphaned_spills() -> None:
    """Remove the spill directories of engines whose process is gone: one killed (``kill -9``,
    the kernel's OOM killer) never ran ``close``, and its spill can be tens of GB (10^8
    records). A directory whose process still runs, or whose name carries no process id, is
    left alone."""
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        pid, sep, _rest = name.removeprefix(SPILL_PREFIX).partition("-")
        if not name.startswith(SPILL_PREFIX) or not sep or not pid.isdigit() or _alive(int(pid)):
            continue
        path = os.path.join(root, name)
        log.info("duckdb.orphaned_spill_removed", path=path)
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def snapshot_dataset(snap, files: list[str] | None = None):
    """A pyarrow dataset of a ``LogSnapshot``'s local Parquet files (or their local copies
    ``files``) with the table's schema (files written before a column existed read it as null),
    page checksums verified."""
    import pyarrow.dataset as ds

    from kraftlake.records.store.data_files import PARQUET

    return ds.dataset(snap.files() if files is None else files, schema=snap.schema(), format=PARQUET)
