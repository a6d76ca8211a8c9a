"""Builders for the KRaft state-machine tests: real-looking ids, brokers, topics and controllers;
and records without their envelope or offsets, as the tests compare them."""

from __future__ import annotations

import hashlib

import msgspec

from kraftlake.records import FeatureLevel, RegisterBroker
from kraftlake.records.types import is_reserved, uuid_from_bytes
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.controller import Controller

MV = 21  # 3.9-IV0: the semantics kraftlake targets


def uid(name: str) -> str:
    """A real (non-reserved) Kafka uuid named after ``name``."""
    u = uuid_from_bytes(hashlib.sha256(name.encode()).digest()[:16])
    assert not is_reserved(u)
    return u


def dir_id(broker: int, slot: int, incarnation: int) -> str:
    return uid(f"dir-{broker}-{slot}-{incarnation}")


def incarnation_id(broker: int, incarnation: int) -> str:
    return uid(f"incarnation-{broker}-{incarnation}")


def bootstrap(mv: int = MV) -> list:
    return [FeatureLevel(name="metadata.version", feature_level=mv)]


def new_controller() -> Controller:
    return Controller(records=bootstrap())


def registration(broker: int, dirs: list[str], *, epoch: int | None = None, fenced: bool = True) -> RegisterBroker:
    """RegisterBroker v3 as Kafka's ReplicationControlManagerTest writes it (epoch = id + 100)."""
    return RegisterBroker(
        broker_id=broker,
        incarnation_id=uid(f"incarnation-{broker}"),
        broker_epoch=broker + 100 if epoch is None else epoch,
        log_dirs=tuple(dirs),
        fenced=fenced,
    )


def strip(records):
    """Records without envelope (offset, time, source): what the controller decides."""
    return [msgspec.structs.replace(r, offset=None, ts_ms=None, source=None, source_offset=None) for r in records]


def without_offsets(records) -> list:
    """Records without the offsets a log gave them: to append again, replay or compare."""
    return [msgspec.structs.replace(r, offset=None) for r in records]


def controller_with_brokers(dirs: dict[int, list[str]], mv: int = MV) -> Controller:
    """Brokers registered (epoch id + 100) and unfenced by a heartbeat, as Kafka's tests do."""
    ctl = Controller(bootstrap(mv) + [registration(b, d) for b, d in dirs.items()])
    for b in dirs:
        d = ctl.handle(c.Heartbeat(broker_id=b, broker_epoch=b + 100, current_metadata_offset=ctl.view.offset))
        assert not d.reply.is_fenced
    return ctl
