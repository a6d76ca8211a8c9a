"""``GET /v1/producers/{producer}``: where a producer resumes (its last committed seq, null for
none), what ``Appender(url, producer)`` asks first.

Finding where to resume is part of appending, not a read: it is not counted against
``--reads-per-client`` or ``--max-reads`` and never waits behind reads, views or audits on the
read pool (``service.reads``), so that no reader, however heavy, starves a client that wants to
append. It has a thread of its own with a ``Log`` of its own, caught up with the table once for
all the lookups that were waiting when it started (the seq must be the store's: an appender
resuming from a stale one would have its next batches answered as duplicates of older ones),
and at most ``Limits.max_lookups`` waiting in all (429 past it).

Any name the log takes is served, exactly as the client wrote it: the name is the rest of the
request's raw path, percent-decoded once, so ``x/y``, ``..``, ``/`` or ``a//b/`` (which a router
splits, collapses or strips) are names like the others. So this endpoint is answered in front of
Litestar, as the append's fast path is (``service.append``), through the same middleware;
Litestar's route documents it in the OpenAPI schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote_to_bytes

import msgspec

from kraftlake.records import Log, LogError
from kraftlake.records.store.location import Location

from .append import Answer, internal_error
from .limits import Limits

PREFIX = "/v1/producers/"
_RAW_PREFIX = PREFIX.encode()
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]
_JSON = msgspec.json.Encoder()


class BadName(ValueError):
    """The path names no producer (empty, or not UTF-8 once percent-decoded)."""


def producer_of(scope: dict) -> str | None:
    """The producer a request's path names, or None when the path is not ``PREFIX`` + a name
    (``BadName`` when the name is empty or not UTF-8)."""
    raw = scope.get("raw_path")
    if raw is None:  # a server that gives the decoded path only
        path = scope["path"]
        return path[len(PREFIX) :] if path.startswith(PREFIX) else None
    root = scope.get("root_path", "").encode()
    if root and raw.startswith(root):
        raw = raw[len(root) :]
    if not raw.startswith(_RAW_PREFIX):
        return None
    try:
        name = unquote_to_bytes(raw[len(_RAW_PREFIX) :]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadName(f"the producer is not UTF-8 once percent-decoded (byte {exc.start})") from None
    if not name:
        raise BadName("producer must not be empty")
    return name


class Lookups:
    """Producers' seqs, read fresh from the log on a thread of their own."""

    def __init__(self, location: Location, limits: Limits) -> None:
        self.location = location
        self.limits = limits
        self.waiting = 0
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="kraftlake-resume")
        self._log: Log | None = None
        self._asked = 0
        """Lookups asked so far (on the event loop); each waits for a catch-up begun after it."""
        self._fresh_for = 0
        """The lookups the reader's last catch-up began after (on the lookup thread)."""

    async def seq(self, producer: str) -> Answer:
        if self.waiting >= self.limits.max_lookups:
            return Answer(
                429,
                {"error": f"the service has {self.limits.max_lookups} producer lookups waiting"},
                {"retry-after": "1"},
            )
        self.waiting += 1
        self._asked += 1
        try:
            loop = asyncio.get_running_loop()
            seq = await loop.run_in_executor(self._executor, self._lookup, producer, self._asked)
        except (LogError, OSError) as exc:  # the store, not the request: retry may answer
            message = f"the log cannot be read ({type(exc).__name__}: {exc})"
            return Answer(503, {"error": message}, {"retry-after": "1"})
        except Exception as exc:
            return internal_error(exc)
        finally:
            self.waiting -= 1
        return Answer(200, {"producer": producer, "seq": seq})

    def _lookup(self, producer: str, ticket: int) -> int | None:
        if self._fresh_for < ticket:  # one catch-up serves every lookup asked before it began
            asked = self._asked
            if self._log is None:
                self._log = Log.open(self.location)
            else:
                self._log.refresh()
            self._fresh_for = asked
        return self._log.producer_seq(producer)  # type: ignore[union-attr]  # opened just above when None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


async def answer_for(lookups: Lookups, scope: dict) -> Answer:
    """The answer to a ``GET /v1/producers/{producer}`` with this ASGI scope."""
    try:
        producer = producer_of(scope)
    except BadName as exc:
        return Answer(400, {"error": f"producer: {exc}", "parameter": "producer"})
    if producer is None:  # its decoded path is the prefix's, not its raw path (``/v1%2Fproducers/…``)
        return Answer(404, {"error": "Not Found"})
    return await lookups.seq(producer)


def resume_path(app: ASGIApp, lookups: Lookups, middleware: list[Callable[[ASGIApp], ASGIApp]]) -> ASGIApp:
    """``app`` with ``GET /v1/producers/{producer}`` answered before it, through ``middleware``
    (outermost first, as Litestar applies its list)."""

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        answer = await answer_for(lookups, scope)
        payload = _JSON.encode(answer.payload)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in answer.headers.items()]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    wrapped: ASGIApp = endpoint
    for layer in reversed(middleware):
        wrapped = layer(wrapped)

    async def front(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"].startswith(PREFIX):
            await wrapped(scope, receive, send)
        else:
            await app(scope, receive, send)

    return front
