"""A real S3 API for the tests: moto's standalone server in a process of its own on a free loopback
port (in-process, its threads would wait for the GIL that a delta-rs call holds), and a bucket per
test. The server is started through ``moto_server.py``, which makes moto's conditional puts
atomic as AWS S3's are (moto's own check and store race: see there)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

REGION = "us-east-1"
ACCESS_KEY = "kraftlake-test"
SECRET_KEY = "kraftlake-test-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TESTS = str(Path(__file__).parent.parent)
"""On the server's ``PYTHONPATH``, for ``-m helpers.moto_server`` (run as a script, its folder
would come first on ``sys.path`` and ``helpers/http.py`` hide the standard library's ``http``)."""


class MotoServer:
    """moto's S3 server on 127.0.0.1 (``moto_server.py``); ``stop()`` ends it. ``env`` are
    extra environment variables for the server (moto's ``INITIAL_NO_AUTH_ACTION_COUNT`` turns
    on its IAM checks). ``request_log``: a file the server writes its access log to (one line
    per request; the benchmarks count requests with it). ``atomic=False`` leaves moto's racy
    conditional put as it is; ``conditional_put_delay`` (seconds) widens its race window
    (``moto_server.py``)."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        request_log: str | None = None,
        *,
        atomic: bool = True,
        conditional_put_delay: float = 0.0,
    ) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(request_log, "wb") if request_log else None  # noqa: SIM115 - closed in stop()
        ours = [] if atomic else ["--non-atomic"]
        if conditional_put_delay:
            ours += ["--conditional-put-delay", str(conditional_put_delay)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "helpers.moto_server", *ours, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=self._log or subprocess.DEVNULL,
            env={
                **os.environ,
                **(env or {}),
                "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])),
            },
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's server did not start on {self.endpoint}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._log is not None:
            self._log.close()

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY, service: str = "s3"):
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name=REGION,
        )


@dataclass
class Bucket:
    """A fresh bucket on the server, and the environment a process needs to reach it."""

    server: MotoServer
    name: str

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.server.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    @property
    def options(self) -> dict[str, str]:
        """The same as ``storage_options`` (delta-rs's names)."""
        return dict(self.env)

    def uri(self, name: str) -> str:
        return f"s3://{self.name}/{name}"

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key under ``prefix``."""
        out: list[str] = []
        pages = self.server.client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        for page in pages:
            out += [o["Key"] for o in page.get("Contents", ())]
        return out

    @classmethod
    def new(cls, server: MotoServer) -> Bucket:
        name = f"kraftlake-{uuid.uuid4().hex[:12]}"
        server.client().create_bucket(Bucket=name)
        return cls(server, name)


def race_conditional_puts(server: MotoServer, writers: int, rounds: int) -> list[int]:
    """``writers`` threads, released together, each PUT their own body to one new key with
    ``If-None-Match: *``, ``rounds`` times: per round, how many were answered 200 (the key then
    holds one of their bodies)."""
    from botocore.exceptions import ClientError

    bucket = Bucket.new(server)
    clients = [server.client() for _ in range(writers)]

    def put(w: int, key: str, start: threading.Barrier, answers: list[str]) -> None:
        start.wait()
        try:
            clients[w].put_object(Bucket=bucket.name, Key=key, Body=f"writer {w}".encode(), IfNoneMatch="*")
            answers[w] = "200"
        except ClientError as exc:
            answers[w] = exc.response["Error"]["Code"]

    out = []
    for r in range(rounds):
        key = f"_delta_log/{r:020d}.json"
        start = threading.Barrier(writers)
        answers = [""] * writers
        threads = [threading.Thread(target=put, args=(w, key, start, answers)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(answers) <= {"200", "PreconditionFailed"}, answers
        body = clients[0].get_object(Bucket=bucket.name, Key=key)["Body"].read()
        out.append(answers.count("200"))
        assert body in {f"writer {w}".encode() for w in range(writers) if answers[w] == "200"}, (answers, body)
    return out
