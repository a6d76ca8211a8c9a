"""kill -9 in the middle of appends never corrupts the log, loses an acknowledged batch or splits one.

One producer process appends numbered batches (on local disk, and on S3: moto's server) (batch ``k`` holds ``1 + k % 7`` records, each naming
its batch and index) to a shared log with ``producer``/``seq = k`` and prints every acknowledged
batch. The test SIGKILLs it at a random moment once it has acknowledged at least one batch,
``ROUNDS`` times on the same log; each new worker resends from the first batch the test has not seen
acknowledged, as a restarted producer would. After every kill:

- the table opens and reads; offsets run gapless from 0;
- the log holds exactly batches ``0..K-1``, each whole, contiguous, in order and once: a batch
  lands entirely or not at all;
- every batch the dead worker acknowledged is there, at the offsets it was told; at most the one
  batch the kill interrupted landed unacknowledged, and the next worker's resend of it is
  acknowledged as a duplicate with its original offsets instead of being written again.

At the end ``maintain(retention_hours=0)`` succeeds, deletes every Parquet file no commit refers
to and that can never be committed (the leftovers of appends killed after another commit took
their offsets) and leaves the records unchanged.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kraftlake.records import Config, Log

from helpers.tiers import rounds

ROUNDS = {"local": 20, "s3": 8}
"""Kills per store. Each round on S3 opens the log twice (the worker, the check), and an open
reads every commit file over HTTP: the rounds cost more as the log grows."""
PRODUCER = "crash-worker"
KILL_AFTER_FIRST_ACK_S = (0.0, 0.5)
"""The kill comes this long (uniform) after the worker's first acknowledgement. The worker
acknowledges a batch every ~30 ms, so this spans many append cycles; a longer window would only
grow the log, and the full read after each kill costs ~20 ms per batch file."""
FIRST_ACK_TIMEOUT_S = 60


def batch_records(batch: int) -> list[Config]:
    """Batch ``batch``: ``1 + batch % 7`` records, each naming its batch and its index."""
    size = 1 + batch % 7
    return [
        Config(resource_type=2, resource_name=PRODUCER, name=f"batch-{batch}", value=f"{i}/{size}") for i in range(size)
    ]


def tag(record: Config) -> tuple[int, int]:
    """(batch, index) of a record made by ``batch_records``."""
    return int(record.name.removeprefix("batch-")), int(record.value.split("/")[0])


def worker(path: str, batch: int) -> None:
    """The process under test: append batches ``batch, batch + 1, ...`` forever, printing
    ``<batch> <first_offset> <last_offset> <duplicate>`` once each is acknowledged."""
    from kraftlake.logging import configure

    configure(level="warning")  # logs go to stderr; stdout carries only acknowledgements
    log = Log.open(path)
    while True:
        res = log.append(batch_records(batch), producer=PRODUCER, seq=batch)
        print(batch, res.first_offset, res.last_offset, int(res.duplicate), flush=True)
        batch += 1


def run_and_kill(path: str, first_batch: int, kill_after_s: float, stderr_path: Path) -> list[str]:
    """Start a worker at ``first_batch``, SIGKILL it ``kill_after_s`` after its first
    acknowledgement; return the lines it printed before it died."""
    here = str(Path(__file__).parent)  # the worker imports this module to run ``worker``
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    code = "import sys, test_crash; test_crash.worker(sys.argv[1], int(sys.argv[2]))"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, path, str(first_batch)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for raw in proc.stdout:  # type: ignore[union-attr]
            if raw.endswith(b"\n"):  # a line cut by the kill was never acknowledged
                lines.put(raw.decode())
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        first = lines.get(timeout=FIRST_ACK_TIMEOUT_S)
        if first is None:
            proc.wait()
            pytest.fail(f"worker exited ({proc.returncode}) before its first ack:\n{stderr_path.read_text()}")
        time.sleep(kill_after_s)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL, stderr_path.read_text()
    printed = [first]
    while (line := lines.get_nowait()) is not None:
        printed.append(line)
    return printed


class Checked:
    """What the checks after earlier kills verified: the batches found (batch -> offsets) and
    the offset after them. The log is append-only, so each check reads only what landed since."""

    def __init__(self) -> None:
        self.landed: dict[int, tuple[int, int]] = {}
        self.next_offset = 0


def check_log(path: str, acked: dict[int, tuple[int, int]], checked: Checked | None = None) -> int:
    """Check the log after a kill; return K, the number of batches in it (batches 0..K-1).
    ``checked``: the state of the previous checks, of which this one continues (read from where
    they ended); none: the whole log."""
    checked = checked or Checked()
    log = Log.open(path)
    at = checked.next_offset
    records = log.read(from_offset=at)  # refuses a gap in the offsets it reads
    assert [r.offset for r in records] == list(range(at, at + len(records))), "offsets must run gapless"
    assert log.last_offset == at + len(records) - 1

    landed = checked.landed
    i = 0
    while i < len(records):
        batch = len(landed)  # one producer, in order: the next batch must be the next number
        want = [(batch, j) for j in range(len(batch_records(batch)))]
        got = [tag(r) for r in records[i : i + len(want)]]  # type: ignore[arg-type]
        assert got == want, f"offset {at + i}: expected batch {batch} whole, found {got}"
        landed[batch] = (at + i, at + i + len(want) - 1)
        i += len(want)
    checked.next_offset = at + i

    for batch, offsets in acked.items():
        assert landed.get(batch) == offsets, f"acknowledged batch {batch} at {offsets}, log has {landed.get(batch)}"
    assert len(landed) - len(acked) in (0, 1), "only the batch the kill interrupted may lack an ack"
    assert log.producer_seq(PRODUCER) == (len(landed) - 1 if landed else None)
    return len(landed)


def unreferenced_files(log: Log) -> set[str]:
    """Parquet files in the table folder (or under its prefix) that the latest version does not
    refer to."""
    from pyarrow.fs import FileSelector

    where = log.location
    on_store = (
        {os.path.basename(i.path) for i in where.filesystem.get_file_info(FileSelector(where.join("")))}
        if not where.is_local
        else {p.name for p in Path(log.path).glob("*.parquet")}
    )
    on_store = {n for n in on_store if n.endswith(".parquet")}
    return on_store - {os.path.basename(f) for f in log.at().files()}


@pytest.mark.slow
@pytest.mark.parametrize("table_uri", ["local", "s3"], indirect=True)  # the slowest test: S3's default commit only
def test_kill_9_during_appends(tmp_path, table_uri, request):
    path = table_uri
    kills = rounds(ROUNDS[request.node.callspec.params["table_uri"]])
    Log.create(path)
    rng = random.Random(20240917)
    acked: dict[int, tuple[int, int]] = {}  # batch -> (first, last) offset, as acknowledged
    in_log = 0  # batches in the log after the last kill
    resent_duplicates = 0
    checked = Checked()

    for round_no in range(kills):
        first_batch = len(acked)
        kill_after_s = rng.uniform(*KILL_AFTER_FIRST_ACK_S)
        printed = run_and_kill(path, first_batch, kill_after_s, tmp_path / f"stderr-{round_no}")
        for n, line in enumerate(printed):
            batch, first, last, duplicate = map(int, line.split())
            assert batch == first_batch + n
            # Only a batch that landed but was never acknowledged comes back as a duplicate.
            assert duplicate == (n == 0 and in_log > first_batch), line
            resent_duplicates += duplicate
            acked[batch] = (first, last)
        in_log = check_log(path, acked, checked)

    assert check_log(path, acked) == in_log  # the whole log, read again
    log = Log.open(path)
    before = log.read()
    orphans = unreferenced_files(log)
    # The last kill's file may hold offsets the log does not have yet: for all the vacuum knows,
    # an append on its way to committing it (records.compaction.IN_FLIGHT_HOURS) keeps it.
    maybe_in_flight = {f for f in orphans if int(f.split("-")[1]) > log.last_offset}
    report = log.maintain(retention_hours=0)
    assert unreferenced_files(log) == maybe_in_flight
    assert set(report.vacuumed) >= orphans - maybe_in_flight
    assert Log.open(path).read() == before
    assert check_log(path, acked) == in_log
    print(
        f"\n{kills} kills: {len(acked)} batches acknowledged, {in_log} in the log,"
        f" {resent_duplicates} acknowledged on resend, {len(orphans)} orphan files vacuumed"
    )
