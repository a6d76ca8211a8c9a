"""What the HTTP-abuse tests (tests/adversarial/test_http_*) share: a record builder, a service
over a fresh log (a test client, or uvicorn on loopback in this process), and waiting for a
condition the service reports."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from litestar.testing import TestClient

from kraftlake.records import Log
from kraftlake.service.app import create_app


def config(i: int, client: str = "c") -> dict:
    """A small valid record (a topic config), as a client sends it."""
    return {"type": "Config", "resource_type": 4, "resource_name": client, "name": "n", "value": str(i)}


def served(tmp_path: Path, **kw) -> tuple[Path, TestClient]:
    """A fresh log and a test client of the service over it (``create_app``'s keywords)."""
    path = tmp_path / "log"
    Log.create(path)
    config_ = kw.pop("config", None)
    return path, TestClient(app=create_app(path, config_, **kw))


def eventually(check: Callable[[], object], what: str, attempts: int = 600, pause_s: float = 0.1) -> object:
    """``check()``'s first truthy value, asked up to ``attempts`` times (a bound on a wait for
    another thread or process, not an assertion about time)."""
    for _ in range(attempts):
        value = check()
        if value:
            return value
        time.sleep(pause_s)
    raise AssertionError(f"never happened: {what}")


@contextmanager
def listening(app) -> Iterator[str]:
    """``app`` served by uvicorn on a loopback port, on a thread of this process (no process to
    start, and the test may patch what the service calls): its URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started, "uvicorn started")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()
