"""A ``kafka-dump-log.sh --cluster-metadata-decoder``-like listing, straight from binary files:
one line per batch (offsets, epoch, position, size, CRC, control), one per record (offset, time,
type, version, fields as JSON), for operators used to Kafka's tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from kraftlake.records.base import ENVELOPE_FIELDS, Record
from kraftlake.records.kraft import API_KEYS, CONTROL_TYPES, KafkaOpaque

from .batches import iter_batches
from .layout import PARTITION_DIR, open_metadata_dir
from .metadata import CONTROL_NAMES, MetadataDecoder, SnapshotFooter, SnapshotHeader, decode_control


def files_of(path: str | Path) -> list[Path]:
    """The files to dump: a file as given, or a metadata log dir's checkpoints and segments."""
    p = Path(path)
    if p.is_file():
        return [p]
    md = open_metadata_dir(p)
    files = [md.bootstrap] if md.bootstrap is not None else []
    entries = [(s.base_offset, s.path) for s in md.segments] + [(c.end_offset, c.path) for c in md.checkpoints]
    return files + [f for _, f in sorted(entries, key=lambda e: (e[0], e[1].suffix != ".checkpoint"))]


def _kafka_name(r: object) -> str:
    """Kafka's record type name, as its dump tool prints it (PARTITION_CHANGE_RECORD)."""
    if isinstance(r, SnapshotHeader):
        return "SNAPSHOT_HEADER"
    if isinstance(r, SnapshotFooter):
        return "SNAPSHOT_FOOTER"
    cls = type(r)
    if type(r) is KafkaOpaque:
        return CONTROL_NAMES.get(r.api_key, f"CONTROL_{r.api_key}") if r.control else f"UNKNOWN_API_KEY_{r.api_key}"
    if cls in CONTROL_TYPES:
        return CONTROL_NAMES[CONTROL_TYPES[cls]]
    name = "".join("_" + c if c.isupper() else c for c in cls.__name__).lstrip("_").upper()
    return name.replace("K_R_AFT", "KRAFT") + ("_RECORD" if cls in API_KEYS else "")


def _fields(r: object) -> dict:
    if isinstance(r, Record):
        data = msgspec.to_builtins(r)
        return {k: v for k, v in data.items() if k not in ENVELOPE_FIELDS and k != "type"}
    return {k: v for k, v in vars(r).items() if k != "version"}


def dump_lines(path: str | Path, *, records: bool = True) -> Iterator[dict]:
    """One dict per batch (``kind: "batch"``) followed by one per record (``kind: "record"``)."""
    for f in files_of(path):
        data = f.read_bytes()
        decoder = MetadataDecoder()
        snapshot = f.suffix == ".checkpoint"
        yield {
            "kind": "file",
            "file": str(f),
            "bytes": len(data),
            "snapshot": snapshot or None,
            "partition_dir": f.parent.name == PARTITION_DIR or None,
        }
        for b in iter_batches(data, file=str(f)):
            yield {
                "kind": "batch",
                "base_offset": b.base_offset,
                "last_offset": b.last_offset,
                "count": len(b.records),
                "epoch": b.partition_leader_epoch,
                "position": b.position,
                "size": b.size,
                "create_time": b.base_timestamp,
                "crc": b.crc,
                "control": b.is_control,
                "transactional": b.is_transactional,
                "compression": b.compression,
            }
            if not records:
                continue
            for offset, ts, key, value in b.records:
                if b.is_control:
                    r: object = decode_control(
                        key, value, epoch=b.partition_leader_epoch, offset=offset, ts_ms=ts, source=None
                    )
                else:
                    r = decoder.decode(value, offset=offset, ts_ms=ts, source=None)
                yield {
                    "kind": "record",
                    "offset": offset,
                    "create_time": ts,
                    "type": _kafka_name(r),
                    "version": getattr(r, "kafka_version", getattr(r, "version", 0)),
                    "data": _fields(r),
                }
