"""Racing conditional PUTs (``If-None-Match: *``) on one key against moto's S3 server: how many
rounds answer more than one writer 200 (a store honouring the condition answers exactly one).

    python bench/conditional_put_race.py --rounds 1500        # run beside CPU load to see moto race

Two servers, the same race: moto's server as it is (``--non-atomic``), and the tests' launcher
(``tests/helpers/moto_server.py``), which serialises conditional puts. ``--window S`` widens the
server's gap between a put's check and its store (0: moto's own gap, a few dozen Python lines).
Each round: ``--writers`` threads, each with its own client, released by a barrier, PUT their own
body to a new key; the table counts rounds by the number of writers answered 200.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' moto server (helpers/object_store.py)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from helpers.object_store import MotoServer, race_conditional_puts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1500)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--window", type=float, default=0.0, help="seconds between check and store")
    args = parser.parse_args()
    table = Table(title=f"{args.writers} writers racing If-None-Match PUTs, load average {os.getloadavg()[0]:.1f}")
    for col in ("server", "window s", "rounds", "rounds by writers answered 200", "rounds with >1", "wall s"):
        table.add_column(col)
    for atomic, name in ((False, "moto 5.2.5 as it is"), (True, "tests/helpers/moto_server.py")):
        server = MotoServer(atomic=atomic, conditional_put_delay=args.window)
        try:
            start = time.monotonic()
            wins = Counter(race_conditional_puts(server, args.writers, args.rounds))
            wall = time.monotonic() - start
        finally:
            server.stop()
        many = sum(n for k, n in wins.items() if k > 1)
        spread = ", ".join(f"{k}: {n}" for k, n in sorted(wins.items()))
        table.add_row(name, f"{args.window:g}", str(args.rounds), spread, str(many), f"{wall:.1f}")
    table.caption = f"load average at the end {os.getloadavg()[0]:.1f}"
    Console().print(table)


if __name__ == "__main__":
    main()
