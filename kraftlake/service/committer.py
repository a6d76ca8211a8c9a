"""Group commit: the requests waiting for a Delta commit share it.

A Delta commit costs tens of milliseconds here, whatever its size, so one commit per request caps
a service at a few dozen requests a second. ``GroupCommitter`` queues the requests (each a batch,
with its producer and sequence) and one thread commits them: it takes what is waiting, up to
``max_records``, waits at most ``max_wait_ms`` for more while the group is small, and appends the
group in one commit (``Log.append_group``): every batch lands whole and contiguous, or none does.
A request is acknowledged only once its commit landed (durable).

Backpressure: the queue holds at most ``max_queued_records``; beyond that ``submit`` refuses
(``Overloaded``), the service answers 429 with ``Retry-After``, and memory stays bounded.
A request whose (producer, seq) is already waiting or being committed shares that request's
answer instead of being queued twice (a client retrying after a timeout).

One request must not fail the others: the service checks each request fully before it is
queued, and should a commit still fail because of what one request holds (anything but the
store's own failures, ``STORE_ERRORS``: nothing landed), the group is split in halves and each
committed again, down to the request at fault, which alone gets the error (logged with its
cause). A store failure is every request's (503: its retry lands exactly once). A log the
writer refuses to commit to (``CorruptStoreError``: its history gone, ``records.lineage``)
makes the writer's state ``refusing``, with why, until a commit lands again (``health``).

Answers reach threads through ``concurrent.futures.Future`` (``submit``) and the event loop
through asyncio futures (``append``), settled together: one wake-up of the loop per commit, not
one per request (a thread-safe future costs a lock, a condition and a wake-up of its own, as much
again as the rest of a single-record request on the loop).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from kraftlake.logging import get_logger
from kraftlake.records import CorruptStoreError, Log, LogError, Record, RecordError
from kraftlake.records.store.log import AppendResult, Batch

from .metrics import Metrics

log = get_logger(__name__)


class Closed(RuntimeError):
    """The committer is closed (the service is shutting down): the batch was not queued."""


STORE_ERRORS = (LogError, OSError)
"""Failures of the store or of the writer, not of a request's content: the whole group's."""


class Overloaded(Exception):
    """The queue is full: try again after ``retry_after_s``."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"the append queue is full; retry in {retry_after_s:.2f} s")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class CommitConfig:
    max_records: int = 50_000
    """A commit carries at most this many records (a bigger request still goes alone)."""
    max_wait_ms: float = 5.0
    """How long the committer waits for more requests while the group is below ``min_records``."""
    min_records: int = 1
    max_queued_records: int = 500_000
    """Records waiting beyond this: 429."""
    compact_after_files: int | None = 2_000
    """Compact the table in the background once it holds more files than this (None: never)."""


@dataclass
class _Request:
    batch: Batch
    future: Future | None = None
    """For a thread waiting (``submit``)."""
    waiters: list[asyncio.Future] = field(default_factory=list)
    """For coroutines waiting (``append``), on their event loops."""
    enqueued: float = field(default_factory=time.perf_counter)


class GroupCommitter:
    def __init__(self, target: Log, config: CommitConfig | None = None, metrics: Metrics | None = None) -> None:
        self.log = target
        self.config = config or CommitConfig()
        self.metrics = metrics or Metrics()
        self.metrics.queued_records.set_function(lambda: self._queued_records)
        self._queue: deque[_Request] = deque()
        self._queued_records = 0
        self._inflight: dict[tuple[str, int], _Request] = {}
        self._cv = threading.Condition()
        self._closed = False
        self._commit_ms = 30.0  # running estimate, for Retry-After
        self._refusing: str | None = None
        """Why the last commit was refused because of the log itself, until one lands."""
        self._upkeep = target.upkeep_in_background(self.config.compact_after_files)
        self._thread = threading.Thread(target=self._run, name="kraftlake-committer", daemon=True)
        self._thread.start()

    def submit(self, records: list[Record], producer: str | None = None, seq: int | None = None) -> Future:
        """Queue a batch; the future resolves to its ``AppendResult`` once committed."""
        with self._cv:
            req = self._enqueue(records, producer, seq)
            if req.future is None:
                req.future = Future()
            return req.future

    async def append(self, records: list[Record], producer: str | None = None, seq: int | None = None) -> AppendResult:
        """Queue a batch and wait for its ``AppendResult`` (``Overloaded`` at once when full)."""
        waiter = asyncio.get_running_loop().create_future()
        with self._cv:
            self._enqueue(records, producer, seq).waiters.append(waiter)
        return await waiter

    def _enqueue(self, records: list[Record], producer: str | None, seq: int | None) -> _Request:
        """The request to wait on (a new one, or the same batch already waiting); under ``_cv``."""
        if self._closed:
            raise Closed("the service is shutting down")
        key = (producer, seq) if producer is not None else None
        if key is not None and key in self._inflight:
            return self._inflight[key]  # type: ignore[index]  # key is not None here: the producer's batch
        if self._queued_records and self._queued_records + len(records) > self.config.max_queued_records:
            backlog = self._queued_records / max(1, self.config.max_records)
            raise Overloaded(max(0.05, backlog * self._commit_ms / 1000))
        req = _Request(Batch(records, producer, seq))
        self._queue.append(req)
        self._queued_records += len(records)
        if key is not None:
            self._inflight[key] = req  # type: ignore[index]  # key is not None here: the producer's batch
        self.metrics.append_requests.inc()
        self._cv.notify()
        return req

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then stop."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout)
        self._upkeep.close(timeout)

    @property
    def queued_records(self) -> int:
        return self._queued_records

    @property
    def last_offset(self) -> int | None:
        """The log's last offset as the writer knows it (no I/O, no lock: for ``/healthz``)."""
        return self.log.last_offset

    def health(self) -> dict:
        """The writer's state: its process's (``CommitProcess.health``), or ``ready`` when it
        commits in this process; ``stopped`` once the committing thread is gone."""
        health = getattr(self.log, "health", None)
        out = health() if health is not None else {"state": "ready", "pid": None, "restarts": 0}
        refusing = self._refusing
        if refusing is not None and out["state"] == "ready":
            out["state"], out["error"] = "refusing", refusing
        if not self._thread.is_alive():
            out["state"] = "stopped"
        return out

    def _take(self) -> list[_Request]:
        cfg = self.config
        with self._cv:
            while not self._queue and not self._closed:
                self._cv.wait()
            if not self._queue:
                return []
            deadline = time.perf_counter() + cfg.max_wait_ms / 1000
            while self._queued_records < cfg.min_records and not self._closed:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                self._cv.wait(left)
            group, n = [], 0
            while self._queue and (not group or n + len(self._queue[0].batch.records) <= cfg.max_records):
                req = self._queue.popleft()
                group.append(req)
                n += len(req.batch.records)
            self._queued_records -= n
            return group

    def _run(self) -> None:
        while True:
            group = self._take()
            if not group:
                return
            # A producer's batches in sequence order (clients pipelining may race each other).
            group.sort(key=lambda r: (r.batch.producer is None, r.batch.producer or "", r.batch.seq or 0))
            outcomes = self._commit(group)
            done = time.perf_counter()
            for r, res in zip(group, outcomes):
                if not isinstance(res, BaseException):
                    self.metrics.answered(done - r.enqueued, res.duplicate)
            self._settle(group, outcomes)

    def _commit(self, group: list[_Request]) -> list:
        """Each request's outcome: its ``AppendResult``, or the exception that failed it. A
        failure of the store fails the whole group; any other is narrowed down by halves to the
        requests that cause it (nothing of a failed ``append_group`` landed, so the rest may go)."""
        started = time.perf_counter()
        try:
            results = self.log.append_group([r.batch for r in group])
        except STORE_ERRORS as exc:  # every waiting request learns why; the service stays up
            log.warning("service.commit_failed", error=f"{type(exc).__name__}: {exc}", requests=len(group))
            if isinstance(exc, CorruptStoreError):
                self._refusing = str(exc)
            return [exc] * len(group)
        except Exception as exc:
            if len(group) == 1:
                b = group[0].batch
                if not isinstance(exc, RecordError):  # a RecordError is the client's (409), not a fault
                    log.error(
                        "service.batch_failed",
                        error=f"{type(exc).__name__}: {exc}",
                        producer=b.producer,
                        seq=b.seq,
                        records=len(b.records),
                        exc_info=exc,
                    )
                return [exc]
            half = len(group) // 2
            return self._commit(group[:half]) + self._commit(group[half:])
        self._refusing = None
        took = (time.perf_counter() - started) * 1000
        self._commit_ms = 0.8 * self._commit_ms + 0.2 * took
        written = sum(len(r.batch.records) for r, res in zip(group, results) if not res.duplicate)
        if written:
            self.metrics.commit(written, took / 1000)
        log.debug("service.group_committed", requests=len(group), records=written, ms=round(took, 1))
        return results

    def _settle(self, group: list[_Request], outcomes: list) -> None:
        """Give every request its outcome (an ``AppendResult`` or an exception). The requests
        leave ``_inflight`` first, under the lock, so that no retry joins one after its waiters
        were collected; coroutines are settled by one callback per event loop."""
        with self._cv:
            for r in group:
                b = r.batch
                if b.producer is not None and self._inflight.get((b.producer, b.seq)) is r:  # type: ignore[arg-type]  # seq is set whenever producer is
                    del self._inflight[(b.producer, b.seq)]  # type: ignore[arg-type]  # seq is set whenever producer is
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for r, outcome in zip(group, outcomes):
            if r.future is not None:
                if isinstance(outcome, BaseException):
                    r.future.set_exception(outcome)
                else:
                    r.future.set_result(outcome)
            for w in r.waiters:
                by_loop.setdefault(w.get_loop(), []).append((w, outcome))
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_waiters, settled)
            except RuntimeError:  # that loop is closed: nobody waits there any more
                pass


def _settle_waiters(settled: list) -> None:
    for waiter, outcome in settled:
        if waiter.done():  # cancelled: the client went away
            continue
        if isinstance(outcome, BaseException):
            waiter.set_exception(outcome)
        else:
            waiter.set_result(outcome)
