"""Real metadata logs written by Kafka, kept byte for byte (fixtures/kafka/PROVENANCE.md): where
they are and what they are called."""

from __future__ import annotations

from pathlib import Path

KAFKA_LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "kafka"
KAFKA_LOG_NAMES = ["codecrafters-single", "kafka37-jbod-dirs", "kafka40-single", "single-snapshot", "three-snapshots"]
