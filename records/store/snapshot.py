"""Reading the log as it was at one Delta version: ``LogSnapshot``, and opening the table.

delta-rs resolves the snapshot (its version, its file list, its app transactions); the rows are
read from exactly its Parquet files with pyarrow (the same file list Spark reads), a file at a
time where a long log replays in bounded memory. Choosing the version is ``time_travel``'s job.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Iterator, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from ..arrow import RECORD_COLUMN, column_name, from_table
from ..base import Record
from ..catalog import BY_NAME
from ..errors import CorruptStoreError, LogError, LogNotFoundError, RecordError, TimeTravelError
from . import digests, log_checks
from .data_files import PARQUET, check_pages, read_parquet
from .delta_commit import listed
from .location import UNKNOWN_CAUSE, Location, resolve, storage_cause, storage_errors
from .log_checks import damaged_log

OFFSET_TXN = "kraftlake.offset"

ENVELOPE = ("offset", "ts_ms", "type", "version", "key", "source", "source_offset")


def arrow_schema(dt: DeltaTable) -> pa.Schema:
    return pa.schema(dt.schema().to_arrow())


def open_table(location: str | Location, version: int | None = None) -> DeltaTable:
    """The log's Delta table (at ``version``); ``LogNotFoundError``/``TimeTravelError`` when
    there is none, ``StorageError`` when its store cannot be used."""
    where = resolve(location)
    if where.local is not None and os.path.isfile(where.local):
        raise LogNotFoundError(
            f"{where.uri} is a file, not a kraftlake log (a log is a directory: create one with "
            "`kraftlake init`; `kraftlake append LOG FILE` appends a JSON Lines file to it)"
        )
    try:
        with storage_errors(where):
            try:
                return listed(
                    lambda: DeltaTable(where.uri, version=version, storage_options=where.options),
                    attempts=20 if where.is_local else 2,
                )
            except DeltaError as exc:
                # On an object store, delta-rs's words for a damaged _delta_log (a gap, a file
                # that is not JSON) are a Rust debug dump: said here as on local disk. A store
                # that cannot be used (no bucket, credentials, unreachable) stays a StorageError.
                if (
                    where.is_local
                    or isinstance(exc, TableNotFoundError)
                    or not storage_cause(exc).startswith(UNKNOWN_CAUSE)
                ):
                    raise
                raise damaged_log(where, exc) from None
    except TableNotFoundError:
        if version is None:
            raise LogNotFoundError(f"no kraftlake log at {where.uri} (create one with `kraftlake init`)") from None
        raise TimeTravelError(f"{where.uri} has no version {version}") from None
    except LogError:
        raise
    except BaseException as exc:  # delta-rs's errors, and its panics (not Exceptions)
        if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)):
            raise
        raise damaged_log(where, exc) from None


def _stat(actions: pa.Table, side: str, n: int) -> list[int | None]:
    """The ``add`` actions' ``min``/``max`` statistics of ``offset`` (None where there are none)."""
    if side not in actions.column_names or "offset" not in [f.name for f in actions.column(side).type]:
        return [None] * n
    return pc.struct_field(actions.column(side), "offset").to_pylist()


class LogSnapshot:
    """The log as of one Delta version, optionally cut at an offset. Read-only."""

    def __init__(self, dt: DeltaTable, *, to_offset: int | None = None, location: Location | None = None) -> None:
        self._dt = dt
        self.location = location if location is not None else resolve(dt.table_uri)
        """Where the table is: its files are read through ``location.filesystem``."""
        self.version: int = dt.version()
        try:
            stored = dt.transaction_version(OFFSET_TXN)  # delta-rs reads the app transactions here
        except DeltaError as exc:
            raise damaged_log(self.location, exc) from None
        last = -1 if stored is None else stored
        self.last_offset: int = last if to_offset is None else min(last, to_offset)
        protocol = dt.protocol()
        if protocol.reader_features or dt.metadata().partition_columns:
            raise LogError(
                "this table uses Delta reader features or partition columns that kraftlake's"
                f" file-list reader does not support: {protocol.reader_features}"
            )
        log_checks.check_kind(dt, self.location)
        self._actions = pa.table(dt.get_add_actions(flatten=False))
        """The version's ``add`` actions: its files, their sizes and statistics."""
        log_checks.check_files(self._actions, last, self.version, self.location)

    def cut(self, to_offset: int | None) -> LogSnapshot:
        """This snapshot cut after ``to_offset`` (None: as it is), without reading the table again."""
        if to_offset is None or to_offset >= self.last_offset:
            return self
        cut = copy.copy(self)
        cut.last_offset = max(-1, to_offset)
        return cut

    @property
    def table_id(self) -> str:
        """The Delta table's id (its ``metaData`` id, a uuid made when the log was created)."""
        return self._dt.metadata().id  # type: ignore[return-value]  # a uuid string: deltalake's stub says int

    def schema(self) -> pa.Schema:
        """The table's Arrow schema at this version (every column, struct fields included)."""
        return arrow_schema(self._dt)

    def files(self) -> list[str]:
        """The snapshot's Parquet files: absolute paths for a local table, URIs (``s3://…``) on
        an object store. Exactly what Spark reads. delta-rs gives local paths percent-encoded
        (``my%20log``): a path is the file's name on disk, unescaped."""
        uris = self._dt.file_uris()
        return [unquote(u) for u in uris] if self.location.is_local else list(uris)

    def dataset(self, columns: Sequence[str] | None = None) -> ds.Dataset:
        """The snapshot's rows as a ``pyarrow.dataset`` over exactly its Parquet files, read
        through ``pyarrow.fs`` with the log's storage options (any engine that scans Arrow
        datasets, DuckDB's included, reads it where it lies). Rows are not cut at ``last_offset``
        nor sorted: filter on ``offset`` for that. Each file is checked against the digest in its
        name first (read once, a piece at a time: ``CorruptStoreError`` naming a damaged one),
        and page checksums are verified as the dataset is read."""
        schema = arrow_schema(self._dt)
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        files = self._paths()
        fs = None if self.location.is_local else self.location.filesystem
        self.verify(files)
        return ds.dataset(files, schema=schema, format=PARQUET, filesystem=fs)

    def verify(self, files: Sequence[str] | None = None, *, pages: bool = False) -> int:
        """Check the snapshot's data files (or ``files`` of them) against the digests in their
        names, reading each once (with ``pages``, a file without one by reading its pages with
        their checksums): how many had a digest. ``CorruptStoreError`` names a damaged file, or
        one the store lost."""
        fs = None if self.location.is_local else self.location.filesystem
        checked = 0
        for f in self._paths() if files is None else files:
            try:
                if digests.verify(f, fs):
                    checked += 1
                elif pages:
                    check_pages(f, fs)
            except FileNotFoundError:
                raise self._missing(f) from None
            except OSError as exc:
                if "NoSuchKey" in str(exc) or "does not exist" in str(exc):
                    raise self._missing(f) from None
                raise CorruptStoreError(f"{os.path.basename(f)} cannot be read: {exc}", file=f) from exc
        return checked

    def local_copies(self, directory: str) -> list[str]:
        """The snapshot's data files copied into the local ``directory`` (same names), each
        checked against the digest in its name as it is copied: the local paths, in ``files``'
        order. For an engine that reads local files only, of a log on an object store."""
        copies = []
        fs = None if self.location.is_local else self.location.filesystem
        for f in self._paths():
            dest = os.path.join(directory, os.path.basename(f))
            try:
                digests.copy_checked(f, fs, dest)
            except FileNotFoundError:
                raise self._missing(f) from None
            except OSError as exc:
                if "NoSuchKey" in str(exc) or "does not exist" in str(exc):
                    raise self._missing(f) from None
                raise CorruptStoreError(f"{os.path.basename(f)} cannot be read: {exc}", file=f) from exc
            copies.append(dest)
        return copies

    def _read(self, files: list[str], schema: pa.Schema, where: ds.Expression | None) -> pa.Table:
        """``files``' rows matching ``where``, page checksums verified. A file gone is a
        ``TimeTravelError`` (vacuumed) or a ``CorruptStoreError`` (lost from the newest version).
        Local files are checked before (a stat each); an object store's are not (a request
        each): its read fails instead."""
        if self.location.is_local:
            missing = [f for f in files if not os.path.exists(f)]
            if missing:
                raise self._missing(missing[0])
            return read_parquet(files, schema, filter=where)
        try:
            return read_parquet(files, schema, filesystem=self.location.filesystem, filter=where)
        except CorruptStoreError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, FileNotFoundError) or "NoSuchKey" in str(exc) or "does not exist" in str(exc):
                raise self._missing(exc.file or files[0]) from None
            raise

    def _paths(self) -> list[str]:
        """The snapshot's data files as paths of ``location.filesystem`` (local: ``files()``)."""
        return [p for p, _, _ in self._file_ranges()]

    def _file_ranges(self) -> list[tuple[str, int | None, int | None]]:
        actions = self._actions
        paths = actions.column("path").to_pylist()
        lo, hi = (_stat(actions, side, len(paths)) for side in ("min", "max"))
        join = self.location.join
        return [(join(p), a, b) for p, a, b in zip(paths, lo, hi)]

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
        # One multi-threaded scan of exactly the snapshot's files; files written before a column
        # or struct field existed read it as null (conformed to defaults in from_table).
        where = (ds.field("offset") >= lo) & (ds.field("offset") <= hi)
        if wanted is not None:
            where &= ds.field("type").isin(wanted)
        result = self._read(files, schema, where).sort_by("offset")
        if wanted is None and hi >= lo and result.num_rows != hi - lo + 1:
            have = set(result.column("offset").to_pylist())
            raise self._gap(next((o for o in range(lo, hi + 1) if o not in have), None))
        return result

    def _missing(self, path: str) -> LogError:
        """A data file the version refers to is not there: vacuumed, when the version is an old
        one; lost, when it is the table's newest."""
        name = os.path.basename(path)
        newest = open_table(self.location).version()
        if self.version < newest:
            return TimeTravelError(
                f"version {self.version} refers to {name}, which was vacuumed; read the latest version cut"
                " at an offset instead"
            )
        return CorruptStoreError(
            f"{name} is missing: version {self.version}, the newest, refers to it (the store lost it)", file=path
        )

    def _gap(self, hole: int | None) -> CorruptStoreError:
        """The version's files do not hold each offset once (from ``hole`` on, or some twice)."""
        what = f"offsets from {hole} are missing" if hole is not None else "some offsets are held twice"
        return CorruptStoreError(
            f"{what} in version {self.version} (last offset {self.last_offset}): a commit file in"
            f" {self._dt.table_uri.removeprefix('file://')}/_delta_log is damaged or emptied"
        )

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
                if hit is not None and hit > best:
                    best = hit
        return best

    def record_times(self, offsets: Iterable[int]) -> dict[int, int | None]:
        """The record time (``ts_ms``; None where a record has none) of each of ``offsets``
        that the snapshot holds: a report's rows carry the times of the offsets they name. Only
        the ``offset`` and ``ts_ms`` columns of the files holding one of them are read."""
        import numpy as np

        wanted = np.unique(np.fromiter((o for o in offsets if 0 <= o <= self.last_offset), dtype=np.int64))
        out: dict[int, int | None] = {}
        if not len(wanted):
            return out
        schema = arrow_schema(self._dt)
        schema = pa.schema([schema.field("offset"), schema.field("ts_ms")])
        for path, a, b in self._file_ranges():
            if a is not None and b is not None:
                lo, hi = np.searchsorted(wanted, [a, b + 1])
                if lo == hi:
                    continue
                here = wanted[lo:hi]
            else:
                here = wanted
            table = self._read([path], schema, ds.field("offset").isin(pa.array(here)))
            for o, t in zip(table.column("offset").to_pylist(), table.column("ts_ms").to_pylist(), strict=True):
                out[o] = t
        return out

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
        spans = [(a, b, path) for a, b, path in ranges if a is not None and b is not None]
        if len(spans) != len(ranges):
            yield self.table(lo, hi)
            return
        spans.sort()
        if any(spans[i][1] >= spans[i + 1][0] for i in range(len(spans) - 1)):
            yield self.table(lo, hi)
            return
        # The files cover [lo, hi] with no hole: a commit that lost its ``add`` loses offsets.
        ends = [lo - 1] + [b for _, b, _ in spans]
        starts = [a for a, _, _ in spans] + [hi + 1]
        for end, start in zip(ends, starts):
            if start > end + 1:
                raise self._gap(end + 1)
        schema = arrow_schema(self._dt)
        if columns is not None and all(c in schema.names for c in columns):
            schema = pa.schema([schema.field(c) for c in columns])
        where = (ds.field("offset") >= lo) & (ds.field("offset") <= hi)
        for a, b, path in spans:
            whole = lo <= a and b <= hi
            table = self._read([path], schema, None if whole else where)
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
