"""The log: records in a Delta Lake table with gapless offsets, via delta-rs.

What it guarantees (the delta-rs behaviours it rests on are in ``docs/delta-on-this-machine.md``):

- **Gapless, strictly increasing offsets from 0.** Every append is *fenced*: it commits only on top
  of the version it read, and carries the new last offset as the app transaction
  ``kraftlake.offset``. A plain delta-rs append would silently rebase onto a newer version and
  repeat offsets; a fenced one fails, follows the commits it lost to, and retries. On a local
  path and on S3 the log writes the commit file itself, put-if-absent (``delta_commit``: by
  ``link(2)``, durable; ``location``: S3's conditional put), far cheaper than delta-rs's commit
  (bench/RESULTS.md); on the other object stores, and on S3 where a locking provider stands in
  for conditional puts, delta-rs commits with no retries (``store_commit``). delta-rs does
  everything else (creation, schema changes, checkpoints, compaction, snapshots and time
  travel).
- **A batch lands whole or not at all**, as one Parquet file in one Delta commit. A commit that
  loses the race deletes the file it wrote; a process killed before its commit leaves an
  unreferenced file that ``maintain`` vacuums, never a partial batch.
- **Exactly-once batches.** With a producer id and a sequence number, the commit also carries the
  app transactions ``kraftlake.producer/<id>`` (= sequence) and ``.../first``/``.../last`` (the
  batch's offsets), the id with ``%`` and ``/`` escaped (``appending.producer_key``). A batch whose sequence is not above the stored one is acknowledged with its
  original offsets and not written again.
- **Time travel** by Delta version, timestamp or record offset. delta-rs resolves the snapshot;
  the rows are read from exactly its Parquet files with pyarrow (the same file list Spark reads).

- **No commit on top of a history that is gone**: before each commit the file of the version
  it builds on is looked at once (``lineage``); missing or replaced, the commit is refused.

``Log`` is put together from one module per job: ``snapshot`` (reading one version),
``appending`` (the fenced, exactly-once append), ``compaction`` (``compact`` and ``maintain``),
``history``, ``time_travel`` and ``follow`` (subscriptions); this module holds what they share, the table and the version
this object stands on, and re-exports their names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.schema import Schema as DeltaSchema

from kraftlake.logging import get_logger

from ..arrow import LOG_SCHEMA
from ..base import Record
from ..errors import LogExistsError, StorageError, UnsupportedLocationError
from . import log_checks, store_commit
from .appending import (
    KEY_FORMAT,
    KEY_FORMAT_TXN,
    AppendingMixin,
    AppendResult,
    Batch,
    legacy_keys_ambiguous,
    producer_key,
)
from .compaction import CompactionMixin, MaintenanceReport
from .data_files import now_ms
from .delta_commit import DataFile, Upkeep, appends_after, listed, put_if_absent
from .follow import Follower, FollowMixin
from .history import Commit, HistoryMixin
from .lineage import Lineage
from .location import Location, resolve, storage_errors
from .snapshot import OFFSET_TXN, LogSnapshot, damaged_log, open_table
from .time_travel import TimeTravelMixin

__all__ = [
    "OFFSET_TXN",
    "REOPEN_EVERY",
    "TABLE_PROPERTIES",
    "AppendResult",
    "Batch",
    "Commit",
    "Follower",
    "Log",
    "LogSnapshot",
    "MaintenanceReport",
]

log = get_logger("kraftlake.log")

TABLE_PROPERTIES = {
    "delta.appendOnly": "true",
    "delta.checkpointInterval": "100",
}
REOPEN_EVERY = 100
"""Commits between re-opening the DeltaTable: a long-lived object slows with every commit it
makes (``docs/delta-on-this-machine.md``, What a commit costs)."""


class Log(AppendingMixin, CompactionMixin, FollowMixin, HistoryMixin, TimeTravelMixin):
    """A kraftlake log: one Delta table. Create with ``Log.create``, open with ``Log.open``."""

    def __init__(self, location: str | os.PathLike[str] | Location, dt: DeltaTable) -> None:
        self.location = resolve(location)
        self.path = self.location.uri
        """The table's local path, or its URI on an object store."""
        self._loading: threading.Thread | None = None
        self._loading_lock = threading.Lock()
        try:
            log_checks.check_table(dt, self.location)  # what it appends to is a log, whole
            self._legacy_keys = dt.transaction_version(KEY_FORMAT_TXN) != KEY_FORMAT
            """Created before producer ids were escaped in their keys (``appending.producer_key``)."""
        except DeltaError as exc:  # delta-rs reads app transactions lazily, and fails there
            raise damaged_log(self.location, exc) from None
        self._dt = dt
        self._head = dt.version()
        """The newest version this object knows: ``_dt``'s, or a newer one it committed itself
        (commits are written directly, ``delta_commit``; ``_dt`` catches up when read)."""
        self._commits_since_open = 0
        self._schema_checked = False
        configuration = dt.metadata().configuration
        self._checkpoint_interval = int(configuration.get("delta.checkpointInterval", "100"))
        self._legacy_cache: dict[str, tuple[int, int, int, int] | None] = {}
        self._upkeep: Upkeep | None = None
        self._lineage = Lineage(self.location)
        """The commit file the next commit builds on, checked before it is put."""
        self._commit_lock = threading.Lock()
        """Held while a commit file is put and ``_head`` moves: appends and the compaction of
        ``upkeep_in_background`` (another thread) commit on top of one another."""
        self._txn_cache: dict[str, int | None] = {}
        """App transactions at ``_head``: those set by the commits after ``_dt``'s version (read
        from ``_dt`` they would be stale), and lookups already made."""

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> Log:
        """Create an empty log at ``path`` (a local path or a URI: ``s3://bucket/prefix``…, with
        delta-rs's ``storage_options``); ``LogExistsError`` if a table is already there,
        ``StorageError`` when the store cannot be used (nothing is created then)."""
        where = resolve(path, storage_options)
        if where.local is not None:
            _make_directory(where.local)
        with storage_errors(where):
            try:
                DeltaTable(where.uri, storage_options=where.options)
            except TableNotFoundError:
                pass
            else:
                raise LogExistsError(f"{where.uri} already holds a Delta table")
            dt = DeltaTable.create(
                where.uri,
                schema=LOG_SCHEMA,
                name="kraftlake",
                description="kraftlake event-sourced metadata log",
                configuration=TABLE_PROPERTIES,
                storage_options=where.options,
                commit_properties=CommitProperties(
                    custom_metadata={"kraftlake.operation": "init"},
                    app_transactions=[
                        Transaction(KEY_FORMAT_TXN, KEY_FORMAT),
                        Transaction(
                            log_checks.SCHEMA_TXN, log_checks.schema_digest(DeltaSchema.from_arrow(LOG_SCHEMA))
                        ),
                    ],
                ),
            )
        log.info("log.created", path=where.uri, version=dt.version())
        return cls(where, dt)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> Log:
        """Open the log at ``path`` (a local path or a URI, with delta-rs's ``storage_options``);
        ``LogNotFoundError`` if there is none, ``StorageError`` when the store cannot be used."""
        where = resolve(path, storage_options)
        return cls(where, open_table(where))

    @property
    def storage_options(self) -> dict[str, str]:
        """The storage options this log was opened with (give them to whatever else reads it)."""
        return dict(self.location.storage_options)

    def upkeep_in_background(self, compact_after: int | None = None) -> Upkeep:
        """Write the checkpoints this object's commits call for (every ``delta.checkpointInterval``
        versions) on a thread of their own instead of in the commit that calls for them, and
        with ``compact_after``, compact the table there once it holds more files than that: for
        a long-lived writer such as the service. ``close()`` the result before exiting."""
        if self._upkeep is None:
            self._upkeep = Upkeep(self.location, None if compact_after is None else lambda: self.compact(compact_after))
        return self._upkeep

    # -- state -------------------------------------------------------------------------------

    @property
    def _dt(self) -> DeltaTable:
        """The delta-rs table, once the move ``_load_in_background`` started has ended."""
        self._settle_load()
        return self.__dt

    @_dt.setter
    def _dt(self, dt: DeltaTable) -> None:
        self._settle_load()
        self.__dt = dt

    def _load_in_background(self) -> None:
        """On an object store, start moving the delta-rs table to ``_head`` (a commit needs it
        there: delta-rs's own commit leaves it where it was) while the caller checks and
        converts its batch: that move is three requests (a LIST and two GETs of the commit),
        and delta-rs makes them without the GIL. Whoever reads ``_dt`` next waits for it, and
        the append that started it waits for it before it returns (``_settle_load``): nothing
        runs on after the call. A failure here is left to the commit's own move, which reports
        it."""
        if self.location.commits_by_put:
            return
        with self._loading_lock:
            if self._loading is not None:
                return
            dt, version = self.__dt, self._head
            if dt.version() == version:
                return
            self._loading = threading.Thread(
                target=_load_quietly, args=(dt, version), name="kraftlake-load", daemon=True
            )
            self._loading.start()

    def _settle_load(self) -> None:
        """Wait for the move ``_load_in_background`` started, if any."""
        loading = self._loading
        if loading is not None:
            loading.join()
            with self._loading_lock:
                if self._loading is loading:
                    self._loading = None

    def refresh(self) -> None:
        """Catch up with the table (commits of other writers, and this object's own)."""
        with self._commit_lock:  # the upkeep thread's compaction moves ``_head`` too
            if self._commits_since_open >= REOPEN_EVERY:
                self._dt = open_table(self.location)
                self._commits_since_open = 0
            else:
                try:
                    listed(self._dt.update_incremental)
                except DeltaError as exc:
                    raise damaged_log(self.location, exc) from None
            if self._dt.version() != self._head:  # commits this object has not checked
                try:
                    log_checks.check_table(self._dt, self.location)
                except DeltaError as exc:
                    raise damaged_log(self.location, exc) from None
            self._head = self._dt.version()
            self._txn_cache = {}

    def _catch_up(self) -> None:
        """Move to the newest version after losing one to another writer (or to this object's
        compaction): by reading the commit files that follow when they only append or compact
        (cheap), else by a full refresh."""
        with self._commit_lock:
            followed = appends_after(self.location, self._head, last_offset=self.last_offset)
            if followed is not None:
                self._head, txns = followed
                self._txn_cache.update(txns)
                return
        self.refresh()

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
        stored = self._txn(producer_key(producer))
        if stored is None and self._legacy_keys and legacy_keys_ambiguous(producer):
            landing = self._legacy_landing(producer)
            return None if landing is None else landing[0]
        return stored

    def _txn(self, app_id: str) -> int | None:
        """An app transaction's version at ``_head``, cached: delta-rs scans every app id per
        lookup (bench/RESULTS.md), and a group commit asks for four per producer. ``_dt`` may stand on an older version: what changed since is in the cache."""
        cache = self._txn_cache
        if app_id not in cache:
            cache[app_id] = self._dt.transaction_version(app_id)
        return cache[app_id]

    def _commit_on_store(
        self,
        version: int,
        files: list[DataFile],
        txns: list[tuple[str, int]],
        meta: dict[str, str],
        removed: Sequence[tuple[str, int]] = (),
    ) -> bool:
        """Commit version ``version + 1`` on an object store through delta-rs (``store_commit``):
        True when it landed and ``_head`` moved there; False when ``_head`` is no longer
        ``version`` or another writer took ``version + 1``. A refusal with nothing at
        ``version + 1`` is not a lost race: ``StorageError``."""
        with self._commit_lock, storage_errors(self.location):
            if version != self._head:
                return False
            self._lineage.check(version)
            dt = self._dt
            if dt.version() != version:
                # delta-rs's commit leaves ``dt`` where it was, and _catch_up moves ``_head`` by
                # reading commit files: move it to exactly ``version``, which exists (one GET;
                # update_incremental lists the log, 4x slower on moto, bench/RESULTS.md).
                dt.load_as_version(version)
            if store_commit.commit(dt, files, txns, meta, now_ms(), removed=removed):
                self._lineage.committed(version + 1, None, holds=meta.get("kraftlake.batch"))
                self._head = version + 1
                self._commits_since_open += 1
                self._txn_cache.update(txns)
                return True
            if self.location.read(f"_delta_log/{version + 1:020d}.json") is None:
                raise StorageError(f"{self.path}: delta-rs refused the commit of version {version + 1}")
            return False

    def _put_commit(self, version: int, body: bytes) -> bool:
        """Create the commit file of ``version`` holding ``body`` unless another writer did
        first (False): ``link(2)`` on local disk (durable: ``delta_commit``), a conditional put
        on S3 (``Location.put_new``). ``CorruptStoreError`` when the version before is not the
        one this object saw (``lineage``)."""
        self._lineage.check(version - 1)
        made: object | None
        if self.location.local is not None:
            made = put_if_absent(self.location.local, version, body)
        else:
            with storage_errors(self.location):
                made = self.location.put_new(f"_delta_log/{version:020d}.json", body)
        if made is None:
            return False
        self._lineage.committed(version, made)
        return True

    def _fresh(self) -> DeltaTable:
        self.refresh()
        return self._dt

    # -- read --------------------------------------------------------------------------------

    def read(
        self,
        from_offset: int | None = None,
        to_offset: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Record]:
        """Records of the latest version in ``[from_offset, to_offset]``, of the given types."""
        return self.at().records(from_offset, to_offset, types)


def _make_directory(path: str) -> None:
    """The directory of a new local log, made (with its parents) before delta-rs is asked to:
    delta-rs's words for a path it cannot make are a traceback's (``init notlog/file`` under a
    regular file ``notlog``)."""
    try:
        os.makedirs(path, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        taken = path
        while taken and not os.path.exists(taken):
            taken = os.path.dirname(taken)
        raise UnsupportedLocationError(
            f"cannot create a log at {path}: {taken} is a file, not a directory (a log is a directory)"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot create a log at {path}: {exc.strerror or exc}") from None


def _load_quietly(dt: DeltaTable, version: int) -> None:
    try:
        dt.load_as_version(version)
    except Exception as exc:  # the commit moves the table itself and says what is wrong
        log.debug("log.background_load_failed", version=version, error=str(exc))
