"""metadata.version levels that change what the KRaft controller writes (MetadataVersion.java).

Only the levels this package branches on are named; Kafka's ``MetadataVersion`` lists them all.
A log with no ``metadata.version`` FeatureLevel record is at level 1 (3.0-IV1), as in Kafka.
"""

from __future__ import annotations

from kraftlake.records.metadata_versions import RELEASES

METADATA_VERSION = "metadata.version"

MV_3_0_IV1 = 1
"""Minimum KRaft level; assumed when the log has no metadata.version record."""
MV_3_2_IV0 = 3
"""Leader recovery state (KIP-704)."""
MV_3_3_IV2 = 6
"""Fence/unfence written as BrokerRegistrationChange instead of Fence/UnfenceBroker."""
MV_3_3_IV3 = 7
"""In-controlled-shutdown state (RegisterBroker v1, BrokerRegistrationChange v1)."""
MV_3_4_IV0 = 8
"""ZK migration (RegisterBroker v2)."""
MV_3_6_IV0 = 12
"""An ISR shrink no longer forces a leader-epoch bump (KAFKA-15021)."""
MV_3_6_IV1 = 13
"""Metadata transactions (KIP-868): the bootstrap records are written in one."""
MV_3_7_IV2 = 17
"""JBOD in KRaft (KIP-858): directories on registrations and partitions, AssignReplicasToDirs."""
MV_3_9_IV0 = 21
"""Kafka 3.9: the semantics this package targets."""
MV_4_0_IV0 = 22
"""The first level only Kafka 4.x writes: a controller at it or above is Kafka 4.x software."""
MV_4_0_IV1 = 23
"""ELR (KIP-966): Partition and PartitionChange v2; ``eligible.leader.replicas.version`` 1 needs it."""
MV_4_1_IV1 = 27
"""Kafka 4.1's latest production level: new clusters bootstrap with ELR on."""
MV_4_2_IV1 = 29
"""Kafka 4.2's latest production level: streams groups on by default (KIP-1071); no record changes."""


def partition_record_version(mv: int) -> int:
    """Version of Partition and PartitionChange records written at ``mv``."""
    return 2 if mv >= MV_4_0_IV1 else 1 if mv >= MV_3_7_IV2 else 0


def register_broker_version(mv: int) -> int:
    """Version of RegisterBroker records written at ``mv``."""
    if mv >= MV_3_7_IV2:
        return 3
    if mv >= MV_3_4_IV0:
        return 2
    return 1 if mv >= MV_3_3_IV3 else 0


def directories_supported(mv: int) -> bool:
    return mv >= MV_3_7_IV2


MV_4_1_IV0 = 26
"""Kafka 4.1: ``eligible.leader.replicas.version`` 1 is the default of new clusters from here."""

_RELEASES = RELEASES
"""Kafka's ``MetadataVersion`` names by feature level (level 1 first), up to Kafka 4.2
(``records.metadata_versions``)."""


def parse_metadata_version(text: str) -> int:
    """A metadata.version level from Kafka's name ("4.1-IV1") or its number ("27")."""
    if text.isdigit() and 1 <= int(text) <= len(_RELEASES):
        return int(text)
    if text in _RELEASES:
        return _RELEASES.index(text) + 1
    raise ValueError(
        f"unknown metadata.version {text!r}: one of {_RELEASES[0]} .. {_RELEASES[-1]}, or 1 .. {len(_RELEASES)}"
    )


ELIGIBLE_LEADER_REPLICAS = "eligible.leader.replicas.version"


def software_features(mv: int) -> tuple[tuple[str, int, int], ...]:
    """The (feature, min, max) ranges a broker of the Kafka release that writes ``mv`` sends when
    it registers: Kafka 3.x supports metadata.version 1 .. 3.9-IV0; Kafka 4.0 and 4.1 3.3-IV3 ..
    4.1-IV1, Kafka 4.2 3.3-IV3 .. 4.2-IV1 (its latest production level), both
    ``eligible.leader.replicas.version`` 0 .. 1."""
    if mv > MV_4_1_IV1:
        return ((METADATA_VERSION, MV_3_3_IV3, MV_4_2_IV1), (ELIGIBLE_LEADER_REPLICAS, 0, 1))
    if mv > MV_3_9_IV0:
        return ((METADATA_VERSION, MV_3_3_IV3, MV_4_1_IV1), (ELIGIBLE_LEADER_REPLICAS, 0, 1))
    return ((METADATA_VERSION, MV_3_0_IV1, MV_3_9_IV0),)
