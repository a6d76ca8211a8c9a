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
import msgspec.inspect as mi

from kraftlake.records.base import Record, struct_info, trusted, type_name
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

_ASSIGNMENT: dict[str, Role] = {"broker": BROKER, "directory": UUID}
_PARTITION: dict[str, Role] = {
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
        out = self._uuids.get(u)
        if out is None:
            fresh = self.copy == 0 or is_reserved(u)
            out = u if fresh else uuid_from_bytes(hashlib.sha256(f"tile:{self.copy}:{u}".encode()).digest()[:16])
            self._uuids[u] = out
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
        fns: dict[str, Callable[[Any], Any]] = {
            BROKER: self.broker,
            UUID: self.uuid,
            TOPIC: self.topic,
            PATH: self.path,
        }
        return fns[role]


def _unwrap(t: mi.Type) -> tuple[mi.Type, bool]:
    """A field's type without its constraints, and whether it may be None."""
    optional = False
    if isinstance(t, mi.UnionType):
        optional = any(isinstance(u, mi.NoneType) for u in t.types)
        (t,) = [u for u in t.types if not isinstance(u, mi.NoneType)]
    if isinstance(t, mi.Metadata):
        t = t.type
    return t, optional


def _value_fn(role: Role, ftype: mi.Type, tile: Tile) -> Callable[[Any], Any]:
    """Remaps a value of type ``ftype``: None stays, a tuple element by element (each distinct
    tuple of ids once: ISRs and replica lists repeat), a Struct field by field."""
    t, optional = _unwrap(ftype)
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        item = _value_fn(role, t.item_type, tile)
        if isinstance(_unwrap(t.item_type)[0], mi.StructType):
            return lambda v: None if v is None else tuple(map(item, v))
        cache: dict[tuple, tuple] = {}

        def seq(v: Any) -> Any:
            if v is None:
                return None
            out = cache.get(v)
            if out is None:
                out = cache[v] = tuple(map(item, v))
            return out

        return seq
    if isinstance(t, mi.StructType):
        if not isinstance(role, dict):
            raise ValueError(f"a {t.cls.__name__} needs the roles of its fields, not {role!r}")
        fn = _struct_fn(t.cls, role, tile)
    else:
        if not isinstance(role, str):
            raise ValueError(f"a {t!r} takes one role, not the roles of fields {role!r}")
        fn = tile.scalar(role)
    return (lambda v: None if v is None else fn(v)) if optional else fn


def _struct_fn(cls: type, fields: dict[str, Role], tile: Tile, envelope: tuple[str, ...] = ()) -> Callable[..., Any]:
    """``replace(r, field=f(r.field), ...)`` for ``fields`` and the ``envelope`` assignments,
    compiled once per type: the tiler calls it for every record of 10^8, where a loop over the
    fields costs several times the replace itself."""
    types = {f.name: f.type for f in struct_info(cls).fields}
    env: dict[str, Any] = {"replace": msgspec.structs.replace, "config_name": tile.config_name}
    args = []
    for i, (name, role) in enumerate(fields.items()):
        if role == CONFIG_NAME:
            args.append(f"{name}=config_name(r.resource_type, r.{name})")
            continue
        env[f"f{i}"] = _value_fn(role, types[name], tile)
        args.append(f"{name}=f{i}(r.{name})")
    params = "r, o, t" if "offset=o" in envelope else "r"
    exec(f"def remap({params}):\n    return replace(r, {', '.join([*args, *envelope])})\n", env)  # noqa: S102
    return env["remap"]


def tile_records(
    records: Iterable[Record], tile: Tile, stamps: Iterable[tuple[int, int]] | None = None
) -> Iterator[Record]:
    """``records`` (one shard, offsets from 0) as copy ``tile.copy``: ids remapped; offsets and
    times kept (``sharded`` redraws them) and ``source_offset`` cleared, as a generated record's.
    With ``stamps`` (offset, time) per record: the records as the tiled log stores them (that
    offset and time, the offset as ``source_offset``, what an append of a fresh record writes)."""
    by_type: dict[type, Callable[..., Record]] = {}
    envelope = ("source_offset=None",) if stamps is None else ("offset=o", "ts_ms=t", "source_offset=o")
    with trusted():  # the shard's records were checked when they were written
        if stamps is None:
            for r in records:
                fn = by_type.get(type(r))
                if fn is None:
                    fn = by_type[type(r)] = _struct_fn(type(r), roles(type_name(type(r))), tile, envelope)
                yield fn(r)
            return
        for r, (o, t) in zip(records, stamps, strict=True):
            fn = by_type.get(type(r))
            if fn is None:
                fn = by_type[type(r)] = _struct_fn(type(r), roles(type_name(type(r))), tile, envelope)
            yield fn(r, o, t)
