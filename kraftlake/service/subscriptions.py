"""Subscriptions over HTTP: long polls (``GET /v1/records?from=N&wait_ms=M``) and Server-Sent
Events (``GET /v1/records/stream?from=N``), with a bounded number of waiting clients.

No waiting client holds a read-pool thread. One ``Tail`` per service watches the log's head
for all of them: while anybody waits, it reads the commit files after the version it knows
(``delta_commit.commits_after``, one small read each, on a thread of its own) every
``poll_s``, and wakes the waiters when the last offset moves. Records themselves are read on the
read pool (``service.reads``) like any read: the long poll's answer once there are records, the
stream's each batch (``records.follow.Follower``, which survives compactions and ``maintain``).

Past ``Limits.max_waiting`` clients waiting (long polls and streams together), 429. A stream is
held to the read limits once, when it starts (429 then, like any read); its later reads are
counted but never refused, so that no other request of its client's ends or stalls it. A stream
that cannot go on (its log damaged, the service stopping) sends an ``error`` event saying why
and ends its answer: the client sees the end, and an ``EventSource`` reconnects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import msgspec

from kraftlake.logging import get_logger
from kraftlake.records import LogError
from kraftlake.records.codec import encode_line
from kraftlake.records.store.delta_commit import commits_after
from kraftlake.records.store.follow import Follower
from kraftlake.records.store.location import Location
from kraftlake.records.store.snapshot import OFFSET_TXN, LogSnapshot, open_table

from .limits import READ_CHUNK, Limits
from .reads import Busy, ReadPool

log = get_logger(__name__)

KEEPALIVE_S = 15.0
"""A stream with nothing new sends a comment this often (proxies close idle connections)."""


class Tail:
    """The log's last offset, followed while clients wait for it to move."""

    def __init__(self, location: Location, limits: Limits, poll_s: float = 0.02) -> None:
        self.location = location
        self.limits = limits
        self.poll_s = poll_s
        self.waiting = 0
        self._version = -1
        self.last_offset = -1
        self._moved = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._looking = asyncio.Lock()

    def _look(self) -> None:
        """Read the commits after the version known (a thread's work: file reads)."""
        followed = commits_after(self.location, self._version)
        if followed is None or self._version < 0:
            snap = LogSnapshot(open_table(self.location), location=self.location)
            self._version, self.last_offset = snap.version, snap.last_offset
            return
        self._version = followed.version
        self.last_offset = followed.txns.get(OFFSET_TXN, self.last_offset)

    async def refresh(self) -> int:
        """The last offset now (one look)."""
        async with self._looking:
            before = self.last_offset
            await asyncio.to_thread(self._look)
            if self.last_offset != before:
                self._wake()
            return self.last_offset

    def _wake(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    async def _run(self) -> None:
        while self.waiting:
            await self.refresh()
            await asyncio.sleep(self.poll_s)
        self._task = None

    async def wait_for(self, offset: int, timeout_s: float) -> bool:
        """Wait until the log holds ``offset`` or ``timeout_s`` passed: whether it does. The
        caller holds a waiting place (``waiter``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        while self.last_offset < offset:
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._moved.wait(), left)
            except TimeoutError:
                return self.last_offset >= offset
        return True

    def waiter(self) -> _Waiting:
        """A waiting place (``Busy`` past ``max_waiting``), as a context manager."""
        if self.waiting >= self.limits.max_waiting:
            raise Busy(f"the service has {self.limits.max_waiting} clients waiting for records (--max-waiting)")
        return _Waiting(self)


class _Waiting:
    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        tail.waiting += 1

    def __enter__(self) -> Tail:
        return self.tail

    def __exit__(self, *_: object) -> None:
        self.tail.waiting -= 1


def sse_event(records: list) -> bytes:
    """One SSE event per record: ``id`` its offset (a reconnecting client sends it back as
    ``Last-Event-ID``), ``data`` its JSON line."""
    return b"".join(b"id: %d\nevent: record\ndata: %s\n\n" % (r.offset, encode_line(r)) for r in records)


async def stream_records(
    pool: ReadPool, tail: Tail, location: Location, client: str, from_offset: int, waiting: _Waiting
) -> AsyncIterator[bytes]:
    """The SSE body: the records from ``from_offset`` on, then each commit's as it lands, for as
    long as the client stays. Each batch is read on the read pool in a slot of ``client``'s; in
    between it waits on the tail, holding only its waiting place."""
    follower = Follower(location, from_offset)
    with waiting:
        yield b": kraftlake stream\n\n"
        while True:
            try:
                async with pool.slot(client, admitted=True):
                    batches = await pool.call(lambda: list(_chunked(follower)))
            except Exception as exc:  # not the client's leaving (a cancellation): this stream is over
                yield _ended(exc, follower.next_offset)
                return
            for batch in batches:
                yield sse_event(batch)
            if batches:
                continue  # a far-behind stream catches up a read at a time
            if not await tail.wait_for(follower.next_offset, KEEPALIVE_S):
                yield b": keepalive\n\n"


def _ended(exc: Exception, next_offset: int) -> bytes:
    """The ``error`` event that ends a stream, and the log of why."""
    if isinstance(exc, (LogError, OSError)):
        message = str(exc)
        log.warning("service.stream_ended", error=message, next_offset=next_offset)
    else:
        message = f"internal error: {type(exc).__name__}: {exc}"
        log.error("service.stream_ended", error=message, next_offset=next_offset, exc_info=exc)
    return b"event: error\ndata: %s\n\n" % msgspec.json.encode({"error": message})


def _chunked(follower: Follower) -> Iterator[list]:
    """The batches one poll of ``follower`` gives, at most ``READ_CHUNK`` records each, and at
    most ``READ_CHUNK`` * 5 in all (what the stream holds at once): a far-behind stream catches up
    over several polls (the follower resumes from its next offset whatever it stopped in)."""
    sent = 0
    for batch in follower.poll_once():
        for i in range(0, len(batch), READ_CHUNK):
            yield batch[i : i + READ_CHUNK]
        sent += len(batch)
        if sent >= READ_CHUNK * 5:
            return
