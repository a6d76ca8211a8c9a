"""The pure core is pure when imported: the record types, every state machine module and the
replay package load no storage, dataframe, Spark or HTTP library, as a program that imports only
one of them would find. numpy is allowed: the S3Stream coverage index computes with it. The
per-record audit engine loads no storage library either (it is given its records).

One fresh interpreter imports them all: what importing the modules together loads is the union
of what each loads alone, so none loads a forbidden library if together they do not. Only when
they do, each is imported in an interpreter of its own, to name the ones that load it.
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
PROBE = (
    "import importlib, json, sys\n"
    "for name in sys.argv[1:]: importlib.import_module(name)\n"
    "print(json.dumps(sorted(sys.modules)))"
)


def _loaded(*modules: str) -> set[str]:
    """The modules a fresh interpreter has loaded after importing ``modules``."""
    done = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


ENGINE = [
    "kraftlake.replay.audit",
    "kraftlake.replay.kraft_audit",
    "kraftlake.replay.s3stream_audit",
    "kraftlake.replay.bookkeeper_audit",
    "kraftlake.replay.books",
    "kraftlake.replay.incidents",
    "kraftlake.replay.live_audit",
]
"""The per-record engine: it audits the records it is given and reads no store. Its report's
long lists are Arrow columns (``replay.columns``), so pyarrow and numpy are allowed."""
ENGINE_FORBIDDEN = tuple(m for m in FORBIDDEN if m != "pyarrow") + ("duckdb",)


@pytest.mark.parametrize(
    ("modules", "forbidden"), [(PURE, FORBIDDEN), (ENGINE, ENGINE_FORBIDDEN)], ids=["core", "engine"]
)
def test_importing_the_pure_core_loads_no_io_library(modules, forbidden):
    loaded = _loaded(*modules)
    if not any(m in loaded for m in forbidden):
        return
    culprits = {module: [m for m in forbidden if m in _loaded(module)] for module in modules}
    assert {module: found for module, found in culprits.items() if found} == {}


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
