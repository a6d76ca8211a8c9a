"""Generated histories for the benchmarks: ``bench/replay.py``'s generate phase (the seeded JBOD
workload through the real deciders) run in its own process, into a temporary log."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).parent


@contextmanager
def generated_log(
    records: int,
    *,
    brokers: int,
    partitions: int,
    shards: int = 1,
    console=None,
    family: str = "kraft",
    streams: int = 10_000,
    nodes: int = 20,
    metadata_version: int = 0,
    faults: str = "",
) -> Iterator[str]:
    """The path of a log holding a generated history of ``records`` records (in ``shards``
    parts generated in parallel, ``workload.shard_config``); removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="kraftlake-bench-"))
    try:
        cmd = [
            sys.executable,
            str(HERE / "replay.py"),
            "--phase",
            "generate",
            "--records",
            str(records),
            "--brokers",
            str(brokers),
            "--partitions",
            str(partitions),
            "--shards",
            str(shards),
            "--dir",
            str(work),
            "--family",
            family,
            "--streams",
            str(streams),
            "--nodes",
            str(nodes),
            "--metadata-version",
            str(metadata_version),
            "--faults",
            faults,
        ]
        if console is not None:
            with console.status(f"generating {records:,} records"):
                subprocess.run(cmd, check=True, capture_output=True)
        else:
            subprocess.run(cmd, check=True, capture_output=True)
        yield str(work / "log")
    finally:
        shutil.rmtree(work, ignore_errors=True)
