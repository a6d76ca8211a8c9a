"""Kafka's own snapshots (``.checkpoint`` files) as kraftlake views, and the field-by-field
comparison of two views in the terms Kafka's image has.

A snapshot at end offset E holds the image of every record below E: replaying the log up to
Kafka offset E - 1 must give exactly that image. ``differences`` says where two views disagree,
leaving out what only kraftlake keeps (the offset a broker registered at, the directories a
broker lost since it registered, the open transaction, the view's own offset, which broker was
last handed producer ids).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from kraftlake.records.kafka.batches import read_checkpoint
from kraftlake.statemachine.kraft.reducer import replay
from kraftlake.statemachine.kraft.view import ControllerView

KRAFTLAKE_ONLY = {"offset", "state_hash", "transaction"}
BROKER_KRAFTLAKE_ONLY = {"registered_at", "removed_dirs"}


def checkpoint_view(path: str | Path) -> ControllerView:
    """The controller view a ``.checkpoint`` (or ``bootstrap.checkpoint``) file holds."""
    p = Path(path)
    content = read_checkpoint(p.read_bytes(), file=str(p))
    return replay(content.records)


def kafka_image(view: ControllerView) -> dict[str, Any]:
    """The parts of ``view.image()`` that Kafka's MetadataImage has, as plain data."""
    image = msgspec.to_builtins(view.image())
    for key in KRAFTLAKE_ONLY:
        image.pop(key, None)
    for broker in image["brokers"]:
        for key in BROKER_KRAFTLAKE_ONLY:
            broker.pop(key, None)
    # ProducerIdsImage keeps only the next id; snapshots write broker -1, epoch -1 beside it.
    block = image.pop("producer_ids")
    image["next_producer_id"] = None if block is None else block["next_producer_id"]
    return image


def differences(expected: ControllerView, actual: ControllerView, *, limit: int = 50) -> list[str]:
    """Where ``actual`` differs from ``expected`` (paths like ``brokers[1].log_dirs``), at most
    ``limit`` of them; empty when they hold the same Kafka image."""
    out: list[str] = []
    _diff(kafka_image(expected), kafka_image(actual), "", out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: {'missing' if k not in b else 'unexpected'}")
            else:
                _diff(a[k], b[k], f"{path}.{k}" if path else str(k), out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: expected {a!r}, got {b!r}")
