"""What one request may cost the service: the bounds ``kraftlake serve`` sets (its ``--help``
says the defaults), and the ASGI layer that holds a request body to its deadline.

Memory per request is bounded by these numbers, not by what a client sends:

- an append's body is read up to ``max_body_bytes`` (the rest is not read: 413), and each record
  in it is at most ``max_record_bytes`` as sent (413 naming its index), so one append holds
  roughly ``max_body_bytes`` and its decoded records (a few times that) until it is committed;
- a read (``GET /v1/records``) covers at most ``max_read_records`` offsets, read one Parquet
  file at a time and sent in chunks of ``READ_CHUNK`` records as they are encoded (JSON Lines
  with ``Accept: application/x-ndjson``, else one JSON array): the service holds one file's
  records and one chunk, never the whole answer;
- a long poll (``wait_ms``) or an SSE stream waits without a thread (``service.subscriptions``), at
  most ``max_waiting`` of them in all; each of their reads is a read like the others;
- reads, views and audits run on ``read_workers`` threads (``service.reads``), at most
  ``reads_per_client`` at a time per client and ``max_reads`` in all; past either, 429.

A body must arrive within ``body_timeout_s`` of the request's start (408 otherwise), so a client
that sends slowly cannot hold a connection and its buffers for ever.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024
READ_CHUNK = 2_000
"""Records per chunk of a streamed read."""


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 16 * MIB
    """An append's body, at most (413 past it)."""
    max_record_bytes: int = 1 * MIB
    """One record in an append, as sent (JSON or msgpack), at most (413 naming its index)."""
    body_timeout_s: float = 30.0
    """A request body must have arrived this many seconds after the request started (408)."""
    max_read_records: int = 100_000
    """Offsets one GET /v1/records covers at most (page with from/to)."""
    read_workers: int = 2
    """Threads for reads, views and audits (health and metrics never wait for them)."""
    reads_per_client: int = 2
    """Reads, views and audits one client may have running or waiting (429 past it)."""
    max_reads: int = 32
    """Reads, views and audits running or waiting in all (429 past it)."""
    max_waiting: int = 256
    """Clients waiting for records in all: long polls and SSE streams (429 past it)."""
    max_poll_wait_ms: int = 60_000
    """A long poll's ``wait_ms``, at most (400 past it)."""
    max_lookups: int = 1_024
    """Producer lookups (where an appender resumes, ``service.producers``) waiting in all (429
    past it). They are not reads: no read limit holds them."""


class BodyTimeout(Exception):
    """The request body did not arrive within ``Limits.body_timeout_s``."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"the request body did not arrive within {timeout_s:g} s")


ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def body_deadline(timeout_s: float) -> Callable[[ASGIApp], ASGIApp]:
    """ASGI middleware: ``receive`` raises ``BodyTimeout`` once the body has not arrived within
    ``timeout_s`` of the request's start; after the last chunk, ``receive`` waits as before (for
    the client to go away)."""
    import asyncio  # here: ``kraftlake serve --help`` reads the defaults above without the event loop's modules

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            deadline = time.monotonic() + timeout_s
            complete = False

            async def timed() -> Any:
                nonlocal complete
                if complete:
                    return await receive()
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    raise BodyTimeout(timeout_s) from None
                if message["type"] != "http.request" or not message.get("more_body", False):
                    complete = True
                return message

            await app(scope, timed, send)

        return middleware

    return wrap
