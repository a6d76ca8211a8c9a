"""Shared builders for the KRaft state-machine tests: real-looking ids, brokers and topics."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kraftlake.records import FeatureLevel, RegisterBroker
from kraftlake.records.types import uuid_from_bytes

MV = 21  # 3.9-IV0: the semantics kraftlake targets

# Real metadata logs written by Kafka, kept byte for byte (fixtures/kafka/PROVENANCE.md).
KAFKA_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "kafka"


def uid(name: str) -> str:
    """A real (non-reserved) Kafka uuid named after ``name``."""
    return uuid_from_bytes(hashlib.sha256(name.encode()).digest()[:16])


def bootstrap(mv: int = MV) -> list:
    return [FeatureLevel(name="metadata.version", feature_level=mv)]


def registration(broker: int, dirs: list[str], *, epoch: int | None = None, fenced: bool = True) -> RegisterBroker:
    """RegisterBroker v3 as Kafka's ReplicationControlManagerTest writes it (epoch = id + 100)."""
    return RegisterBroker(
        broker_id=broker,
        incarnation_id=uid(f"incarnation-{broker}"),
        broker_epoch=broker + 100 if epoch is None else epoch,
        log_dirs=tuple(dirs),
        fenced=fenced,
    )
