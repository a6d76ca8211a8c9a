"""The service's reads (records, views, producers' seqs, audits, BookKeeper views) on a bounded
pool of their own, with a limit per client, so that no read waits for a lock another holds and
no client's audits make health answers or other clients wait.

``ReadPool.run`` runs one function on a pool thread with that thread's own ``Log`` (opened once
per thread, caught up before each use): threads never share a reader, so none waits for another.
``ReadPool.stream`` holds a client's place while an answer is sent chunk by chunk, each chunk
made on a pool thread (a long read, and later a long poll, does not hold a thread while the
client reads). Admission is decided on the event loop: a client with ``reads_per_client`` reads
running or waiting, or a service with ``max_reads``, is refused at once (``Busy``: 429 with
``Retry-After``) instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from kraftlake.records import Log
from kraftlake.records.store.location import Location

from .limits import Limits

T = TypeVar("T")


class Busy(Exception):
    """Too many reads running or waiting, for this client or in all: retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def client_of(scope: dict) -> str:
    """Who a request counts against: its token's producer when tokens are required, else the
    client's address."""
    identity = scope.get("state", {}).get("identity")
    if identity is not None:
        return f"token:{identity.producer}"
    client = scope.get("client")
    return f"addr:{client[0]}" if client else "addr:?"


class ReadPool:
    def __init__(self, path: str | Path | Location, limits: Limits) -> None:
        self.path = path
        self.limits = limits
        self._executor = ThreadPoolExecutor(limits.read_workers, thread_name_prefix="kraftlake-read")
        self._local = threading.local()
        self._by_client: Counter[str] = Counter()
        self._total = 0

    def reader(self) -> Log:
        """This pool thread's ``Log``, caught up with the table."""
        log = getattr(self._local, "log", None)
        if log is None:
            log = self._local.log = Log.open(self.path)
        else:
            log.refresh()
        return log

    @property
    def active(self) -> int:
        """Reads running or waiting."""
        return self._total

    def admit(self, client: str) -> None:
        """``Busy`` when a read of ``client``'s would be refused now."""
        limits = self.limits
        if self._by_client[client] >= limits.reads_per_client:
            raise Busy(f"this client has {limits.reads_per_client} reads running or waiting (--reads-per-client)")
        if self._total >= limits.max_reads:
            raise Busy(f"the service has {limits.max_reads} reads running or waiting (--max-reads)")

    @asynccontextmanager
    async def slot(self, client: str, *, admitted: bool = False) -> AsyncIterator[None]:
        """A place for one read of ``client``'s (``Busy`` when there is none). ``admitted``: a
        read of a request admitted before (``admit``), such as an SSE stream's next batch, which
        is counted but never refused: a limit refuses new requests, it never ends one that was
        let in (the stream's client would get nothing more)."""
        if not admitted:
            self.admit(client)
        self._by_client[client] += 1
        self._total += 1
        try:
            yield
        finally:
            self._total -= 1
            self._by_client[client] -= 1
            if not self._by_client[client]:
                del self._by_client[client]

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a pool thread (the caller holds a slot)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def run(self, client: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a pool thread, in a slot of ``client``'s."""
        async with self.slot(client):
            return await self.call(fn, *args)

    async def stream(self, client: str, start: Callable[[], Iterator[bytes]]) -> AsyncIterator[bytes]:
        """The chunks of ``start()`` (which yields at least one), each made on a pool thread,
        holding a slot of ``client``'s until the last one is sent. The first chunk is made here,
        before the answer starts: a refusal (``Busy``) or an error of the read itself (a bad
        offset) is still an error answer, not a broken 200."""
        chunks = self._chunks(client, start)
        first = await chunks.__anext__()
        return _prepend(first, chunks)

    async def _chunks(self, client: str, start: Callable[[], Iterator[bytes]]) -> AsyncIterator[bytes]:
        async with self.slot(client):
            made = await self.call(start)
            done = object()
            while (chunk := await self.call(next, made, done)) is not done:
                yield chunk  # type: ignore[misc]  # ``done`` is the sentinel: every other value is bytes

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``first``, then ``rest``; ``rest`` is closed (its slot given back) however the answer ends.
    A started generator that is never iterated again is closed by the event loop when collected."""
    try:
        yield first
        async for chunk in rest:
            yield chunk
    finally:
        await rest.aclose()  # type: ignore[attr-defined]  # an async generator's, not AsyncIterator's
