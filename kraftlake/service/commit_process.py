"""The service's commits, made in a process of their own.

A commit is mostly Python work (records to Arrow, the Parquet file, the commit file) between
system calls that release the GIL. In the service's process it competes for the GIL with the
event loop, which holds it most of the time under load: each time the committer gives it up (an
fsync) it waits for it back, and a commit took several times as long, varying with the load
(bench/RESULTS.md, bench/service.py). Here the committer thread only hands the group over,
already checked, as one msgpack message, and waits (GIL released) for the offsets.

``CommitProcess`` has the two methods ``GroupCommitter`` uses of a ``Log``: ``append_group`` and
``upkeep_in_background``. The child holds the only writing ``Log`` of the service; it
checkpoints and compacts in the background, stops when told or when its parent's end of the pipe closes
(the service killed: no orphan writer stays), and finishes the commit it was making first, so an
acknowledged batch is always committed and an unacknowledged one may be (its retry is then
answered from the log, exactly once).
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import msgspec

from kraftlake.records import AppendConflictError, Log, RecordError
from kraftlake.records.catalog import AnyRecord
from kraftlake.records.log import AppendResult, Batch

_SPAWN = multiprocessing.get_context("spawn")  # a process that used delta-rs must not fork


class _Group(msgspec.Struct, array_like=True):
    batches: list[tuple[str | None, int | None, list[AnyRecord]]]  # type: ignore[valid-type]


class _Done(msgspec.Struct, array_like=True):
    results: list[tuple[int, int, int, bool]] | None = None
    error: str | None = None
    kind: str | None = None


_ERRORS = {"RecordError": RecordError, "AppendConflictError": AppendConflictError}


def _serve(path: str, compact_after: int | None, conn: Any, storage_options: dict[str, str] | None = None) -> None:
    """The child: commit each group it is sent, until told to stop or the parent is gone."""
    from kraftlake.logging import configure
    from kraftlake.records.base import trusted

    configure(level="warning")
    log = Log.open(path, storage_options=storage_options)
    upkeep = log.upkeep_in_background(compact_after)
    decoder = msgspec.msgpack.Decoder(_Group)
    encode = msgspec.msgpack.Encoder().encode
    try:
        while True:
            try:
                message = conn.recv_bytes()
            except EOFError:
                return
            if not message:
                return
            with trusted():  # checked by the service before they were queued
                group = decoder.decode(message)
            try:
                results = log.append_group([Batch(records, p, q) for p, q, records in group.batches])
                reply = _Done([(r.first_offset, r.last_offset, r.version, r.duplicate) for r in results])
            except Exception as exc:
                reply = _Done(error=str(exc), kind=type(exc).__name__)
            conn.send_bytes(encode(reply))
    finally:
        upkeep.close()


class CommitProcess:
    """A ``Log``'s ``append_group`` run by a child process (see the module's docstring)."""

    def __init__(
        self, path: str, compact_after: int | None = None, storage_options: dict[str, str] | None = None
    ) -> None:
        self.path = str(path)
        self.compact_after = compact_after
        self._conn, child = _SPAWN.Pipe()
        self._proc = _SPAWN.Process(
            target=_serve,
            args=(self.path, compact_after, child, storage_options),
            name="kraftlake-commits",
            daemon=True,
        )
        self._proc.start()
        child.close()
        self._encode = msgspec.msgpack.Encoder().encode
        self._decoder = msgspec.msgpack.Decoder(_Done)
        self._lock = threading.Lock()

    def append_group(self, batches: list[Batch]) -> list[AppendResult]:
        message = self._encode(_Group([(b.producer, b.seq, list(b.records)) for b in batches]))
        with self._lock:
            try:
                self._conn.send_bytes(message)
                reply = self._decoder.decode(self._conn.recv_bytes())
            except (EOFError, OSError) as exc:
                raise RuntimeError(f"the commit process is gone (exit code {self._proc.exitcode})") from exc
        if reply.error is not None:
            raise _ERRORS.get(reply.kind or "", RuntimeError)(reply.error)
        return [AppendResult(a, b, v, d) for a, b, v, d in reply.results or []]

    def upkeep_in_background(self, compact_after: int | None = None) -> CommitProcess:
        """Upkeep is the child's, in its background, with the ``compact_after`` given when it
        was started; ``close`` stops it."""
        return self

    def close(self, timeout: float = 60.0) -> None:
        with self._lock:
            try:
                self._conn.send_bytes(b"")
            except OSError:
                pass
        self._proc.join(timeout)
        self._conn.close()
