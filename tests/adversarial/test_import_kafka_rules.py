"""``BatchOrder`` case by case against the Kafka tests of the rules it ports (UnifiedLogTest,
LogSegmentTest, LeaderEpochFileCacheTest), on batches built as Kafka's MemoryRecordsBuilder
writes them."""

from __future__ import annotations

import pytest

from kraftlake.records.kafka.batches import encode_batch, iter_batches
from kraftlake.records.kafka.errors import KafkaFormatError
from kraftlake.records.kafka.validation import BatchOrder

LEADER_CHANGE_KEY = b"\x00\x00\x00\x02"


def _batch(base: int, epoch: int = 0, *, n: int = 1, leader_change: bool = False):
    records = [(base + i, 1_700_000_000_000, LEADER_CHANGE_KEY if leader_change else None, b"v") for i in range(n)]
    data = encode_batch(records, base_offset=base, partition_leader_epoch=epoch, control=leader_change)
    return next(iter_batches(data))


def _check(batches, segment_base: int = 0, snapshots=None):
    order = BatchOrder(snapshots)
    order.segment(segment_base, "00000000000000000000.log")
    for b in batches:
        order.check(b)


def test_testAppendWithOutOfOrderOffsetsThrowsException():
    """UnifiedLogTest: batches at offsets 0, 1, 3, 2, 4 are refused (OffsetsOutOfOrderException)."""
    with pytest.raises(KafkaFormatError, match="baseOffset 2 is not above the previous batch's last offset 3"):
        _check([_batch(o) for o in (0, 1, 3, 2, 4)])


def test_testAppendBelowExpectedOffsetThrowsException():
    """UnifiedLogTest: a batch below the log end offset (UnexpectedAppendOffsetException)."""
    with pytest.raises(KafkaFormatError, match="not above"):
        _check([_batch(0), _batch(1), _batch(1)])


def test_testAppendForLogSegmentOffsetOverflowException():
    """LogSegmentTest: an offset too far from the segment's base for its 32-bit index."""
    with pytest.raises(KafkaFormatError, match="32-bit range"):
        _check([_batch(0), _batch(2**31)])
    _check([_batch(2**31 - 1)])


def test_base_offset_below_the_segment_base():
    """LogSegment's contract: its base offset is <= every offset in it."""
    with pytest.raises(KafkaFormatError, match="below the segment's base offset 100"):
        _check([_batch(99)], segment_base=100)


def test_shouldEnforceMonotonicallyIncreasingEpochs():
    """LeaderEpochFileCacheTest: epochs 1 at 5, 2 at 6, then 1 at 7. Kafka's cache truncates the
    later entries; a log file holding that order lost what epoch 2 wrote, so the import refuses."""
    batches = [_batch(5, 1, leader_change=True), _batch(6, 2, leader_change=True), _batch(7, 1)]
    with pytest.raises(KafkaFormatError, match="below the previous batch's 2"):
        _check(batches)


def test_negative_epoch_is_refused():
    """LeaderEpochFileCache.assign throws for an epoch below 0."""
    with pytest.raises(KafkaFormatError, match="negative"):
        _check([_batch(0, -5)])


def test_epoch_rises_only_at_a_leader_change():
    """KafkaRaftClient writes LeaderChange as a new leader's first record."""
    _check([_batch(0, 1, leader_change=True), _batch(1, 1, n=3), _batch(4, 2, leader_change=True), _batch(5, 2)])
    with pytest.raises(KafkaFormatError, match="not the new leader's LeaderChange"):
        _check([_batch(0, 1, leader_change=True), _batch(1, 2)])


def test_snapshot_epoch_is_the_epoch_of_its_last_offset():
    """``<end offset>-<epoch>.checkpoint``: the record at end offset - 1 was written in epoch."""
    batches = [_batch(0, 1, leader_change=True, n=5), _batch(5, 2, leader_change=True, n=5)]
    _check(batches, snapshots={5: 1, 10: 2})
    with pytest.raises(KafkaFormatError, match="snapshot ending at 8"):
        _check(batches, snapshots={8: 1})


# -- batch lengths (issue 54, item 9): Kafka's readers, 3.9.0 (dd5272687e) -----------------------


def _two_batches() -> tuple[bytes, int]:
    """Two batches and where the second starts."""
    first = encode_batch([(0, 15, None, b"1"), (1, 20, None, b"2")], base_offset=0, partition_leader_epoch=0)
    second = encode_batch([(2, 30, None, b"3"), (3, 40, None, b"4")], base_offset=2, partition_leader_epoch=0)
    return first + second, len(first)


def _with_length(data: bytes, at: int, length: int) -> bytes:
    return data[: at + 8] + length.to_bytes(4, "big", signed=True) + data[at + 12 :]


@pytest.mark.parametrize("length", [9, 10, 0, -1, 48])
def test_iteratorRaisesOnTooSmallRecords(length):
    """ByteBufferLogInputStreamTest: the second batch's length set to 9, below the smallest
    record overhead (CorruptRecordException); a v2 batch's smallest is its 61-byte header. The
    import says the length is impossible, not that the batch is truncated."""
    data, second = _two_batches()
    data = _with_length(data, second, length)
    batches = iter_batches(data, file="seg.log")
    assert next(batches).base_offset == 0
    with pytest.raises(
        KafkaFormatError, match=f"seg.log at byte {second}: impossible batch header: its length field says {length} "
    ) as exc:
        next(batches)
    assert "truncated" not in str(exc.value) and "below a batch header's 61" in str(exc.value)


@pytest.mark.parametrize("length", [2**31 - 1, 8 * 1024 * 1024])
def test_iteratorRaisesOnTooLargeRecords(length):
    """ByteBufferLogInputStreamTest: a batch larger than the log's max.message.bytes
    (CorruptRecordException); the metadata log's is KafkaRaftClient.MAX_BATCH_SIZE_BYTES, 8 MiB
    with the 12 bytes of offset and length (KafkaMetadataLog.apply)."""
    data, second = _two_batches()
    with pytest.raises(KafkaFormatError, match="impossible batch header: .* above the 8388608 a KRaft batch can hold"):
        list(iter_batches(_with_length(data, second, length), file="seg.log"))


def test_testBatchIterationIncompleteBatch():
    """FileLogInputStreamTest: the file cut 13 bytes short of the second batch's end. Kafka's
    reader stops there (null); the import names it as what it is, a truncated batch."""
    data, second = _two_batches()
    batches = iter_batches(data[:-13], file="seg.log")
    assert next(batches).base_offset == 0
    with pytest.raises(KafkaFormatError, match=f"byte {second}: truncated batch: its length says"):
        next(batches)


def test_a_tail_of_zeros_is_named_as_zeros():
    """A zero-filled tail (a file system's after a crash) has length 0 at every position."""
    data, _ = _two_batches()
    with pytest.raises(KafkaFormatError, match="impossible batch header: the file ends in 4096 zero bytes"):
        list(iter_batches(data + bytes(4096), file="seg.log"))
