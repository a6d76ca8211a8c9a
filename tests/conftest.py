"""Shared test setup: quiet structured logs, hypothesis profiles, small log factories."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from kraftlake.logging import configure

from helpers.tiers import TIER

configure(level=os.environ.get("KRAFTLAKE_LOG_LEVEL", "warning"))

# Hypothesis's profile follows the tier (``helpers.tiers``): its example count is what a test
# without its own ``max_examples`` runs; CI's runs are derandomized (the same examples each run).
_PROFILE_EXAMPLES = {"fast": 25, "default": 100, "thorough": 500}
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    max_examples=_PROFILE_EXAMPLES[TIER],
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

_FIRST = ("spark", "slow")
"""Marks whose tests start first: the longest runs (the Spark tier on one worker, the kill -9
and racing-writer loops) begin while the rest fill the other core, not at the end of a run."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    """Every test that takes the Spark session is marked ``spark`` (``make test-fast`` leaves
    them out); under pytest-xdist the Spark tests share one worker, so one JVM serves them all
    (``--dist loadgroup``), and they and the slow loops are handed out first."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))

    def first(item) -> int:
        return next((i for i, m in enumerate(_FIRST) if item.get_closest_marker(m) is not None), len(_FIRST))

    items.sort(key=first)


@pytest.fixture
def log_path(tmp_path):
    return tmp_path / "log"


@pytest.fixture
def new_log(log_path):
    from kraftlake.records import Log

    return Log.create(log_path)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run (starting one takes 10-15 s)."""
    from kraftlake.spark import session

    s = session(cores=2, memory="2g")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def moto_server():
    """moto's S3 server, one for the whole run (tests/helpers/object_store.py)."""
    from helpers.object_store import MotoServer

    server = MotoServer()
    yield server
    server.stop()


@pytest.fixture
def s3_bucket(moto_server, monkeypatch):
    """A fresh bucket, with the AWS environment variables pointing at it (processes the test
    spawns inherit them)."""
    from helpers.object_store import Bucket

    bucket = Bucket.new(moto_server)
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in bucket.env.items():
        monkeypatch.setenv(key, value)
    return bucket


# s3-delta-rs in make test, not make test-fast: the inner loop keeps a local log and S3 with
# kraftlake's own commit (the suite's budget, bench/RESULTS.md).
@pytest.fixture(params=["local", "s3", pytest.param("s3-delta-rs", marks=pytest.mark.slow)])
def table_uri(request, tmp_path, monkeypatch):
    """Where a test's log goes: a local path, or ``s3://`` on moto's server, its commit files
    made by kraftlake's conditional put (``s3``) or by delta-rs's commit (``s3-delta-rs``: the
    path a store without conditional puts takes; processes the test spawns inherit the choice)."""
    if request.param == "local":
        return str(tmp_path / "log")
    if request.param == "s3-delta-rs":
        from kraftlake.records.store.location import S3_COMMIT_VARIABLE

        monkeypatch.setenv(S3_COMMIT_VARIABLE, "delta-rs")
    return request.getfixturevalue("s3_bucket").uri("log")
