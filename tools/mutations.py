"""The mutation check of issue 53: break one piece of logic at a time (a reducer branch, a decider
rule, an invariant's predicate, a statement of the SQL plan, the commit's fencing), run `make
test`'s tier stopping at the first failure, put the code back, and say which test caught it.

Run it in a worktree of its own (it edits the files there):
``python tools/mutations.py [--root DIR] [M1 M4 ...]``. A mutation the suite does not catch is a
gap in the tests (M4 was one: tests/test_invariant_parity.py's K4 history closes it)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

MUTATIONS = {
    "M1 reducer: a leader change keeps the leader epoch": (
        "statemachine/kraft/partitions.py",
        "leader_epoch = p.leader_epoch + 1",
        "leader_epoch = p.leader_epoch",
    ),
    "M2 decider: offline dirs move no partition": (
        "statemachine/kraft/directory_deciders.py",
        "        records.extend(bulk_update(view, view.dir_index.get(d, ()), broker_to_remove=reg.id))",
        "        pass",
    ),
    "M3 K5/K15 predicate: no member is offline": (
        "statemachine/kraft/invariants.py",
        "if reg is not None and d is not None and not is_online(d, reg.log_dirs):",
        "if reg is not None and d is not None and not is_online(d, reg.log_dirs) and False:",
    ),
    "M4 plan SQL: K4 takes the least severe reason": (
        "replay/plan/sql.py",
        "min(CASE WHEN role = 'L' THEN {rank} END) AS k4_rank",
        "max(CASE WHEN role = 'L' THEN {rank} END) AS k4_rank",
    ),
    "M5 commit fencing: a commit overwrites another's": (
        "records/store/delta_commit.py",
        "        os.link(tmp, commit_path(table, version))",
        "        __import__('shutil').copyfile(tmp, commit_path(table, version))",
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the worktree to mutate (default: here)")
    parser.add_argument("which", nargs="*", help="mutation ids (M1..M5; default: all)")
    args = parser.parse_args()
    caught = True
    for name, (path, old, new) in MUTATIONS.items():
        if args.which and not any(name.startswith(w + " ") for w in args.which):
            continue
        file = args.root / path
        source = file.read_text()
        if source.count(old) != 1:
            print(f"{name}: the line to break is not in {path} once; update tools/mutations.py", file=sys.stderr)
            return 2
        file.write_text(source.replace(old, new))
        started = time.monotonic()
        try:
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-n",
                    "2",
                    "--dist",
                    "loadgroup",
                    "-x",
                    "-p",
                    "no:cacheprovider",
                ],
                cwd=args.root,
                capture_output=True,
                text=True,
                env={**os.environ, "KRAFTLAKE_TEST_TIER": "default"},
            )
        finally:
            file.write_text(source)
        failed = [line for line in run.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        caught &= bool(failed)
        print(f"{name}: {'caught by ' + failed[0] if failed else 'NOT CAUGHT'} ({time.monotonic() - started:.0f} s)")
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main())
