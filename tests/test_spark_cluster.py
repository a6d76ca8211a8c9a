"""The plan on Spark beyond one process: ``kraftlake audit LOG --master spark://…`` on a standalone
cluster (a master and two workers, each a JVM of its own, executors in further JVMs) and
``kraftlake audit LOG --remote sc://…`` on a Spark Connect server, both on loopback, each run as
the command a user types, give the Python engine's report. On the cluster the executors, not the
driver, read the log: exactly the snapshot's files, by their ``file://`` URIs."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from kraftlake.records import Log
from kraftlake.statemachine.kraft.workload import FAULTS, WorkloadConfig, generate

from helpers.spark_cluster import ConnectServer, StandaloneCluster, loopback_env

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    """A standalone master and two workers (1 core, 1 GiB each) for the whole run."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1, memory="1g")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("connect"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A simulated JBOD history whose controller elects leaders on offline directories, every
    fault on (the statements' coverage is the Spark tier's, ``test_spark_parity.py``: here the
    question is the cluster and the server)."""
    log = Log.create(tmp_path_factory.mktemp("logs") / "history")
    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=2, topics=2, partitions=12, seed=7, bug="elect-offline-leader", faults=FAULTS
    )
    log.append([r for batch in generate(cfg, records=800) for r in batch])
    return log


def _audit(log: Log, *args: str) -> tuple[int, dict]:
    """``kraftlake audit LOG --format json ARGS`` as a process of its own (bound to loopback)."""
    done = subprocess.run(
        [sys.executable, "-m", "kraftlake", "audit", str(log.path), "--format", "json", *args],
        capture_output=True,
        env=loopback_env(),
        timeout=1800,
    )
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")[-3000:]
    return done.returncode, json.loads(done.stdout)


def _same_report(python: dict, spark: dict) -> None:
    """Every field of the report but the engine's name: verdict, violations, invariants with
    their counts, state hash, incidents, availability."""
    assert spark["engine"].startswith("spark: ") and python["engine"] == "python"
    assert {k: v for k, v in spark.items() if k != "engine"} == {k: v for k, v in python.items() if k != "engine"}


def test_audit_on_a_standalone_cluster_gives_the_python_report(standalone, history):
    log = history
    before = {a["id"] for a in standalone.state()["completedapps"]}
    code, spark = _audit(log, "--master", standalone.url)
    python_code, python = _audit(log, "--engine", "python")
    assert code == python_code == 1 and python["violations"]
    _same_report(python, spark)
    (app,) = [a for a in standalone.state()["completedapps"] if a["id"] not in before]
    # One executor per worker (each has one core), and they read the log: every file of the
    # snapshot, by its file:// URI, and nothing else.
    executors = standalone.executor_logs(app["id"])
    assert len(executors) == 2
    read = {m for text in executors for m in re.findall(r"Reading File path: (\S+?),", text)}
    assert read == {f"file://{f}" for f in log.at().files()}


def test_audit_on_a_spark_connect_server_gives_the_python_report(connect_server, history):
    """Spark Connect has no SparkContext and no JVM in the client: the plan, the reader, the
    scratch and the progress use none."""
    log = history
    code, spark = _audit(log, "--remote", connect_server.url)
    python_code, python = _audit(log, "--engine", "python")
    assert code == python_code == 1 and python["violations"]
    _same_report(python, spark)
