"""Following a live ``__cluster_metadata-0`` directory into a kraftlake log (``import-kafka --follow``).

``KafkaFollower.poll`` reads what Kafka wrote since the last poll: whole new batches at the end of
the active segment (a partially written last batch is left for the next poll), rolled segments,
new ``.checkpoint`` snapshots; old segments deleted by retention are ignored once read.

Raft may truncate a follower's uncommitted tail when a new leader's log diverges
(``KafkaRaftClient.handleFetchResponse`` -> ``truncateToEndOffset`` -> ``LogSegment.truncateTo``,
which cuts the file and deletes later segments) and the bytes at those offsets are then
rewritten in a higher epoch. Kafka's high watermark is not on disk (``KafkaMetadataLog`` keeps it
in memory; brokers' ``MetadataLoader`` apply records only through ``handleCommit``), so a reader
of the files cannot know which records are committed. The follower therefore publishes a batch
only once it is safe (README "Following a running cluster"): below the newest snapshot's end
offset (``KafkaMetadataLog.createNewSnapshot`` refuses one above the high watermark), or
unchanged on disk for ``settle_ms``. Batches still held back that Kafka rewrites are dropped
and counted (``truncated_batches``); a rewrite below what was already published stops the follower with ``PublishedTruncationError`` and publishes nothing
of the new tail: a truncated record is never appended as history.

Exactly-once across restarts: each append is one atomic commit with the next sequence of the
import's producer, and a restart resumes after the Kafka offset of the log's last record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kraftlake.logging import get_logger
from kraftlake.records.base import Record
from kraftlake.records.errors import LogError

from .batches import HEADER, HEADER_SIZE, Batch, impossible_length, iter_batches
from .errors import KafkaFormatError
from .importer import CHUNK, ImportStats, batch_records, checkpoint_records, parse_source
from .layout import MetadataDir, Segment, open_metadata_dir
from .metadata import MetadataDecoder
from .validation import BatchOrder

if TYPE_CHECKING:
    from kraftlake.records.store.log import Log  # imports Delta: for the annotations only

log = get_logger(__name__)

SETTLE_MS = 5_000
"""Default time a batch stays unchanged on disk before it is published. A follower truncates a
divergent tail at its first fetch from a new leader: after ``controller.quorum.fetch.timeout.ms``
(2 s) without the old leader and an election (``controller.quorum.election.timeout.ms``, 1 s,
plus backoff). 5 s covers both with margin."""


class PublishedTruncationError(KafkaFormatError):
    """Kafka truncated and rewrote offsets that were already published to the kraftlake log."""


@dataclass
class _Read:
    """A batch read from a segment, not yet published, and when it was first seen."""

    batch: Batch
    segment: int
    seen_at: float


@dataclass
class FollowStats(ImportStats):
    appends: int = 0
    """Commits made to the kraftlake log."""
    truncated_batches: int = 0
    """Held-back batches that Kafka truncated (divergence) before they were published."""
    truncations: int = 0
    """Divergences seen (the tail on disk changed under what was read)."""
    held: int = 0
    """Batches read but not yet published (at the last poll)."""

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(appends=self.appends, truncated_batches=self.truncated_batches, truncations=self.truncations)
        return d


class KafkaFollower:
    """Tails one metadata log dir into one kraftlake log (module docstring).

    ``clock`` (seconds, monotonic) is injectable so that tests drive the settle window without
    sleeping; ``on_publish(records)`` is called after each append has landed."""

    def __init__(
        self,
        path: str | Path,
        log_: Log,
        *,
        include_noop: bool = False,
        settle_ms: int = SETTLE_MS,
        chunk: int = CHUNK,
        clock: Callable[[], float] = time.monotonic,
        on_publish: Callable[[list[Record]], None] | None = None,
    ) -> None:
        self.md = open_metadata_dir(path)
        self.path = self.md.partition
        self.log_ = log_
        self.include_noop = include_noop
        self.settle = settle_ms / 1000
        self.chunk = chunk
        self.clock = clock
        self.on_publish = on_publish
        self.producer = f"import-kafka:{self.md.cluster_id or self.md.root.name}:{self.md.node_id or '?'}"
        self.stats = FollowStats()
        self.decoder = MetadataDecoder()
        landed = log_.producer_seq(self.producer)
        if log_.last_offset >= 0 and landed is None:
            raise LogError(
                f"{log_.path} already holds {log_.last_offset + 1} records not written by this import;"
                " import into a new log"
            )
        self.seq = 0 if landed is None else landed + 1
        self.next_offset: int | None = None
        """The next Kafka offset to publish; None before anything was (then the start is chosen
        from the directory at the first poll)."""
        self.published: tuple[int, int, int | None] | None = None
        """(base offset, epoch, CRC or None after a restart) of the last batch published from."""
        if landed is not None:
            last = log_.read(from_offset=log_.last_offset, to_offset=log_.last_offset)[-1]
            self.next_offset = last.source_offset + 1  # type: ignore[operator]  # the import's records carry it
            origin = parse_source(last.source)
            if origin is not None:
                self.published = (origin[1], origin[0], None)
        self.held: list[_Read] = []
        self.cursor: tuple[int, int] | None = None
        """(segment base offset, byte position) after the last batch read."""
        self.order: BatchOrder | None = None
        self.last_read: tuple[int, int, int, int, int, int] | None = None
        """(segment, byte position, base offset, epoch, CRC, last offset) of the last batch read."""
        self.published_seen = False

    # -- one poll -------------------------------------------------------------------------------

    def poll(self) -> int:
        """Read what is new on disk and publish what is safe; the number of batches read."""
        try:
            md = open_metadata_dir(self.path)
        except FileNotFoundError:
            return 0  # a file vanished while listing (retention, a roll): look again next poll
        if self.next_offset is None and not self._start(md):
            return 0
        if self.cursor is not None and not self._tail_intact(md):
            self._resync(md)
        read = self._read_new(md)
        self._publish(md)
        self.stats.held = len(self.held)
        return read

    def _start(self, md: MetadataDir) -> bool:
        """Where a first run starts: offset 0 when the log holds it, else the newest snapshot's
        image then the log after it, as a Kafka replica starts (``KafkaMetadataLog``)."""
        if not md.segments and not md.checkpoints:
            return False
        if md.segments and md.segments[0].base_offset == 0:
            self.next_offset = 0
            return True
        cp = md.latest_checkpoint()
        if cp is None:
            raise KafkaFormatError(f"{md.partition}: the log starts at {md.segments[0].base_offset} and no snapshot")
        records = checkpoint_records(cp, self.decoder, self.stats)
        self.stats.records += len(records)
        self.stats.by_type.update(type(r).__name__ for r in records)
        self._append(records)
        self.next_offset = cp.end_offset
        return True

    def _segment_for(self, md: MetadataDir, offset: int) -> Segment | None:
        found = None
        for seg in md.segments:
            if seg.base_offset <= offset:
                found = seg
        return found

    def _tail_intact(self, md: MetadataDir) -> bool:
        """Whether the last batch read is still where it was, as it was (Kafka truncates by
        cutting the file, then writes the new leader's batches at the same offsets)."""
        if self.last_read is None:
            return True
        seg_base, position, base, epoch, crc, last_offset = self.last_read
        path = next((s.path for s in md.segments if s.base_offset == seg_base), None)
        if path is None:
            # Retention deletes only segments below a snapshot; Raft truncation deletes segments
            # above the truncation offset.
            cp = md.latest_checkpoint()
            return cp is not None and cp.end_offset > last_offset
        try:
            with open(path, "rb") as f:
                f.seek(position)
                head = f.read(HEADER_SIZE)
        except FileNotFoundError:
            return False
        if len(head) < HEADER_SIZE:
            return False
        h = HEADER.unpack(head)
        return (h[0], h[2], h[4]) == (base, epoch, crc)

    def _resync(self, md: MetadataDir) -> None:
        """The tail changed under us: re-read from the last published offset, drop held batches
        that are no longer on disk as they were, refuse if published ones changed."""
        self.stats.truncations += 1
        before = {r.batch.base_offset: (r.batch.partition_leader_epoch, r.batch.crc) for r in self.held}
        seen_at = {r.batch.base_offset: r.seen_at for r in self.held}
        self.held, self.cursor, self.order, self.last_read = [], None, None, None
        self._read_new(md)
        now = {r.batch.base_offset: (r.batch.partition_leader_epoch, r.batch.crc) for r in self.held}
        cut = min((base for base, key in before.items() if now.get(base) != key), default=None)
        if cut is not None:
            self.stats.truncated_batches += sum(1 for base in before if base >= cut)
            log.warning(
                "kafka.follow.truncated", path=str(self.path), from_offset=cut, epoch_now=now.get(cut, (None,))[0]
            )
        for r in self.held:  # batches below the cut keep their age; rewritten ones start again
            base = r.batch.base_offset
            if base in seen_at and (cut is None or base < cut):
                r.seen_at = seen_at[base]

    def _read_new(self, md: MetadataDir) -> int:
        """Read whole new batches from the cursor on, across segment rolls."""
        assert self.next_offset is not None
        if self.cursor is None:
            # Start in the segment holding the last published offset, to check it is unchanged.
            anchor = max(self.next_offset - 1, 0)
            seg = self._segment_for(md, anchor) or self._segment_for(md, self.next_offset)
            if seg is None:
                if md.segments:
                    raise KafkaFormatError(
                        f"{md.partition}: Kafka offset {self.next_offset} was deleted before it was read"
                        f" (the log now starts at {md.segments[0].base_offset}); import the newest snapshot"
                        " into a new log"
                    )
                return 0
            self.cursor = (seg.base_offset, 0)
            n = self._read_segments(md)
            if self.published is not None and not self.published_seen:
                cp = md.latest_checkpoint()
                if cp is None or cp.end_offset < self.next_offset:
                    raise PublishedTruncationError(
                        f"Kafka offset {self.next_offset - 1}, already published, is no longer on disk"
                        " (Raft truncated the log below it); re-import into a new log, with a longer --settle-ms",
                        file=str(seg.path),
                    )
            return n
        return self._read_segments(md)

    def _read_segments(self, md: MetadataDir) -> int:
        self.published_seen = False
        n = 0
        assert self.cursor is not None  # placed by _read_new
        while True:
            seg_base, pos = self.cursor
            seg = next((s for s in md.segments if s.base_offset == seg_base), None)
            later = [s for s in md.segments if s.base_offset > seg_base]
            if seg is None:
                if not later:
                    return n
                self.cursor = (later[0].base_offset, 0)
                continue
            try:
                with open(seg.path, "rb") as f:
                    f.seek(pos)
                    data = f.read()
            except FileNotFoundError:
                return n
            whole = _whole_prefix(data)
            for batch in iter_batches(data[:whole], file=str(seg.path)):
                batch.position += pos
                n += self._take(batch, seg)
            self.cursor = (seg_base, pos + whole)
            if len(data) - whole >= 12:
                # A header whose length no batch can have is not one still being written (a
                # write's bytes are visible once the file has grown over them): say so, as the
                # one-shot import does, instead of waiting for the rest forever.
                impossible = impossible_length(data, whole)
                if impossible is not None:
                    raise KafkaFormatError(impossible, file=str(seg.path), position=pos + whole)
            if whole < len(data) or not later:
                return n  # a partly written batch: wait for the rest
            self.cursor = (later[0].base_offset, 0)

    def _take(self, batch: Batch, seg: Segment) -> int:
        assert self.next_offset is not None
        self.last_read = (
            seg.base_offset,
            batch.position,
            batch.base_offset,
            batch.partition_leader_epoch,
            batch.crc,
            batch.last_offset,
        )
        pub = self.published
        if pub is not None and batch.base_offset <= pub[0] <= batch.last_offset:
            self.published_seen = True
            if (batch.base_offset, batch.partition_leader_epoch) != pub[:2] or pub[2] not in (None, batch.crc):
                raise PublishedTruncationError(
                    f"Kafka rewrote the batch at offset {pub[0]} (epoch {pub[1]} -> "
                    f"{batch.partition_leader_epoch}) after its records were published; the kraftlake log"
                    f" holds records up to Kafka offset {self.next_offset - 1} that Raft truncated."
                    " Re-import into a new log, with a longer --settle-ms",
                    file=str(seg.path),
                    position=batch.position,
                    field="partitionLeaderEpoch",
                )
        if batch.last_offset < self.next_offset:
            self._order(seg).check(batch)
            return 0
        self._order(seg).check(batch)
        self.held.append(_Read(batch, seg.base_offset, self.clock()))
        self.stats.batches += 1
        self.stats.bytes_read += batch.size
        return 1

    def _order(self, seg: Segment) -> BatchOrder:
        if self.order is None:
            self.order = BatchOrder()
            self.order.segment(seg.base_offset, str(seg.path))
        elif self.order.segment_base != seg.base_offset:
            self.order.segment(seg.base_offset, str(seg.path))
        return self.order

    def _publish(self, md: MetadataDir) -> None:
        """Append the held batches that are safe (module docstring), oldest first."""
        cp = md.latest_checkpoint()
        committed = cp.end_offset - 1 if cp is not None else -1
        now = self.clock()
        ready = 0
        for r in self.held:
            if r.batch.last_offset <= committed or now - r.seen_at >= self.settle:
                ready += 1
            else:
                break
        if not ready:
            return
        assert self.next_offset is not None
        out: list[Record] = []
        for r in self.held[:ready]:
            out.extend(
                batch_records(
                    r.batch,
                    self.decoder,
                    self.stats,
                    start=self.next_offset,
                    include_noop=self.include_noop,
                    file=str(self.path),
                )
            )
        self.stats.records += len(out)
        for i in range(0, len(out), self.chunk):
            self._append(out[i : i + self.chunk])
        last = self.held[ready - 1].batch
        self.published = (last.base_offset, last.partition_leader_epoch, last.crc)
        self.next_offset = last.last_offset + 1
        del self.held[:ready]

    def _append(self, records: list[Record]) -> None:
        if not records:
            return
        self.log_.append(records, producer=self.producer, seq=self.seq)
        self.seq += 1
        self.stats.appends += 1
        if self.on_publish is not None:
            self.on_publish(records)

    # -- the loop -------------------------------------------------------------------------------

    def run(
        self,
        *,
        poll_ms: int = 100,
        until_idle_ms: int | None = None,
        stop: threading.Event | None = None,
    ) -> FollowStats:
        """Poll every ``poll_ms`` until ``stop`` is set, or until nothing new was read and nothing
        is held back for ``until_idle_ms``."""
        stop = stop or threading.Event()
        idle_since = self.clock()
        while not stop.is_set():
            if self.poll() or self.held:
                idle_since = self.clock()
            elif until_idle_ms is not None and self.clock() - idle_since >= until_idle_ms / 1000:
                break
            stop.wait(poll_ms / 1000)
        log.info("kafka.follow.stopped", path=str(self.path), log=str(self.log_.path), **self.stats.to_dict())
        return self.stats


def _whole_prefix(data: bytes) -> int:
    """Bytes of ``data`` that are whole batches (a batch still being written is left out)."""
    pos, n = 0, len(data)
    while n - pos >= 12:
        if impossible_length(data, pos) is not None:
            break
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if pos + size > n:
            break
        pos += size
    return pos
