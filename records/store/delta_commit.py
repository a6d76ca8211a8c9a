"""Appending to a local Delta table by writing its commit file directly.

A Delta commit is one JSON file, ``_delta_log/<version, 20 digits>.json``, that must be created
only if absent (the Delta protocol, delta-io/delta's ``PROTOCOL.md``: "Delta Log Entries" and
"Commit Provenance Information"). For an append that file holds a ``commitInfo``, one ``add`` per
data file and the ``txn`` actions (app transaction ids); for a compaction, ``remove`` and ``add``
actions that change no data. delta-rs's ``create_write_transaction`` spends many milliseconds of
CPU on it, lists the log directory several times (slower as the log grows,
docs/delta-on-this-machine.md), and the ``update_incremental`` the writer needs afterwards as much
again: a single writer's commits cost tens of milliseconds of a core whatever their size, which
caps the HTTP service's group commits (bench/RESULTS.md). Writing the file here is cheap and makes
it durable (fsync of the data file, the commit and the log directory), which delta-rs on a local
file system does not.

Put-if-absent is ``link(2)`` of a fully written temporary file: atomic on a POSIX file system, and
it fails when another writer (delta-rs or this code) already took the version. So the fencing of
``Log`` stays what it was: a commit lands on exactly the version it read, or is refused.

S3 tables get the same commit file by a conditional put (``Location.put_new``); other object
stores commit through delta-rs (``store_commit``). Table creation, schema changes,
checkpoints, vacuum and every read stay with delta-rs.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import unquote

import msgspec
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from kraftlake.logging import get_logger

from .location import Location, resolve
from .log_checks import follows

ENGINE = "kraftlake"
_ENCODER = msgspec.json.Encoder()
log = get_logger("kraftlake.log")
T = TypeVar("T")


@dataclass(frozen=True)
class DataFile:
    """A Parquet file already written in the table's directory (``path`` relative to it)."""

    path: str
    size: int
    modification_time_ms: int
    stats: str
    """The ``add`` action's JSON statistics (numRecords, minValues, maxValues, nullCount)."""


def listed(read: Callable[[], T], attempts: int = 20) -> T:
    """``read`` (a delta-rs open or update), again when it listed the log directory while a writer
    was adding to it: a directory listed during additions may show a commit and miss the one
    before it (readdir promises nothing about entries added meanwhile), which delta-rs refuses as
    a gap. A second listing sees both; the writers here commit hundreds of times a second. An
    object store's listing is consistent (a commit is put only after the one before it exists):
    give it fewer ``attempts``, a real gap there costs a request each."""
    for attempt in range(attempts):
        try:
            return read()
        except DeltaError as exc:
            if "contiguous commit files" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.001 * (attempt + 1))
    raise AssertionError("unreachable")


def commit_path(table: str, version: int) -> str:
    return os.path.join(table, "_delta_log", f"{version:020d}.json")


def commit_json(
    files: Sequence[DataFile],
    txns: Sequence[tuple[str, int]],
    metadata: Mapping[str, str],
    timestamp_ms: int,
    engine_version: str,
    *,
    removed: Sequence[tuple[str, int]] = (),
) -> bytes:
    """The commit file's bytes: ``commitInfo`` first (custom metadata at its top level, where
    delta-rs puts ``CommitProperties.custom_metadata`` and ``history()`` returns it), then the
    ``remove``, ``add`` and ``txn`` actions, one JSON object per line. With ``removed`` (path,
    size) it is a compaction: the files change, the data does not (``dataChange`` false)."""
    compaction = bool(removed)
    info = {
        "timestamp": timestamp_ms,
        "operation": "OPTIMIZE" if compaction else "WRITE",
        "operationParameters": {} if compaction else {"mode": "Append", "partitionBy": "[]"},
        "isBlindAppend": not compaction,
        "engineInfo": f"{ENGINE}/{engine_version}",
        "clientVersion": f"{ENGINE}-{engine_version}",
        **metadata,
    }
    enc = _ENCODER.encode
    lines = [enc({"commitInfo": info})]
    for path, size in removed:
        lines.append(
            enc(
                {
                    "remove": {
                        "path": path,
                        "deletionTimestamp": timestamp_ms,
                        "dataChange": False,
                        "extendedFileMetadata": True,
                        "partitionValues": {},
                        "size": size,
                    }
                }
            )
        )
    for f in files:
        add = {
            "path": f.path,
            "partitionValues": {},
            "size": f.size,
            "modificationTime": f.modification_time_ms,
            "dataChange": not compaction,
            "stats": f.stats,
        }
        lines.append(enc({"add": add}))
    for app_id, version in txns:
        lines.append(enc({"txn": {"appId": app_id, "version": version, "lastUpdated": timestamp_ms}}))
    lines.append(b"")
    return b"\n".join(lines)


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file from another of the same name: its device and inode, size and
    modification time (a file made again gets another inode, or, if its inode is used again,
    another time)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def put_if_absent(table: str, version: int, body: bytes) -> tuple[int, int, int, int] | None:
    """Create the commit file of ``version`` with ``body`` unless it exists: its
    ``file_identity``, durable once returned. None: another writer committed ``version``
    first (nothing of ours is left behind)."""
    log_dir = os.path.join(table, "_delta_log")
    tmp = os.path.join(log_dir, f".kraftlake-{uuid.uuid4()}.json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, body)
        os.fsync(fd)
        made = file_identity(os.fstat(fd))  # the link is this inode: no other stat needed
    finally:
        os.close(fd)
    try:
        os.link(tmp, commit_path(table, version))
    except FileExistsError:
        return None
    finally:
        os.unlink(tmp)
    fsync_file(log_dir)
    return made


def checkpoint(table: Location | str, version: int) -> None:
    """Write the checkpoint of ``version`` (delta-rs does it; readers then open the table from it
    instead of replaying every commit)."""
    where = resolve(table)
    listed(lambda: DeltaTable(where.uri, version=version, storage_options=where.options)).create_checkpoint()


class Upkeep:
    """Checkpoints and compaction done by a thread of their own beside a long-lived writer (the
    service), so that no commit waits for them; delta-rs and pyarrow release the GIL while they
    work.

    - Checkpoints: a checkpoint holds every file and app transaction of the table and takes from
      milliseconds to seconds as the table grows. When several are asked for while one is being
      written, only the newest follows.
    - Compaction (``compact``, the writer's ``Log.compact``): every commit adds a small file, and
      readers pay for each (docs/delta-on-this-machine.md: Spark plans thousands of small files
      slowly).
      It commits beside the writer's appends, through the writer: delta-rs's own compaction,
      retrying its commit after a full re-read, never got in between appends a few milliseconds
      apart. Vacuuming the files it replaced stays ``kraftlake maintain``'s.

    ``close`` writes the checkpoint still asked for; a compaction waits for the next start."""

    def __init__(self, table: Location, compact: Callable[[], int | None] | None = None) -> None:
        self.table = table
        self.compact = compact
        """Compacts the table when it holds too many files: its version, or None (``Log.compact``)."""
        self.written: list[int] = []
        """Versions checkpointed."""
        self.compactions: list[int] = []
        """Versions of the compaction commits made."""
        self._wanted: int | None = None
        self._closed = False
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="kraftlake-upkeep", daemon=True)
        self._thread.start()

    def request(self, version: int) -> None:
        """``version`` calls for a checkpoint (and a look at the number of files)."""
        with self._cv:
            self._wanted = version if self._wanted is None else max(self._wanted, version)
            self._cv.notify()

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the checkpoint still asked for, waiting at most ``timeout`` seconds: a
        compaction of a big table can take longer, and nothing upkeep does must be waited for (a
        commit lands whole or not at all, and the files of one that did not are vacuumed)."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            # Below the writer's own threads: upkeep can wait, a commit's clients cannot
            # (Linux gives each thread its own niceness; elsewhere this is a no-op).
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except (AttributeError, OSError):
            pass
        while True:
            with self._cv:
                while self._wanted is None and not self._closed:
                    self._cv.wait()
                version, self._wanted = self._wanted, None
            if version is None:
                return
            try:
                self._once(version)
            except Exception as exc:  # a missing checkpoint or compaction slows readers; it loses nothing
                log.warning("log.upkeep_failed", version=version, error=str(exc))

    def _once(self, version: int) -> None:
        if self.compact is not None and not self._closed:  # closing: the next start compacts
            compacted = self.compact()
            if compacted is not None:
                self.compactions.append(compacted)
                version = compacted  # its checkpoint: readers open the table without the small files
        checkpoint(self.table, version)
        self.written.append(version)


def appends_after(
    table: Location | str, version: int, *, compactions: bool = True, last_offset: int | None = None
) -> tuple[int, dict[str, int]] | None:
    """Follow the log past ``version`` by reading the commit files that follow it, as long as
    they only append or compact (``commitInfo``, ``add``, ``txn``, and ``remove`` without a data
    change; ``compactions=False``: no ``remove`` at all): the newest version, and the app
    transactions those commits set. None when one of them does anything else (a schema change):
    then only delta-rs's own snapshot update is right.

    A writer that lost a version to another one needs only this to try again, a few reads of
    small files, where delta-rs lists the whole log directory; without it the losers of a race
    re-read for longer than the winners take to commit again, and keep losing. On an object store
    each is one GET (the commits of delta-rs's writers included).

    With ``last_offset`` (the log's at ``version``), each commit must also hold what
    kraftlake's appends write (``log_checks.follows``): rows that continue at the next offset,
    with the ``kraftlake.offset`` they end at; None otherwise (the caller's full read then says
    what is wrong)."""
    followed = commits_after(table, version, compactions=compactions, last_offset=last_offset)
    return None if followed is None else (followed.version, followed.txns)


@dataclass
class Followed:
    """What the commit files after a version say (``commits_after``)."""

    version: int
    """The newest version read."""
    txns: dict[str, int]
    """The app transactions the commits set."""
    added: list[str]
    """The data files the appends added (paths relative to the table, in commit order); a
    compaction's files (no data change) are not among them."""


def commits_after(
    table: Location | str, version: int, *, compactions: bool = True, last_offset: int | None = None
) -> Followed | None:
    """``appends_after``, with the data files the appends added (a subscription reads just those)."""
    followed = Followed(version, {}, [])
    table = resolve(table)
    while True:
        body = table.read(f"_delta_log/{version + 1:020d}.json")
        if body is None:
            followed.version = version
            return followed
        if not body.strip():
            return None  # an emptied commit: delta-rs's full read (and log_checks) say what is wrong
        adds: list[dict] = []
        txns: dict[str, int] = {}
        for line in body.splitlines():
            if not line.strip():
                continue
            try:
                action = msgspec.json.decode(line)
            except msgspec.DecodeError:
                return None  # a damaged commit: delta-rs's full read says what is wrong with it
            if not isinstance(action, dict):
                return None
            if "txn" in action:
                txns[action["txn"]["appId"]] = action["txn"]["version"]
            elif "add" in action:
                if action["add"].get("dataChange", True):
                    adds.append(action["add"])
                    followed.added.append(unquote(action["add"]["path"]))
            elif "remove" in action:
                if not compactions or action["remove"].get("dataChange", True):
                    return None
            elif "commitInfo" not in action:
                return None
        if last_offset is not None:
            last_offset = follows(adds, txns, last_offset)
            if last_offset is None:
                return None
        followed.txns.update(txns)
        version += 1
