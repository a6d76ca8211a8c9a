"""``Log.follow``: catch-up subscriptions, local and on S3 (moto), through appends from other
threads, ``compact``, ``maintain`` (compaction, checkpoint, vacuum of the files a follower was about
to read) and a schema-free fallback; ``kraftlake log --follow``."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlake.records import FeatureLevel, Log
from kraftlake.records.store.delta_commit import checkpoint
from kraftlake.records.store.follow import Follower
from tests.helpers.child import Child

from helpers.tiers import examples


def feature(i: int) -> FeatureLevel:
    return FeatureLevel(name=f"f{i}", feature_level=i % 100, ts_ms=1_700_000_000_000 + i)


def append(log: Log, n: int, start: int) -> None:
    log.append([feature(start + i) for i in range(n)])


def offsets(batches) -> list[int]:
    return [r.offset for b in batches for r in b]


def test_follow_catches_up_then_follows_appends_from_another_thread(table_uri):
    log = Log.create(table_uri)
    append(log, 5, 0)
    stop = threading.Event()
    got: list = []

    def consume():
        for r in Log.open(table_uri).follow(2, poll=0.01, stop=stop):
            got.append(r)

    t = threading.Thread(target=consume)
    t.start()
    writer = Log.open(table_uri)
    for i in range(10):
        append(writer, 3, 5 + 3 * i)
    deadline = time.monotonic() + 60
    while len(got) < 33 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    t.join(30)
    assert not t.is_alive()
    assert [r.offset for r in got] == list(range(2, 35))
    assert [r.name for r in got] == [f"f{i}" for i in range(2, 35)]


def test_follow_survives_compaction_maintain_and_checkpoints(table_uri):
    log = Log.create(table_uri)
    append(log, 4, 0)
    follower = iter(Follower(log.location, 0, poll=0.01, idle_timeout=0.3))
    seen = offsets([next(follower)])
    for i in range(6):
        append(log, 2, 4 + 2 * i)
    seen += offsets([next(follower)])  # the follower now stands on a version in the middle
    assert log.compact(2) is not None  # the files it would read next are merged
    checkpoint(log.location, log.version)
    append(log, 3, 16)
    report = log.maintain(retention_hours=0)  # ...compacted again, vacuumed: gone from the store
    assert report.vacuumed
    append(log, 1, 19)
    seen += offsets(follower)
    assert seen == list(range(20))


def test_follow_from_beyond_the_end_waits_for_the_offset(tmp_path):
    log = Log.create(tmp_path / "log")
    append(log, 3, 0)
    follower = Follower(log.location, 7, poll=0.01, idle_timeout=0.2)
    assert list(follower) == []
    append(log, 6, 3)
    assert offsets(follower) == [7, 8]
    assert follower.next_offset == 9


def test_follow_stops_on_close_and_on_a_set_event(tmp_path):
    log = Log.create(tmp_path / "log")
    append(log, 3, 0)
    gen = log.follow(0, poll=0.01)
    assert next(gen).offset == 0
    gen.close()
    stop = threading.Event()
    stop.set()
    # Set before the first poll: the catch-up is handed out, then it returns without waiting.
    assert [r.offset for r in log.follow(1, stop=stop, poll=60)] == [1, 2]


def test_follow_rejects_a_negative_offset(tmp_path):
    log = Log.create(tmp_path / "log")
    with pytest.raises(ValueError, match="from_offset"):
        next(log.follow(-1))


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("read"), st.integers(1, 3)),
        st.just(("compact", 0)),
        st.just(("checkpoint", 0)),
        st.just(("maintain", 0)),
    ),
    max_size=14,
)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, start=st.integers(0, 6))
def test_follow_never_gaps_nor_repeats_under_any_interleaving(tmp_path_factory, ops, start):
    """Appends, compactions, checkpoints and maintain interleaved with reads of a follower: what it
    hands out is exactly the offsets from ``start`` to the end, once each, in order."""
    log = Log.create(tmp_path_factory.mktemp("follow") / "log")
    follower = Follower(log.location, start, poll=0.001)
    seen: list[int] = []
    written = 0
    for op, n in ops:
        if op == "append":
            append(log, n, written)
            written += n
        elif op == "read":
            for _ in range(n):
                for batch in follower.poll_once(force=True):
                    seen += [r.offset for r in batch]
        elif op == "compact":
            log.compact(1)
        elif op == "checkpoint" and log.version > 0:
            checkpoint(log.location, log.version)
        elif op == "maintain" and written:
            log.maintain(retention_hours=0)
    for batch in follower.poll_once(force=True):
        seen += [r.offset for r in batch]
    assert seen == list(range(start, written))


def test_cli_log_follow_prints_json_lines_as_they_land(tmp_path):
    path = tmp_path / "log"
    log = Log.create(path)
    append(log, 2, 0)
    with Child([sys.executable, "-m", "kraftlake", "log", str(path), "--follow", "--from", "1"]) as child:
        first = json.loads(child.line())
        assert first["offset"] == 1 and first["name"] == "f1"
        append(log, 3, 2)  # lands after the follower caught up
        assert [json.loads(child.line())["offset"] for _ in range(3)] == [2, 3, 4]
        assert child.interrupt() == 0, child.stop()  # Ctrl-C
        assert child.unread() == []


def test_cli_follow_refuses_options_it_cannot_honour(tmp_path):
    from typer.testing import CliRunner

    from kraftlake.cli.app import app

    path = str(tmp_path / "log")
    Log.create(path)
    runner = CliRunner()
    for args, words in (
        (["log", path, "--follow", "--to", "3"], "--follow"),
        (["log", path, "--follow", "--format", "table"], "--follow"),
        (["audit", path, "--format", "jsonl"], "--format jsonl is for --follow"),
        (["audit", path, "--follow", "--format", "html"], "--follow prints text"),
        (["audit", path, "--follow", "--to", "3"], "--follow runs from --from"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.output, (args, result.output)
