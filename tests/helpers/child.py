"""A command run as a child process whose output a test reads line by line, with time limits.

Threads drain both pipes (a full pipe would block the child in a write), so a child that stalls
or fails ends the test with what it said on stderr instead of hanging it."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading

import pytest

# Ctrl-C reaches the child as it reaches a command started from a terminal: SIGINT at its default
# disposition and not blocked, whatever the test process had done with it (a child inherits an
# ignored disposition and the signal mask through exec). A small exec wrapper, not preexec_fn,
# which is unsafe in a process with threads (the test process has the JVM's and others').
_AS_A_SHELL_STARTS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); os.execv(sys.argv[1], sys.argv[1:])"
)


def _signals(pid: int) -> str:
    """The child's ignored, blocked and caught signal masks, for a failure's message."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return " ".join(line.strip() for line in status if line.startswith(("SigIgn", "SigBlk", "SigCgt")))
    except OSError:
        return "(no /proc)"


class Child:
    def __init__(self, args: list[str]):
        wrapped = [sys.executable, "-c", _AS_A_SHELL_STARTS_IT, *args]
        self.proc = subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=lambda: self._errors.extend(self.proc.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # the child closed its stdout

    def line(self, timeout: float = 120) -> str:
        """The child's next line of stdout; fails the test if none comes within ``timeout``."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the child printed nothing for {timeout} s; stderr: {self.stop()}")
        if line is None:
            pytest.fail(f"the child ended (status {self.proc.wait()}); stderr: {self.stop()}")
        return line

    def interrupt(self, timeout: float = 60) -> int:
        """Ctrl-C, then the child's exit status; fails the test if it does not end in time."""
        self.proc.send_signal(2)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            masks = _signals(self.proc.pid)
            pytest.fail(f"the child did not end within {timeout} s of Ctrl-C ({masks}); stderr: {self.stop()}")

    def unread(self) -> list[str]:
        """The lines the child printed that were not read (after it ended)."""
        self._readers[0].join(timeout=10)
        unread = []
        while (line := self._lines.get_nowait()) is not None:
            unread.append(line)
        return unread

    def stop(self) -> str:
        """Kill the child if it runs; what it said on stderr."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=10)
        return "".join(self._errors)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
