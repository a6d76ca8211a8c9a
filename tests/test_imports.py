"""The pure core is pure when imported: the record types, every state machine module and the
replay package load no storage, dataframe, Spark or HTTP library (each checked in a fresh
interpreter, as a program that imports only it would). numpy is allowed: the S3Stream coverage
index computes with it.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import kraftlake.statemachine

FORBIDDEN = ("deltalake", "pyarrow", "pandas", "pyspark", "litestar", "uvicorn", "http.client", "structlog")
PURE = ["kraftlake", "kraftlake.records", "kraftlake.replay", "kraftlake.statemachine"] + sorted(
    m.name for m in pkgutil.walk_packages(kraftlake.statemachine.__path__, "kraftlake.statemachine.")
)
PROBE = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps(sorted(sys.modules)))"


@pytest.mark.parametrize("module", PURE)
def test_importing_the_pure_core_loads_no_io_library(module):
    done = subprocess.run([sys.executable, "-c", PROBE, module], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(done.stdout))
    assert [m for m in FORBIDDEN if m in loaded] == []


def test_the_list_covers_the_state_machines():
    assert {
        "kraftlake.statemachine.kraft.reducer",
        "kraftlake.statemachine.s3stream.reducer",
        "kraftlake.statemachine.bookkeeper.reducer",
        "kraftlake.statemachine.placement",
    } <= set(PURE)


def test_the_facades_names_still_resolve():
    import kraftlake
    from kraftlake.records import AppendResult, Log, LogSnapshot

    assert kraftlake.Log is Log and kraftlake.LogSnapshot is LogSnapshot and kraftlake.AppendResult is AppendResult
    assert {"Appender", "Lake", "open", "init", "state_at"} <= set(dir(kraftlake))
    assert kraftlake.Lake.__name__ == "Lake" and kraftlake.Appender.__name__ == "Appender"
    with pytest.raises(AttributeError):
        kraftlake.NoSuchThing  # noqa: B018
