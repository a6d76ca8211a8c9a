"""Reading a Kafka metadata log directory into kraftlake records, and into a kraftlake log.

``read_kafka`` walks the segments in offset order (optionally starting from a ``.checkpoint``
snapshot) and yields kraftlake records: metadata records decoded into their Structs, Raft
control records (LeaderChange, KRaftVersion, Voters) as records too, and anything kraftlake
cannot decode as ``KafkaOpaque`` (warned about and counted, never dropped). NoOp records, the
active controller's heartbeat and ~99% of a real log, are counted and skipped unless asked for.
A ``metadata.version`` beyond the newest kraftlake knows (``records.metadata_versions``), in the
log, its snapshot or ``bootstrap.checkpoint``, is warned about once, saying what kraftlake does.

Every imported record keeps Kafka's offset as ``source_offset`` and its batch's time as
``ts_ms``; ``source`` is ``kafka@<raft epoch>:<batch base offset>``, which is what
``export_kafka`` needs to rebuild the same batches. Records of a snapshot have no Kafka offset of
their own: they carry the snapshot's last contained offset (end offset - 1), the point whose
state they are, and ``source = kafka-snapshot@<epoch>:<end offset>``.

``import_kafka`` appends them to a log in chunks. Each chunk is one atomic append with an
exactly-once sequence (producer ``import-kafka:<cluster id>:<node id>``), so an import stopped
half-way (a corrupt batch, a kill) resumes where it stopped when run again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kraftlake.logging import get_logger
from kraftlake.records.base import Record
from kraftlake.records.errors import LogError
from kraftlake.records.kraft import FeatureLevel, KafkaOpaque, NoOp
from kraftlake.records.metadata_versions import NEWEST_KNOWN, newer_level_warning

from .batches import Batch, iter_batches, read_checkpoint
from .errors import KafkaFormatError
from .layout import Checkpoint, MetadataDir, open_metadata_dir, parse_checkpoint
from .metadata import MetadataDecoder, SnapshotFooter, SnapshotHeader, decode_control
from .validation import BatchOrder

if TYPE_CHECKING:
    from kraftlake.records.store.log import Log  # imports Delta: for the annotations only

log = get_logger(__name__)

METADATA_VERSION = "metadata.version"

CHUNK = 50_000
"""Records per append when importing: one Delta commit each."""


def source_of(epoch: int, base_offset: int) -> str:
    """The ``source`` of a record read from the batch at ``base_offset`` written in ``epoch``."""
    return f"kafka@{epoch}:{base_offset}"


def parse_source(source: str | None) -> tuple[int, int] | None:
    """(epoch, batch base offset) of an imported record's ``source``; None for other records."""
    if not source or not source.startswith("kafka@"):
        return None
    epoch, _, base = source[6:].partition(":")
    try:
        return int(epoch), int(base)
    except ValueError:
        return None


@dataclass
class ImportStats:
    """What an import read: counts by record type, NoOps, opaque records, skipped corruption."""

    batches: int = 0
    records: int = 0
    """Records yielded (what lands in the log)."""
    noops: int = 0
    """NoOp records read (yielded only with ``include_noop``)."""
    by_type: Counter = field(default_factory=Counter)
    opaque: Counter = field(default_factory=Counter)
    """(api key or control type, version, control?) -> count of records kraftlake could not decode."""
    skipped: list[str] = field(default_factory=list)
    """Corrupt batches skipped with ``skip_corrupt``: file and byte position, why."""
    bytes_read: int = 0
    first_source_offset: int | None = None
    last_source_offset: int | None = None
    snapshot: str | None = None
    """The snapshot the import started from, if any."""
    bootstrap: dict[str, int] | None = None
    """The features ``bootstrap.checkpoint`` holds (what the controller formatted the cluster
    with). Read and checked, not imported: a log that starts at 0 holds the same records in its
    "Bootstrap records" transaction."""
    newer_metadata_version: int | None = None
    """The highest ``metadata.version`` read beyond the newest kraftlake knows, if any."""

    def to_dict(self) -> dict:
        return {
            "batches": self.batches,
            "records": self.records,
            "noops": self.noops,
            "by_type": dict(sorted(self.by_type.items())),
            "opaque": [
                {"api_key": k, "version": v, "control": c, "count": n} for (k, v, c), n in sorted(self.opaque.items())
            ],
            "skipped": list(self.skipped),
            "bytes_read": self.bytes_read,
            "first_source_offset": self.first_source_offset,
            "last_source_offset": self.last_source_offset,
            "snapshot": self.snapshot,
            "bootstrap": self.bootstrap,
            "newer_metadata_version": self.newer_metadata_version,
        }

    def level(self, level: int, *, offset: int | None, file: str) -> None:
        """Note a ``metadata.version`` read at Kafka ``offset`` of ``file``; warn at the first
        one beyond the newest kraftlake knows (and at a higher one after it)."""
        if level <= NEWEST_KNOWN or (self.newer_metadata_version is not None and level <= self.newer_metadata_version):
            return
        self.newer_metadata_version = level
        log.warning(
            "kafka.newer_metadata_version",
            metadata_version=level,
            offset=offset,
            file=file,
            what=newer_level_warning(level),
        )


def checkpoint_records(cp: Checkpoint, decoder: MetadataDecoder, stats: ImportStats) -> list[Record]:
    snap = read_checkpoint(
        cp.path.read_bytes(),
        file=str(cp.path),
        decoder=decoder,
        source_offset=cp.end_offset - 1,
        source=f"kafka-snapshot@{cp.epoch}:{cp.end_offset}",
    )
    if snap.epoch != cp.epoch:
        raise KafkaFormatError(
            f"the snapshot's batches are of epoch {snap.epoch}, its name says {cp.epoch}",
            file=str(cp.path),
            position=0,
            field="partitionLeaderEpoch",
        )
    stats.snapshot = cp.path.name
    records = [r for r in snap.records if type(r) is not NoOp]
    for r in records:
        if type(r) is FeatureLevel and r.name == METADATA_VERSION:
            stats.level(r.feature_level, offset=r.source_offset, file=str(cp.path))
    return records


def read_kafka(
    path: str | Path | MetadataDir,
    *,
    include_noop: bool = False,
    to_offset: int | None = None,
    from_snapshot: str | Path | None = None,
    skip_corrupt: bool = False,
    stats: ImportStats | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[Record]]:
    """The kraftlake records of a Kafka metadata log directory, in lists (one per batch read).

    ``from_snapshot`` is a ``.checkpoint`` file, or ``"latest"`` for the newest in the directory:
    its image comes first, then the log from its end offset. ``to_offset`` stops after Kafka
    offset ``to_offset``. ``progress`` is called with the bytes read of each batch.
    """
    md = path if isinstance(path, MetadataDir) else open_metadata_dir(path)
    st = stats if stats is not None else ImportStats()
    decoder = MetadataDecoder()
    start = 0
    if md.bootstrap is not None:
        boot = read_checkpoint(md.bootstrap.read_bytes(), file=str(md.bootstrap))
        st.bootstrap = {r.name: r.feature_level for r in boot.records if type(r) is FeatureLevel}
        if METADATA_VERSION in st.bootstrap:
            st.level(st.bootstrap[METADATA_VERSION], offset=None, file=str(md.bootstrap))
    if from_snapshot is not None:
        if from_snapshot == "latest":
            cp = md.latest_checkpoint()
            if cp is None:
                raise KafkaFormatError(f"{md.partition}: there is no .checkpoint snapshot to start from")
        else:
            cp = _checkpoint_at(md, Path(from_snapshot))
        if to_offset is not None and to_offset < cp.end_offset - 1:
            raise KafkaFormatError(f"--to-offset {to_offset} is before the snapshot's last offset {cp.end_offset - 1}")
        records = checkpoint_records(cp, decoder, st)
        st.records += len(records)
        st.by_type.update(type(r).__name__ for r in records)
        yield records
        start = cp.end_offset
    if not md.segments:
        raise KafkaFormatError(f"{md.partition}: no .log segment")
    order = BatchOrder({cp.end_offset: cp.epoch for cp in md.checkpoints})
    for seg in md.segments:
        data = seg.path.read_bytes()
        order.segment(seg.base_offset, str(seg.path))
        for batch in iter_batches(data, file=str(seg.path), skip_corrupt=skip_corrupt, skipped=st.skipped):
            order.check(batch)  # refused even with skip_corrupt: a wrong offset misplaces the batches after it
            st.batches += 1
            st.bytes_read += batch.size
            if progress is not None:
                progress(batch.size)
            if batch.last_offset < start:
                continue
            out = batch_records(
                batch, decoder, st, start=start, to_offset=to_offset, include_noop=include_noop, file=str(seg.path)
            )
            if out:
                st.records += len(out)
                yield out
            if to_offset is not None and batch.last_offset >= to_offset:
                return


def batch_records(
    batch: Batch,
    decoder: MetadataDecoder,
    st: ImportStats,
    *,
    start: int = 0,
    to_offset: int | None = None,
    include_noop: bool = False,
    file: str = "<bytes>",
) -> list[Record]:
    """The kraftlake records of one log batch at Kafka offsets ``start..to_offset``, counted in
    ``st`` (NoOps skipped unless ``include_noop``; undecodable records kept as ``KafkaOpaque``)."""
    out: list[Record] = []
    src = source_of(batch.partition_leader_epoch, batch.base_offset)
    for offset, ts, key, value in batch.records:
        if offset < start:
            continue
        if to_offset is not None and offset > to_offset:
            break
        if batch.is_control:
            r = decode_control(key, value, epoch=batch.partition_leader_epoch, offset=offset, ts_ms=ts, source=src)
            if isinstance(r, (SnapshotHeader, SnapshotFooter)):  # framing only
                continue
        else:
            r = decoder.decode(value, offset=offset, ts_ms=ts, source=src)
        cls = type(r)
        if cls is NoOp:
            st.noops += 1
            if not include_noop:
                continue
        elif type(r) is KafkaOpaque:
            k = (r.api_key, r.kafka_version, r.control)
            if k not in st.opaque:
                log.warning(
                    "kafka.opaque_record",
                    offset=offset,
                    api_key=r.api_key,
                    version=r.kafka_version,
                    control=r.control,
                    file=file,
                )
            st.opaque[k] += 1
        elif type(r) is FeatureLevel and r.name == METADATA_VERSION and r.feature_level > NEWEST_KNOWN:
            st.level(r.feature_level, offset=offset, file=file)
        st.by_type[cls.__name__] += 1
        out.append(r)
        if st.first_source_offset is None:
            st.first_source_offset = offset
        st.last_source_offset = offset
    return out


def _checkpoint_at(md: MetadataDir, path: Path) -> Checkpoint:
    for cp in md.checkpoints:
        if cp.path.resolve() == path.resolve() or cp.path.name == path.name:
            return cp
    parsed = parse_checkpoint(path)
    if parsed is None or not path.exists():
        raise KafkaFormatError(f"{path}: not a snapshot (<20-digit end offset>-<10-digit epoch>.checkpoint)")
    return parsed


def import_kafka(
    path: str | Path,
    log_: Log,
    *,
    include_noop: bool = False,
    to_offset: int | None = None,
    from_snapshot: str | Path | None = None,
    skip_corrupt: bool = False,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
) -> ImportStats:
    """Append the records of a Kafka metadata log dir to ``log_`` (see the module docstring).

    The log must be empty or hold an earlier, interrupted run of the same import: chunks that
    already landed are acknowledged, not written twice.
    """
    md = open_metadata_dir(path)
    producer = f"import-kafka:{md.cluster_id or md.root.name}:{md.node_id or '?'}"
    landed = log_.producer_seq(producer)
    if log_.last_offset >= 0 and landed is None:
        raise LogError(
            f"{log_.path} already holds {log_.last_offset + 1} records not written by this import;"
            " import into a new log"
        )
    stats = ImportStats()
    pending: list[Record] = []
    seq = 0
    for records in read_kafka(
        md,
        include_noop=include_noop,
        to_offset=to_offset,
        from_snapshot=from_snapshot,
        skip_corrupt=skip_corrupt,
        stats=stats,
        progress=progress,
    ):
        pending.extend(records)
        while len(pending) >= chunk:
            log_.append(pending[:chunk], producer=producer, seq=seq)
            del pending[:chunk]
            seq += 1
    if pending:
        log_.append(pending, producer=producer, seq=seq)
    log.info(
        "kafka.imported",
        path=str(md.partition),
        log=str(log_.path),
        **{k: v for k, v in stats.to_dict().items() if k in ("records", "noops", "batches", "snapshot")},
    )
    return stats
