"""Where the CPU of one kraftlake append to S3 (moto's server on loopback) goes, stage by stage.

    python bench/s3_stages.py --size 10000 --commits 8 [--commit delta-rs]

Appends ``--commits`` batches of ``--size`` records (bench/append.py's workload; one untimed
warm-up) to a log on a fresh moto server, with the stages ``Log.append`` goes through wrapped in
``time.process_time`` (this process, all threads): the checks (``columnar.from_python``), the
Arrow table (``columnar.to_table``), the Parquet body (``pyarrow.parquet.write_table``), its PUT
(``Location.write``) and the commit: kraftlake's conditional put of the commit file
(``Location.put_new``), or with ``--commit delta-rs`` the move of the delta-rs table to the version
read (``DeltaTable.load_as_version``) and delta-rs's commit (``store_commit.commit``). The move
runs here in the commit's own thread, not during the checks as ``Log`` does, so that no two
stages overlap and each one's CPU is its own. Prints the median CPU ms per commit of each stage
the path calls and of the whole append.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' moto server (helpers/object_store.py)

import pyarrow.parquet as pq  # noqa: E402
from append import Workload  # noqa: E402 - bench/append.py's
from deltalake import DeltaTable  # noqa: E402

import kraftlake.records.store.appending as appending  # noqa: E402
import kraftlake.records.store.location as location  # noqa: E402
import kraftlake.records.store.store_commit as store_commit  # noqa: E402
from kraftlake.records import Log  # noqa: E402

from helpers.object_store import Bucket, MotoServer  # noqa: E402

STAGES: list[tuple[Any, str, str]] = [
    (appending, "from_python", "checks (columnar.from_python)"),
    (appending, "to_table", "Arrow table (columnar.to_table)"),
    (pq, "write_table", "Parquet body"),
    (location.Location, "write", "PUT of the data file"),
    (location.Location, "put_new", "conditional PUT of the commit file"),
    (DeltaTable, "load_as_version", "move DeltaTable to the version read"),
    (store_commit, "commit", "delta-rs commit (conditional put, post-commit read)"),
    (Log, "append", "whole Log.append"),
]


def timed(fn: Callable[..., Any], samples: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            samples.append((time.process_time() - start) * 1000)

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=10_000, help="records per batch (default 10000)")
    ap.add_argument("--commits", type=int, default=8, help="timed commits (default 8)")
    ap.add_argument(
        "--commit", choices=("put", "delta-rs"), default="put", help="the commit path (KRAFTLAKE_S3_COMMIT)"
    )
    args = ap.parse_args()
    os.environ[location.S3_COMMIT_VARIABLE] = args.commit
    server = MotoServer()
    try:
        bucket = Bucket.new(server)
        os.environ.update(bucket.env)
        samples: dict[str, list[float]] = {}
        for owner, attr, label in STAGES:
            setattr(owner, attr, timed(getattr(owner, attr), samples.setdefault(label, [])))
        Log._load_in_background = lambda self: None  # type: ignore[method-assign]  # see the docstring
        log = Log.create(bucket.uri("stages"))
        work = Workload(1)
        for _ in range(args.commits + 1):
            log.append(work.batch(args.size))
    finally:
        server.stop()
    print(f"CPU ms per commit of {args.size:,} records to S3 (moto), median of {args.commits}:")
    for label, values in samples.items():
        if not values:
            continue  # a stage of the other commit path
        print(f"  {label:55s} {statistics.median(values[-args.commits :]):7.1f}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
