"""Where things are in a Kafka metadata log directory: ``meta.properties`` (Kafka's
``MetaProperties``), the partition ``__cluster_metadata-0`` (``Topic.CLUSTER_METADATA_TOPIC_NAME``),
segments named by ``LogFileUtils`` and snapshots by ``Snapshots.filenameFromSnapshotId``.

A metadata log dir (``metadata.log.dir``, else the first of ``log.dirs``) holds
``meta.properties``, on controllers ``bootstrap.checkpoint``, and the partition directory
``__cluster_metadata-0`` with ``<20-digit base offset>.log`` segments and
``<20-digit end offset>-<10-digit epoch>.checkpoint`` snapshots. Operators point kraftlake at
either the log dir or the partition dir, or at a single file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kraftlake.records.errors import KraftlakeError

PARTITION_DIR = "__cluster_metadata-0"
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_CHECKPOINT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class KafkaDirError(KraftlakeError):
    """The path is not a Kafka metadata log directory (or a file kraftlake can read)."""


@dataclass(frozen=True, order=True)
class Segment:
    base_offset: int
    path: Path = field(compare=False)


@dataclass(frozen=True, order=True)
class Checkpoint:
    """A snapshot: the image of every record below ``end_offset``, the last one in ``epoch``."""

    end_offset: int
    epoch: int
    path: Path = field(compare=False)


@dataclass(frozen=True)
class MetadataDir:
    root: Path
    """The log dir (with ``meta.properties``) or, when only that was given, the partition dir."""
    partition: Path
    properties: dict[str, str]
    segments: tuple[Segment, ...]
    checkpoints: tuple[Checkpoint, ...]
    bootstrap: Path | None

    @property
    def cluster_id(self) -> str | None:
        return self.properties.get("cluster.id")

    @property
    def node_id(self) -> str | None:
        return self.properties.get("node.id")

    def latest_checkpoint(self) -> Checkpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None


def read_properties(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file as written by Kafka (``key=value`` lines, ``#`` comments)."""
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip()
    return props


def open_metadata_dir(path: str | Path) -> MetadataDir:
    """The segments (by base offset), snapshots (by end offset) and properties under ``path``.

    Incomplete (``.checkpoint.part``) and deleted (``.checkpoint.deleted``) snapshots, indexes and
    producer state files are not listed: Kafka ignores them too.
    """
    p = Path(path)
    if not p.exists():
        raise KafkaDirError(f"{p}: no such directory")
    if not p.is_dir():
        raise KafkaDirError(f"{p}: not a directory (give a Kafka metadata log dir)")
    if (p / PARTITION_DIR).is_dir():
        root, partition = p, p / PARTITION_DIR
    elif p.name == PARTITION_DIR or any(_SEGMENT.match(f.name) for f in p.iterdir()):
        root, partition = (p.parent if (p.parent / "meta.properties").exists() else p), p
    else:
        raise KafkaDirError(
            f"{p}: neither a metadata log dir (with {PARTITION_DIR}/) nor a partition dir with .log segments"
        )
    props_file = root / "meta.properties"
    segments = sorted(Segment(int(m.group(1)), f) for f in partition.iterdir() if (m := _SEGMENT.match(f.name)))
    checkpoints = sorted(cp for f in partition.iterdir() if (cp := parse_checkpoint(f)) is not None)
    bootstrap = root / "bootstrap.checkpoint"
    return MetadataDir(
        root=root,
        partition=partition,
        properties=read_properties(props_file) if props_file.exists() else {},
        segments=tuple(segments),
        checkpoints=tuple(checkpoints),
        bootstrap=bootstrap if bootstrap.exists() else None,
    )


def parse_checkpoint(path: Path) -> Checkpoint | None:
    """The snapshot a file is, from its name (``<end offset>-<epoch>.checkpoint``); None if the
    name is not a snapshot's."""
    m = _CHECKPOINT.match(path.name)
    return None if m is None else Checkpoint(int(m.group(1)), int(m.group(2)), path)


def checkpoint_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"
