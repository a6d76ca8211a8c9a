"""Kafka's own checks on the order of the batches in a metadata log, made while importing one.

The CRC-32C of a batch covers its attributes and records, not its ``baseOffset`` nor its
``partitionLeaderEpoch``: a damaged or edited header passes it. Kafka checks those where it
loads and appends a log, and so does ``import_kafka``, refusing with the file and byte position:

- ``LogSegment``: a segment's base offset is <= the offset of every batch in it, and every
  offset fits the segment's 32-bit relative index (``ensureOffsetInRange``).
- ``UnifiedLog.analyzeAndValidateRecords``: offsets increase from batch to batch ("Out of order
  offsets", ``OffsetsOutOfOrderException``); a batch never starts at or before the previous
  batch's last offset (``UnexpectedAppendOffsetException``).
- ``LeaderEpochFileCache.assign``: epochs are >= 0 and never go back along the log.
- ``KafkaRaftClient``: a new leader's first batch in its epoch is the LeaderChange control
  record, so an epoch rises only at such a batch.
- Snapshots: ``<end offset>-<epoch>.checkpoint`` is the image up to ``end offset`` written in
  ``epoch``, the epoch of the record at ``end offset - 1``.

What they cannot see: a ``baseOffset`` raised on the last batch of a log (no later batch to
disagree with it, as in Kafka).
"""

from __future__ import annotations

from .batches import Batch
from .errors import KafkaFormatError

LEADER_CHANGE = 2
"""Control record type of ``LeaderChangeMessage`` (``ControlRecordType.LEADER_CHANGE``)."""
MAX_RELATIVE = 2**31 - 1


class BatchOrder:
    """The batches of one log in file order, checked as Kafka checks them (module docstring).
    ``snapshot_epochs``: end offset -> epoch of the log's ``.checkpoint`` snapshots."""

    def __init__(self, snapshot_epochs: dict[int, int] | None = None) -> None:
        self.snapshot_epochs = dict(snapshot_epochs or {})
        self.last_offset: int | None = None
        self.epoch: int | None = None
        self.segment_base = 0
        self.file = "<bytes>"

    def segment(self, base_offset: int, file: str) -> None:
        """The next segment, named by its base offset."""
        if self.last_offset is not None and base_offset <= self.last_offset:
            raise KafkaFormatError(
                f"segment base offset {base_offset} is not above the previous segment's last offset {self.last_offset}",
                file=file,
                position=0,
            )
        self.segment_base, self.file = base_offset, file

    def check(self, batch: Batch) -> None:
        def refuse(message: str) -> KafkaFormatError:
            return KafkaFormatError(message, file=self.file, position=batch.position, field="baseOffset")

        base, last, epoch = batch.base_offset, batch.last_offset, batch.partition_leader_epoch
        if batch.last_offset_delta < 0:
            raise refuse(f"lastOffsetDelta {batch.last_offset_delta} is negative")
        if base < self.segment_base:
            raise refuse(f"baseOffset {base} is below the segment's base offset {self.segment_base}")
        if last - self.segment_base > MAX_RELATIVE:
            raise refuse(f"last offset {last} is beyond the segment's 32-bit range from {self.segment_base}")
        if self.last_offset is not None and base <= self.last_offset:
            raise refuse(f"baseOffset {base} is not above the previous batch's last offset {self.last_offset}")
        if epoch < 0:
            raise _epoch(self.file, batch, f"partitionLeaderEpoch {epoch} is negative")
        if self.epoch is not None and epoch < self.epoch:
            raise _epoch(self.file, batch, f"partitionLeaderEpoch {epoch} is below the previous batch's {self.epoch}")
        if self.epoch is not None and epoch > self.epoch and not _starts_epoch(batch):
            raise _epoch(
                self.file,
                batch,
                f"partitionLeaderEpoch rises from {self.epoch} to {epoch} at a batch that is not the new"
                " leader's LeaderChange control record",
            )
        for end, snap_epoch in self.snapshot_epochs.items():
            if base <= end - 1 <= last and epoch != snap_epoch:
                raise _epoch(
                    self.file,
                    batch,
                    f"partitionLeaderEpoch {epoch} differs from epoch {snap_epoch} of the snapshot ending at {end}",
                )
        self.last_offset, self.epoch = last, epoch


def _epoch(file: str, batch: Batch, message: str) -> KafkaFormatError:
    return KafkaFormatError(message, file=file, position=batch.position, field="partitionLeaderEpoch")


def _starts_epoch(batch: Batch) -> bool:
    if not batch.is_control or not batch.records:
        return False
    key = batch.records[0][2]
    return key is not None and len(key) >= 4 and int.from_bytes(key[2:4], "big") == LEADER_CHANGE
