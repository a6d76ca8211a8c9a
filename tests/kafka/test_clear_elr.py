"""ClearElrRecord (apiKey 28, Kafka 4.0): its bytes, its JSON Lines and Arrow forms, and its replay
(Kafka's ``ReplicationControlManager.replay(ClearElrRecord)``, ``removeTopicElrs``; the image side's
``TopicsDeltaTest`` case replays a topic clear, then a clear of all).

``TopicsImageTest``'s ClearElr cases, read at apache/kafka tag 4.2.0-rc1 (6eef6636), on the
reducer: Kafka 4.1 added testClearElrRecordOnNonExistingTopic and the two ``_ForDeletedTopics``
cases (KAFKA-19383: a clear after a topic was deleted and created again applies to the new
topic). Kafka's image is a delta replayed on a ``TopicsImage``; here the records are replayed on
a view built from records. Where Kafka's PartitionRecords leave Replicas empty (their default),
the partitions here have the replicas of the image's partition (0-3), which the clear ignores."""

from __future__ import annotations

import pytest

from kraftlake.records import decode_line, encode_line
from kraftlake.records.arrow import from_table, to_table
from kraftlake.records.errors import ReplayError
from kraftlake.records.kafka.metadata import MetadataDecoder, encode_value
from kraftlake.records.kraft import ClearElr, FeatureLevel, Partition, RemoveTopic, Topic
from kraftlake.statemachine.kraft import reducer
from tests.helpers.kraft import uid

FOO, BAR = uid("foo"), uid("bar")


@pytest.mark.parametrize(
    ("record", "value"),
    [
        (ClearElr(topic_name="bar"), b"\x01\x1c\x00\x04bar\x00"),
        # The all-topics form: Kafka's default "" (a compact string of length 0).
        (ClearElr(), b"\x01\x1c\x00\x01\x00"),
    ],
)
def test_clear_elr_bytes_round_trip(record, value):
    assert encode_value(record) == value
    decoded = MetadataDecoder().decode(value, offset=7, ts_ms=1, source="kafka")
    assert decoded == ClearElr(topic_name=record.topic_name, offset=7, ts_ms=1, source="kafka", source_offset=7)
    assert encode_value(decoded) == value


def test_clear_elr_json_lines_and_arrow():
    r = ClearElr(topic_name="bar")
    assert decode_line(encode_line(r)) == r
    back = from_table(to_table([r, ClearElr()], first_offset=0, ts_ms=5))
    assert [x.topic_name for x in back] == ["bar", ""]
    assert r.entity_key() == "elr/bar"


def _log() -> list:
    return [
        FeatureLevel(name="metadata.version", feature_level=23),
        Topic(name="foo", topic_id=FOO),
        Partition(
            topic_id=FOO, partition_id=0, replicas=(0, 1, 2, 3), isr=(1,), leader=1, eligible_leader_replicas=(2,)
        ),
        Partition(topic_id=FOO, partition_id=1, replicas=(0, 1), isr=(0, 1), leader=0),
        Topic(name="bar", topic_id=BAR),
        Partition(
            topic_id=BAR,
            partition_id=0,
            replicas=(0, 1, 2, 3),
            isr=(1,),
            leader=0,
            eligible_leader_replicas=(2,),
            last_known_elr=(3,),
        ),
    ]


def test_testClearElrRecords():
    """TopicsDeltaTest.testClearElrRecords: clearing "bar", then everything, empties both ELR
    fields everywhere; each partition that had any is merged once (partition epoch +1)."""
    view = reducer.replay([*_log(), ClearElr(topic_name="bar")])
    bar, foo0 = view.partition(BAR, 0), view.partition(FOO, 0)
    assert (bar.eligible_leader_replicas, bar.last_known_elr, bar.partition_epoch) == ((), (), 0)
    assert foo0.eligible_leader_replicas == (2,)
    view = reducer.replay([ClearElr()], view)
    foo0, foo1 = view.partition(FOO, 0), view.partition(FOO, 1)
    assert (foo0.eligible_leader_replicas, foo0.partition_epoch) == ((), 0)
    assert foo1.partition_epoch == -1  # no ELR to clear: not merged
    assert view.partition(BAR, 0).partition_epoch == 0  # already clear: not merged again


def test_clear_elr_of_an_unknown_topic_is_refused():
    with pytest.raises(ReplayError, match="baz"):
        reducer.replay([*_log(), ClearElr(topic_name="baz")])


def test_last_known_elr_of_a_leaderless_partition_is_minus_one():
    """Kafka's ``maybeUpdateLastKnownLeader`` sets LastKnownElr to ``[partition.leader]`` when the
    ISR empties, -1 when the partition had no leader (its schema takes any int32): such a change
    decodes from Kafka's bytes, round-trips through JSON Lines, Arrow and both append paths; a
    broker id below -1 is still refused, naming the field."""
    from kraftlake.records import PartitionChange, RecordError
    from kraftlake.records.codec import from_builtins

    change = PartitionChange(topic_id=FOO, partition_id=0, isr=(), leader=-1, last_known_elr=(-1,), version=2)
    value = encode_value(change)
    decoded = MetadataDecoder().decode(value, offset=3, ts_ms=1, source="kafka")
    assert decoded.last_known_elr == (-1,) and encode_value(decoded) == value
    assert decode_line(encode_line(change)) == change
    assert from_table(to_table([change], first_offset=0, ts_ms=5))[0].last_known_elr == (-1,)
    with pytest.raises(RecordError, match="last_known_elr"):
        from_builtins({"type": "PartitionChange", "topic_id": FOO, "partition_id": 0, "last_known_elr": [-2]})


def test_a_log_takes_a_minus_one_last_known_elr_from_records_and_json_lines(tmp_path):
    from kraftlake.records import Log, PartitionChange
    from kraftlake.records.columnar import from_lines

    log = Log.create(tmp_path / "log")
    records = [*_log()[:3], PartitionChange(topic_id=FOO, partition_id=0, isr=(), leader=-1, last_known_elr=(-1,))]
    log.append(records)  # Python records
    log.append(from_lines([encode_line(r) for r in records[3:]]), validated=True)  # JSON Lines, as the CLI does
    assert [r.last_known_elr for r in log.read() if isinstance(r, PartitionChange)] == [(-1,), (-1,)]


FOO2, BAR2 = uid("foo-2"), uid("bar-2")


def test_testClearElrRecordOnNonExistingTopic():
    with pytest.raises(ReplayError, match="foo"):
        reducer.replay([FeatureLevel(name="metadata.version", feature_level=23), ClearElr(topic_name="foo")])


def test_testClearElrRecordForNonExistTopic():
    with pytest.raises(ReplayError, match="non-exist"):
        reducer.replay([ClearElr(topic_name="non-exist")])


def _deleted_and_created_again(*clears: ClearElr):
    """The ``_ForDeletedTopics`` cases: foo (image: replicas 0-3, leader 0) deleted and created
    again with an ELR; bar created, deleted and created again with one; then ``clears``."""
    image = [
        FeatureLevel(name="metadata.version", feature_level=23),
        Topic(name="foo", topic_id=FOO),
        Partition(topic_id=FOO, partition_id=0, replicas=(0, 1, 2, 3), isr=(0, 1, 2, 3), leader=0),
        Partition(topic_id=FOO, partition_id=0, replicas=(0, 1, 2, 3), isr=(1, 2, 3), leader=0),
    ]
    delta = [
        RemoveTopic(topic_id=FOO),
        Topic(name="foo", topic_id=FOO2),
        Partition(
            topic_id=FOO2,
            partition_id=0,
            replicas=(0, 1, 2, 3),
            isr=(0, 1),
            leader=-1,
            eligible_leader_replicas=(2,),
            last_known_elr=(3,),
        ),
        Topic(name="bar", topic_id=BAR),
        Partition(topic_id=BAR, partition_id=0, replicas=(0, 1, 2, 3), isr=(1, 2, 3), leader=0),
        RemoveTopic(topic_id=BAR),
        Topic(name="bar", topic_id=BAR2),
        Partition(
            topic_id=BAR2,
            partition_id=0,
            replicas=(0, 1, 2, 3),
            isr=(1,),
            leader=0,
            eligible_leader_replicas=(2,),
            last_known_elr=(3,),
        ),
        *clears,
    ]
    view = reducer.replay([*image, *delta])
    assert sorted(view.topics) == sorted((FOO2, BAR2)) and sorted(view.topic_ids) == ["bar", "foo"]
    for topic in (FOO2, BAR2):
        p = view.partition(topic, 0)
        assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())


def test_testClearElrRecords_All_ForDeletedTopics():
    _deleted_and_created_again(ClearElr())


def test_testClearElrRecords_Single_ForDeletedTopics():
    _deleted_and_created_again(ClearElr(topic_name="foo"), ClearElr(topic_name="bar"))
