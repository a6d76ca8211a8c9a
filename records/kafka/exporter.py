"""Writing kraftlake records as a Kafka ``__cluster_metadata`` segment.

So that histories kraftlake made (a simulated dir failure, BRCR v2 LogDirs changes, LOST and
UNASSIGNED directories: things no public Kafka log holds) exist as real binary vectors that
Kafka's own tools (``kafka-dump-log.sh --cluster-metadata-decoder``) and kraftlake's importer read.

Batches: records imported from Kafka carry ``source = kafka@<epoch>:<base offset>``
(``importer.source_of``) and are written back in the same batches, at their Kafka offsets, with
their times: an import of every record (NoOps included) exported again gives the same bytes.
Other records are batched by run of (source, ts_ms), at Kafka offsets equal to their own, in
the epoch of the last LeaderChange before them (1 before any). Records that are not Kafka
metadata (observations, other families) have no Kafka form: they are counted and left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kraftlake.records.base import Record
from kraftlake.records.kraft import API_KEYS, CONTROL_TYPES, KafkaOpaque, LeaderChange

from .batches import encode_batch
from .errors import KafkaFormatError
from .importer import parse_source
from .layout import PARTITION_DIR, segment_name
from .metadata import encode_control, encode_value

MAX_BATCH = 10_000
"""Records per batch for records kraftlake made (Kafka's controller writes at most 10 000)."""


@dataclass
class ExportStats:
    batches: int = 0
    records: int = 0
    bytes_written: int = 0
    left_out: Counter = field(default_factory=Counter)
    """Record types with no Kafka form -> count."""
    segment: str | None = None

    def to_dict(self) -> dict:
        return {
            "batches": self.batches,
            "records": self.records,
            "bytes_written": self.bytes_written,
            "left_out": dict(sorted(self.left_out.items())),
            "segment": self.segment,
        }


def _is_control(r: Record) -> bool:
    return type(r) in CONTROL_TYPES or (type(r) is KafkaOpaque and r.control)


def _exportable(r: Record) -> bool:
    return type(r) in API_KEYS or type(r) in CONTROL_TYPES or type(r) is KafkaOpaque


def _kafka_offset(r: Record) -> int:
    return r.source_offset if r.source_offset is not None else r.offset  # type: ignore[return-value]  # stored: has its offset


def plan_batches(records: Iterable[Record], stats: ExportStats) -> Iterable[tuple[int, int, bool, list[Record]]]:
    """(base offset, epoch, control?, records) per batch to write, in offset order."""
    epoch = batch_epoch = 1
    current: list[Record] = []
    key: tuple | None = None
    base = 0
    last = -1
    for r in records:
        if not _exportable(r):
            stats.left_out[type(r).__name__] += 1
            continue
        offset = _kafka_offset(r)
        if offset is None:
            raise KafkaFormatError(f"{type(r).__name__}: a record without an offset cannot be exported")
        if offset <= last:
            raise KafkaFormatError(
                f"{type(r).__name__} at offset {r.offset}: Kafka offset {offset} does not follow {last}"
                " (records from several imports, or an import mixed with native appends)"
            )
        last = offset
        origin = parse_source(r.source)
        control = _is_control(r)
        if type(r) is LeaderChange:
            epoch = r.epoch
        if origin is not None:
            k: tuple = ("kafka", origin)
        else:
            k = ("native", r.source, r.ts_ms, control)
        if current and (
            k != key
            or control != _is_control(current[0])
            or (origin is None and len(current) >= MAX_BATCH)
            or (control and origin is None)
        ):
            yield base, batch_epoch, _is_control(current[0]), current
            current = []
        if not current:
            key = k
            base = origin[1] if origin is not None else offset
            batch_epoch = origin[0] if origin is not None else epoch
        current.append(r)
    if current:
        yield base, batch_epoch, _is_control(current[0]), current


def export_kafka(records: Iterable[Record], out_dir: str | Path) -> ExportStats:
    """Write ``records`` as one Kafka segment under ``out_dir/__cluster_metadata-0/``."""
    stats = ExportStats()
    part = Path(out_dir) / PARTITION_DIR
    part.mkdir(parents=True, exist_ok=True)
    chunks: list[bytes] = []
    first_base = None
    for base, epoch, control, batch in plan_batches(records, stats):
        if first_base is None:
            first_base = base
        entries = []
        for r in batch:
            offset = _kafka_offset(r)
            if control:
                key, value = encode_control(r)
            else:
                key, value = None, encode_value(r)
            entries.append((offset, r.ts_ms or 0, key, value))
        chunks.append(encode_batch(entries, base_offset=base, partition_leader_epoch=epoch, control=control))
        stats.batches += 1
        stats.records += len(batch)
    if first_base is None:
        raise KafkaFormatError("nothing to export: no Kafka metadata record in the log")
    name = segment_name(first_base)
    data = b"".join(chunks)
    tmp = part / (name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(part / name)  # whole or nothing
    stats.bytes_written = len(data)
    stats.segment = str(part / name)
    return stats
