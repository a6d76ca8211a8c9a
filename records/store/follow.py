"""Catch-up subscriptions: ``Log.follow``, the records from an offset on, then each commit's as it
lands, in offset order, never a gap or a repeat.

How it stays cheap and right:

- **Catching up** reads the newest snapshot from the offset asked for (``LogSnapshot.iter_records``,
  one Parquet file at a time).
- **Following** reads the commit files after the version it stands on directly
  (``delta_commit.commits_after``: one small read each, a GET on an object store, where delta-rs
  would list the whole log), then only the data files those appends added, keeping the rows from
  the next offset on.
- **Anything else falls back to a snapshot**: a commit that is neither an append nor a compaction
  (a schema change), a data file gone (compacted then vacuumed by ``maintain``), or rows that do
  not start at the next offset. The newest snapshot is then read from the next offset, as when
  catching up. Offsets never change (a compaction rewrites files, not offsets), so reading "from
  the next offset" in any later version continues the same sequence.
- Checkpoints add no commit; ``maintain``'s compaction adds one without a data change (nothing to
  read), and its metadata cleanup may delete old commit files: a follower that finds no next commit
  for a while re-opens the table to check (``recheck_every``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.dataset as ds

from kraftlake.logging import get_logger

from ..arrow import RECORD_COLUMN, from_table
from ..base import Record
from ..errors import CorruptStoreError
from .data_files import read_parquet
from .delta_commit import commits_after
from .location import Location
from .log_parts import LogParts
from .snapshot import LogSnapshot, arrow_schema, open_table

log = get_logger("kraftlake.follow")

RECHECK_EVERY = 50
"""Empty polls between re-opening the table to see whether it moved while the next commit file is
missing (deleted by a metadata cleanup under a follower far behind)."""


class Follower:
    """One subscription: iterate it for batches (lists of records, each non-empty, offsets
    consecutive across batches). Stops when ``stop`` is set, when ``idle_timeout`` seconds pass
    with no new record, or when the iterator is closed."""

    def __init__(
        self,
        location: Location,
        from_offset: int = 0,
        *,
        poll: float = 0.1,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        recheck_every: int = RECHECK_EVERY,
    ) -> None:
        if from_offset < 0:
            raise ValueError(f"from_offset must be >= 0, not {from_offset}")
        self.location = location
        self.next_offset = from_offset
        """The offset of the next record to hand out."""
        self.version = -1
        """The Delta version whose records were all handed out."""
        self.poll = poll
        self.stop = stop if stop is not None else threading.Event()
        self.idle_timeout = idle_timeout
        self.recheck_every = recheck_every
        self._schema: pa.Schema | None = None

    def __iter__(self) -> Iterator[list[Record]]:
        yield from self._from_snapshot()
        idle_since = time.monotonic()
        empty = 0
        while not self.stop.is_set():
            got = False
            for batch in self.poll_once(force=empty >= self.recheck_every):
                got = True
                yield batch
            if got:
                idle_since, empty = time.monotonic(), 0
                continue
            empty += 1
            if self.idle_timeout is not None and time.monotonic() - idle_since >= self.idle_timeout:
                return
            self.stop.wait(self.poll)

    def poll_once(self, *, force: bool = False) -> Iterator[list[Record]]:
        """The batches the commits after ``version`` added (none when nothing came). ``force``:
        re-open the table when no next commit file is there, in case it moved without one."""
        followed = commits_after(self.location, self.version)
        if followed is None:  # not only appends and compactions: the snapshot says what it holds
            yield from self._from_snapshot()
            return
        if followed.version == self.version:
            if force and open_table(self.location).version() > self.version:
                yield from self._from_snapshot()
            return
        batches, expect = [], self.next_offset
        for rel in followed.added:
            table = self._read_added(rel, expect)
            if table is None:
                yield from self._from_snapshot()
                return
            if table.num_rows:
                batches.append(table)
                expect += table.num_rows
        for table in batches:
            records = from_table(table)
            self.next_offset = records[-1].offset + 1  # type: ignore[operator]  # read from the log: it has one
            yield records
        self.version = followed.version

    def _read_added(self, rel: str, expect: int) -> pa.Table | None:
        """The rows from offset ``expect`` on of a data file an append added, by offset; None when
        the file is gone or its rows do not continue at ``expect`` (read the snapshot)."""
        where = self.location
        if self._schema is None:
            self._schema = arrow_schema(open_table(where, self.version))
        schema = pa.schema([f for f in self._schema if f.name in ("offset", RECORD_COLUMN)])
        fs = None if where.is_local else where.filesystem
        try:
            table = read_parquet([where.join(rel)], schema, filesystem=fs, filter=ds.field("offset") >= expect)
        except (CorruptStoreError, FileNotFoundError, OSError) as exc:
            log.info("follow.file_gone", file=rel, error=str(exc))
            return None
        if table.num_rows == 0:
            return table
        table = table.sort_by("offset")
        offsets = table.column("offset")
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        if first != expect or last - first + 1 != table.num_rows:
            return None
        if table.column(RECORD_COLUMN).null_count:  # rows from before the column: the snapshot decodes them
            return None
        return table

    def _from_snapshot(self) -> Iterator[list[Record]]:
        """Read the newest snapshot from ``next_offset`` on, and stand on its version."""
        dt = open_table(self.location)
        self._schema = arrow_schema(dt)
        snap = LogSnapshot(dt, location=self.location)
        for records in snap.iter_records(self.next_offset):
            records = [r for r in records if r.offset >= self.next_offset]  # type: ignore[operator]  # read from a log: set
            if records:
                if records[0].offset != self.next_offset:
                    raise CorruptStoreError(f"offsets from {self.next_offset} are missing in version {snap.version}")
                self.next_offset = records[-1].offset + 1  # type: ignore[operator]  # read from the log: it has one
                yield records
        self.version = snap.version


class FollowMixin(LogParts):
    """``Log.follow`` and ``Log.follow_batches``, over the ``Log``'s location (log.py)."""

    location: Location

    def follow_batches(
        self,
        from_offset: int = 0,
        *,
        poll: float = 0.1,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
    ) -> Iterator[list[Record]]:
        """``follow``, a commit's records at a time (the catch-up in one list per data file)."""
        return iter(Follower(self.location, from_offset, poll=poll, stop=stop, idle_timeout=idle_timeout))

    def follow(
        self,
        from_offset: int = 0,
        *,
        poll: float = 0.1,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
    ) -> Iterator[Record]:
        """The records from ``from_offset`` on, then each new commit's as it lands (looked for every
        ``poll`` seconds), in offset order, with no gap and no repeat, whatever compactions,
        checkpoints and ``maintain`` do meanwhile. Runs until ``stop`` is set, ``idle_timeout``
        seconds pass with no new record, or the generator is closed."""
        for batch in self.follow_batches(from_offset, poll=poll, stop=stop, idle_timeout=idle_timeout):
            yield from batch


__all__ = ["FollowMixin", "Follower"]
