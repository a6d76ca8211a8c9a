"""Kafka RecordBatch v2, read and write: Kafka's ``DefaultRecordBatch`` and ``DefaultRecord``, and
snapshots as ``RecordsSnapshotWriter`` writes them.

Our own framing with ``struct`` rather than kafka-python's record reader: the importer's goal
(``bench/import.py``) leaves a few microseconds per record, and kafka-python spends more than that
in its per-record objects. kafka-python stays a test oracle (tests/test_kafka_vectors.py).
CRC-32C comes from ``google-crc32c`` (C, Apache-2.0): a pure-Python CRC would cost more than all
the decoding.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import google_crc32c

from . import wire as w
from .errors import KafkaFormatError
from .metadata import MetadataDecoder, SnapshotFooter, SnapshotHeader, decode_control

HEADER = struct.Struct(">qiibIhiqqqhii")
"""BaseOffset, BatchLength, PartitionLeaderEpoch, Magic, CRC, Attributes, LastOffsetDelta,
BaseTimestamp, MaxTimestamp, ProducerId, ProducerEpoch, BaseSequence, RecordsCount: 61 bytes."""
HEADER_SIZE = HEADER.size
CRC_START = 21
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
MAX_BATCH_SIZE = 8 * 1024 * 1024
"""The largest batch a KRaft metadata log holds, its 12 bytes of offset and length included:
``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``, which ``KafkaMetadataLog.apply`` makes the log's
``max.message.bytes`` (Kafka 3.9.0, dd5272687e); the accumulator never writes a larger one."""


def impossible_length(data: bytes, pos: int) -> str | None:
    """Why the batch header at ``pos`` cannot start a batch Kafka wrote, from its length field
    alone, or None when it can (the batch may still be incomplete: a truncated tail, or one
    still being written). Kafka's readers refuse a length below the smallest record overhead
    (``ByteBufferLogInputStream.nextBatchSize``, ``FileLogInputStream.nextBatch``:
    CorruptRecordException) and above the log's ``max.message.bytes``; for a v2 batch the
    smallest is its 61-byte header (``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``). Needs the
    12 bytes of offset and length."""
    length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
    if HEADER_SIZE - 12 <= length <= MAX_BATCH_SIZE - 12:
        return None
    rest = data[pos:]
    if not rest.strip(b"\x00"):
        return (
            f"impossible batch header: the file ends in {len(rest)} zero bytes where a batch should start"
            " (a zero-filled tail, not a batch Kafka wrote)"
        )
    limit = (
        f"below a batch header's {HEADER_SIZE}"
        if length < HEADER_SIZE - 12
        else f"above the {MAX_BATCH_SIZE} a KRaft batch can hold"
    )
    return (
        f"impossible batch header: its length field says {length} ({12 + length} bytes with offset and length), {limit}"
    )


class Batch:
    """One RecordBatch: its header, its byte position and size in the file, and its records as
    (offset, timestamp, key, value) tuples."""

    __slots__ = (
        "base_offset",
        "partition_leader_epoch",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "position",
        "size",
        "records",
    )

    def __init__(self, header: tuple, position: int, size: int, records: list) -> None:
        (
            self.base_offset,
            _,
            self.partition_leader_epoch,
            _,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            _,
        ) = header
        self.position = position
        self.size = size
        self.records = records

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def compression(self) -> str:
        return CODECS.get(self.attributes & 7, str(self.attributes & 7))


def _records(
    body: bytes, count: int, base_offset: int, base_ts: int
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    pos = 0
    varint = w.varint
    for _ in range(count):
        length, pos = varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        b = body[pos]  # one-byte varints are the rule here: timestamp delta 0, small offsets
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            ts_delta, pos = varint(body, pos)
        b = body[pos]
        if b < 0x80:
            off_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            off_delta, pos = varint(body, pos)
        klen, pos = varint(body, pos)
        key = None
        if klen >= 0:
            key = body[pos : pos + klen]
            pos += klen
        vlen, pos = varint(body, pos)
        value = None
        if vlen >= 0:
            value = body[pos : pos + vlen]
            pos += vlen
        headers, pos = varint(body, pos)
        for _ in range(headers):  # KRaft writes none; skip them if a writer did
            hk, pos = varint(body, pos)
            pos += max(hk, 0)
            hv, pos = varint(body, pos)
            pos += max(hv, 0)
        if pos != end:
            raise ValueError(f"record length {length} does not match its fields")
        out.append((base_offset + off_delta, base_ts + ts_delta, key, value))
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last record")
    return out


def iter_batches(
    data: bytes,
    *,
    file: str = "<bytes>",
    verify_crc: bool = True,
    skip_corrupt: bool = False,
    skipped: list[str] | None = None,
) -> Iterator[Batch]:
    """The batches of a segment or snapshot file, in file order.

    A CRC mismatch or a batch whose records do not parse raises ``KafkaFormatError`` naming the
    file and byte position; with ``skip_corrupt`` it is skipped and described in ``skipped``.
    A truncated last batch (the file ends inside it, as after a crash) ends the iteration with an
    error, or with an entry in ``skipped``."""
    n = len(data)
    pos = 0
    unpack = HEADER.unpack_from
    while pos < n:
        header = unpack(data, pos) if n - pos >= HEADER_SIZE else None
        size = 12 + header[1] if header is not None else 0
        impossible = impossible_length(data, pos) if n - pos >= 12 else None
        if impossible is not None or header is None or pos + size > n:
            if impossible is not None:
                message = impossible
            elif header is None:
                message = f"truncated batch: {n - pos} bytes left, a batch header is {HEADER_SIZE}"
            else:
                message = f"truncated batch: its length says {size} bytes, {n - pos} are left"
            # The length cannot be trusted: without skip_corrupt, stop here; with it, go on at
            # the next valid batch, as Kafka's recovery scans, and say what was skipped.
            nxt = _next_batch(data, pos + 1, verify_crc) if skip_corrupt else None
            if nxt is None:
                _corrupt(
                    message + (f"; no valid batch follows ({n - pos} bytes skipped)" if skip_corrupt else ""),
                    file,
                    pos,
                    skip_corrupt,
                    skipped,
                )
                return
            _corrupt(f"{message}; resumed at the next valid batch, byte {nxt}", file, pos, skip_corrupt, skipped)
            pos = nxt
            continue
        if header[3] != 2:
            _corrupt(f"batch magic {header[3]} (only v2 batches are KRaft's)", file, pos, skip_corrupt, skipped)
            pos += size
            continue
        if verify_crc:
            crc = google_crc32c.value(data[pos + CRC_START : pos + size])
            if crc != header[4]:
                _corrupt(
                    f"CRC-32C mismatch: stored {header[4]:08x}, computed {crc:08x}", file, pos, skip_corrupt, skipped
                )
                pos += size
                continue
        body = data[pos + HEADER_SIZE : pos + size]
        codec = header[5] & 7
        try:
            if codec == 1:
                body = gzip.decompress(body)
            elif codec != 0:
                raise ValueError(
                    f"{CODECS.get(codec, codec)} compression is not supported (KRaft writes uncompressed batches)"
                )
            records = _records(body, header[12], header[0], header[7])
        except (ValueError, IndexError, OSError, EOFError) as exc:
            _corrupt(f"batch at offset {header[0]} does not parse: {exc}", file, pos, skip_corrupt, skipped)
            pos += size
            continue
        yield Batch(header, pos, size, records)
        pos += size


def _next_batch(data: bytes, start: int, verify_crc: bool) -> int | None:
    """The position of the next batch at or after ``start`` whose header is whole, v2, of a
    length that fits the file and (``verify_crc``) whose CRC-32C matches; None when none does."""
    n = len(data)
    at = data.find(b"\x02", start + 16)
    while at != -1:
        p = at - 16  # the magic byte is the 17th of a header
        if n - p >= HEADER_SIZE:
            length = int.from_bytes(data[p + 8 : p + 12], "big", signed=True)
            end = p + 12 + length
            if HEADER_SIZE - 12 <= length and end <= n:
                stored = int.from_bytes(data[p + 17 : p + 21], "big")
                if not verify_crc or google_crc32c.value(data[p + CRC_START : end]) == stored:
                    return p
        at = data.find(b"\x02", at + 1)
    return None


def _corrupt(message: str, file: str, pos: int, skip: bool, skipped: list[str] | None) -> None:
    if not skip:
        raise KafkaFormatError(message, file=file, position=pos)
    if skipped is not None:
        skipped.append(f"{file} at byte {pos}: {message}")


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> None:
    body = bytearray(b"\x00")
    w.write_varint(body, ts_delta)
    w.write_varint(body, offset_delta)
    if key is None:
        w.write_varint(body, -1)
    else:
        w.write_varint(body, len(key))
        body += key
    if value is None:
        w.write_varint(body, -1)
    else:
        w.write_varint(body, len(value))
        body += value
    body.append(0)  # no headers
    w.write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    base_offset: int,
    partition_leader_epoch: int,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A RecordBatch v2 of ``(offset, timestamp, key, value)`` records, exactly as Kafka's
    ``MemoryRecordsBuilder`` writes an uncompressed one (base timestamp = the first record's)."""
    if not records:
        raise ValueError("a batch holds at least one record")
    base_ts = records[0][1]
    body = bytearray()
    for offset, ts, key, value in records:
        _encode_record(body, offset - base_offset, ts - base_ts, key, value)
    last_delta = records[-1][0] - base_offset
    max_ts = max(r[1] for r in records)
    attributes = CONTROL_FLAG if control else 0
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    crc = google_crc32c.value(bytes(after_crc))
    length = 4 + 1 + 4 + len(after_crc)  # epoch, magic, crc, then the rest
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + after_crc


@dataclass
class CheckpointContent:
    """A decoded ``.checkpoint`` (or ``bootstrap.checkpoint``)."""

    header: SnapshotHeader
    records: list
    epoch: int
    """The snapshot's epoch (every batch's PartitionLeaderEpoch)."""


def read_checkpoint(
    data: bytes,
    *,
    file: str = "<bytes>",
    decoder: MetadataDecoder | None = None,
    source_offset: int | None = None,
    source: str | None = None,
) -> CheckpointContent:
    """Decode a snapshot: header batch, metadata batches, footer batch (``RecordsSnapshotWriter``).

    Records get no offset (a snapshot's offsets are relative to it) and ``source_offset``,
    normally the snapshot's last contained offset. A missing header or footer is an error."""
    dec = decoder or MetadataDecoder()
    header: SnapshotHeader | None = None
    footer = False
    records: list = []
    epoch = 0
    for batch in iter_batches(data, file=file):
        epoch = batch.partition_leader_epoch
        for _rel, ts, key, value in batch.records:
            if footer:
                raise KafkaFormatError("records after the snapshot footer", file=file, position=batch.position)
            if batch.is_control:
                c = decode_control(key, value, epoch=epoch, offset=None, ts_ms=ts, source=source)
                if isinstance(c, SnapshotHeader):
                    header = c
                elif isinstance(c, SnapshotFooter):
                    footer = True
                continue  # KRaftVersion / Voters of the snapshot: the quorum's, not the image's
            if header is None:
                raise KafkaFormatError("metadata before the snapshot header", file=file, position=batch.position)
            records.append(dec.decode(value, offset=None, ts_ms=ts, source=source, source_offset=source_offset))
    if header is None:
        raise KafkaFormatError("no snapshot header (not a .checkpoint file?)", file=file)
    if not footer:
        raise KafkaFormatError("no snapshot footer: the snapshot is incomplete", file=file)
    return CheckpointContent(header=header, records=records, epoch=epoch)
