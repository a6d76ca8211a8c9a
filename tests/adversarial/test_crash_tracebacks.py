"""Tracebacks instead of errors (issue 54, item 10): ``maintain`` losing its commits to appends,
``init`` under a regular file, and a service's commit child whose service was killed with -9.
Each ends with plain words and its exit code (or, for the child, quietly), and loses nothing."""

from __future__ import annotations

import threading

import msgspec
import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, NoOp

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _plain(result, code: int, *words: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for w in words:
        assert w in result.stderr, (w, result.stderr)


def test_maintain_that_loses_its_vacuum_to_appends_says_so(tmp_path, monkeypatch):
    """delta-rs commits the vacuum and gives up after its retries when appends keep committing
    first (CommitFailedError: 'Failed to commit transaction: 15' beside two busy appenders);
    that is said plainly, exit code 1, and the log is whole."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    log = Log.create(tmp_path / "log")
    for _ in range(3):
        log.append([NoOp()])

    def lost(*args, **kwargs):
        raise CommitFailedError("Failed to commit transaction: 100")

    monkeypatch.setattr(DeltaTable, "vacuum", lost)
    _plain(run("maintain", tmp_path / "log"), 1, "maintain gave up vacuuming", "nothing is lost")
    assert [r.offset for r in Log.open(tmp_path / "log").read()] == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("retention", [[], ["--retention-hours", "0"]], ids=["default", "0-hours"])
def test_maintain_beside_busy_appenders_never_ends_in_a_traceback(tmp_path, retention):
    """The adversarial run's case: two appenders committing as fast as they can while
    ``maintain`` runs; it succeeds or gives up in words, and every acknowledged batch is there,
    at any retention (at 0 hours a full vacuum used to delete the file an append had written
    and not yet committed: acknowledged batches lost)."""
    path = tmp_path / "log"
    Log.create(path).append([NoOp()])
    stop = threading.Event()
    acked: list[int] = []

    def append() -> None:
        log = Log.open(path)
        while not stop.is_set():
            acked.append(log.append([NoOp()]).first_offset)

    writers = [threading.Thread(target=append) for _ in range(2)]
    for w in writers:
        w.start()
    try:
        while len(acked) < 50:  # the appenders are busy
            stop.wait(0.01)
        for _ in range(3):
            result = run("maintain", path, *retention)
            if result.exit_code:
                _plain(result, 1, "maintain gave up")
            else:
                _plain(result, 0)
    finally:
        stop.set()
        for w in writers:
            w.join()
    offsets = [r.offset for r in Log.open(path).read()]
    assert offsets == list(range(len(offsets))) and set(acked) <= set(offsets)


@pytest.mark.parametrize("target", ["notlog/file/", "notlog", "notlog/a/b"])
def test_init_under_a_regular_file_is_refused_in_words(tmp_path, target):
    (tmp_path / "notlog").write_text("not a log")
    _plain(run("init", tmp_path / target), 2, f"{tmp_path / 'notlog'} is a file, not a directory")
    assert (tmp_path / "notlog").read_text() == "not a log"


class _GoneParent:
    """The child's end of the pipe to a service killed with -9: the service's ready message is
    taken, one group comes, then the end is gone (``failing``: on the answer, BrokenPipeError;
    on the next read, ConnectionResetError)."""

    def __init__(self, group: bytes, failing: str) -> None:
        self.incoming = [group]
        self.failing = failing
        self.sent = 0

    def send_bytes(self, data: bytes) -> None:
        self.sent += 1
        if self.sent > 1 and self.failing == "answer":
            raise BrokenPipeError(32, "Broken pipe")

    def recv_bytes(self) -> bytes:
        if self.incoming:
            return self.incoming.pop()
        raise ConnectionResetError(104, "Connection reset by peer")


@pytest.mark.parametrize("failing", ["answer", "next read"])
def test_a_commit_child_whose_service_was_killed_ends_quietly(log_path, failing):
    """Its answer to a dead service (BrokenPipeError) or its next read (ConnectionResetError)
    ended the child with a traceback on the service's stderr; the commit it made stays."""
    from kraftlake.service.commit_process import _Group, _serve

    Log.create(log_path)
    group = msgspec.msgpack.encode(_Group([("p", 0, [NoOp(), NoOp()])]))
    _serve(str(log_path), None, _GoneParent(group, failing))
    assert [r.offset for r in Log.open(log_path).read()] == [0, 1]
