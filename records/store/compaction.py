"""The two compactions: ``Log.compact``, by the writer itself between its appends (each run of
small files that are neighbours by offset merged into one), and ``Log.maintain``, delta-rs's
compaction with a checkpoint and a vacuum of unreferenced files.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError

from kraftlake.logging import get_logger

from ..errors import MaintenanceConflictError
from .data_files import ENGINE_VERSION, now_ms, parquet_schema, read_parquet, write_data_file
from .delta_commit import DataFile, appends_after, commit_json, listed
from .log_parts import LogParts
from .snapshot import LogSnapshot, arrow_schema, open_table

log = get_logger("kraftlake.log")

_APPENDED = re.compile(r"^part-(\d{20})-(?!compacted-)")
"""An append's data file (``appending``), its first offset: not a compaction's."""
VACUUM_RETRIES = 100
"""How often delta-rs tries the vacuum's commit again after an append committed first (its
default, 15, gave up beside two busy appenders in 2 of 4 runs, issue 54)."""
IN_FLIGHT_HOURS = 1
"""A data file no version names may be an append or a compaction still on its way to its
commit: the vacuum leaves such files alone until they are this old, whatever the retention
(``_vacuum``)."""
COMPACT_RECORDS = 250_000
"""A file this big is left alone by ``Log.compact``, and a merge stops growing there."""


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


class CompactionMixin(LogParts):
    """``Log``'s compactions, over the ``Log``'s state (log.py): ``compact`` commits beside its
    appends, under its commit lock, moving its ``_head``; ``maintain`` re-opens its table."""

    def compact(self, more_than: int) -> int | None:
        """When the table holds more than ``more_than`` files (every append adds one; readers pay
        for each), merge each run of small files that are neighbours by offset into one file,
        committed beside this object's appends: the version of the compaction, or None (few
        enough files, or another process changed the table's layout meanwhile: next time). Big
        files (a compaction's output past ``COMPACT_RECORDS``) are not rewritten again; rows keep
        their offsets; versions before it keep their files until ``maintain`` vacuums them."""
        done = self._compact(more_than)
        return None if done is None else done[0]

    def _compact(self, more_than: int) -> tuple[int, int, int] | None:
        """``compact``: the version, and how many files it added and removed."""
        dt = open_table(self.location)
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
        where = self.location
        fs = None if where.is_local else where.filesystem
        schema = arrow_schema(dt)
        added, removed, written = [], [], []
        for run in runs:
            paths = [where.join(f[3]) for f in run]
            # The columns these files hold (a few of the table's 250), in the table's types.
            present = set(pa.unify_schemas([parquet_schema(p, fs) for p in paths]).names)
            # Checksums verified: a damaged page must stop the compaction, not be rewritten into
            # a new file with checksums of its own.
            table = read_parquet(paths, pa.schema([f for f in schema if f.name in present]), filesystem=fs)
            file = write_data_file(
                where, table.sort_by("offset"), f"part-{run[0][0]:020d}-compacted-{uuid.uuid4()}.zstd.parquet"
            )
            written.append(file.path)
            added.append(file)
            removed += [(f[3], f[4]) for f in run]
        meta = {"kraftlake.operation": "compact", "kraftlake.files": str(len(removed))}
        if not where.commits_by_put:
            version = self._compact_on_store(dt.version(), added, removed, written)
            return None if version is None else (version, len(added), len(removed))
        body = commit_json(added, [], meta, now_ms(), ENGINE_VERSION, removed=removed)
        with self._commit_lock:
            while True:
                # After the snapshot compacted, appends only (another compaction would have
                # removed files this one removes again); this object follows whatever came.
                followed = appends_after(where, dt.version(), compactions=False)
                mine = appends_after(where, self._head)
                if followed is None or mine is None:
                    for rel in written:
                        where.delete(rel)
                    return None
                self._head, txns = mine
                self._txn_cache.update(txns)
                if self._put_commit(self._head + 1, body):
                    break
            self._head += 1
            version = self._head
        log.info("log.compacted", files=len(removed), into=len(added), version=version)
        return version, len(added), len(removed)

    def _compact_on_store(
        self, read: int, added: list[DataFile], removed: list[tuple[str, int]], written: list[str]
    ) -> int | None:
        """``compact``'s commit on an object store, through delta-rs (``Log._commit_on_store``):
        after the version it read, appends only; retried on top of each append that comes."""
        meta = {"kraftlake.operation": "compact", "kraftlake.files": str(len(removed))}
        for _ in range(100):  # beside a busy writer: give up after that many lost races (next time)
            if appends_after(self.location, read, compactions=False) is None:
                break
            self._catch_up()
            if self._commit_on_store(self._head, added, [], meta, removed):
                log.info("log.compacted", files=len(removed), into=len(added), version=self._head)
                return self._head
        for rel in written:
            self.location.delete(rel)
        return None

    def _vacuum(self, dt: DeltaTable, retention_hours: int | None) -> list[str]:
        """Delete the files no version inside the retention window needs, and those of appends
        that can never commit; leave alone what an append or a compaction may still commit.

        delta-rs's full vacuum takes every file no version names once it is older than the
        retention: at ``--retention-hours 0`` that was the file an append had just written and
        was about to commit (3 of 249 acknowledged batches lost beside a running appender,
        issue 54). So: the removed files of old versions by the retention (delta-rs, not full);
        files no version names once ``IN_FLIGHT_HOURS`` old at least (delta-rs, full); and at a
        retention of 0, when every removed file is gone and the rest are untracked, also an
        append's file whose first offset the log already holds: its append lost the race or
        died (a loser deletes its file and writes another), and it can never be committed."""
        props = CommitProperties(custom_metadata={"kraftlake.operation": "vacuum"}, max_commit_retries=VACUUM_RETRIES)
        vacuumed = list(
            dt.vacuum(
                retention_hours=retention_hours,
                dry_run=False,
                enforce_retention_duration=retention_hours is None,
                full=False,
                commit_properties=props,
            )
        )
        untracked_after = None if retention_hours is None else max(retention_hours, IN_FLIGHT_HOURS)
        vacuumed += dt.vacuum(
            retention_hours=untracked_after,
            dry_run=False,
            enforce_retention_duration=untracked_after is None,
            full=True,
            commit_properties=props,
        )
        if retention_hours == 0:
            dt = open_table(self.location)
            named = {os.path.basename(p) for p in dt.file_uris()}
            last = LogSnapshot(dt, location=self.location).last_offset
            for name in self.location.data_file_names():
                m = _APPENDED.match(name)
                if name not in named and m is not None and int(m.group(1)) <= last:
                    self.location.delete(name)
                    vacuumed.append(name)
        return vacuumed

    def maintain(self, *, retention_hours: int | None = None) -> MaintenanceReport:
        """Compact small files, write a checkpoint, vacuum unreferenced files.

        Every data file is checked first (its digest, or its page checksums): a damaged one
        stops maintain before anything is rewritten or vacuumed. The compaction is ``compact``'s,
        of every run of neighbour files: it commits between appenders' commits as a writer's
        does, and its files carry digests and page checksums (delta-rs's compaction, used
        before, wrote neither, so that nothing could check a compacted log's bytes).

        The vacuum honours the retention window (the table's
        ``delta.deletedFileRetentionDuration``, 7 days by default, unless ``retention_hours``
        says otherwise): no version inside the window loses a file; older versions stay
        reachable by offset (``at(offset=...)``). It also reaps the files of appends that never
        committed, but never one an append or a compaction may still commit (``_vacuum``), so
        it is safe beside appenders at any retention. delta-rs commits the vacuum and retries
        when appends commit first; when they keep doing so, maintain gives up with
        ``MaintenanceConflictError`` (nothing is lost: what landed stays, files a vacuum did not
        reach are vacuumed next time).
        """
        dt = open_table(self.location)
        before_version, before_files = dt.version(), len(dt.file_uris())
        LogSnapshot(dt, location=self.location).verify(pages=True)
        compacted = self._compact(1)
        dt = open_table(self.location)
        # delta-rs lists the log again as it checkpoints, vacuums and cleans up: beside busy
        # appenders a listing can miss a commit being added (``listed``), so each is retried.
        listed(dt.create_checkpoint)
        checkpoint_version = dt.version()
        try:
            vacuumed = listed(lambda: self._vacuum(dt, retention_hours))
        except CommitFailedError as exc:
            done = "compacted and checkpointed" if compacted is not None else "checkpointed"
            raise MaintenanceConflictError(
                f"maintain gave up vacuuming {self.path}: appends committed first each of the"
                f" {VACUUM_RETRIES + 1} times delta-rs tried to commit the vacuum ({exc}). It {done} version"
                f" {checkpoint_version}; nothing is lost. Run it again when fewer appends run."
            ) from None
        listed(dt.cleanup_metadata)
        dt = open_table(self.location)
        self._dt = dt
        self._head = dt.version()
        self._txn_cache = {}
        self._commits_since_open = 0
        report = MaintenanceReport(
            version_before=before_version,
            version_after=dt.version(),
            files_before=before_files,
            files_after=len(dt.file_uris()),
            compacted={} if compacted is None else {"numFilesAdded": compacted[1], "numFilesRemoved": compacted[2]},
            vacuumed=list(vacuumed),
            checkpoint_version=checkpoint_version,
        )
        log.info("log.maintained", path=self.path, **report.to_dict())
        return report
