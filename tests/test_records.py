"""Records: every type round-trips through JSON Lines, Arrow and Delta unchanged; versions,
upcasts, entity keys and validation behave as Kafka's schemas say."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import (
    KRAFT_RECORDS,
    LOST,
    MIGRATING,
    OBSERVATION_RECORDS,
    RECORD_TYPES,
    UNASSIGNED,
    BrokerRegistrationChange,
    Partition,
    PartitionChange,
    ProducerIds,
    RecordError,
    RegisterBroker,
    ReplicaDirectory,
    current_version,
    decode_line,
    encode_line,
    normalize,
)
from kraftlake.records.arrow import LOG_SCHEMA, column_name, from_table, payload_type, to_table
from kraftlake.records.types import is_reserved, uuid_from_ints, uuid_to_ints
from kraftlake.testing import any_record, batches, records_of

from helpers.tiers import examples

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
DIR_A = "yHzNFVl5RoS2TvJfCqg0lw"

DESIGN_KRAFT = (
    "RegisterBroker UnregisterBroker BrokerRegistrationChange FenceBroker UnfenceBroker Topic"
    " RemoveTopic Partition PartitionChange FeatureLevel Config RegisterController ProducerIds"
    " BeginTransaction EndTransaction AbortTransaction NoOp ZkMigrationState"
).split()


def test_catalogue_has_every_type_of_the_design():
    names = [c.__name__ for c in KRAFT_RECORDS]
    assert names[: len(DESIGN_KRAFT)] == DESIGN_KRAFT
    # Beyond the design's list, what importing real Kafka logs needs: every other apiKey of Kafka's
    # metadata record schemas (metadata/src/main/resources/common/metadata/*.json: 6, 13 and 16 have
    # none; 28, ClearElrRecord, is Kafka 4.0's), the Raft control records, the opaque record.
    from kraftlake.records.kraft import API_KEYS, CONTROL_TYPES

    assert sorted(API_KEYS.values()) == sorted(set(range(29)) - {6, 13, 16})
    assert sorted(c.__name__ for c in CONTROL_TYPES) == ["KRaftVersion", "LeaderChange", "Voters"]
    assert set(names) == {c.__name__ for c in API_KEYS} | {c.__name__ for c in CONTROL_TYPES} | {"KafkaOpaque"}
    # The design's observations, then the broker's side of KIP-858 (issue 9): start-up, unfence.
    assert [c.__name__ for c in OBSERVATION_RECORDS] == [
        "LogDirFailed",
        "HeartbeatOfflineDirs",
        "AssignReplicasToDirsRequest",
        "LogDirsLoaded",
        "UnfenceRequested",
        "ObjectWritten",  # issue 6: a V2+ stream-set object's index block
    ]


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_jsonl_round_trip_is_identity(cls, data):
    record = data.draw(records_of(cls))
    line = encode_line(record)
    assert b"\n" not in line
    assert decode_line(line) == record
    assert msgspec.json.decode(line)["type"] == cls.__name__


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_records_are_valid_and_normalize_is_idempotent(cls, data):
    record = data.draw(records_of(cls))
    assert normalize(record) == record
    assert record.entity_key()  # every type declares its entity


def _as_logged(records, first_offset, ts_ms):
    return [
        msgspec.structs.replace(
            r,
            offset=first_offset + i,
            ts_ms=r.ts_ms if r.ts_ms is not None else ts_ms,
            source_offset=r.source_offset if r.source_offset is not None else r.offset,
        )
        for i, r in enumerate(records)
    ]


@given(batch=batches(max_size=30), first=st.integers(0, 2**40))
def test_arrow_round_trip_is_identity(batch, first):
    table = to_table(batch, first_offset=first, ts_ms=1_700_000_000_000)
    assert table.schema == LOG_SCHEMA
    assert table.column("offset").to_pylist() == list(range(first, first + len(batch)))
    assert table.column("key").to_pylist() == [r.entity_key() for r in batch]
    assert from_table(table) == _as_logged(batch, first, 1_700_000_000_000)


@settings(max_examples=examples(15))
@given(batch=batches(max_size=25))
def test_delta_round_trip_is_identity(tmp_path_factory, batch):
    from kraftlake.records import Log

    log = Log.create(tmp_path_factory.mktemp("log") / "log")
    result = log.append(batch)
    assert (result.first_offset, result.last_offset) == (0, len(batch) - 1)
    back = log.read()
    stamped = {r.ts_ms for r, orig in zip(back, batch) if orig.ts_ms is None}
    assert len(stamped) <= 1  # the appender stamps a whole batch with one time
    now = stamped.pop() if stamped else 0
    assert back == _as_logged(batch, 0, now)


def test_delta_round_trip_appends_in_order(new_log):
    batches_ = [
        [
            Partition(
                partition_id=p,
                topic_id=TOPIC,
                replicas=(1,),
                isr=(1,),
                leader=1,
                assignment=(ReplicaDirectory(broker=1, directory=DIR_A),),
            )
        ]
        for p in range(3)
    ]
    for b in batches_:
        new_log.append(b)
    assert [r.partition_id for r in new_log.read()] == [0, 1, 2]
    assert [r.offset for r in new_log.read()] == [0, 1, 2]


def test_schema_is_derived_from_structs():
    pc = payload_type(PartitionChange)
    assert pc.field("leader").type == "int32"
    assert pc.field("leader_recovery_state").type == "int8"
    assert str(pc.field("assignment").type) == "list<item: struct<broker: int32, directory: string>>"
    rb = payload_type(RegisterBroker)
    assert rb.field("broker_epoch").type == "int64"
    assert str(rb.field("end_points").type.value_type.field("port").type) == "int32"
    for cls in RECORD_TYPES:
        t = payload_type(cls)
        assert (column_name(cls) in LOG_SCHEMA.names) == (t is not None)
    assert "no_op" not in LOG_SCHEMA.names  # no payload, no column


def test_uuid_text_form_is_kafkas():
    assert uuid_from_ints(0, 0) == MIGRATING
    assert uuid_from_ints(0, 1) == UNASSIGNED
    assert uuid_from_ints(0, 2) == LOST
    assert uuid_to_ints(UNASSIGNED) == (0, 1)
    assert is_reserved(LOST) and is_reserved(uuid_from_ints(0, 99))
    assert not is_reserved(uuid_from_ints(0, 100)) and not is_reserved(uuid_from_ints(1, 0))
    assert uuid_to_ints(uuid_from_ints(-5, -7)) == (-5, -7)  # signed longs, as Kafka's Uuid


def test_old_partition_is_upcast_with_migrating_directories():
    line = (
        b'{"type":"Partition","version":0,"partition_id":4,"topic_id":"%s",'
        b'"replicas":[3,1],"isr":[3],"leader":3,"leader_epoch":0,"partition_epoch":0}' % TOPIC.encode()
    )
    record = decode_line(line)
    assert record.version == 0  # the version it was produced at stays
    assert record.assignment == (
        ReplicaDirectory(broker=3, directory=MIGRATING),
        ReplicaDirectory(broker=1, directory=MIGRATING),
    )
    assert record.eligible_leader_replicas is None


def test_field_newer_than_the_version_is_rejected():
    line = (
        b'{"type":"BrokerRegistrationChange","version":1,"broker_id":1,"broker_epoch":5,"log_dirs":["%s"]}'
        % DIR_A.encode()
    )
    with pytest.raises(RecordError) as exc:
        decode_line(line, line_no=3)
    assert (exc.value.line, exc.value.record_type, exc.value.field) == (3, "BrokerRegistrationChange", "log_dirs")
    assert "added in v2" in str(exc.value)
    # the same field at its default is fine at any version
    ok = decode_line(b'{"type":"BrokerRegistrationChange","version":0,"broker_id":1,"broker_epoch":5,"log_dirs":[]}')
    assert ok == BrokerRegistrationChange(version=0, broker_id=1, broker_epoch=5)


def test_unknown_version_is_rejected():
    with pytest.raises(RecordError, match=r"versions 0\.\.2, got 3") as exc:
        decode_line(b'{"type":"PartitionChange","version":3,"partition_id":0,"topic_id":"%s"}' % TOPIC.encode())
    assert exc.value.field == "version"


def test_kafka_defaults_and_sentinels():
    pcr = PartitionChange(partition_id=0, topic_id=TOPIC)
    assert (pcr.leader, pcr.isr, pcr.assignment, pcr.leader_recovery_state) == (-2, None, None, -1)
    rb = decode_line(b'{"type":"RegisterBroker","broker_id":1,"incarnation_id":"%s","broker_epoch":0}' % DIR_A.encode())
    assert rb.fenced is True and rb.in_controlled_shutdown is False and rb.log_dirs == ()
    assert current_version(PartitionChange) == 2 and current_version(RegisterBroker) == 3


def test_python_built_record_is_validated_on_normalize():
    bad = PartitionChange(partition_id=0, topic_id=TOPIC, leader=-7)  # constructors skip type checks
    with pytest.raises(RecordError) as exc:
        normalize(bad, index=4)
    assert (exc.value.line, exc.value.record_type, exc.value.field) == (4, "PartitionChange", "leader")


@given(record=any_record())
def test_entity_keys_name_the_entity(record):
    key = record.entity_key()
    if isinstance(record, (Partition, PartitionChange)):
        assert key == f"partition/{record.topic_id}/{record.partition_id}"
    elif hasattr(record, "broker_id") and not isinstance(record, ProducerIds):
        assert key == f"broker/{record.broker_id}"
    elif hasattr(record, "topic_id"):
        assert key == f"topic/{record.topic_id}"
    elif record.FAMILY == "bookkeeper" and hasattr(record, "ledger_id"):
        assert key == f"ledger/{record.ledger_id}"
    elif record.FAMILY == "bookkeeper" and hasattr(record, "bookie_id"):
        assert key == f"bookie/{record.bookie_id}"
    elif record.FAMILY == "s3stream" and hasattr(record, "stream_id"):
        assert key == f"stream/{record.stream_id}"
    elif record.FAMILY == "s3stream" and hasattr(record, "node_id") and type(record).__name__ != "UpdateNextNodeId":
        assert key == f"node/{record.node_id}"
    elif record.FAMILY == "s3stream" and hasattr(record, "object_id"):
        assert key == f"object/{record.object_id}"
    else:
        prefixes = {"broker", "feature", "config", "controller", "producer-ids", "cluster"}
        prefixes |= {"token", "user", "acl", "quorum", "kafka"}  # security records, Raft, opaque imports
        prefixes |= {"elr"}  # ClearElr: a topic by name ("elr/<name>"), or every topic ("elr/")
        prefixes |= {
            "ids",
            "streams",
            "stream",
            "kv",
            "object",
            "auditor",
        }  # S3Stream: id high-water marks, end offsets, KV
        assert key.split("/")[0] in prefixes


def test_log_append_rejects_a_bad_python_record_and_writes_nothing(new_log):
    good = PartitionChange(partition_id=0, topic_id=TOPIC, leader=1)
    bad = PartitionChange(partition_id=0, topic_id=TOPIC, isr=(1, -3))  # constructors skip ranges
    with pytest.raises(RecordError) as exc:
        new_log.append([good, bad])
    assert (exc.value.line, exc.value.record_type, exc.value.field) == (2, "PartitionChange", "isr[1]")
    assert new_log.version == 0 and new_log.read() == []
