"""Kafka's ``metadata.version`` levels that kraftlake knows, and what it says of a newer one.

From ``MetadataVersion.java`` at apache/kafka tag 4.2.0-rc1 (6eef6636, the commit released as
4.2.0): levels 1 (3.0-IV1) to 29 (4.2-IV1, Kafka 4.2's latest production level). Kafka 4.2 also
lists 30 (4.3-IV0) as unstable, "may be changed", and it did change in 4.3, so kraftlake stops at
29. The metadata record schemas at that tag are the ones ``records.kafka.metadata`` reads: no
type or version was added after Kafka 4.0 (apiKeys 0-28; Partition and PartitionChange v2).

A log at a newer level is imported and replayed as far as kraftlake knows its records: what it
does not know (a type or version) is kept as ``KafkaOpaque`` and refused where it would be
replayed, as Kafka's own loader refuses a record it cannot read.
"""

from __future__ import annotations

RELEASES: tuple[str, ...] = tuple(
    (
        "3.0-IV1 3.1-IV0 3.2-IV0 3.3-IV0 3.3-IV1 3.3-IV2 3.3-IV3 3.4-IV0 3.5-IV0 3.5-IV1 3.5-IV2 3.6-IV0 3.6-IV1"
        " 3.6-IV2 3.7-IV0 3.7-IV1 3.7-IV2 3.7-IV3 3.7-IV4 3.8-IV0 3.9-IV0 4.0-IV0 4.0-IV1 4.0-IV2 4.0-IV3 4.1-IV0"
        " 4.1-IV1 4.2-IV0 4.2-IV1"
    ).split()
)
"""Kafka's ``MetadataVersion`` names by feature level, level 1 first."""

NEWEST_KNOWN = len(RELEASES)
"""29, 4.2-IV1: the newest level kraftlake knows."""


def name_of(level: int) -> str | None:
    """Kafka's name of a level ("4.2-IV1" for 29), None for a level kraftlake does not know."""
    return RELEASES[level - 1] if 1 <= level <= NEWEST_KNOWN else None


def newer_level_warning(level: int) -> str:
    """What kraftlake says of, and does with, a log at a ``metadata.version`` beyond the newest it knows."""
    newest = RELEASES[-1]
    kafka = "Kafka " + newest.split("-")[0]
    return (
        f"metadata.version {level} is newer than kraftlake knows (up to {NEWEST_KNOWN}, {newest}, {kafka}):"
        f" records of the types and versions it knows are imported and replayed as {kafka} replays them;"
        " a record type or version it does not know is kept as KafkaOpaque, and replaying or auditing"
        " the log stops there (exit 2), naming it"
    )
