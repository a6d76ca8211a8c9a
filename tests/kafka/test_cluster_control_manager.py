"""Kafka's ``ClusterControlManagerTest`` (org.apache.kafka.controller), the registration cases, case by
case against the registration decider (``statemachine.kraft.brokers.register``), the view and
``default_dir_provider``.

Cases that cannot apply: testReplay*, testRegistrationsToRecords, testRegisterBrokerRecordVersion
(record replay and versions are tests/test_kraft_replay.py's and test_kafka_codec.py's);
testRegistrationWithIncorrectClusterId (the log has no cluster id to compare);
testRegistrationWithUnsupportedKraftVersion (kraft.version is Raft's, not a FeatureLevel in the
view); testRegisterControlWithOlderMetadataVersion (controller registration is not decided here);
testPlaceReplicas (Kafka's striped placer; kraftlake places by weight, tests/test_placement.py);
testUnregister (tests/test_kraft_deciders.py)."""

from __future__ import annotations

import pytest

from kraftlake.records.kraft import LOST, MIGRATING, UNASSIGNED, BrokerFeature, FeatureLevel, RegisterBroker
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.brokers import supported_features
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.replication import default_dir_provider
from tests.helpers.kraft import uid

DIRS = (uid("yJGxmjfbQZSVFAlNM3uXZg"), uid("Mj3CW3OSRi29cFeNJlXuAQ"))


def controller(mv: int, *extra) -> Controller:
    return Controller(records=[FeatureLevel(name="metadata.version", feature_level=mv), *extra])


def mv_range(lo: int, hi: int) -> BrokerFeature:
    return BrokerFeature(name="metadata.version", min_supported_version=lo, max_supported_version=hi)


def register(ctl, broker=0, dirs=DIRS, features=None, incarnation="0H4fUu1xQEKXFYwB1aBjhg"):
    return ctl.handle(
        c.RegisterBroker(
            broker_id=broker,
            incarnation_id=uid(incarnation),
            log_dirs=tuple(dirs),
            features=supported_features(ctl.view.metadata_version) if features is None else features,
        )
    )


def test_testRegistrationWithUnsupportedFeature():
    ctl = controller(15, FeatureLevel(name="test.feature.version", feature_level=1))  # 3.7-IV0
    reply = register(ctl, features=(mv_range(2, 15),)).reply
    assert reply.error_code == c.UNSUPPORTED_VERSION
    assert reply.message == (
        "Unable to register because the broker does not support finalized version 1 of "
        "test.feature.version. The broker wants a version between 0 and 0, inclusive."
    )


def test_testRegistrationWithUnsupportedMetadataVersion():
    ctl = controller(4)  # 3.3-IV0
    reply = register(ctl, features=()).reply
    assert reply.error_code == c.UNSUPPORTED_VERSION
    assert reply.message == (
        "Unable to register because the broker does not support finalized version 4 of "
        "metadata.version. The broker wants a version between 1 and 1, inclusive."
    )
    reply = register(ctl, features=(mv_range(7, 7),)).reply
    assert reply.error_code == c.UNSUPPORTED_VERSION
    assert reply.message.endswith(
        "finalized version 4 of metadata.version. The broker wants a version between 7 and 7, inclusive."
    )


def test_a_broker_without_a_metadata_version_range_is_recorded_with_1_1():
    """processRegistrationFeature's default: no metadata.version range means [1, 1]."""
    ctl = Controller(records=[])  # no metadata.version record: level 1
    d = register(ctl, features=(), dirs=())
    assert d.reply.error_code == c.NONE
    [record] = [r for r in d.records if isinstance(r, RegisterBroker)]
    assert record.features == (mv_range(1, 1),)


def test_testRegisterWithDuplicateDirectoryId():
    ctl = controller(21, RegisterBroker(broker_id=0, incarnation_id=uid("i0"), broker_epoch=100, log_dirs=DIRS))
    assert register(ctl, 0, incarnation="i0").reply.error_code == c.NONE
    for dirs, message in [
        ((), "No directories specified in request"),
        ((uid("TyNK6XSSQJaJc2q9uflNHg"), DIRS[1]), f"Broker 0 is already registered with directory {DIRS[1]}"),
        ((uid("TyNK6XSSQJaJc2q9uflNHg"), UNASSIGNED), "Reserved directory ID in request"),
        ((uid("aR6lssMrSeyXRf65hiUovQ"),) * 2, "Duplicate directory ID in request"),
    ]:
        reply = register(ctl, 1, dirs=dirs, incarnation="i1").reply
        assert reply.error_code == c.INVALID_REGISTRATION
        assert reply.message.startswith(message)


def test_testHasOnlineDir():
    d1, d2 = uid("dir1SEbpRuG1dcpTRGOvJw"), uid("dir2xaEwR2m3JHTiy7PWwA")
    ctl = controller(21)
    assert register(ctl, 1, dirs=(d1, d2)).reply.error_code == c.NONE
    view = ctl.view
    assert view.has_online_dir(1, d1) and view.has_online_dir(1, d2)
    assert view.has_online_dir(1, UNASSIGNED) and view.has_online_dir(1, MIGRATING)
    assert not view.has_online_dir(1, uid("otherAA1QFK4U1GWzkjZ5A"))
    assert not view.has_online_dir(77, uid("8xVRVs6UQHGVonA9SRYseQ"))
    assert not view.has_online_dir(1, LOST)


def test_testDefaultDir():
    ctl = controller(21, RegisterBroker(broker_id=1, incarnation_id=uid("i1"), broker_epoch=100, log_dirs=()))
    single = uid("singleOnlineDirectoryA")
    assert register(ctl, 2, dirs=(single,), incarnation="i2").reply.error_code == c.NONE
    assert register(ctl, 3, dirs=(uid("s4fRm"), uid("Ubtx")), incarnation="i3").reply.error_code == c.NONE
    default = default_dir_provider(ctl.view)
    assert (default(1), default(2), default(3), default(4)) == (MIGRATING, single, UNASSIGNED, UNASSIGNED)


@pytest.mark.parametrize("new_incarnation_id", [False, True])
def test_testReRegistrationAndBrokerEpoch(new_incarnation_id):
    """The epoch is the registration's offset (Kafka passes the next write offset): a new
    incarnation gets a new one, the same incarnation keeps its own (KAFKA-16952)."""
    ctl = controller(21)
    first = register(ctl, 1, dirs=(uid("Vv1gzkM2QpuE-PPrIc6XEw"),), incarnation="mISEfEFwQIuaD1gKCc5tzQ")
    ctl.append([FeatureLevel(name="noop.feature", feature_level=0)] * 10)  # the log moves on
    again = register(
        ctl,
        1,
        dirs=(uid("Vv1gzkM2QpuE-PPrIc6XEw"),),
        incarnation="07OOcU7MQFeSmGAFPP2Zww" if new_incarnation_id else "mISEfEFwQIuaD1gKCc5tzQ",
    )
    reg = ctl.view.brokers[1]
    if new_incarnation_id:
        assert reg.incarnation_id == uid("07OOcU7MQFeSmGAFPP2Zww") and reg.epoch == again.reply.broker_epoch
        assert reg.epoch > first.reply.broker_epoch
    else:
        assert reg.incarnation_id == uid("mISEfEFwQIuaD1gKCc5tzQ") and reg.epoch == first.reply.broker_epoch
