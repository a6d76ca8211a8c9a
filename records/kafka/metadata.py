"""Kafka metadata record values <-> kraftlake records, as Kafka's ``MetadataRecordSerde`` reads and
writes them, and the Raft control records (``ControlRecordUtils``).

One table, ``SCHEMAS``, lists every metadata record type Kafka has (apiKey 0-28), its versions
and its fields in wire order, from ``metadata/src/main/resources/common/metadata/*.json`` in
apache/kafka. Field names are the kraftlake Struct's (Kafka's in snake_case), so decoding is
"read the fields, call the class" and encoding is the reverse; nothing else is hand-written per
type except Kafka's ``Directories`` array, which kraftlake keeps as ``assignment`` pairs.

A value is a frame (uvarint 1, uvarint apiKey, uvarint version: ``AbstractApiMessageSerde``) then
the body in flexible encoding; an apiKey or version kraftlake does not know becomes
``KafkaOpaque`` (raw bytes, for a byte-identical export). Writers omit tagged fields equal to
their default, as Kafka does, so that re-encoding what Kafka wrote gives the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kraftlake.records.base import _TRUSTED, Record
from kraftlake.records.kraft import (
    MIGRATING,
    AbortTransaction,
    AccessControlEntry,
    BeginTransaction,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChange,
    ClearElr,
    ClientQuota,
    Config,
    CredentialInfo,
    DelegationToken,
    EndTransaction,
    EntityData,
    FeatureLevel,
    FenceBroker,
    KafkaOpaque,
    KRaftVersion,
    LeaderChange,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RegisterController,
    RemoveAccessControlEntry,
    RemoveDelegationToken,
    RemoveTopic,
    RemoveUserScramCredential,
    ReplicaDirectory,
    Topic,
    UnfenceBroker,
    UnregisterBroker,
    UserScramCredential,
    Voter,
    VoterEndpoint,
    Voters,
    ZkMigrationState,
)

from . import wire as w
from .errors import KafkaFormatError

FRAME_VERSION = 1
NOOP_VALUE = b"\x01\x14\x00\x00"
"""A NoOpRecord's whole value: ~99% of a real log, decoded without parsing."""

_MISSING: Any = object()


# -- field kinds: (reader, writer) ---------------------------------------------------------------


def _not_null(reader: Callable) -> Callable:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        v, pos = reader(buf, pos)
        if v is None:
            raise ValueError("null in a field that is not nullable")
        return v, pos

    return read


_KINDS: dict[str, tuple[Callable, Callable]] = {
    "i8": (w.i8, w.w_i8),
    "i16": (w.i16, w.w_i16),
    "i32": (w.i32, w.w_i32),
    "i64": (w.i64, w.w_i64),
    "u16": (w.u16, w.w_u16),
    "bool": (w.boolean, w.w_bool),
    "f64": (w.f64, w.w_f64),
    "uuid": (w.uuid, w.w_uuid),
    "str": (_not_null(w.string), w.w_string),
    "str?": (w.string, w.w_string),
    "bytes": (_not_null(w.compact_bytes), w.w_bytes),
    "[i32]": (_not_null(w.int32_array), w.w_int32_array),
    "[i32]?": (w.int32_array, w.w_int32_array),
    "[uuid]": (_not_null(w.uuid_array), w.w_uuid_array),
    "[uuid]?": (w.uuid_array, w.w_uuid_array),
}


@dataclass(frozen=True)
class F:
    """One field: kraftlake name, kind, first and last version, tag (None = untagged), default
    (what a tagged field is omitted at; what the Struct takes when the version lacks it)."""

    name: str
    kind: Any
    since: int = 0
    until: int = 99
    tag: int | None = None
    default: Any = _MISSING


@dataclass(frozen=True)
class StructOf:
    """An array element (or nested struct) type: its fields and the Part class it becomes."""

    cls: type
    fields: tuple[F, ...]


def _array_of(read_one: Callable, write_one: Callable) -> tuple[Callable, Callable]:
    """A non-nullable compact array of elements read and written by ``read_one``/``write_one``."""

    def read(buf: bytes, pos: int) -> tuple[tuple[Any, ...], int]:
        n, pos = w.uvarint(buf, pos)
        if n == 0:
            raise ValueError("null array")
        out = []
        for _ in range(n - 1):
            v, pos = read_one(buf, pos)
            out.append(v)
        return tuple(out), pos

    def write(out: bytearray, values: Sequence[Any]) -> None:
        w.write_uvarint(out, len(values) + 1)
        for v in values:
            write_one(out, v)

    return read, write


def _struct_array(spec: StructOf) -> tuple[Callable, Callable]:
    readers = [(f.name, _reader(f.kind)) for f in spec.fields]
    writers = [(f.name, _writer(f.kind)) for f in spec.fields]
    cls = spec.cls

    def read_one(buf: bytes, pos: int) -> tuple[Any, int]:
        kw = {}
        for name, rd in readers:
            kw[name], pos = rd(buf, pos)
        pos = w.skip_tagged(buf, pos)
        return cls(**kw), pos

    def write_one(out: bytearray, v: Any) -> None:
        for name, wr in writers:
            wr(out, getattr(v, name))
        out.append(0)

    return _array_of(read_one, write_one)


_KINDS["[str]"] = _array_of(_KINDS["str"][0], w.w_string)


def _reader(kind: Any) -> Callable:
    return _kinds(kind)[0]


def _writer(kind: Any) -> Callable:
    return _kinds(kind)[1]


def _kinds(kind: Any) -> tuple[Callable, Callable]:
    if isinstance(kind, StructOf):
        return _struct_array(kind)
    return _KINDS[kind]


ENDPOINT = StructOf(
    BrokerEndpoint, (F("name", "str"), F("host", "str"), F("port", "u16"), F("security_protocol", "i16"))
)
FEATURE = StructOf(
    BrokerFeature, (F("name", "str"), F("min_supported_version", "i16"), F("max_supported_version", "i16"))
)
CREDENTIAL = StructOf(
    CredentialInfo, (F("mechanism", "i8"), F("salt", "bytes"), F("salted_password", "bytes"), F("iterations", "i32"))
)
ENTITY = StructOf(EntityData, (F("entity_type", "str"), F("entity_name", "str?")))


@dataclass(frozen=True)
class Schema:
    cls: type[Record]
    api_key: int
    versions: tuple[int, int]
    fields: tuple[F, ...]


SCHEMAS: tuple[Schema, ...] = (
    Schema(
        RegisterBroker,
        0,
        (0, 3),
        (
            F("broker_id", "i32"),
            F("is_migrating_zk_broker", "bool", since=2, default=False),
            F("incarnation_id", "uuid"),
            F("broker_epoch", "i64"),
            F("end_points", ENDPOINT),
            F("features", FEATURE),
            F("rack", "str?"),
            F("fenced", "bool"),
            F("in_controlled_shutdown", "bool", since=1, default=False),
            F("log_dirs", "[uuid]", since=3, tag=0, default=()),
        ),
    ),
    Schema(UnregisterBroker, 1, (0, 0), (F("broker_id", "i32"), F("broker_epoch", "i64"))),
    Schema(Topic, 2, (0, 0), (F("name", "str"), F("topic_id", "uuid"))),
    Schema(
        Partition,
        3,
        (0, 2),
        (
            F("partition_id", "i32"),
            F("topic_id", "uuid"),
            F("replicas", "[i32]"),
            F("isr", "[i32]"),
            F("removing_replicas", "[i32]"),
            F("adding_replicas", "[i32]"),
            F("leader", "i32"),
            F("leader_recovery_state", "i8", tag=0, default=0),
            F("leader_epoch", "i32"),
            F("partition_epoch", "i32"),
            F("directories", "[uuid]", since=1),
            F("eligible_leader_replicas", "[i32]?", since=2, tag=1, default=None),
            F("last_known_elr", "[i32]?", since=2, tag=2, default=None),
        ),
    ),
    Schema(
        Config, 4, (0, 0), (F("resource_type", "i8"), F("resource_name", "str"), F("name", "str"), F("value", "str?"))
    ),
    Schema(
        PartitionChange,
        5,
        (0, 2),
        (
            F("partition_id", "i32"),
            F("topic_id", "uuid"),
            F("isr", "[i32]?", tag=0, default=None),
            F("leader", "i32", tag=1, default=-2),
            F("replicas", "[i32]?", tag=2, default=None),
            F("removing_replicas", "[i32]?", tag=3, default=None),
            F("adding_replicas", "[i32]?", tag=4, default=None),
            F("leader_recovery_state", "i8", tag=5, default=-1),
            F("eligible_leader_replicas", "[i32]?", since=2, tag=6, default=None),
            F("last_known_elr", "[i32]?", since=2, tag=7, default=None),
            F("directories", "[uuid]?", since=1, tag=8, default=None),
        ),
    ),
    Schema(FenceBroker, 7, (0, 0), (F("id", "i32"), F("epoch", "i64"))),
    Schema(UnfenceBroker, 8, (0, 0), (F("id", "i32"), F("epoch", "i64"))),
    Schema(RemoveTopic, 9, (0, 0), (F("topic_id", "uuid"),)),
    Schema(
        DelegationToken,
        10,
        (0, 0),
        (
            F("owner", "str"),
            F("requester", "str"),
            F("renewers", "[str]"),
            F("issue_timestamp", "i64"),
            F("max_timestamp", "i64"),
            F("expiration_timestamp", "i64"),
            F("token_id", "str"),
        ),
    ),
    Schema(UserScramCredential, 11, (0, 0), (F("name", "str"), F("credential_infos", CREDENTIAL))),
    Schema(FeatureLevel, 12, (0, 0), (F("name", "str"), F("feature_level", "i16"))),
    Schema(ClientQuota, 14, (0, 0), (F("entity", ENTITY), F("key", "str"), F("value", "f64"), F("remove", "bool"))),
    Schema(ProducerIds, 15, (0, 0), (F("broker_id", "i32"), F("broker_epoch", "i64"), F("next_producer_id", "i64"))),
    Schema(
        BrokerRegistrationChange,
        17,
        (0, 2),
        (
            F("broker_id", "i32"),
            F("broker_epoch", "i64"),
            F("fenced", "i8", tag=0, default=0),
            F("in_controlled_shutdown", "i8", since=1, tag=1, default=0),
            F("log_dirs", "[uuid]", since=2, tag=2, default=()),
        ),
    ),
    Schema(
        AccessControlEntry,
        18,
        (0, 0),
        (
            F("id", "uuid"),
            F("resource_type", "i8"),
            F("resource_name", "str"),
            F("pattern_type", "i8"),
            F("principal", "str"),
            F("host", "str"),
            F("operation", "i8"),
            F("permission_type", "i8"),
        ),
    ),
    Schema(RemoveAccessControlEntry, 19, (0, 0), (F("id", "uuid"),)),
    Schema(NoOp, 20, (0, 0), ()),
    Schema(ZkMigrationState, 21, (0, 0), (F("zk_migration_state", "i8"),)),
    Schema(RemoveUserScramCredential, 22, (0, 0), (F("name", "str"), F("mechanism", "i8"))),
    Schema(BeginTransaction, 23, (0, 0), (F("name", "str?", tag=0, default=None),)),
    Schema(EndTransaction, 24, (0, 0), ()),
    Schema(AbortTransaction, 25, (0, 0), (F("reason", "str?", tag=0, default=None),)),
    Schema(RemoveDelegationToken, 26, (0, 0), (F("token_id", "str"),)),
    Schema(
        RegisterController,
        27,
        (0, 0),
        (
            F("controller_id", "i32"),
            F("incarnation_id", "uuid"),
            F("zk_migration_ready", "bool"),
            F("end_points", ENDPOINT),
            F("features", FEATURE),
        ),
    ),
    Schema(ClearElr, 28, (0, 0), (F("topic_name", "str"),)),
)
"""Every Kafka metadata record type Kafka 4.2 writes (the schemas at tag 4.2.0-rc1 are Kafka 4.0's):
6, 13 and 16 are unused apiKeys (removed or never shipped); 28 (ClearElrRecord) is Kafka 4.0's."""

BY_API_KEY: dict[int, Schema] = {s.api_key: s for s in SCHEMAS}
BY_CLASS: dict[type, Schema] = {s.cls: s for s in SCHEMAS}


def describe_unknown(api_key: int, version: int) -> str:
    """What kraftlake knows of a metadata record it could not decode: "RegisterBroker v4
    (apiKey 0; kraftlake knows v0-3)", or "apiKey 29 v0 (a type kraftlake does not know)"."""
    schema = BY_API_KEY.get(api_key)
    if schema is None:
        return f"apiKey {api_key} v{version} (a type kraftlake does not know)"
    lo, hi = schema.versions
    return f"{schema.cls.__name__} v{version} (apiKey {api_key}; kraftlake knows v{lo}-{hi})"


@dataclass
class _Compiled:
    """One (apiKey, version): readers of the untagged fields in order, readers by tag, writers."""

    cls: type[Record]
    untagged: list[tuple[str, Callable]]
    tagged: dict[int, tuple[str, Callable]]
    writers: list[tuple[str, Callable]]
    tag_writers: list[tuple[int, str, Callable, Any]]
    absent: frozenset[str] = field(default_factory=frozenset)


def _compile(schema: Schema, version: int) -> _Compiled:
    fields = [f for f in schema.fields if f.since <= version <= f.until]
    absent = frozenset(f.name for f in schema.fields if f not in fields)
    return _Compiled(
        cls=schema.cls,
        untagged=[(f.name, _reader(f.kind)) for f in fields if f.tag is None],
        tagged={f.tag: (f.name, _reader(f.kind)) for f in fields if f.tag is not None},
        writers=[(f.name, _writer(f.kind)) for f in fields if f.tag is None],
        tag_writers=sorted((f.tag, f.name, _writer(f.kind), f.default) for f in fields if f.tag is not None),
        absent=absent,
    )


_COMPILED: dict[tuple[int, int], _Compiled] = {
    (s.api_key, v): _compile(s, v) for s in SCHEMAS for v in range(s.versions[0], s.versions[1] + 1)
}


def decode_fields(value: bytes) -> tuple[int, int, dict[str, Any] | None]:
    """(apiKey, version, fields) of a metadata record value; fields None when kraftlake does not
    know that apiKey or version. Raises ``ValueError``/``IndexError`` on malformed bytes."""
    if value[0] == FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:  # every known record
        api_key, version, pos = value[1], value[2], 3
    else:
        frame, pos = w.uvarint(value, 0)
        if frame != FRAME_VERSION:
            raise ValueError(f"frame version {frame} (only 1 exists; 0 was the 2.8 preview format)")
        api_key, pos = w.uvarint(value, pos)
        version, pos = w.uvarint(value, pos)
    c = _COMPILED.get((api_key, version))
    if c is None:
        return api_key, version, None
    kw: dict[str, Any] = {}
    for name, rd in c.untagged:
        kw[name], pos = rd(value, pos)
    n, pos = w.uvarint(value, pos)
    last_tag = -1
    for _ in range(n):
        tag, pos = w.uvarint(value, pos)
        size, pos = w.uvarint(value, pos)
        if tag <= last_tag:
            raise ValueError(f"tagged fields out of order: {tag} after {last_tag}")
        last_tag = tag
        f = c.tagged.get(tag)
        if f is not None:
            kw[f[0]], end = f[1](value, pos)
            if end != pos + size:
                raise ValueError(f"tagged field {f[0]} (tag {tag}) is {end - pos} bytes, its size says {size}")
        pos += size  # unknown tags are skipped, as Kafka's readers do
    if pos != len(value):
        raise ValueError(f"{len(value) - pos} trailing bytes after the record")
    return api_key, version, kw


class MetadataDecoder:
    """Decodes metadata record values into kraftlake records, in log order.

    Stateful for one reason: a PartitionChangeRecord may set ``Directories`` without
    ``Replicas``, and kraftlake's ``assignment`` pairs each directory with its broker, so the
    decoder keeps every partition's current replicas from the records it has decoded."""

    def __init__(self) -> None:
        self.replicas: dict[str, dict[int, tuple[int, ...]]] = {}

    def decode(
        self,
        value: bytes,
        *,
        offset: int | None,
        ts_ms: int | None,
        source: str | None,
        source_offset: int | None = _MISSING,
    ) -> Record:
        """The record of one value. ``source_offset`` defaults to ``offset`` (Kafka's offset)."""
        src_off = offset if source_offset is _MISSING else source_offset
        if value == NOOP_VALUE:
            return NoOp(offset=offset, ts_ms=ts_ms, source=source, source_offset=src_off)
        api_key = version = None
        try:
            api_key, version, kw = decode_fields(value)
        except (ValueError, IndexError, struct.error) as exc:  # UnicodeDecodeError is a ValueError
            name = BY_API_KEY[api_key].cls.__name__ if api_key in BY_API_KEY else f"apiKey {api_key}"
            raise KafkaFormatError(
                f"{name} v{version}: does not decode: {exc}"
                if version is not None
                else f"record value does not decode: {exc}",
                offset=src_off,
            ) from None
        if kw is None:
            return KafkaOpaque(
                api_key=api_key,
                kafka_version=version,
                control=False,
                value=bytes(value),
                offset=offset,
                ts_ms=ts_ms,
                source=source,
                source_offset=src_off,
            )
        cls = _COMPILED[(api_key, version)].cls
        try:
            if cls is Partition or cls is PartitionChange:
                self._directories(cls, kw, src_off)
            elif cls is RemoveTopic:
                self.replicas.pop(kw["topic_id"], None)
            # The uuids came from 16 raw bytes and the version from the schema table: only the
            # type's own rules (real ids where Kafka needs them, assignment alignment) are left.
            token = _TRUSTED.set(True)
            try:
                record = cls(version=version, offset=offset, ts_ms=ts_ms, source=source, source_offset=src_off, **kw)
            finally:
                _TRUSTED.reset(token)
            record._validate()
            return record
        except KafkaFormatError:
            raise
        except (ValueError, TypeError, msgspec.ValidationError) as exc:
            raise KafkaFormatError(str(exc), offset=src_off, record_type=cls.__name__) from None

    def _directories(self, cls: type, kw: dict[str, Any], offset: int | None) -> None:
        """Kafka's ``Directories`` (parallel to the replicas) -> kraftlake's ``assignment``."""
        topic, pid = kw["topic_id"], kw["partition_id"]
        dirs = kw.pop("directories", None)
        replicas = kw.get("replicas")
        parts = self.replicas.setdefault(topic, {})
        if replicas is None:
            replicas = parts.get(pid)
        else:
            parts[pid] = replicas
        if dirs is None:
            if cls is Partition and replicas is not None:
                # v0 has no Directories: Kafka reads every replica as MIGRATING, and so does
                # kraftlake's upcaster (records.upcast): the same record either way.
                kw["assignment"] = tuple(ReplicaDirectory(broker=b, directory=MIGRATING) for b in replicas)
            return
        if replicas is None:
            raise KafkaFormatError(
                f"sets Directories of partition {topic}/{pid}, whose replicas this import has not seen;"
                " start from a snapshot that contains it (--from-snapshot)",
                offset=offset,
                record_type=cls.__name__,
                field="directories",
            )
        if dirs and len(dirs) != len(replicas):
            raise KafkaFormatError(
                f"has {len(dirs)} directories for replicas {list(replicas)} (InvalidReplicaDirectoriesException)",
                offset=offset,
                record_type=cls.__name__,
                field="directories",
            )
        kw["assignment"] = tuple(ReplicaDirectory(broker=b, directory=d) for b, d in zip(replicas, dirs))


def _field_value(r: Record, name: str) -> Any:
    if name == "directories":
        a = r.assignment  # type: ignore[attr-defined]  # "directories" is a field of the partition records only
        return None if a is None else tuple(p.directory for p in a)
    return getattr(r, name)


def encode_value(r: Record) -> bytes:
    """The Kafka value of a record, at the record's ``version``: the inverse of ``decode``."""
    cls = type(r)
    if type(r) is KafkaOpaque:
        if r.control:
            raise KafkaFormatError("a control record has no metadata value", record_type="KafkaOpaque")
        return r.value
    schema = BY_CLASS.get(cls)
    if schema is None:
        raise KafkaFormatError("has no Kafka metadata form", record_type=cls.__name__)
    c = _COMPILED.get((schema.api_key, r.version))
    if c is None:
        raise KafkaFormatError(f"Kafka has no version {r.version}", record_type=cls.__name__, field="version")
    for name in c.absent:
        if name == "directories":
            assignment = r.assignment  # type: ignore[attr-defined]  # "directories": a partition record
            if assignment and any(p.directory != MIGRATING for p in assignment):
                raise KafkaFormatError(f"v{r.version} has no Directories", record_type=cls.__name__, field="assignment")
        elif getattr(r, name) != _default_of(schema, name):
            raise KafkaFormatError(f"v{r.version} has no {name}", record_type=cls.__name__, field=name)
    out = bytearray((FRAME_VERSION,))
    w.write_uvarint(out, schema.api_key)
    w.write_uvarint(out, r.version)
    try:
        for name, wr in c.writers:
            wr(out, _field_value(r, name))
        tags = []
        for tag, name, wr, default in c.tag_writers:
            v = _field_value(r, name)
            if v != default:
                payload = bytearray()
                wr(payload, v)
                tags.append((tag, payload))
        w.write_uvarint(out, len(tags))
        for tag, payload in tags:
            w.write_uvarint(out, tag)
            w.write_uvarint(out, len(payload))
            out += payload
    except (ValueError, TypeError, OverflowError) as exc:
        raise KafkaFormatError(str(exc), record_type=cls.__name__, offset=r.offset) from None
    return bytes(out)


def _default_of(schema: Schema, name: str) -> Any:
    for f in schema.fields:
        if f.name == name:
            if f.default is not _MISSING:
                return f.default
    from kraftlake.records.base import field_defaults

    return field_defaults(schema.cls).get(name)


# -- control records (ControlRecordType; schemas in clients/src/main/resources/common/message/) -----

LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, VOTERS = 2, 3, 4, 5, 6
CONTROL_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


@dataclass(frozen=True)
class SnapshotHeader:
    version: int
    last_contained_log_timestamp: int


@dataclass(frozen=True)
class SnapshotFooter:
    version: int


def _voter_ids(buf: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    n, pos = w.uvarint(buf, pos)
    out = []
    for _ in range(max(0, n - 1)):
        v, pos = w.i32(buf, pos)
        pos = w.skip_tagged(buf, pos)
        out.append(v)
    return tuple(out), pos


def _w_voter_ids(out: bytearray, ids: tuple[int, ...]) -> None:
    w.write_uvarint(out, len(ids) + 1)
    for v in ids:
        w.w_i32(out, v)
        out.append(0)


_VOTER_ENDPOINT = StructOf(VoterEndpoint, (F("name", "str"), F("host", "str"), F("port", "u16")))
_read_endpoints, _write_endpoints = _struct_array(_VOTER_ENDPOINT)


def _read_voter(buf: bytes, pos: int) -> tuple[Voter, int]:
    vid, pos = w.i32(buf, pos)
    did, pos = w.uuid(buf, pos)
    eps, pos = _read_endpoints(buf, pos)
    lo, pos = w.i16(buf, pos)
    hi, pos = w.i16(buf, pos)
    pos = w.skip_tagged(buf, pos)  # KRaftVersionFeature's own
    pos = w.skip_tagged(buf, pos)  # the voter's
    return Voter(
        voter_id=vid, voter_directory_id=did, endpoints=eps, min_supported_version=lo, max_supported_version=hi
    ), pos


def _write_voter(out: bytearray, v: Voter) -> None:
    w.w_i32(out, v.voter_id)
    w.w_uuid(out, v.voter_directory_id)
    _write_endpoints(out, v.endpoints)
    w.w_i16(out, v.min_supported_version)
    w.w_i16(out, v.max_supported_version)
    out.append(0)
    out.append(0)


class _UnknownControl(Exception):
    """A control type or version kraftlake does not decode (kept as KafkaOpaque)."""


def decode_control(
    key: bytes | None,
    value: bytes | None,
    *,
    epoch: int,
    offset: int | None,
    ts_ms: int | None,
    source: str | None,
) -> Record | SnapshotHeader | SnapshotFooter:
    """A control record: LeaderChange, KRaftVersion and Voters as records, the snapshot header
    and footer as framing, anything else (transaction markers, unknown types) as KafkaOpaque."""
    if key is None or len(key) != 4:
        raise KafkaFormatError(
            f"control record key of {0 if key is None else len(key)} bytes (4 expected)", offset=offset
        )
    key_version, ctype = w.i16(key, 0)[0], w.i16(key, 2)[0]
    env: dict[str, Any] = {"offset": offset, "ts_ms": ts_ms, "source": source, "source_offset": offset}
    buf = value or b""
    try:
        version, pos = w.i16(buf, 0)
        if (
            key_version != 0
            or version != 0
            or ctype not in (LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, VOTERS)
        ):
            raise _UnknownControl
        if ctype == LEADER_CHANGE:
            leader, pos = w.i32(buf, pos)
            voters, pos = _voter_ids(buf, pos)
            granting, pos = _voter_ids(buf, pos)
            result: Any = LeaderChange(
                version=version, epoch=epoch, leader_id=leader, voters=voters, granting_voters=granting, **env
            )
        elif ctype == SNAPSHOT_HEADER:
            ts, pos = w.i64(buf, pos)
            result = SnapshotHeader(version, ts)
        elif ctype == SNAPSHOT_FOOTER:
            result = SnapshotFooter(version)
        elif ctype == KRAFT_VERSION:
            kv, pos = w.i16(buf, pos)
            result = KRaftVersion(version=version, kraft_version=kv, **env)
        else:
            n, pos = w.uvarint(buf, pos)
            voters_ = []
            for _ in range(max(0, n - 1)):
                v, pos = _read_voter(buf, pos)
                voters_.append(v)
            result = Voters(version=version, voters=tuple(voters_), **env)
        pos = w.skip_tagged(buf, pos)
        if pos != len(buf):
            raise ValueError(f"{len(buf) - pos} trailing bytes")
        return result
    except _UnknownControl:
        return KafkaOpaque(api_key=ctype, kafka_version=key_version, control=True, value=bytes(buf), **env)
    except KafkaFormatError:
        raise
    except (ValueError, IndexError, struct.error) as exc:
        raise KafkaFormatError(
            f"{CONTROL_NAMES.get(ctype, ctype)} control record does not decode: {exc}", offset=offset
        ) from None


def encode_control(r: Record | SnapshotHeader | SnapshotFooter) -> tuple[bytes, bytes]:
    """(key, value) of a control record: the inverse of ``decode_control``."""
    if type(r) is KafkaOpaque:
        return b"\x00\x00" + r.api_key.to_bytes(2, "big", signed=True), r.value
    out = bytearray()
    w.w_i16(out, r.version)
    if type(r) is LeaderChange:
        ctype = LEADER_CHANGE
        w.w_i32(out, r.leader_id)
        _w_voter_ids(out, r.voters)
        _w_voter_ids(out, r.granting_voters)
    elif type(r) is SnapshotHeader:
        ctype = SNAPSHOT_HEADER
        w.w_i64(out, r.last_contained_log_timestamp)
    elif type(r) is SnapshotFooter:
        ctype = SNAPSHOT_FOOTER
    elif type(r) is KRaftVersion:
        ctype = KRAFT_VERSION
        w.w_i16(out, r.kraft_version)
    elif type(r) is Voters:
        ctype = VOTERS
        w.write_uvarint(out, len(r.voters) + 1)
        for v in r.voters:
            _write_voter(out, v)
    else:
        raise KafkaFormatError("is not a Raft control record", record_type=type(r).__name__)
    out.append(0)
    return b"\x00\x00" + ctype.to_bytes(2, "big"), bytes(out)
