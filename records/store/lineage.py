"""What a writer builds on: the commit file of the version it last saw, checked before each
commit it makes on top of it.

A commit is put only if its file is absent (``delta_commit.put_if_absent``, S3's conditional
put), which fences writers against each other but not against the log's history going away: with
``_delta_log`` emptied (its data files too), or the bucket deleted and made again, the next
version's file is absent as well, and the put lands a commit on top of nothing, acknowledged,
in a log no reader can open. So before each commit a writer looks at the file of the version it
builds on, once (a ``stat`` on disk, a ``HEAD`` on an object store: ``Location.identity``):

- missing: the history is gone; the writer refuses (``CorruptStoreError`` naming the file) and
  keeps refusing, until the file is back (a restore);
- another file than the one this writer saw there (another inode or time, another ETag): the log
  was replaced by another one as long; refused alike.

The identity of a file this writer put itself comes with the put (the ``fstat`` of the file it
wrote, the ETag S3 answers), so a commit costs one look more and no more; on an object store
the look is made while the commit's data file is put (``prefetch``), so it adds a request but
no wait. delta-rs's commit (the
path of stores without kraftlake's conditional put) answers with none: its file is read instead
of looked at (one ``GET`` in place of the ``HEAD``), and must hold the commit's batch id. A file
another writer put is first seen by the look: its existence is checked then, its identity from
then on. What no look can close is the gap between the look and the put: a history deleted in
between, in that millisecond, is not seen.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from ..errors import CorruptStoreError
from .location import Location


class Lineage:
    """The commit file a writer builds on: its version and, once known, its identity."""

    def __init__(self, location: Location) -> None:
        self.location = location
        self.version = -1
        self.identity: object | None = None
        self.holds: str | None = None
        """Text the file holds, when its identity is not known (the batch id of a commit delta-rs
        made for this writer)."""
        self._ahead: tuple[int, bool, Future] | None = None
        self._executor: ThreadPoolExecutor | None = None

    def prefetch(self, version: int) -> None:
        """Start the look ``check(version)`` will make, on a thread (object stores only: on disk
        a ``stat`` is not worth a thread)."""
        if self.location.is_local:
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kraftlake-lineage")
        reads = self._reads(version)
        self._ahead = (version, reads, self._executor.submit(self._look, version, reads))

    def _reads(self, version: int) -> bool:
        """Whether the look at ``version`` reads the file (its identity unknown, its text known)."""
        return version == self.version and self.identity is None and self.holds is not None

    def _look(self, version: int, reads: bool) -> object | None:
        rel = f"_delta_log/{version:020d}.json"
        return self.location.read(rel) if reads else self.location.identity(rel)

    def check(self, version: int) -> None:
        """Refuse (``CorruptStoreError``) to build on ``version`` unless its commit file is there
        and is the one this writer last saw at that version."""
        where = f"{self.location.uri}/_delta_log/{version:020d}.json"
        mine, reads = version == self.version, self._reads(version)
        ahead, self._ahead = self._ahead, None
        looked = (
            ahead[2].result() if ahead is not None and ahead[:2] == (version, reads) else self._look(version, reads)
        )
        if reads:
            if looked is None:
                raise self._missing(where)
            if self.holds.encode() not in looked:  # type: ignore[union-attr, operator]  # reads: holds is set, looked is bytes
                raise self._replaced(where)
            return
        found = looked
        if found is None:
            raise self._missing(where)
        if mine and self.identity is not None:
            if found != self.identity:
                raise self._replaced(where)
            return
        self.version, self.identity, self.holds = version, found, None

    @staticmethod
    def _missing(where: str) -> CorruptStoreError:
        return CorruptStoreError(
            f"{where}, the version this writer builds on, is missing: the log's history is gone"
            " (its commits deleted, or its store made again); nothing is committed on top of it",
            file=where,
        )

    @staticmethod
    def _replaced(where: str) -> CorruptStoreError:
        return CorruptStoreError(
            f"{where}, the version this writer builds on, is not the one this writer saw: the log"
            " was replaced by another; nothing is committed on top of it",
            file=where,
        )

    def committed(self, version: int, identity: object | None, *, holds: str | None = None) -> None:
        """This writer put ``version``'s commit file, whose identity is ``identity``; None when
        not known (a commit delta-rs made), and then ``holds``: text the file holds."""
        self.version, self.identity, self.holds = version, identity, holds
