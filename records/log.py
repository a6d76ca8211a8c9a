"""The log: records in a Delta Lake table with gapless offsets, via delta-rs.

What it guarantees (measured in ``shared/research/delta-spark-probe.md`` sections 1-3):

- **Gapless, strictly increasing offsets from 0.** Every append is *fenced*: it commits only on top
  of the version it read, and carries the new last offset as the app transaction
  ``kraftlake.offset``. A plain delta-rs append would silently rebase onto a newer version and
  repeat offsets; a fenced one fails, follows the commits it lost to, and retries. The commit
  file is written here, put-if-absent (``delta_commit``: a millisecond and durable, where
  delta-rs's commit costs 20-40 ms of CPU that grow with the log); delta-rs does everything else
  (creation, schema changes, checkpoints, compaction, snapshots and time travel).
- **A batch lands whole or not at all**, as one Parquet file in one Delta commit. A commit that
  loses the race deletes the file it wrote; a process killed before its commit leaves an
  unreferenced file that ``maintain`` vacuums, never a partial batch.
- **Exactly-once batches.** With a producer id and a sequence number, the commit also carries the
  app transactions ``kraftlake.producer/<id>`` (= sequence) and ``.../first``/``.../last`` (the
  batch's offsets). A batch whose sequence is not above the stored one is acknowledged with its
  original offsets and not written again.
- **Time travel** by Delta version, timestamp or record offset. delta-rs resolves the snapshot;
  the rows are read from exactly its Parquet files with pyarrow (the same file list Spark reads).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _package_version
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import TableNotFoundError
from deltalake.schema import Schema as DeltaSchema

from kraftlake.logging import get_logger

from .arrow import LOG_SCHEMA, RECORD_COLUMN, column_name, from_table, record_column, to_table
from .base import Record
from .catalog import BY_NAME
from .codec import normalize_batch
from .delta_commit import (
    DataFile,
    Upkeep,
    appends_after,
    checkpoint,
    commit_json,
    fsync_file,
    listed,
    put_if_absent,
)
from .errors import (
    AppendConflictError,
    LogError,
    LogExistsError,
    LogNotFoundError,
    RecordError,
    TimeTravelError,
)
from .location import local_path

log = get_logger("kraftlake.log")

OFFSET_TXN = "kraftlake.offset"
PRODUCER_TXN = "kraftlake.producer/"
TABLE_PROPERTIES = {
    "delta.appendOnly": "true",
    "delta.checkpointInterval": "100",
}
try:
    ENGINE_VERSION = _package_version("kraftlake")
except PackageNotFoundError:  # running from a checkout that was never installed
    ENGINE_VERSION = "0+unknown"
"""Written into every commit's ``engineInfo``."""
REOPEN_EVERY = 100
"""Commits between re-opening the DeltaTable: a long-lived object slows with history (probe 2)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ROW_GROUP_ROWS = 32_768
COMPACT_RECORDS = 250_000
"""A file this big is left alone by ``Log.compact``, and a merge stops growing there."""

ENVELOPE = ("offset", "ts_ms", "type", "version", "key", "source", "source_offset")


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed. ``duplicate``: it had landed before and was not written again."""

    first_offset: int
    last_offset: int
    version: int
    duplicate: bool = False

    def to_dict(self) -> dict[str, Any]:
        # Spelled out: the service answers every append with it, and asdict's deep copy costs
        # more than the rest of the answer.
        return {
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "version": self.version,
            "duplicate": self.duplicate,
        }


@dataclass(frozen=True)
class Commit:
    """One entry of the table's history."""

    version: int
    timestamp_ms: int
    operation: str
    first_offset: int | None = None
    last_offset: int | None = None
    records: int | None = None
    producer: str | None = None
    seq: int | None = None
    batches: tuple[tuple[str | None, int | None, int, int], ...] = ()
    """A group commit's batches: (producer, seq, first offset, last offset) each."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Batch:
    """One batch of a group commit (``Log.append_group``): its records and, for exactly-once,
    its producer and sequence."""

    records: Sequence[Record]
    producer: str | None = None
    seq: int | None = None


@dataclass
class MaintenanceReport:
    version_before: int
    version_after: int
    files_before: int
    files_after: int
    compacted: dict[str, Any] = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    checkpoint_version: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version_before": self.version_before,
            "version_after": self.version_after,
            "files_before": self.files_before,
            "files_after": self.files_after,
            "files_added_by_compaction": self.compacted.get("numFilesAdded", 0),
            "files_removed_by_compaction": self.compacted.get("numFilesRemoved", 0),
            "files_vacuumed": len(self.vacuumed),
            "checkpoint_version": self.checkpoint_version,
        }


def _producer_txns(producer: str, seq: int, first: int, last: int, version: int) -> list[tuple[str, int]]:
    """A producer's app transactions (app id, version) in a commit: its sequence, where that
    batch landed, and the version (fenced: the commit becomes exactly that version, or nothing)."""
    return [
        (PRODUCER_TXN + producer, seq),
        (PRODUCER_TXN + producer + "/first", first),
        (PRODUCER_TXN + producer + "/last", last),
        (PRODUCER_TXN + producer + "/version", version),
    ]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _arrow_schema(dt: DeltaTable) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


def _open_table(path: str, version: int | None = None) -> DeltaTable:
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
        return _arrow_schema(self._dt)

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
        schema = _arrow_schema(self._dt)
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
        schema = _arrow_schema(self._dt)
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


class Log:
    """A kraftlake log: one Delta table. Create with ``Log.create``, open with ``Log.open``."""

    def __init__(self, path: str | os.PathLike[str], dt: DeltaTable) -> None:
        self.path = str(path)
        self._dt = dt
        self._head = dt.version()
        """The newest version this object knows: ``_dt``'s, or a newer one it committed itself
        (commits are written directly, ``delta_commit``; ``_dt`` catches up when read)."""
        self._commits_since_open = 0
        self._schema_checked = False
        self._checkpoint_interval = int(dt.metadata().configuration.get("delta.checkpointInterval", "100"))
        self._upkeep: Upkeep | None = None
        self._commit_lock = threading.Lock()
        """Held while a commit file is put and ``_head`` moves: appends and the compaction of
        ``upkeep_in_background`` (another thread) commit on top of one another."""
        self._txn_cache: dict[str, int | None] = {}
        """App transactions at ``_head``: those set by the commits after ``_dt``'s version (read
        from ``_dt`` they would be stale), and lookups already made."""

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> Log:
        """Create an empty log at ``path``; ``LogExistsError`` if a table is already there."""
        path = local_path(path)
        try:
            DeltaTable(path)
        except TableNotFoundError:
            pass
        else:
            raise LogExistsError(f"{path} already holds a Delta table")
        dt = DeltaTable.create(
            path,
            schema=LOG_SCHEMA,
            name="kraftlake",
            description="kraftlake event-sourced metadata log",
            configuration=TABLE_PROPERTIES,
            commit_properties=CommitProperties(custom_metadata={"kraftlake.operation": "init"}),
        )
        log.info("log.created", path=path, version=dt.version())
        return cls(path, dt)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Log:
        """Open the log at ``path``; ``LogNotFoundError`` if there is none."""
        path = local_path(path)
        return cls(path, _open_table(path))

    def upkeep_in_background(self, compact_after: int | None = None) -> Upkeep:
        """Write the checkpoints this object's commits call for (every ``delta.checkpointInterval``
        versions) on a thread of their own instead of in the commit that calls for them, and
        with ``compact_after``, compact the table there once it holds more files than that: for
        a long-lived writer such as the service. ``close()`` the result before exiting."""
        if self._upkeep is None:
            self._upkeep = Upkeep(self.path, None if compact_after is None else lambda: self.compact(compact_after))
        return self._upkeep

    # -- state -------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Catch up with the table (commits of other writers, and this object's own)."""
        with self._commit_lock:  # the upkeep thread's compaction moves ``_head`` too
            if self._commits_since_open >= REOPEN_EVERY:
                self._dt = _open_table(self.path)
                self._commits_since_open = 0
            else:
                listed(self._dt.update_incremental)
            self._head = self._dt.version()
            self._txn_cache = {}

    def _catch_up(self) -> None:
        """Move to the newest version after losing one to another writer (or to this object's
        compaction): by reading the commit files that follow when they only append or compact
        (cheap), else by a full refresh."""
        with self._commit_lock:
            followed = appends_after(self.path, self._head)
            if followed is not None:
                self._head, txns = followed
                self._txn_cache.update(txns)
                return
        self.refresh()

    def compact(self, more_than: int) -> int | None:
        """When the table holds more than ``more_than`` files (every append adds one; readers pay
        for each), merge each run of small files that are neighbours by offset into one file,
        committed beside this object's appends: the version of the compaction, or None (few
        enough files, or another process changed the table's layout meanwhile: next time). Big
        files (a compaction's output past ``COMPACT_RECORDS``) are not rewritten again; rows keep
        their offsets; versions before it keep their files until ``maintain`` vacuums them."""
        dt = listed(lambda: DeltaTable(self.path))
        actions = pa.table(dt.get_add_actions(flatten=True))
        if actions.num_rows <= more_than or "min.offset" not in actions.column_names:
            return None
        files = sorted(
            zip(
                *[
                    actions.column(c).to_pylist()
                    for c in ("min.offset", "max.offset", "num_records", "path", "size_bytes")
                ]
            )
        )
        runs: list[list[tuple]] = [[]]
        for f in files:
            lo, hi, rows = f[0], f[1], f[2]
            if lo is None or hi is None or rows >= COMPACT_RECORDS:
                runs.append([])  # a big file (or one without statistics) ends a run
                continue
            if runs[-1] and (runs[-1][-1][1] + 1 != lo or sum(x[2] for x in runs[-1]) + rows > COMPACT_RECORDS):
                runs.append([])
            runs[-1].append(f)
        runs = [r for r in runs if len(r) > 1]
        if not runs:
            return None
        root = dt.table_uri.removeprefix("file://")
        schema = _arrow_schema(dt)
        added, removed, written = [], [], []
        for run in runs:
            paths = [os.path.join(root, f[3]) for f in run]
            # The columns these files hold (a few of the table's 250), in the table's types.
            present = set(pa.unify_schemas([pq.read_schema(p) for p in paths]).names)
            table = ds.dataset(
                paths, schema=pa.schema([f for f in schema if f.name in present]), format="parquet"
            ).to_table()
            file = self._write_file(
                table.sort_by("offset"), f"part-{run[0][0]:020d}-compacted-{uuid.uuid4()}.zstd.parquet"
            )
            written.append(os.path.join(self.path, file.path))
            added.append(file)
            removed += [(f[3], f[4]) for f in run]
        body = commit_json(
            added,
            [],
            {"kraftlake.operation": "compact", "kraftlake.files": str(len(removed))},
            _now_ms(),
            ENGINE_VERSION,
            removed=removed,
        )
        with self._commit_lock:
            while True:
                # After the snapshot compacted, appends only (another compaction would have
                # removed files this one removes again); this object follows whatever came.
                followed = appends_after(self.path, dt.version(), compactions=False)
                mine = appends_after(self.path, self._head)
                if followed is None or mine is None:
                    for full in written:
                        os.remove(full)
                    return None
                self._head, txns = mine
                self._txn_cache.update(txns)
                if put_if_absent(self.path, self._head + 1, body):
                    break
            self._head += 1
            version = self._head
        log.info("log.compacted", files=len(removed), into=len(added), version=version)
        return version

    @property
    def version(self) -> int:
        return self._head

    @property
    def last_offset(self) -> int:
        """Offset of the last record, -1 for an empty log (as of the last refresh)."""
        stored = self._txn(OFFSET_TXN)
        return -1 if stored is None else stored

    def producer_seq(self, producer: str) -> int | None:
        """The last sequence number that landed for ``producer``, or None."""
        return self._txn(PRODUCER_TXN + producer)

    def _txn(self, app_id: str) -> int | None:
        """An app transaction's version at ``_head``, cached: delta-rs scans every app id per
        lookup (0.7 ms with a few hundred producers), and a group commit asks for four per
        producer. ``_dt`` may stand on an older version: what changed since is in the cache."""
        cache = self._txn_cache
        if app_id not in cache:
            cache[app_id] = self._dt.transaction_version(app_id)
        return cache[app_id]

    # -- append ------------------------------------------------------------------------------

    def _evolve_schema(self) -> pa.Schema:
        """Add the columns and struct fields this code knows and the table lacks (newer record
        types or fields); tables written by an older kraftlake stay readable and appendable."""
        current = _arrow_schema(self._dt)
        missing = []
        for f in LOG_SCHEMA:
            if f.name not in current.names:
                missing.append(f)
            elif pa.types.is_struct(f.type) and not _struct_covers(current.field(f.name).type, f.type):
                missing.append(f)
        if missing:
            fields = DeltaSchema.from_arrow(pa.schema(missing)).fields
            self._dt.alter.add_columns(fields)
            self.refresh()  # the schema change is a commit: appends go on after it
            log.info("log.schema_evolved", path=self.path, columns=[f.name for f in missing])
        self._schema_checked = True
        return LOG_SCHEMA

    def append(
        self,
        records: Sequence[Record],
        *,
        producer: str | None = None,
        seq: int | None = None,
        validated: bool = False,
        max_attempts: int = 1000,
    ) -> AppendResult:
        """Append one batch atomically, with offsets ``last + 1 .. last + len(records)``.

        Args:
            records: the batch, validated first (``RecordError`` names index, type and field).
            producer, seq: give both for exactly-once: a batch whose ``seq`` is not above the
                producer's stored sequence is acknowledged with its original offsets.
            validated: the records come straight from kraftlake's decoders (``iter_lines``,
                ``decode_line``, ``from_builtins``), which already checked and upcast them; skips
                the second check. Structs built by calling their class are never validated:
                leave it False for those.
            max_attempts: fenced commits to try before ``AppendConflictError``.
        """
        if (producer is None) != (seq is None):
            raise ValueError("give both producer and seq, or neither")
        if seq is not None and seq < 0:
            raise ValueError("seq must be >= 0")
        if not records:
            raise RecordError("a batch holds at least one record")
        batch = list(records) if validated else normalize_batch(records)
        if not self._schema_checked:
            self._evolve_schema()
        ts_ms = _now_ms()
        encoded_at = self.last_offset + 1
        data = to_table(batch, first_offset=encoded_at, ts_ms=ts_ms, producer=producer, producer_seq=seq)
        batch_id = str(uuid.uuid4())
        rng = random.Random(batch_id)  # jitter only: no effect on what is written
        for attempt in range(1, max_attempts + 1):
            if producer is not None:
                done = self._duplicate(producer, seq)  # type: ignore[arg-type]
                if done is not None:
                    return done
            first = self.last_offset + 1
            version = self._head
            if first != encoded_at:  # another writer took our offsets: re-encode the records
                blobs = record_column(batch, first_offset=first, ts_ms=ts_ms)
                data = data.set_column(data.schema.get_field_index(RECORD_COLUMN), RECORD_COLUMN, blobs)
                encoded_at = first
            result = self._try_commit(data, first, version, producer, seq, batch_id)
            if result is not None:
                if attempt > 1:
                    log.debug("append.committed_after_retries", attempts=attempt, version=result.version)
                return result
            self._catch_up()
            # Lost the race to another writer: back off a little, with jitter, so that writers
            # contending for the same version don't keep colliding in lockstep.
            time.sleep(rng.uniform(0, min(0.05, 0.002 * attempt)))
        raise AppendConflictError(f"gave up after {max_attempts} attempts: other writers kept committing first")

    def _write_file(self, rows: pa.Table, name: str) -> DataFile:
        """``rows`` (in offset order) as the durable data file ``name``, with the statistics
        its ``add`` action carries."""
        n = rows.num_rows
        # A column null in every row (the struct of each record type the rows do not hold) is
        # left out of the file: readers take the table's schema and read it as null, as they do
        # for files written before a column existed. A batch of a few types then writes a few
        # column chunks instead of 250 (0.5 ms instead of 10, a sixteenth of the bytes).
        rows = rows.select([c for c in rows.column_names if rows.column(c).null_count < n])
        full = os.path.join(self.path, name)
        # Row groups carry offset statistics: a read of a range (the tail after a snapshot)
        # skips the groups outside it instead of decompressing the whole file.
        pq.write_table(rows, full, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        fsync_file(full)
        st = os.stat(full)
        offsets, ts = rows.column("offset"), rows.column("ts_ms")
        stats = {
            "numRecords": n,
            "minValues": {"offset": offsets[0].as_py(), "ts_ms": pc.min(ts).as_py()},
            "maxValues": {"offset": offsets[-1].as_py(), "ts_ms": pc.max(ts).as_py()},
            "nullCount": {"offset": 0, "ts_ms": 0},
        }
        return DataFile(name, st.st_size, int(st.st_mtime * 1000), json.dumps(stats))

    def _try_commit(
        self,
        data: pa.Table,
        first: int,
        version: int,
        producer: str | None,
        seq: int | None,
        batch_id: str,
        group: list[tuple[str | None, int | None, int, int]] | None = None,
    ) -> AppendResult | None:
        n = data.num_rows
        last = first + n - 1
        data = data.set_column(0, "offset", pa.array(range(first, first + n), pa.int64()))
        file = self._write_file(data, f"part-{first:020d}-{batch_id}.zstd.parquet")
        full = os.path.join(self.path, file.path)
        txns = [(OFFSET_TXN, last)]
        meta = {
            "kraftlake.operation": "append",
            "kraftlake.batch": batch_id,
            "kraftlake.first_offset": str(first),
            "kraftlake.last_offset": str(last),
            "kraftlake.records": str(n),
        }
        if producer is not None:
            txns += _producer_txns(producer, seq, first, last, version + 1)  # type: ignore[arg-type]
            meta |= {"kraftlake.producer": producer, "kraftlake.seq": str(seq)}
        if group is not None:
            # Each producer's newest batch in the group is its stored sequence; every batch's
            # range is in the commit's metadata, where a late retry finds it.
            newest: dict[str, tuple[int, int, int]] = {}
            for p, q, lo, hi in group:
                if p is not None:
                    newest[p] = (q, lo, hi)  # type: ignore[assignment]
            for p, (q, lo, hi) in sorted(newest.items()):
                txns += _producer_txns(p, q, lo, hi, version + 1)
            meta["kraftlake.batches"] = json.dumps(group)
        body = commit_json(
            [file],
            txns,
            meta,
            _now_ms(),
            ENGINE_VERSION,
        )
        with self._commit_lock:
            landed = version == self._head and put_if_absent(self.path, version + 1, body)
            if landed:
                self._head = version + 1
                self._commits_since_open += 1
                self._txn_cache.update(txns)
        if not landed:
            os.remove(full)  # nothing refers to it: the refused commit never happened
            return None
        if (version + 1) % self._checkpoint_interval == 0:
            if self._upkeep is not None:
                self._upkeep.request(version + 1)
            else:
                checkpoint(self.path, version + 1)
        log.debug("append.committed", first_offset=first, last_offset=last, version=version + 1)
        return AppendResult(first, last, version + 1)

    def append_group(self, batches: Sequence[Batch], *, max_attempts: int = 1000) -> list[AppendResult]:
        """Append several batches in one commit (group commit: what the HTTP service does with
        the requests waiting for the same commit). Each batch lands whole and contiguous, in the
        order given; a batch a producer already sent is answered with its original offsets and
        not written; all the others land together, or none does. Records must come from
        kraftlake's decoders (``from_builtins``, ``decode_line``): they are not checked again.
        """
        for b in batches:
            if (b.producer is None) != (b.seq is None):
                raise ValueError("give both producer and seq, or neither")
            if not b.records:
                raise RecordError("a batch holds at least one record")
        if not self._schema_checked:
            self._evolve_schema()
        ts_ms = _now_ms()
        batch_id = str(uuid.uuid4())
        rng = random.Random(batch_id)
        for attempt in range(1, max_attempts + 1):
            results: list[AppendResult | None] = [None] * len(batches)
            pending: list[int] = []
            claimed: dict[str, int] = {}
            for i, b in enumerate(batches):
                if b.producer is not None:
                    done = self._duplicate(b.producer, b.seq)  # type: ignore[arg-type]
                    if done is not None:
                        results[i] = done
                        continue
                    if claimed.get(b.producer, -1) >= b.seq:  # type: ignore[operator]
                        raise RecordError(
                            f"producer {b.producer!r}: seq {b.seq} follows seq {claimed[b.producer]} in one group"
                        )
                    claimed[b.producer] = b.seq  # type: ignore[assignment]
                pending.append(i)
            if not pending:
                return results  # type: ignore[return-value]
            first = self.last_offset + 1
            version = self._head
            # One table for the whole group (a table per batch costs a conversion per column
            # per batch, and a chunk per batch in the file): producers set per row after.
            rows: list[Record] = []
            group, producers, seqs, at = [], [], [], first
            for i in pending:
                b = batches[i]
                n = len(b.records)
                rows.extend(b.records)
                group.append((b.producer, b.seq, at, at + n - 1))
                producers += [b.producer] * n
                seqs += [b.seq] * n
                at += n
            data = to_table(rows, first_offset=first, ts_ms=ts_ms)
            data = data.set_column(
                data.schema.get_field_index("producer"), "producer", pa.array(producers, pa.string())
            )
            data = data.set_column(
                data.schema.get_field_index("producer_seq"), "producer_seq", pa.array(seqs, pa.int64())
            )
            landed = self._try_commit(data, first, version, None, None, batch_id, group)
            if landed is not None:
                for i, (_, _, lo, hi) in zip(pending, group):
                    results[i] = AppendResult(lo, hi, landed.version)
                return results  # type: ignore[return-value]
            self._catch_up()
            time.sleep(rng.uniform(0, min(0.05, 0.002 * attempt)))
        raise AppendConflictError(f"gave up after {max_attempts} attempts: other writers kept committing first")

    def _duplicate(self, producer: str, seq: int) -> AppendResult | None:
        """The original landing of a batch this producer already sent, or None for a new one."""
        stored = self.producer_seq(producer)
        if stored is None or seq > stored:
            return None
        txn = self._txn
        if seq == stored:
            first, last = txn(PRODUCER_TXN + producer + "/first"), txn(PRODUCER_TXN + producer + "/last")
            version = txn(PRODUCER_TXN + producer + "/version")
            assert first is not None and last is not None and version is not None
            return AppendResult(first, last, version, duplicate=True)
        # An older batch (a retry whose acknowledgement was lost long ago): its commit says where.
        for c in self.history():
            if c.producer == producer and c.seq == seq and c.first_offset is not None:
                return AppendResult(c.first_offset, c.last_offset, c.version, duplicate=True)  # type: ignore[arg-type]
            for p, q, lo, hi in c.batches:
                if p == producer and q == seq:
                    return AppendResult(lo, hi, c.version, duplicate=True)
        raise RecordError(
            f"producer {producer!r} sent seq {seq} after seq {stored}, and no commit in the"
            " table's history holds it: sequences must increase"
        )

    # -- read --------------------------------------------------------------------------------

    def at(
        self,
        *,
        version: int | None = None,
        timestamp: datetime | str | None = None,
        offset: int | None = None,
        source_offset: int | None = None,
    ) -> LogSnapshot:
        """The log as of a Delta ``version``, a ``timestamp`` (datetime or ISO string), a record
        ``offset`` (the latest version cut there), or a ``source_offset``: the latest version cut
        after the last record imported from that offset or before it (a Kafka offset, for a log
        made by ``import-kafka``). Give at most one."""
        given = [x is not None for x in (version, timestamp, offset, source_offset)]
        if sum(given) > 1:
            raise ValueError("give at most one of version, timestamp, offset, source_offset")
        if source_offset is not None:
            fresh = self._fresh()
            return LogSnapshot(fresh, to_offset=LogSnapshot(fresh).offset_of_source(source_offset))
        if version is not None:
            if version < 0 or version > self._fresh().version():
                raise TimeTravelError(f"{self.path} has versions 0..{self._dt.version()}, not {version}")
            return LogSnapshot(_open_table(self.path, version))
        if timestamp is not None:
            return LogSnapshot(_open_table(self.path, self._version_at(timestamp)))
        if offset is not None and offset < -1:
            raise TimeTravelError(f"offset {offset} is below -1 (the empty log)")
        return LogSnapshot(self._fresh(), to_offset=offset)

    def _version_at(self, timestamp: datetime | str) -> int:
        """The newest version committed at or before ``timestamp``, by the commit times that
        ``history`` shows (delta-rs's own resolution uses file modification times, which can
        differ from them by milliseconds)."""
        when = datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        limit_ms = (when - _EPOCH) // timedelta(milliseconds=1)  # exact, unlike float seconds
        candidates = [h["version"] for h in self._fresh().history() if h["timestamp"] <= limit_ms]
        if not candidates:
            raise TimeTravelError(f"{self.path} has no version committed at or before {when.isoformat()}")
        return max(candidates)

    def _fresh(self) -> DeltaTable:
        self.refresh()
        return self._dt

    def read(
        self,
        from_offset: int | None = None,
        to_offset: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Record]:
        """Records of the latest version in ``[from_offset, to_offset]``, of the given types."""
        return self.at().records(from_offset, to_offset, types)

    def history(self, limit: int | None = None) -> list[Commit]:
        """Commits, newest first."""
        out = []
        for h in self._fresh().history(limit):

            def num(key: str, h: dict = h) -> int | None:
                v = h.get(key)
                return None if v is None else int(v)

            out.append(
                Commit(
                    version=h["version"],
                    timestamp_ms=h["timestamp"],
                    operation=h.get("kraftlake.operation") or h.get("operation", "?").lower(),
                    first_offset=num("kraftlake.first_offset"),
                    last_offset=num("kraftlake.last_offset"),
                    records=num("kraftlake.records"),
                    producer=h.get("kraftlake.producer"),
                    seq=num("kraftlake.seq"),
                    batches=tuple(tuple(b) for b in json.loads(h["kraftlake.batches"]))
                    if "kraftlake.batches" in h
                    else (),  # type: ignore[misc]
                )
            )
        return out

    # -- maintenance -------------------------------------------------------------------------

    def maintain(self, *, retention_hours: int | None = None, target_size: int | None = None) -> MaintenanceReport:
        """Compact small files, write a checkpoint, vacuum unreferenced files.

        Vacuum runs in full mode (it also reaps files of commits that never landed) and honours
        the retention window (the table's ``delta.deletedFileRetentionDuration``, 7 days by
        default, unless ``retention_hours`` says otherwise): no version inside the window loses a
        file. Older versions stay reachable by offset (``at(offset=...)``).
        """
        dt = _open_table(self.path)
        before_version, before_files = dt.version(), len(dt.file_uris())
        compacted = dt.optimize.compact(
            target_size=target_size,
            commit_properties=CommitProperties(custom_metadata={"kraftlake.operation": "compact"}),
        )
        dt.update_incremental()
        dt.create_checkpoint()
        checkpoint_version = dt.version()
        vacuumed = dt.vacuum(
            retention_hours=retention_hours,
            dry_run=False,
            enforce_retention_duration=retention_hours is None,
            full=True,
            commit_properties=CommitProperties(custom_metadata={"kraftlake.operation": "vacuum"}),
        )
        dt.cleanup_metadata()
        dt = _open_table(self.path)
        self._dt = dt
        self._commits_since_open = 0
        report = MaintenanceReport(
            version_before=before_version,
            version_after=dt.version(),
            files_before=before_files,
            files_after=len(dt.file_uris()),
            compacted=compacted.get("metrics", compacted) if isinstance(compacted, dict) else {},
            vacuumed=list(vacuumed),
            checkpoint_version=checkpoint_version,
        )
        log.info("log.maintained", path=self.path, **report.to_dict())
        return report


def _struct_covers(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether struct type ``have`` already holds every (nested) field of ``want``."""
    if not pa.types.is_struct(want):
        return True
    if not pa.types.is_struct(have):
        return False
    names = {f.name: f for f in have}
    return all(f.name in names and _struct_covers(names[f.name].type, f.type) for f in want)
