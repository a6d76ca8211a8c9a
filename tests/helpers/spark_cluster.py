"""Spark beyond one process, on loopback, for the tests: a standalone cluster (a master and
workers, each a JVM started with pyspark's own ``bin/spark-class``; the pip package has no
``sbin/start-*.sh``) and a Spark Connect server (``bin/spark-submit`` of
``SparkConnectServer``, whose JAR pyspark ships). Each runs in a process group of its own, with
its logs and work directories under the caller's directory; ``stop()`` ends the group (the
workers' executors and their Python workers with it)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from helpers.object_store import free_port

START_TIMEOUT_S = 180
"""A JVM starts in seconds on a quiet machine; a loaded one (other test runs) takes far longer."""


def spark_bin(name: str) -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


def loopback_env(**extra: str) -> dict[str, str]:
    """The environment of a Spark process bound to loopback only (a driver too: without it, a
    driver on a host whose name resolves to 127.0.0.1 advertises another interface)."""
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


class _Process:
    """A Spark JVM in a process group of its own, its output in ``log``."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )

    def wait_for(self, pattern: str) -> re.Match:
        """The first match of ``pattern`` in the log, waiting for it; the log's tail in the error
        when the process ends or the time runs out first."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            found = re.search(pattern, self.log.read_text(errors="replace"))
            if found:
                return found
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.log.name}: no {pattern!r} (exit {self.proc.poll()}):\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # Executors the worker started sit in its group; any left after it exits go too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class StandaloneCluster:
    """A standalone master and ``workers`` workers (``cores`` and ``memory`` each) on
    127.0.0.1. ``url``: the master's (``spark://127.0.0.1:PORT``); ``work_dirs``: one per
    worker, where it puts each application's executor logs."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        root.mkdir(parents=True, exist_ok=True)
        # No REST submission server (its fixed port 6066 would collide), small daemon heaps.
        env = loopback_env(SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false", SPARK_DAEMON_MEMORY="256m")
        self._procs: list[_Process] = []
        try:
            master = _Process(
                [
                    spark_bin("spark-class"),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(free_port()),
                    "--webui-port",
                    str(free_port()),
                ],
                root / "master.log",
                env,
            )
            self._procs.append(master)
            # Spark moves to the next port when one is taken: the ports it bound are in its log.
            self.url = master.wait_for(r"Starting Spark master at (spark://\S+)").group(1)
            ui_port = master.wait_for(r"'MasterUI' on port (\d+)").group(1)
            self.ui = f"http://127.0.0.1:{ui_port}"
            master.wait_for(r"New state: ALIVE")
            self.work_dirs = [root / f"worker-{i}" for i in range(workers)]
            for i, work in enumerate(self.work_dirs):
                work.mkdir()
                worker = [
                    spark_bin("spark-class"),
                    "org.apache.spark.deploy.worker.Worker",
                    self.url,
                    *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
                    *("--webui-port", str(free_port()), "--work-dir", str(work)),
                ]
                self._procs.append(_Process(worker, root / f"worker-{i}.log", env))
            for p in self._procs[1:]:
                p.wait_for(r"Successfully registered with master")
            self._wait_alive(workers)
        except BaseException:
            self.stop()
            raise

    def state(self) -> dict:
        """The master's state (its web UI's JSON): workers, cores, applications."""
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=10) as r:
            return json.load(r)

    def _wait_alive(self, workers: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.state()["aliveworkers"] < workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} workers did not register: {self.state()}")
            time.sleep(0.5)

    def executor_logs(self, app_id: str) -> list[str]:
        """The stderr of each executor this application had, one per worker that ran one."""
        return [
            f.read_text(errors="replace") for work in self.work_dirs for f in sorted((work / app_id).glob("*/stderr"))
        ]

    def stop(self) -> None:
        for p in reversed(self._procs):  # workers (and their executors) first, the master last
            p.stop()


class ConnectServer:
    """A Spark Connect server (on a local[``cores``] Spark) on 127.0.0.1; ``url``:
    ``sc://127.0.0.1:PORT``."""

    def __init__(self, root: Path, cores: int = 2) -> None:
        root.mkdir(parents=True, exist_ok=True)
        args = [
            spark_bin("spark-submit"),
            *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
            *("--master", f"local[{cores}]", "--driver-memory", "1g", "--name", "kraftlake-connect-test"),
            *("--conf", "spark.connect.grpc.binding.address=127.0.0.1"),
            *("--conf", f"spark.connect.grpc.binding.port={free_port()}"),
            *("--conf", "spark.ui.enabled=false"),
            *("--conf", f"spark.local.dir={root / 'local'}"),
        ]
        self._proc = _Process(args, root / "connect.log", loopback_env())
        try:
            port = self._proc.wait_for(r"Spark Connect server started at: \S+:(\d+)").group(1)
        except BaseException:
            self.stop()
            raise
        self.url = f"sc://127.0.0.1:{port}"

    def stop(self) -> None:
        self._proc.stop()
