"""A load generator for ``bench/service.py``: many HTTP/1.1 keep-alive connections from one
process, on an asyncio (uvloop when installed) event loop, each a client with its own producer
and sequence numbers, as ``wrk`` would drive them but speaking kraftlake's append protocol.

A thread per client (``kraftlake.Appender``) costs more CPU per request than the server spends on
it, on the same two cores: the bench would measure its own clients. Here a request costs a few
tens of microseconds: the body is one pre-encoded JSON template with the sequence spliced in.

Two modes:

- closed loop (``rate=None``): every connection sends its next batch as soon as the last one is
  acknowledged; throughput at a given concurrency;
- open loop (``rate=R``): batches start at R requests a second (evenly spaced), whatever the
  answers; a request waits for a free connection, and its latency counts from when it was due.
  Latency at a fixed load (half the saturation rate) is only meaningful this way.

The first ``WARMUP_S`` seconds are driven but not counted (new connections, producers the server
has not seen, its first commits). Runs as ``python bench/_loadgen.py URL CLIENTS SIZE SECONDS
[RATE]`` and prints one JSON line (records, seconds, latencies in ms, statuses), so the bench can
run it in its own process.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit

WARMUP_S = 1.0


def _body_parts(producer: str, size: int) -> tuple[bytes, bytes]:
    records = [
        {"type": "Config", "resource_type": 4, "resource_name": producer, "name": "n", "value": str(i)}
        for i in range(size)
    ]
    head = b'{"producer":' + json.dumps(producer).encode() + b',"seq":'
    tail = b',"records":' + json.dumps(records, separators=(",", ":")).encode() + b"}"
    return head, tail


class _Client:
    def __init__(self, host: str, port: int, producer: str, size: int) -> None:
        self.host, self.port = host, port
        self.head, self.tail = _body_parts(producer, size)
        self.seq = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def send(self) -> int:
        """One batch, answered; its HTTP status."""
        body = self.head + str(self.seq).encode() + self.tail
        self.seq += 1
        assert self.writer is not None and self.reader is not None
        self.writer.write(
            b"POST /v1/records HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        status_line = await self.reader.readline()
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await self.reader.readexactly(length)
        if status != 200:
            self.seq -= 1  # not landed (429 and the like): the same seq again
        return status


async def run(url: str, clients: int, size: int, seconds: float, rate: float | None = None) -> dict:
    parts = urlsplit(url)
    tag = f"{clients}x{size}-{time.time_ns()}"
    pool = [_Client(parts.hostname or "127.0.0.1", parts.port or 80, f"load-{tag}-{c}", size) for c in range(clients)]
    await asyncio.gather(*(c.connect() for c in pool))
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    records = 0
    started = time.perf_counter()
    counted = started + WARMUP_S
    stop = counted + seconds

    def count(status: int, since: float) -> bool:
        """Count an answer to a request started (or due) at ``since``; whether it landed."""
        nonlocal records
        if since < counted:
            return True
        statuses[status] = statuses.get(status, 0) + 1
        if status != 200:
            return False
        latencies.append((time.perf_counter() - since) * 1000)
        records += size
        return True

    async def closed(c: _Client) -> None:
        while time.perf_counter() < stop:
            t = time.perf_counter()
            if not count(await c.send(), t):
                await asyncio.sleep(0.01)

    async def opened() -> None:
        idle: asyncio.Queue[_Client] = asyncio.Queue()
        for c in pool:
            idle.put_nowait(c)
        pending: set[asyncio.Task] = set()

        async def one(due: float) -> None:
            c = await idle.get()
            try:
                status = await c.send()
            finally:
                idle.put_nowait(c)
            count(status, due)

        i = 0
        while True:
            due = started + i / rate  # type: ignore[operator]
            if due >= stop:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(due))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
        await asyncio.gather(*pending)

    if rate is None:
        await asyncio.gather(*(closed(c) for c in pool))
    else:
        await opened()
    took = time.perf_counter() - counted
    for c in pool:
        assert c.writer is not None
        c.writer.close()
    return {"records": records, "seconds": took, "lat": latencies, "statuses": statuses}


def main() -> None:
    url, clients, size, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    rate = float(sys.argv[5]) if len(sys.argv) > 5 else None
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(run(url, clients, size, seconds, rate))))


if __name__ == "__main__":
    main()
