"""What the HTTP-abuse tests (tests/adversarial/test_http_*) share: a record builder, a service
over a fresh log, and waiting for a condition the service reports."""

from __future__ import annotations

import time
from collections.abc import Callable
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
