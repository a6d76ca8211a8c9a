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

When the child dies (killed, out of memory, a crash in native code), a supervising thread starts
another and it opens the log afresh: the log is the truth, so the new child's version, last
offset and producers' seqs are the table's, whatever the dead one held. The group in flight when
it died is answered 503 ``WriterUnavailable`` (it may or may not have landed: its retry with the
same producer and seq is answered from the log, exactly once); groups arriving meanwhile wait
for the new child (``ready_wait_s``) and are then committed. ``health()`` says which state the
writer is in, for ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.connection import wait
from typing import Any

import msgspec

from kraftlake.logging import get_logger
from kraftlake.records import AppendConflictError, CorruptStoreError, Log, LogError, RecordError
from kraftlake.records.catalog import AnyRecord
from kraftlake.records.store.log import AppendResult, Batch

log = get_logger(__name__)

_SPAWN = multiprocessing.get_context("spawn")  # a process that used delta-rs must not fork

STARTING, READY, RESTARTING, STOPPED = "starting", "ready", "restarting", "stopped"


class WriterUnavailable(LogError):
    """The commit process died or is being restarted: the batch may be retried (503)."""


class StoreError(LogError):
    """The child's store refused or failed a commit (an ``OSError`` or a ``LogError`` there)."""


class _Group(msgspec.Struct, array_like=True):
    batches: list[tuple[str | None, int | None, list[AnyRecord]]]  # type: ignore[valid-type]  # AnyRecord is a runtime-built Union msgspec decodes


class _Done(msgspec.Struct, array_like=True):
    results: list[tuple[int, int, int, bool]] | None = None
    error: str | None = None
    kind: str | None = None
    store: bool = False
    """The error came from the store (retry may land), not from the batches' content."""
    ready: tuple[int, int] | None = None
    """The child's first message: (version, last offset) of the log it opened."""


_ERRORS = {
    "RecordError": RecordError,
    "AppendConflictError": AppendConflictError,
    "CorruptStoreError": CorruptStoreError,  # the writer refuses the log (``GroupCommitter.health``)
}


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
        if not _send(conn, encode(_Done(ready=(log.version, log.last_offset)))):
            return
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):  # the parent is gone: its end closed, or reset (kill -9)
                log_parent_gone("receiving")
                return
            if not message:
                return
            with trusted():  # checked by the service before they were queued
                group = decoder.decode(message)
            try:
                results = log.append_group([Batch(records, p, q) for p, q, records in group.batches])
                reply = _Done([(r.first_offset, r.last_offset, r.version, r.duplicate) for r in results])
            except Exception as exc:
                store = isinstance(exc, (LogError, OSError))
                reply = _Done(error=str(exc), kind=type(exc).__name__, store=store)
            if not _send(conn, encode(reply)):
                return  # the commit is made (or refused) whole: its retry is answered from the log
    finally:
        upkeep.close()


def _send(conn: Any, data: bytes) -> bool:
    """Send ``data`` to the parent; False when it is gone (a service killed with -9 leaves its
    end of the pipe closed: BrokenPipeError, or ConnectionResetError), which ends the child
    quietly instead of with a traceback on the service's stderr."""
    try:
        conn.send_bytes(data)
    except OSError:
        log_parent_gone("answering")
        return False
    return True


def log_parent_gone(doing: str) -> None:
    log.info("service.commit_process_parent_gone", doing=doing)


class CommitProcess:
    """A ``Log``'s ``append_group`` run by a child process, restarted when it dies (see the
    module's docstring)."""

    def __init__(
        self,
        path: str,
        compact_after: int | None = None,
        storage_options: dict[str, str] | None = None,
        *,
        ready_wait_s: float = 10.0,
        start_timeout_s: float = 120.0,
        restart_delay_s: float = 0.2,
        max_restart_delay_s: float = 10.0,
    ) -> None:
        self.path = str(path)
        self.compact_after = compact_after
        self.storage_options = storage_options
        self.ready_wait_s = ready_wait_s
        self.start_timeout_s = start_timeout_s
        self.restart_delay_s = restart_delay_s
        self.max_restart_delay_s = max_restart_delay_s
        self.state = STARTING
        self.restarts = 0
        self.last_exit_code: int | None = None
        self.last_offset: int | None = None
        """The log's last offset as this writer knows it (None before the first child is ready)."""
        self._encode = msgspec.msgpack.Encoder().encode
        self._decoder = msgspec.msgpack.Decoder(_Done)
        self._lock = threading.Lock()
        """One group on the pipe at a time; held while ``_proc`` and ``_conn`` change."""
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._proc: Any = None
        self._conn: Any = None
        self._supervisor = threading.Thread(target=self._supervise, name="kraftlake-commits-watch", daemon=True)
        self._supervisor.start()

    # -- the child's life --------------------------------------------------------------------

    def _spawn(self) -> tuple[Any, Any]:
        conn, child = _SPAWN.Pipe()
        proc = _SPAWN.Process(
            target=_serve,
            args=(self.path, self.compact_after, child, self.storage_options),
            name="kraftlake-commits",
            daemon=True,
        )
        proc.start()
        child.close()
        return proc, conn

    def _handshake(self, proc: Any, conn: Any) -> bool:
        """Wait for the child's ready message (False: it died or took too long, and is killed)."""
        if conn in wait([conn, proc.sentinel], self.start_timeout_s):
            try:
                ready = self._decoder.decode(conn.recv_bytes()).ready
            except (EOFError, OSError):
                ready = None
            if ready is not None:
                self.last_offset = ready[1]
                return True
        proc.kill()
        proc.join()
        return False

    def _supervise(self) -> None:
        delay = self.restart_delay_s
        while not self._stop.is_set():
            proc, conn = self._spawn()
            if self._handshake(proc, conn):
                with self._lock:  # close() sees this child, or this thread sees close()
                    stopping = self._stop.is_set()
                    if not stopping:
                        self._proc, self._conn = proc, conn
                if stopping:
                    conn.send_bytes(b"")
                    proc.join()
                    break
                self.state = READY
                self._ready.set()
                if self.restarts:
                    log.warning("service.commit_process_restarted", pid=proc.pid, restarts=self.restarts)
                delay = self.restart_delay_s
                wait([proc.sentinel])
            self._ready.clear()
            proc.join()
            if self._stop.is_set():
                break
            self.state = RESTARTING
            self.restarts += 1
            self.last_exit_code = proc.exitcode
            log.error("service.commit_process_died", exit_code=proc.exitcode, restart_in_s=delay)
            conn.close()
            self._stop.wait(delay)
            delay = min(delay * 2, self.max_restart_delay_s)
        self.state = STOPPED

    def health(self) -> dict[str, Any]:
        """The writer's state (``starting``, ``ready``, ``restarting``, ``stopped``), its process
        id, and how many times it was restarted; never waits."""
        proc = self._proc
        return {
            "state": self.state,
            "pid": None if proc is None else proc.pid,
            "restarts": self.restarts,
            "last_exit_code": self.last_exit_code,
        }

    # -- what the committer asks -------------------------------------------------------------

    def append_group(self, batches: list[Batch]) -> list[AppendResult]:
        message = self._encode(_Group([(b.producer, b.seq, list(b.records)) for b in batches]))
        if not self._ready.wait(self.ready_wait_s):
            raise WriterUnavailable(f"the commit process is {self.state} (restarted {self.restarts} times)")
        with self._lock:
            try:
                self._conn.send_bytes(message)
                reply = self._decoder.decode(self._conn.recv_bytes())
            except (EOFError, OSError) as exc:
                self._ready.clear()
                # Not ``self._proc.exitcode``: reading it reaps the child, and two threads reaping
                # at once can leave the supervisor's own read empty. The supervisor alone reaps,
                # and records and logs the exit code.
                raise WriterUnavailable("the commit process died during this commit") from exc
        if reply.error is not None:
            if reply.kind in _ERRORS:
                raise _ERRORS[reply.kind](reply.error)
            if reply.store:
                raise StoreError(f"{reply.kind}: {reply.error}")
            raise RuntimeError(f"{reply.kind}: {reply.error}")
        results = [AppendResult(a, b, v, d) for a, b, v, d in reply.results or []]
        self.last_offset = max([self.last_offset or -1] + [r.last_offset for r in results])
        return results

    def upkeep_in_background(self, compact_after: int | None = None) -> CommitProcess:
        """Upkeep is the child's, in its background, with the ``compact_after`` given when it
        was started; ``close`` stops it."""
        return self

    def close(self, timeout: float = 60.0) -> None:
        with self._lock:
            self._stop.set()
            proc, conn = self._proc, self._conn
            if conn is not None:
                try:
                    conn.send_bytes(b"")
                except OSError:
                    pass
        if proc is not None:
            proc.join(timeout)
        self._supervisor.join(timeout)
        if conn is not None:
            conn.close()
