"""``import-kafka --follow``: tailing a metadata log dir that Kafka is still writing.

The live directories are built from the real logs in fixtures/kafka: their batches are appended
to a segment file while the follower polls, segments roll, snapshots appear, old segments go, and
a tail is rewritten in a higher epoch (a new LeaderChange, then the batches again) with the
project's own encoder (``encode_batch``), as ``LogSegment.truncateTo`` then the new leader's
appends leave it on a follower after a divergence.
"""

from __future__ import annotations

import shutil
import threading
import time

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import Log
from kraftlake.records.kafka.batches import Batch, encode_batch, iter_batches
from kraftlake.records.kafka.follow import KafkaFollower, PublishedTruncationError
from kraftlake.records.kafka.importer import import_kafka, parse_source
from kraftlake.records.kafka.layout import PARTITION_DIR, segment_name
from tests.helpers.kafka_logs import KAFKA_LOGS

from helpers.tiers import examples

NAME = "kafka37-jbod-dirs"
SEGMENT = KAFKA_LOGS / NAME / PARTITION_DIR / "00000000000000000000.log"
runner = CliRunner()


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def raw() -> list[tuple[Batch, bytes]]:
    data = SEGMENT.read_bytes()
    return [(b, data[b.position : b.position + b.size]) for b in iter_batches(data)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list:
    log = Log.create(tmp_path_factory.mktemp("ref") / "log")
    import_kafka(KAFKA_LOGS / NAME, log)
    return _rows(log)


def _rows(log: Log) -> list:
    return [msgspec.to_builtins(r) for r in Log.open(log.path).read()]


def _live(tmp_path):
    root = tmp_path / "live"
    (root / PARTITION_DIR).mkdir(parents=True)
    shutil.copy(KAFKA_LOGS / NAME / "meta.properties", root / "meta.properties")
    return root, root / PARTITION_DIR


def _held(tmp_path, settle_ms: int = 5_000):
    """A live dir, an empty log and a follower on them whose clock the test moves."""
    root, part = _live(tmp_path)
    clock = Clock()
    log = Log.create(tmp_path / "log")
    return part, clock, log, KafkaFollower(root, log, settle_ms=settle_ms, clock=clock)


def _write(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _rewritten_tail(raw, k: int, epoch: int) -> bytes:
    """What a follower holds after Raft truncates at batch ``k`` and a leader of ``epoch``
    appends: its LeaderChange, then the old batches again at the next offsets."""
    lc_batch = raw[0][0]
    base = raw[k][0].base_offset
    _, ts, key, value = lc_batch.records[0]
    out = [encode_batch([(base, ts, key, value)], base_offset=base, partition_leader_epoch=epoch, control=True)]
    for b, _ in raw[k : k + 5]:
        shifted = [(o + 1, t, kk, v) for o, t, kk, v in b.records]
        out.append(
            encode_batch(shifted, base_offset=b.base_offset + 1, partition_leader_epoch=epoch, control=b.is_control)
        )
    return b"".join(out)


def test_a_followed_segment_written_batch_by_batch_imports_as_the_whole_file(tmp_path, raw, reference):
    root, part = _live(tmp_path)
    seg = part / segment_name(0)
    log = Log.create(tmp_path / "log")
    follower = KafkaFollower(root, log, settle_ms=0)
    step = 400
    for i in range(0, len(raw), step):
        chunk = b"".join(d for _, d in raw[i : i + step])
        _write(seg, chunk[: len(chunk) - 7])  # the last batch partly written: waited for
        follower.poll()
        _write(seg, chunk[len(chunk) - 7 :])
        follower.poll()
    assert _rows(log) == reference
    assert follower.stats.batches == len(raw) and follower.stats.truncations == 0


def test_segment_rolls_a_new_snapshot_and_a_deleted_old_segment(tmp_path, raw, reference):
    root, part = _live(tmp_path)
    log = Log.create(tmp_path / "log")
    follower = KafkaFollower(root, log, settle_ms=0)
    thirds = [0, len(raw) // 3, 2 * len(raw) // 3, len(raw)]
    segs = []
    for a, b in zip(thirds, thirds[1:], strict=False):
        seg = part / segment_name(raw[a][0].base_offset)
        segs.append(seg)
        _write(seg, b"".join(d for _, d in raw[a:b]))
        if a == thirds[1]:  # Kafka snapshots, then deletes the segment below it
            cp = KAFKA_LOGS / "single-snapshot" / PARTITION_DIR / "00000000000000007161-0000000001.checkpoint"
            shutil.copy(cp, part / f"{raw[a][0].base_offset:020d}-0000000001.checkpoint")
            follower.poll()
            segs[0].unlink()
        follower.poll()
    assert _rows(log) == reference


def test_a_held_tail_rewritten_in_a_higher_epoch_is_never_published(tmp_path, raw):
    part, clock, log, follower = _held(tmp_path)
    seg = part / segment_name(0)
    k = 3000
    _write(seg, b"".join(d for _, d in raw[:k]))
    follower.poll()
    clock.t = 10  # the first k batches settle and land
    follower.poll()
    published = log.last_offset
    _write(seg, b"".join(d for _, d in raw[k : k + 10]))
    follower.poll()  # read, held back
    assert Log.open(log.path).last_offset == published and follower.stats.held == 10
    # Raft truncates the uncommitted tail, the new leader (epoch 2) writes its own
    with open(seg, "r+b") as f:
        f.truncate(raw[k][0].position)
    _write(seg, _rewritten_tail(raw, k, 2))
    follower.poll()
    clock.t = 20
    follower.poll()
    assert follower.stats.truncations == 1 and follower.stats.truncated_batches == 10
    rows = Log.open(log.path).read()
    after = [r for r in rows if r.source_offset >= raw[k][0].base_offset]
    assert after and all(parse_source(r.source)[0] == 2 for r in after)
    assert type(after[0]).__name__ == "LeaderChange"
    offsets = [r.source_offset for r in rows]
    assert offsets == sorted(set(offsets))


def test_a_rewrite_below_what_was_published_stops_and_publishes_nothing_of_it(tmp_path, raw):
    root, part = _live(tmp_path)
    seg = part / segment_name(0)
    log = Log.create(tmp_path / "log")
    follower = KafkaFollower(root, log, settle_ms=0)
    k = 3000
    _write(seg, b"".join(d for _, d in raw[: k + 10]))
    follower.poll()
    before = _rows(log)
    with open(seg, "r+b") as f:
        f.truncate(raw[k][0].position)
    _write(seg, _rewritten_tail(raw, k, 2))
    with pytest.raises(PublishedTruncationError, match="after its records were published|no longer on disk"):
        follower.poll()
    assert _rows(log) == before


def test_a_restarted_follower_resumes_exactly_once(tmp_path, raw, reference):
    root, part = _live(tmp_path)
    seg = part / segment_name(0)
    log = Log.create(tmp_path / "log")
    _write(seg, b"".join(d for _, d in raw[:2000]))
    KafkaFollower(root, log, settle_ms=0).poll()
    _write(seg, b"".join(d for _, d in raw[2000:]))
    again = KafkaFollower(root, Log.open(log.path), settle_ms=0)
    again.poll()
    assert _rows(log) == reference
    third = KafkaFollower(root, Log.open(log.path), settle_ms=0)
    third.poll()
    assert third.stats.appends == 0 and _rows(log) == reference


def test_a_restart_after_a_rewrite_of_published_batches_is_refused(tmp_path, raw):
    root, part = _live(tmp_path)
    seg = part / segment_name(0)
    log = Log.create(tmp_path / "log")
    _write(seg, b"".join(d for _, d in raw[:3010]))
    KafkaFollower(root, log, settle_ms=0).poll()
    # The batch of the last published record (the batches after it hold only NoOps, which are
    # not published: rewriting those loses no history)
    base = parse_source(Log.open(log.path).read()[-1].source)[1]
    k = next(i for i, (b, _) in enumerate(raw) if b.base_offset == base)
    with open(seg, "r+b") as f:
        f.truncate(raw[k][0].position)
    _write(seg, _rewritten_tail(raw, k, 2))
    before = _rows(log)
    with pytest.raises(PublishedTruncationError, match=f"offset {base} \\(epoch 1 -> 2\\)"):
        KafkaFollower(root, Log.open(log.path), settle_ms=0).poll()
    assert _rows(log) == before


def test_a_snapshot_makes_held_batches_safe_at_once(tmp_path, raw):
    root, part = _live(tmp_path)
    seg = part / segment_name(0)
    log = Log.create(tmp_path / "log")
    follower = KafkaFollower(root, log, settle_ms=60_000, clock=Clock())
    _write(seg, b"".join(d for _, d in raw[:2000]))
    follower.poll()
    assert log.last_offset == -1
    end = raw[1000][0].base_offset
    cp = KAFKA_LOGS / "single-snapshot" / PARTITION_DIR / "00000000000000007161-0000000001.checkpoint"
    shutil.copy(cp, part / f"{end:020d}-0000000001.checkpoint")
    follower.poll()
    rows = Log.open(log.path).read()
    assert rows and max(r.source_offset for r in rows) < end
    assert follower.stats.held == 2000 - 1000


def test_follow_with_a_writer_thread(tmp_path, raw, reference):
    root, part = _live(tmp_path)
    log = Log.create(tmp_path / "log")

    def writer() -> None:
        half = len(raw) // 2
        for lo, hi in ((0, half), (half, len(raw))):
            seg = part / segment_name(raw[lo][0].base_offset)
            for i in range(lo, hi, 500):
                _write(seg, b"".join(d for _, d in raw[i : min(i + 500, hi)]))
                time.sleep(0.01)

    t = threading.Thread(target=writer)
    t.start()
    follower = KafkaFollower(root, log, settle_ms=0)
    stats = follower.run(poll_ms=5, until_idle_ms=1_500)
    t.join()
    assert stats.batches == len(raw) and _rows(log) == reference


def test_cli_follow_until_idle(tmp_path, reference):
    root, _ = _live(tmp_path)
    shutil.copy(SEGMENT, root / PARTITION_DIR / SEGMENT.name)
    result = runner.invoke(
        app,
        ["import-kafka", str(root), str(tmp_path / "log"), "--follow", "--settle-ms", "0", "--until-idle-ms", "100"],
    )
    assert result.exit_code == 0, result.output
    assert _rows(Log.open(tmp_path / "log")) == reference
    assert "followed" in result.stderr


IMPOSSIBLE_TAILS = {
    "a tail of zeros": lambda: bytes(4096),
    "a length of 10": lambda: (0).to_bytes(8, "big") + (10).to_bytes(4, "big") + bytes(100),
    "a length of 2^31-1": lambda: (0).to_bytes(8, "big") + (2**31 - 1).to_bytes(4, "big") + bytes(100),
}


@pytest.mark.parametrize("tail", sorted(IMPOSSIBLE_TAILS))
def test_an_impossible_batch_header_stops_the_follower_naming_it(tmp_path, raw, tail):
    """Issue 54, item 9: after the whole batches, a header no batch can have is not a batch still
    being written: the follower said nothing and exited 0 at --until-idle-ms; it names it, with
    exit code 2, as the one-shot import does (tests/adversarial/test_import_kafka_rules.py)."""
    root, part = _live(tmp_path)
    whole = b"".join(d for _, d in raw[:50])
    _write(part / segment_name(0), whole + IMPOSSIBLE_TAILS[tail]())
    result = runner.invoke(
        app,
        ["import-kafka", str(root), str(tmp_path / "log"), "--follow", "--settle-ms", "0", "--until-idle-ms", "100"],
    )
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"{segment_name(0)} at byte {len(whole)}: impossible batch header" in result.stderr, result.stderr
    one_shot = runner.invoke(app, ["import-kafka", str(root), str(tmp_path / "once")])
    assert one_shot.exit_code == 2 and "impossible batch header" in one_shot.stderr, one_shot.output


# -- Kafka's own cases ---------------------------------------------------------------------------


def _metadata_values(raw, n: int) -> list[bytes]:
    """``n`` metadata record values from the real log (not NoOps: they are not published)."""
    from kraftlake.records.kafka.metadata import MetadataDecoder

    dec, out = MetadataDecoder(), []
    for b, _ in raw:
        for off, ts, _k, v in b.records:
            if not b.is_control and type(dec.decode(v, offset=off, ts_ms=ts, source=None)).__name__ != "NoOp":
                out.append(v)
        if len(out) >= n:
            return out[:n]
    raise AssertionError("the fixture holds fewer metadata records")


def test_testFollowerLogReconciliation(tmp_path, raw):
    # KafkaRaftClientTest: the follower holds [foo, bar] then [baz] in epoch 3; the leader of
    # epoch 5 answers with a diverging epoch ending at offset 2, the follower truncates to 2 and
    # fetches the leader's log from there. Here "foo, bar, baz" are three metadata records.
    part, clock, log, follower = _held(tmp_path)
    seg = part / segment_name(0)
    foo, bar, baz, qux = _metadata_values(raw, 4)
    first = encode_batch([(0, 1, None, foo), (1, 1, None, bar)], base_offset=0, partition_leader_epoch=3)
    _write(seg, first + encode_batch([(2, 1, None, baz)], base_offset=2, partition_leader_epoch=3))
    follower.poll()
    with open(seg, "r+b") as f:
        f.truncate(len(first))  # truncateToEndOffset(2)
    _, ts, key, value = raw[0][0].records[0]
    _write(seg, encode_batch([(2, ts, key, value)], base_offset=2, partition_leader_epoch=5, control=True))
    _write(seg, encode_batch([(3, 2, None, qux)], base_offset=3, partition_leader_epoch=5))
    follower.poll()
    clock.t = 10
    follower.poll()
    rows = Log.open(log.path).read()
    assert [(r.source_offset, parse_source(r.source)[0]) for r in rows] == [(0, 3), (1, 3), (2, 5), (3, 5)]
    assert follower.stats.truncated_batches == 1
    assert msgspec.json.encode(rows[3]) != msgspec.json.encode(rows[1])


def test_testTruncateFull(tmp_path, raw):
    # LogSegmentTest: the whole segment truncated (truncateTo its base offset), then appended
    # again at the original offsets. Here the rolled segment at 2000 is cut to nothing while its
    # batches are held, and the new leader writes them again in epoch 2.
    part, clock, log, follower = _held(tmp_path)
    _write(part / segment_name(0), b"".join(d for _, d in raw[:2000]))
    follower.poll()
    clock.t = 10
    follower.poll()
    rolled = part / segment_name(raw[2000][0].base_offset)
    _write(rolled, b"".join(d for _, d in raw[2000:2010]))
    follower.poll()
    rolled.write_bytes(b"")
    follower.poll()  # nothing there yet: nothing published, nothing lost
    _write(rolled, _rewritten_tail(raw, 2000, 2))
    follower.poll()
    clock.t = 20
    follower.poll()
    rows = Log.open(log.path).read()
    after = [r for r in rows if r.source_offset >= raw[2000][0].base_offset]
    assert after and {parse_source(r.source)[0] for r in after} == {2}
    assert follower.stats.truncated_batches == 10


def test_cli_follow_stops_on_sigterm_with_exit_0(tmp_path, reference):
    import signal
    import subprocess
    import sys

    root, _ = _live(tmp_path)
    shutil.copy(SEGMENT, root / PARTITION_DIR / SEGMENT.name)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kraftlake.cli", "import-kafka", str(root), str(tmp_path / "log"), "--follow"]
        + ["--settle-ms", "0", "--poll-ms", "20"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(1200):  # until the whole segment landed (at most 2 minutes on a busy machine)
            try:
                if len(Log.open(tmp_path / "log").read()) == len(reference):
                    break
            except Exception:  # noqa: BLE001 - the log is still being created
                pass
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "followed" in stderr
    assert _rows(Log.open(tmp_path / "log")) == reference


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_split_of_the_writes_imports_as_the_whole_file(tmp_path_factory, raw, data):
    # Kafka's appends reach the file in pieces of any size, segments roll at any batch: whatever
    # the follower sees between two polls, the log ends as a plain import of the finished files.
    n = data.draw(st.integers(200, 600), label="batches")
    rolls = sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=3), label="rolls"))
    tmp = tmp_path_factory.mktemp("split")
    root, part = _live(tmp)
    bounds = [0, *rolls, n]
    segments = [
        (part / segment_name(raw[a][0].base_offset), b"".join(d for _, d in raw[a:b]))
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    log = Log.create(tmp / "log")
    follower = KafkaFollower(root, log, settle_ms=0)
    for path, blob in segments:
        cuts = sorted(data.draw(st.sets(st.integers(1, len(blob) - 1), max_size=6), label="cuts"))
        for a, b in zip([0, *cuts], [*cuts, len(blob)], strict=False):
            _write(path, blob[a:b])
            follower.poll()
    whole = Log.create(tmp / "whole")
    import_kafka(root, whole)
    assert _rows(log) == _rows(whole) and follower.stats.batches == n
