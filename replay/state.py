"""State at any point of a log: nearest snapshot + replay of the tail, and snapshot writing.

``state_at(log, offset=… | version=… | timestamp=…)`` is what analysts call (``streams_at`` for the
S3Stream view); ``replay_log`` folds a
range of the log into a view in bounded memory (one Parquet file at a time); ``take_snapshots``
replays once and stores a snapshot every ``every`` records.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from kraftlake.logging import get_logger
from kraftlake.records.base import gc_paused
from kraftlake.records.errors import TimeTravelError
from kraftlake.records.store.log import Log, LogSnapshot
from kraftlake.statemachine.bookkeeper import BookiesView
from kraftlake.statemachine.bookkeeper import replay as bookies_replay
from kraftlake.statemachine.kraft.reducer import replay
from kraftlake.statemachine.kraft.view import ControllerView
from kraftlake.statemachine.s3stream import StreamsView
from kraftlake.statemachine.s3stream import replay as streams_replay

from .snapshots import SnapshotInfo, SnapshotStore

log = get_logger(__name__)

Progress = Callable[[int], None]
"""Called with the number of records just replayed."""


def replay_log(
    snapshot: LogSnapshot,
    view: ControllerView | None = None,
    *,
    to_offset: int | None = None,
    progress: Progress | None = None,
) -> ControllerView:
    """Fold the records after ``view.offset`` up to ``to_offset`` (default: the snapshot's end)."""
    v = ControllerView() if view is None else view
    with gc_paused():
        for records in snapshot.iter_records(v.offset + 1, to_offset):
            replay(records, v)
            if progress is not None:
                progress(len(records))
    return v


def _point(log_: Log, offset, version, timestamp, source_offset) -> tuple[LogSnapshot, int]:
    """The snapshot a point in time names, and the last offset to replay."""
    snap = log_.at(offset=offset, version=version, timestamp=timestamp, source_offset=source_offset)
    target = snap.last_offset
    if offset is not None and offset > target:
        raise TimeTravelError(f"offset {offset} is past the end of the log (last offset {target})")
    return snap, target


def _fold(snap: LogSnapshot, view, fold, to_offset: int, progress: Progress | None):
    """Fold the records after ``view.offset`` up to ``to_offset`` with a family's ``replay``."""
    with gc_paused():
        for records in snap.iter_records(view.offset + 1, to_offset):
            fold(records, view)
            if progress is not None:
                progress(len(records))
    return view


def state_at(
    log_: Log,
    *,
    offset: int | None = None,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    source_offset: int | None = None,
    use_snapshots: bool = True,
    progress: Progress | None = None,
) -> ControllerView:
    """The controller view after the record at ``offset``, or at the end of Delta ``version``, or
    of the newest version committed at or before ``timestamp``, or after every record imported
    from ``source_offset`` or before (a Kafka offset; at most one; default: now)."""
    snap, target = _point(log_, offset, version, timestamp, source_offset)
    start = SnapshotStore(log_.path, log_.storage_options).nearest(target, snap) if use_snapshots else None
    if start is not None:
        log.debug("state_at.snapshot", snapshot=start.offset, target=target)
    return replay_log(snap, start, to_offset=target, progress=progress)


def streams_at(
    log_: Log,
    *,
    offset: int | None = None,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    source_offset: int | None = None,
    progress: Progress | None = None,
    use_snapshots: bool = True,
) -> StreamsView:
    """The S3Stream view (AutoMQ's streams, objects, nodes, KV) at the same points as
    ``state_at``: the nearest streams snapshot at or before it, plus the tail."""
    snap, target = _point(log_, offset, version, timestamp, source_offset)
    view = (
        SnapshotStore(log_.path, log_.storage_options).nearest_streams(target, snap) if use_snapshots else None
    ) or StreamsView()
    return _fold(snap, view, streams_replay, target, progress)


def bookies_at(
    log_: Log,
    *,
    offset: int | None = None,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    source_offset: int | None = None,
    progress: Progress | None = None,
) -> BookiesView:
    """The BookKeeper view (bookies, ledgers, marks, locks, the auditor) at the same points as
    ``state_at``, replayed from the start."""
    snap, target = _point(log_, offset, version, timestamp, source_offset)
    return _fold(snap, BookiesView(), bookies_replay, target, progress)


def has_streams(log_: Log, *, to_offset: int) -> bool:
    """Whether the log has S3Stream records at or before ``to_offset`` (reads the type column only)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kraftlake.records.catalog import BY_NAME

    names = pa.array([n for n, cls in BY_NAME.items() if cls.FAMILY == "s3stream"], pa.string())
    for table in log_.at().iter_tables(0, to_offset, columns=("offset", "type")):
        if pc.any(pc.is_in(table.column("type"), value_set=names)).as_py():
            return True
    return False


def failed_dirs(log_: Log, *, to_offset: int) -> set[tuple[int, str]]:
    """(broker, directory) of the directories their brokers said failed (``LogDirFailed``, a
    heartbeat's or a start-up's offline list) at or before ``to_offset`` and did not load
    online again since: the ground truth a controller's registration may not tell (one that
    ignores offline directories keeps listing them). The incidents' rule (``IncidentRules``);
    only the observations are read."""
    from kraftlake.records.observations import HeartbeatOfflineDirs, LogDirFailed, LogDirsLoaded

    failed: set[tuple[int, str]] = set()
    types = ["LogDirFailed", "HeartbeatOfflineDirs", "LogDirsLoaded"]
    for r in log_.at(offset=to_offset).records(0, to_offset, types):
        if type(r) is LogDirFailed:
            failed.add((r.broker_id, r.directory))
        elif type(r) is HeartbeatOfflineDirs:
            failed.update((r.broker_id, d) for d in r.offline_log_dirs)
        elif type(r) is LogDirsLoaded:
            failed.difference_update((r.broker_id, d) for d in r.online_dirs)
            failed.update((r.broker_id, d) for d in r.offline_dirs)
    return failed


def take_snapshots(log_: Log, *, every: int, progress: Progress | None = None) -> list[SnapshotInfo]:
    """Store a snapshot at every multiple of ``every`` records (at the first offset at or after
    it outside a metadata transaction), continuing from the newest existing snapshot."""
    if every < 1:
        raise ValueError("every must be at least 1")
    store = SnapshotStore(log_.path, log_.storage_options)
    snap = log_.at()
    view = store.nearest(snap.last_offset, snap) or ControllerView()
    # The S3Stream view is snapshotted at the same offsets, once the log has S3Stream records.
    streams = store.nearest_streams(view.offset, snap) if view.offset >= 0 else None
    if streams is None or streams.offset != view.offset:
        streams = (
            streams_at(log_, offset=view.offset)
            if view.offset >= 0 and has_streams(log_, to_offset=view.offset)
            else StreamsView()
        )
        streams.offset = max(streams.offset, view.offset)
    written = []
    next_cut = (view.offset // every + 1) * every
    for records in snap.iter_records(view.offset + 1, snap.last_offset):
        i, n = 0, len(records)
        while i < n:
            # Offsets are gapless: replay up to and including the cut, then look at the state
            # (inside a transaction, one record at a time until it ends).
            j = min(n, i + max(0, next_cut - records[i].offset) + 1)  # type: ignore[operator]  # read from a log: offsets are set
            replay(records[i:j], view)
            streams_replay(records[i:j], streams)
            i = j
            if view.offset >= next_cut and view.transaction is None:
                written.append(store.write(view, snap))
                if streams.automq_version or streams.streams or streams.nodes or streams.objects:
                    store.write_streams(streams, snap)
                next_cut = (view.offset // every + 1) * every
        if progress is not None:
            progress(len(records))
    return written
