"""Snapshots of the controller view, in a side Delta table inside the log's directory (or under its
URI's prefix, on the same object store, read and written with the log's storage options).

``<log>/_kraftlake_snapshots`` is a Delta table of its own, one row (and one Parquet file) per
snapshot: the view's data at ``offset`` (``ControllerState``, msgpack), its state hash and a sha256
of the blob. Delta ignores directories that start with ``_``, so the log's vacuum never touches
it, and moving the log's directory moves its snapshots along.

Offsets are immutable, so a snapshot at offset o serves every later version of the log. Snapshots
are only taken outside metadata transactions (an abort would need the state before Begin), and a
snapshot of another image format is ignored (``IMAGE_FORMAT``).

A snapshot carries the identity of the log it was taken from: the Delta table's id, the version
it was taken at, and a digest of the last records it covers (``tail_digest``). One that does
not match the log it is read for (a log deleted and created again beside its old snapshots, a
snapshot table copied from another log, snapshots older than these columns), or that cannot be
read, is skipped with a warning: the view is replayed from further back instead.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from kraftlake.logging import get_logger
from kraftlake.records.base import trusted
from kraftlake.records.errors import CorruptStoreError, LogError
from kraftlake.records.store.data_files import read_parquet
from kraftlake.records.store.location import resolve
from kraftlake.records.store.snapshot import LogSnapshot, open_table
from kraftlake.statemachine.kraft.view import IMAGE_FORMAT, ControllerState, ControllerView
from kraftlake.statemachine.s3stream.view import StreamsImage, StreamsView

log = get_logger(__name__)

SNAPSHOTS_DIR = "_kraftlake_snapshots"
KIND = "kraft.controller"
STREAMS_KIND = "s3stream.streams"
"""The S3Stream view at the same offsets (its image, msgpack): ``brokers`` counts nodes and
``partitions`` streams."""
STREAMS_FORMAT = 2
"""2: an object's index block packed (``StreamRanges``); snapshots of format 1 are not read."""

SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("format", pa.int32(), nullable=False),
        pa.field("state_hash", pa.string(), nullable=False),
        pa.field("blob_sha256", pa.string(), nullable=False),
        pa.field("brokers", pa.int64(), nullable=False),
        pa.field("partitions", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64()),
        pa.field("created_ms", pa.int64(), nullable=False),
        pa.field("image", pa.large_binary(), nullable=False),
        pa.field("table_id", pa.string()),
        pa.field("log_version", pa.int64()),
        pa.field("tail_digest", pa.string()),
    ]
)
TAIL = 64
"""Records at the end of what a snapshot covers whose digest it keeps (``tail_digest``)."""


def tail_digest(source: LogSnapshot, offset: int) -> str:
    """sha256 of the records at offsets ``offset - TAIL + 1 .. offset`` as stored (offset, type,
    key and the record itself): cheap to check when a snapshot is read, and different for a
    log that holds other records there."""
    table = source.table(max(0, offset - TAIL + 1), offset)
    cols = [c for c in ("offset", "type", "key", "record") if c in table.column_names]
    h = hashlib.sha256()
    h.update(msgspec.msgpack.encode(table.select(cols).to_pydict()))
    return h.hexdigest()


_STATE_DECODER = msgspec.msgpack.Decoder(ControllerState)
_STREAMS_DECODER = msgspec.msgpack.Decoder(StreamsImage)


@dataclass(frozen=True)
class SnapshotInfo:
    offset: int
    kind: str
    format: int
    state_hash: str
    brokers: int
    partitions: int
    created_ms: int
    bytes: int | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_INFO = ("offset", "kind", "format", "state_hash", "brokers", "partitions", "created_ms", "bytes")


class SnapshotStore:
    """The snapshots of one log. ``SnapshotStore(log_path)``; the table is created on first write."""

    def __init__(self, log_path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> None:
        self.log_location = resolve(log_path, storage_options)
        self.log_path = self.log_location.uri
        self.location = self.log_location.child(SNAPSHOTS_DIR)
        """Beside the log, on the same store (a local folder, or the prefix under its URI)."""
        self.path = self.location.uri

    def _table(self) -> DeltaTable | None:
        try:
            return DeltaTable(self.path, storage_options=self.location.options)
        except TableNotFoundError:
            return None
        except Exception as exc:  # derived data: a damaged snapshot table means a longer replay
            log.warning("snapshot.unreadable", path=self.path, error=str(exc).splitlines()[0] if str(exc) else "")
            return None

    def _source(self, source: LogSnapshot | None) -> LogSnapshot:
        return source if source is not None else LogSnapshot(open_table(self.log_location), location=self.log_location)

    def _identity(self, source: LogSnapshot | None, offset: int) -> dict[str, object]:
        src = self._source(source)
        return {"table_id": src.table_id, "log_version": src.version, "tail_digest": tail_digest(src, offset)}

    def _append(self, row: dict[str, object]) -> None:
        # schema_mode "merge": a snapshot table written before the identity columns gains them.
        write_deltalake(
            self.path,
            pa.Table.from_pylist([row], schema=SCHEMA),
            mode="append",
            schema_mode="merge",
            storage_options=self.location.options,
        )

    def _read(self, files: list[str], **to_table: object) -> pa.Table:
        fs = None if self.location.is_local else self.location.filesystem
        return read_parquet(files, SCHEMA, filesystem=fs, **to_table)

    def write(self, view: ControllerView, source: LogSnapshot | None = None) -> SnapshotInfo:
        """Store ``view`` (at ``view.offset``) of ``source`` (default: the log's newest version).
        Refuses a view inside a metadata transaction."""
        if view.transaction is not None:
            raise LogError(
                f"offset {view.offset} is inside the metadata transaction that began at"
                f" {view.transaction.begin_offset}: snapshots are taken outside transactions"
            )
        state = view.state()
        blob = msgspec.msgpack.encode(state)
        state_hash = view.state_hash()
        row: dict[str, Any] = {
            "offset": view.offset,
            "kind": KIND,
            "format": IMAGE_FORMAT,
            "state_hash": state_hash,
            "blob_sha256": hashlib.sha256(blob).hexdigest(),
            "brokers": len(state.brokers),
            "partitions": len(state.partitions),
            "bytes": len(blob),
            "created_ms": time.time_ns() // 1_000_000,
            "image": blob,
            **self._identity(source, view.offset),
        }
        self._append(row)
        log.info("snapshot.written", offset=view.offset, bytes=len(blob), state_hash=state_hash)
        return SnapshotInfo(**{k: v for k, v in row.items() if k in _INFO})

    def write_streams(self, view: StreamsView, source: LogSnapshot | None = None) -> SnapshotInfo:
        """Store the S3Stream view ``view`` (at ``view.offset``) of ``source``."""
        image = view.image()
        blob = msgspec.msgpack.encode(image)
        row: dict[str, Any] = {
            "offset": view.offset,
            "kind": STREAMS_KIND,
            "format": STREAMS_FORMAT,
            "state_hash": image.state_hash,
            "blob_sha256": hashlib.sha256(blob).hexdigest(),
            "brokers": len(image.nodes),
            "partitions": len(image.streams),
            "bytes": len(blob),
            "created_ms": time.time_ns() // 1_000_000,
            "image": blob,
            **self._identity(source, view.offset),
        }
        self._append(row)
        log.info("snapshot.streams_written", offset=view.offset, bytes=len(blob), state_hash=image.state_hash)
        return SnapshotInfo(**{k: v for k, v in row.items() if k in _INFO})

    def nearest_streams(self, offset: int, source: LogSnapshot | None = None) -> StreamsView | None:
        """The S3Stream view of the newest streams snapshot of ``source`` at or before ``offset``, or None."""
        blob = self._nearest_blob(offset, STREAMS_KIND, STREAMS_FORMAT, source)
        if blob is None:
            return None
        return StreamsView.from_image(_STREAMS_DECODER.decode(blob))

    def _nearest_blob(self, offset: int, kind: str, fmt: int, source: LogSnapshot | None) -> bytes | None:
        dt = self._table()
        if dt is None:
            return None
        try:
            files = self._files(dt)
        except Exception as exc:
            log.warning("snapshot.unreadable", path=self.path, error=str(exc))
            return None
        candidates = [(b, f) for f, a, b in files if a is not None and a <= offset]
        for _, path in sorted(candidates, reverse=True):
            try:
                table = self._read(
                    [path],
                    filter=(ds.field("offset") <= offset) & (ds.field("kind") == kind) & (ds.field("format") == fmt),
                )
            except CorruptStoreError as exc:
                log.warning("snapshot.unreadable", path=path, error=str(exc))
                continue
            if table.num_rows == 0:
                continue
            best = table.sort_by([("offset", "descending")]).slice(0, 1).to_pylist()[0]
            blob = best["image"]
            if hashlib.sha256(blob).hexdigest() != best["blob_sha256"]:
                log.warning("snapshot.corrupt", offset=best["offset"], path=path, kind=kind)
                continue
            src = self._source(source)
            if best["table_id"] is None:
                log.warning("snapshot.without_identity", offset=best["offset"], path=path, fix="kraftlake snapshot")
                continue
            if best["table_id"] != src.table_id or best["offset"] > src.last_offset:
                log.warning(
                    "snapshot.other_log", offset=best["offset"], path=path, table_id=best["table_id"], log=src.table_id
                )
                continue
            if best["tail_digest"] != tail_digest(src, best["offset"]):
                log.warning("snapshot.other_records", offset=best["offset"], path=path)
                continue
            return blob
        return None

    def _files(self, dt: DeltaTable) -> list[tuple[str, int | None, int | None]]:
        actions = pa.table(dt.get_add_actions(flatten=True))
        cols = actions.column_names
        paths = actions.column("path").to_pylist()
        lo = actions.column("min.offset").to_pylist() if "min.offset" in cols else [None] * len(paths)
        hi = actions.column("max.offset").to_pylist() if "max.offset" in cols else [None] * len(paths)
        return [(self.location.join(p), a, b) for p, a, b in zip(paths, lo, hi)]

    def list(self) -> list[SnapshotInfo]:
        """Every usable snapshot (this kind and format), by offset, without their images."""
        dt = self._table()
        if dt is None:
            return []
        files = [f for f, _, _ in self._files(dt)]
        # Without the images: listing snapshots must not read every image (megabytes each).
        cols = ["offset", "kind", "format", "state_hash", "brokers", "partitions", "created_ms", "bytes"]
        table = self._read(files, columns=cols)
        out: dict[int, SnapshotInfo] = {}
        for row in table.to_pylist():
            if row["kind"] == KIND and row["format"] == IMAGE_FORMAT:
                out[row["offset"]] = SnapshotInfo(**row)
        return [out[o] for o in sorted(out)]

    def nearest(self, offset: int, source: LogSnapshot | None = None) -> ControllerView | None:
        """The view of the newest usable snapshot of ``source`` (default: the log's newest version)
        at or before ``offset``, or None."""
        # Newest first; each file is one snapshot, so its max offset is the snapshot's offset.
        blob = self._nearest_blob(offset, KIND, IMAGE_FORMAT, source)
        if blob is None:
            return None
        with trusted():
            return ControllerView.from_state(_STATE_DECODER.decode(blob))

    def delete(self) -> None:
        """Drop every snapshot (they are derived data: ``kraftlake snapshot`` rebuilds them)."""
        self.location.delete_tree()
