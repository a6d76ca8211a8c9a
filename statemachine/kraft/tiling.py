"""Copies of one generated shard as further shards of a bigger history (the bench's tiler).

A history of 10^8 records takes hours to simulate; ``workload.sharded`` already lays shards
generated apart end to end, each with its own brokers and topics (``shard_config``). A *tile*
is copy ``k`` of one shard with the ids ``shard_config`` would have given shard ``k``: broker
``b`` becomes ``b + k * brokers``, topic ``P-i`` becomes ``P-sK-i``, and every real uuid
(topic, directory, incarnation) a uuid of its own for the copy. Its offsets and times are left
to ``sharded``, which lays the copies end to end.

This module owns which field of which record type holds which kind of id (``ROLES``) and the
remap of one copy (``Tile``); ``tile_records`` applies it record by record. ``bench/tile.py``
applies the same roles to the log's Arrow columns, and a test holds the two to each other.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kraftlake.records.base import Record, trusted, type_name
from kraftlake.records.types import is_reserved, uuid_from_bytes

from .replication import BROKER_RESOURCE, TOPIC_RESOURCE

BROKER = "broker"
"""A broker id; negative values are sentinels (no leader, unchanged) and stay."""
UUID = "uuid"
"""A real uuid gets one of its own per copy; the reserved ones (MIGRATING, UNASSIGNED, LOST) stay."""
TOPIC = "topic"
"""A topic name ``<prefix>-<i>`` (``WorkloadConfig.topic_prefix``); "" (every topic) stays."""
PATH = "path"
"""A log directory's mount path, ``/b<broker>/<dir>`` as the workload names them."""
CONFIG_NAME = "config-name"
"""``Config.resource_name``: a broker id (broker resource), a topic name (topic resource)."""

Role = str | dict[str, Any]
"""A role for a value, or for a nested Struct (or a tuple of them): the roles of its fields."""

_ASSIGNMENT = {"broker": BROKER, "directory": UUID}
_PARTITION = {
    "topic_id": UUID,
    "replicas": BROKER,
    "isr": BROKER,
    "removing_replicas": BROKER,
    "adding_replicas": BROKER,
    "leader": BROKER,
    "eligible_leader_replicas": BROKER,
    "last_known_elr": BROKER,
    "assignment": _ASSIGNMENT,
}
ROLES: dict[str, dict[str, Role]] = {
    "RegisterBroker": {"broker_id": BROKER, "incarnation_id": UUID, "log_dirs": UUID},
    "UnregisterBroker": {"broker_id": BROKER},
    "BrokerRegistrationChange": {"broker_id": BROKER, "log_dirs": UUID},
    "FenceBroker": {"id": BROKER},
    "UnfenceBroker": {"id": BROKER},
    "Topic": {"name": TOPIC, "topic_id": UUID},
    "RemoveTopic": {"topic_id": UUID},
    "Partition": _PARTITION,
    "PartitionChange": _PARTITION,
    "FeatureLevel": {},
    "NoOp": {},
    "Config": {"resource_name": CONFIG_NAME},
    "ClearElr": {"topic_name": TOPIC},
    "LogDirFailed": {"broker_id": BROKER, "directory": UUID},
    "HeartbeatOfflineDirs": {"broker_id": BROKER, "offline_log_dirs": UUID},
    "AssignReplicasToDirsRequest": {
        "broker_id": BROKER,
        "directories": {"id": UUID, "topics": {"topic_id": UUID}},
    },
    "LogDirsLoaded": {
        "broker_id": BROKER,
        "online_dirs": UUID,
        "offline_dirs": UUID,
        "metadata_dir": UUID,
        "paths": PATH,
    },
    "UnfenceRequested": {"broker_id": BROKER},
}
"""Every record type the KRaft workload writes, with its fields that name an entity. A type not
listed cannot be tiled (its ids would be copied unchanged): ``roles`` refuses it. Racks, ports,
epochs and offsets inside records stay what the shard had, as ``sharded`` leaves them."""

_PATH_RE = re.compile(r"/b(\d+)/(.*)")


def roles(name: str) -> dict[str, Role]:
    """The roles of record type ``name``'s fields; ValueError for a type the tiler does not know."""
    try:
        return ROLES[name]
    except KeyError:
        raise ValueError(
            f"cannot tile {name} records: tiling.ROLES does not say which of their fields are ids"
        ) from None


@dataclass
class Tile:
    """Copy ``copy`` of a shard whose brokers are ``0 .. brokers - 1`` and whose topics are named
    ``<topic_prefix>-<i>``: the ids ``shard_config(config, copy, copies)`` gives its shard."""

    copy: int
    brokers: int
    topic_prefix: str = "topic"
    _uuids: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.copy < 0 or self.brokers < 1:
            raise ValueError(f"a tile needs copy >= 0 and brokers >= 1, not {self.copy} and {self.brokers}")
        if (self.copy + 1) * self.brokers > 2**31:
            raise ValueError(f"copy {self.copy} of {self.brokers} brokers needs broker ids past int32")

    def broker(self, b: int) -> int:
        return b if b < 0 else b + self.copy * self.brokers

    def uuid(self, u: str) -> str:
        if self.copy == 0 or is_reserved(u):
            return u
        out = self._uuids.get(u)
        if out is None:
            out = self._uuids[u] = uuid_from_bytes(hashlib.sha256(f"tile:{self.copy}:{u}".encode()).digest()[:16])
        return out

    def topic(self, name: str) -> str:
        if name == "":
            return name
        prefix = f"{self.topic_prefix}-"
        if not name.startswith(prefix):
            raise ValueError(f"topic {name!r} is not named {prefix}<i>: give the shard's topic prefix")
        return f"{self.topic_prefix}-s{self.copy}-{name[len(prefix) :]}"

    def path(self, path: str) -> str:
        if path == "":
            return path
        m = _PATH_RE.fullmatch(path)
        if m is None:
            raise ValueError(f"log directory path {path!r} is not /b<broker>/<dir> as the workload names them")
        return f"/b{self.broker(int(m[1]))}/{m[2]}"

    def config_name(self, resource_type: int, name: str) -> str:
        if name == "":
            return name
        if resource_type == BROKER_RESOURCE:
            return str(self.broker(int(name)))
        if resource_type == TOPIC_RESOURCE:
            return self.topic(name)
        return name

    def scalar(self, role: str) -> Callable[[Any], Any]:
        """The function that remaps one value of ``role`` (not ``CONFIG_NAME``: it needs the row)."""
        return {BROKER: self.broker, UUID: self.uuid, TOPIC: self.topic, PATH: self.path}[role]


def _value_fn(role: Role, tile: Tile) -> Callable[[Any], Any]:
    """Remaps a field's value: None stays, a tuple element by element, a Struct field by field."""
    if isinstance(role, dict):
        fns = [(name, _value_fn(r, tile)) for name, r in role.items()]
        replace = msgspec.structs.replace

        def one(v: Any) -> Any:
            return replace(v, **{name: fn(getattr(v, name)) for name, fn in fns})

    else:
        one = tile.scalar(role)
    cache: dict[tuple, tuple] = {}

    def value(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, tuple):
            out = cache.get(v) if not isinstance(role, dict) else None
            if out is None:
                out = tuple(map(one, v))
                if not isinstance(role, dict):
                    cache[v] = out
            return out
        return one(v)

    return value


def tile_records(records: Iterable[Record], tile: Tile) -> Iterator[Record]:
    """``records`` (one shard, offsets from 0) as copy ``tile.copy``: ids remapped, offsets and
    times kept (``sharded`` redraws them) and ``source_offset`` cleared, as a generated record's."""
    by_type: dict[type, Callable[[Record], Record]] = {}
    replace = msgspec.structs.replace

    def remapper(cls: type) -> Callable[[Record], Record]:
        fields = roles(type_name(cls))
        fns = [(name, _value_fn(role, tile)) for name, role in fields.items() if role != CONFIG_NAME]
        if CONFIG_NAME in fields.values():
            return lambda r: replace(
                r, resource_name=tile.config_name(r.resource_type, r.resource_name), source_offset=None
            )
        return lambda r: replace(r, **{name: fn(getattr(r, name)) for name, fn in fns}, source_offset=None)

    with trusted():  # the shard's records were checked when they were written
        for r in records:
            fn = by_type.get(type(r))
            if fn is None:
                fn = by_type[type(r)] = remapper(type(r))
            yield fn(r)
