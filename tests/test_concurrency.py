"""Concurrent appenders on one log: gapless offsets, whole batches, exactly-once producers.

What these tests prove, with real OS processes racing on one Delta table, on local disk and on
S3 (moto's server: ``table_uri``, tests/conftest.py):

- **Fenced appends.** 4 processes append 200 batches each at the same time. Afterwards the offsets
  are exactly ``0..N-1``, every batch sits whole and in order in one contiguous run of offsets,
  no batch is lost or written twice, every ``AppendResult`` a writer got back names exactly its
  own rows, and every append is exactly one Delta commit (versions 1..800, as the history says).
- **Exactly-once, one process.** A producer batch sent again with the same ``seq`` is
  acknowledged with its original offsets and not written again; so is an older ``seq`` after a
  newer one landed, even through a freshly opened ``Log``; an older ``seq`` that never landed is
  a ``RecordError``.
- **Exactly-once, racing processes.** 4 processes send the same producer batch at once, round
  after round: each round lands once, all four get the same offsets, exactly one of them is told
  it wrote the batch.
- **The same race at the store's conditional put.** With the S3 server holding every commit
  file's ``If-None-Match`` check open (``RACE_WINDOW_S``), the writers meet at the put itself:
  the store's one 200 decides, and the outcome is the same (tests/helpers/moto_server.py makes
  moto answer one of racing puts, as AWS S3 does).

Workers run in *spawned* processes: a process that has used delta-rs must not fork.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from kraftlake.records import AppendResult, Config, Log, NoOp, RecordError

SPAWN = multiprocessing.get_context("spawn")
WORKER_TIMEOUT_S = 180

WRITERS = 4
BATCHES_PER_WRITER = 200
BATCHES_PER_WRITER_ON_S3 = 40
"""moto's server answers a request in milliseconds, a local file system in microseconds: fewer
batches race on S3, for a test of the same kind that ends in reasonable time."""
ROUNDS = 10
PRODUCER = "shared-producer"
RACE_WINDOW_S = 0.1


# -- batches ---------------------------------------------------------------------------------


def batch_records(writer: int, batch: int, size: int) -> list[Config]:
    """Batch ``batch`` of ``writer``: ``size`` records, each naming writer, batch and index."""
    return [
        Config(
            resource_type=2,
            resource_name=f"writer-{writer}",
            name=f"batch-{batch}",
            value=f"r{i}",
            source=f"writer-{writer}",
        )
        for i in range(size)
    ]


def tag(record: Any) -> tuple[int, int, int]:
    """(writer, batch, index within the batch) of a record made by ``batch_records``."""
    assert isinstance(record, Config), record
    writer = int(record.resource_name.removeprefix("writer-"))
    assert record.source == record.resource_name
    return writer, int(record.name.removeprefix("batch-")), int(record.value.removeprefix("r"))


def batches_per_writer(path: str) -> int:
    return BATCHES_PER_WRITER_ON_S3 if path.startswith("s3://") else BATCHES_PER_WRITER


def batch_sizes(writer: int, path: str) -> list[int]:
    """The sizes of ``writer``'s batches: 1-5 records, from a generator seeded by the writer id."""
    rng = random.Random(writer)
    return [rng.randint(1, 5) for _ in range(batches_per_writer(path))]


# -- spawned workers -------------------------------------------------------------------------


def _worker_main(target: Callable[..., Any], worker: int, path: str, barrier: Any, results: Any) -> None:
    """Run ``target`` in a spawned process; send back its result or its traceback."""
    from kraftlake.logging import configure

    configure(level="warning")
    try:
        results.put((worker, True, target(worker, path, barrier)))
    except BaseException:
        barrier.abort()  # release the others from the start barrier instead of hanging them
        results.put((worker, False, traceback.format_exc()))


def run_workers(target: Callable[..., Any], path: str, n: int) -> dict[int, Any]:
    """Start ``n`` spawned processes running ``target(worker, path, barrier)`` on the log at
    ``path``; return each worker's result. ``barrier`` (of ``n``) lets them start at once."""
    barrier = SPAWN.Barrier(n)
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(target=_worker_main, args=(target, w, path, barrier, results), name=f"worker-{w}")
        for w in range(n)
    ]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    failures = []
    try:
        for _ in range(n):
            worker, ok, payload = results.get(timeout=WORKER_TIMEOUT_S)
            if ok:
                out[worker] = payload
            else:
                failures.append(f"worker {worker} failed:\n{payload}")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    assert not failures, "\n".join(failures)
    assert [p.exitcode for p in procs] == [0] * n
    return out


def append_own_batches(worker: int, path: str, barrier: Any) -> list[tuple[int, int, dict]]:
    """Append this writer's 200 batches; return (batch, size, AppendResult) for each."""
    log = Log.open(path)
    sizes = batch_sizes(worker, path)
    pause = random.Random(f"pause-{worker}")
    assert log.last_offset >= -1  # warm up (imports, first reads) before the race starts
    barrier.wait(timeout=60)
    reported = []
    for batch, size in enumerate(sizes):
        result = log.append(batch_records(worker, batch, size))
        reported.append((batch, size, result.to_dict()))
        if batch == 0:
            # Every writer's first commit (a race of all of them) lands before anyone's second:
            # on a loaded machine a writer could otherwise start after another had finished.
            barrier.wait(timeout=60)
        # An append takes a few milliseconds: without a pause between them, a writer that won
        # a version keeps winning while the losers re-read, and the writers take turns instead
        # of racing (correct, but not what this test is for).
        time.sleep(pause.uniform(0, 0.004))
    return reported


def append_shared_batches(worker: int, path: str, barrier: Any) -> list[dict]:
    """Send the same producer batch as every other worker, ``seq`` 0..ROUNDS-1, in lock step."""
    log = Log.open(path)
    reported = []
    for seq in range(ROUNDS):
        barrier.wait(timeout=60)
        result = log.append(shared_batch(seq), producer=PRODUCER, seq=seq)
        reported.append(result.to_dict())
    return reported


def shared_batch(seq: int) -> list[Config]:
    """The batch every worker sends as ``seq``: identical content in all of them."""
    return batch_records(9, seq, 1 + seq % 4)


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_appenders_get_gapless_offsets_and_whole_batches(table_uri):
    path = table_uri
    Log.create(path)

    reports = run_workers(append_own_batches, path, WRITERS)

    log = Log.open(path)
    records = log.read()
    expected = {(w, b): size for w in range(WRITERS) for b, size in enumerate(batch_sizes(w, path))}
    per_writer = batches_per_writer(path)
    n = sum(expected.values())

    # Offsets: exactly 0..N-1, nothing missing, nothing repeated.
    assert [r.offset for r in records] == list(range(n))
    assert log.last_offset == n - 1

    # Batches: each one is a single contiguous run holding its records in order, seen once.
    runs: dict[tuple[int, int], tuple[int, int]] = {}  # (writer, batch) -> (first, last) offset
    i = 0
    while i < len(records):
        writer, batch, index = tag(records[i])
        key = (writer, batch)
        assert index == 0, f"offset {i}: batch {key} starts at index {index}"
        assert key not in runs, f"batch {key} appears twice: offsets {runs[key]} and {i}.."
        size = expected[key]
        run = [tag(r) for r in records[i : i + size]]
        assert run == [(writer, batch, j) for j in range(size)], f"batch {key} split at offset {i}: {run}"
        runs[key] = (i, i + size - 1)
        i += size
    assert runs.keys() == expected.keys()

    # Each writer's batches land in the order it sent them.
    for w in range(WRITERS):
        firsts = [runs[(w, b)][0] for b in range(per_writer)]
        assert firsts == sorted(firsts)

    # Every AppendResult names exactly the rows of the batch it acknowledged.
    versions: dict[int, tuple[int, int]] = {}
    spans: dict[int, tuple[int, int]] = {}  # writer -> (first, last) version it committed
    for w, reported in reports.items():
        assert [b for b, _, _ in reported] == list(range(per_writer))
        for batch, size, res in reported:
            result = AppendResult(**res)
            assert not result.duplicate
            assert (result.first_offset, result.last_offset) == runs[(w, batch)]
            assert result.last_offset - result.first_offset + 1 == size
            assert result.version not in versions, f"two appends report version {result.version}"
            versions[result.version] = (result.first_offset, result.last_offset)
        spans[w] = (AppendResult(**reported[0][2]).version, AppendResult(**reported[-1][2]).version)

    # The writers really raced: each committed before and after every other one (the barrier
    # after the first appends makes sure; the rest of the race is free).
    for a in spans:
        for b in spans:
            assert spans[a][0] < spans[b][1], f"writers {a} and {b} did not overlap: {spans}"

    # One commit per append: versions 1..800 (Log.create wrote 0), and the history agrees.
    appends = WRITERS * per_writer
    assert log.version == appends
    assert sorted(versions) == list(range(1, appends + 1))
    history = {c.version: c for c in log.history() if c.operation == "append"}
    assert sorted(history) == list(range(1, appends + 1))
    for version, (first, last) in versions.items():
        commit = history[version]
        assert (commit.first_offset, commit.last_offset) == (first, last)
        assert commit.records == last - first + 1


def test_exactly_once_sequential(table_uri):
    log = Log.create(table_uri)
    log.append(batch_records(0, 0, 2))  # a batch without a producer comes first: offsets 0-1

    first = log.append(batch_records(1, 0, 3), producer="p1", seq=0)
    assert (first.first_offset, first.last_offset, first.duplicate) == (2, 4, False)
    version = log.version

    again = log.append(batch_records(1, 0, 3), producer="p1", seq=0)
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (2, 4)
    assert log.version == version, "a duplicate must not commit"

    second = log.append(batch_records(1, 1, 2), producer="p1", seq=1)
    assert (second.first_offset, second.last_offset, second.duplicate) == (5, 6, False)
    log.append(batch_records(2, 0, 1), producer="p2", seq=0)  # another producer in between

    # An older seq, after a newer one landed, is acknowledged with its original offsets, also by
    # a Log opened afresh (a restarted producer that lost the acknowledgement).
    for view in (log, Log.open(log.path)):
        old = view.append(batch_records(1, 0, 3), producer="p1", seq=0)
        assert (old.first_offset, old.last_offset, old.duplicate) == (2, 4, True)
        newest = view.append(batch_records(1, 1, 2), producer="p1", seq=1)
        assert (newest.first_offset, newest.last_offset, newest.duplicate) == (5, 6, True)

    # Seqs may skip; a lower seq that never landed is an error, not a silent write.
    skipped = log.append(batch_records(1, 5, 1), producer="p1", seq=5)
    assert (skipped.first_offset, skipped.last_offset, skipped.duplicate) == (8, 8, False)
    with pytest.raises(RecordError, match="sequences must increase"):
        log.append(batch_records(1, 3, 1), producer="p1", seq=3)

    records = log.read()
    assert [r.offset for r in records] == list(range(9))
    assert [tag(r) for r in records] == [
        (0, 0, 0),
        (0, 0, 1),
        (1, 0, 0),
        (1, 0, 1),
        (1, 0, 2),
        (1, 1, 0),
        (1, 1, 1),
        (2, 0, 0),
        (1, 5, 0),
    ]
    assert log.producer_seq("p1") == 5
    assert log.producer_seq("p2") == 0
    assert log.producer_seq("p3") is None
    assert log.version == 5


def check_shared_rounds(path: str, reports: dict[int, Any]) -> None:
    """Each of ``append_shared_batches``' rounds landed once, in order, and exactly one worker was
    told it wrote it; all were given its offsets."""
    log = Log.open(path)
    records = log.read()
    offset = 0
    for seq in range(ROUNDS):
        results = [AppendResult(**reports[w][seq]) for w in range(WRITERS)]
        size = len(shared_batch(seq))
        span = (offset, offset + size - 1)
        assert {(r.first_offset, r.last_offset) for r in results} == {span}, (seq, results)
        assert sum(not r.duplicate for r in results) == 1, (seq, results)
        assert [tag(r) for r in records[offset : offset + size]] == [tag(r) for r in shared_batch(seq)]
        offset += size
    assert [r.offset for r in records] == list(range(offset)), "each round lands exactly once"
    assert log.version == ROUNDS
    assert log.producer_seq(PRODUCER) == ROUNDS - 1


@pytest.mark.slow
def test_exactly_once_when_processes_race_with_the_same_batch(table_uri):
    Log.create(table_uri)
    check_shared_rounds(table_uri, run_workers(append_shared_batches, table_uri, WRITERS))


@pytest.mark.slow
def test_exactly_once_when_every_racing_commit_reaches_the_conditional_put(tmp_path, monkeypatch):
    """The race above, with the store's conditional put held open: the S3 server waits
    ``RACE_WINDOW_S`` between a commit file's ``If-None-Match`` check and its store, so the
    writers of a round that pass delta-rs's listing all meet at the put itself, where S3's answer
    alone decides (one 200, the others 412). On moto without tests/helpers/moto_server.py's
    lock two or more writers of a round were told they wrote the batch, at the same version."""
    from helpers.object_store import Bucket, MotoServer

    request_log = str(tmp_path / "requests.log")
    server = MotoServer(request_log=request_log, conditional_put_delay=RACE_WINDOW_S)
    try:
        bucket = Bucket.new(server)
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(key)
        for key, value in bucket.env.items():
            monkeypatch.setenv(key, value)
        path = bucket.uri("log")
        Log.create(path)
        check_shared_rounds(path, run_workers(append_shared_batches, path, WRITERS))
        with open(request_log, "rb") as f:
            # werkzeug colours the line: ANSI codes around the request
            refused = re.findall(rb'PUT /[^ ]+/_delta_log/\d{20}\.json[^"]*" 412', f.read())
        assert refused, "no two writers met at a commit file's conditional put: the test raced nothing"
    finally:
        server.stop()


def test_duplicate_reports_the_version_the_batch_landed_in(table_uri):
    log = Log.create(table_uri)
    first = log.append([NoOp()], producer="p", seq=0)
    log.append([NoOp()])
    log.append([NoOp()])
    assert log.append([NoOp()], producer="p", seq=0) == AppendResult(0, 0, first.version, duplicate=True)
    second = log.append([NoOp()], producer="p", seq=1)
    log.append([NoOp()])
    assert log.append([NoOp()], producer="p", seq=0) == AppendResult(0, 0, first.version, duplicate=True)
    assert log.append([NoOp()], producer="p", seq=1) == AppendResult(
        second.first_offset, second.last_offset, second.version, duplicate=True
    )
