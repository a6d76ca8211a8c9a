"""Kafka's ``ClusterControlManagerTest`` (org.apache.kafka.controller), case by case: registration
against the registration decider (``statemachine.kraft.brokers.register``), replay against the
reducer, ``checkBrokerEpoch`` against the heartbeat decider's epoch check, placement against
``CreateTopic``; the view and ``default_dir_provider`` for the rest. Of the class's 19 methods
(at apache/kafka tag 4.2.0-rc1, 6eef6636; 4.1 added the two DuplicateBrokerRegistration cases),
16 are here; three cannot apply:

- testRegistrationWithIncorrectClusterId: the cluster id is in meta.properties, not in the log,
  and kraftlake's RegisterBroker command carries none to compare.
- testRegisterControlWithOlderMetadataVersion: controller registration is not decided here (the
  reducer replays RegisterController records; no decider writes them).
- testBrokerContactTimesAreUpdatedOnClusterControlActivation: contact times are the heartbeat
  manager's clock state, which is not in the log."""

from __future__ import annotations

import msgspec
import pytest

from kraftlake.records.kraft import (
    FENCE,
    LOST,
    MIGRATING,
    UNASSIGNED,
    UNFENCE,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChange,
    FeatureLevel,
    FenceBroker,
    RegisterBroker,
    UnfenceBroker,
    UnregisterBroker,
)
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft import reducer
from kraftlake.statemachine.kraft.brokers import supported_features
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.directory_ids import sorted_dirs
from kraftlake.statemachine.kraft.features import MV_4_1_IV1, MV_4_2_IV1
from kraftlake.statemachine.kraft.replication import default_dir_provider
from tests.helpers.kraft import uid

DIRS = ("yJGxmjfbQZSVFAlNM3uXZg", "Mj3CW3OSRi29cFeNJlXuAQ")


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
    # Re-registering broker 0 with the same directories is fine (Kafka 4.1: a new incarnation).
    assert register(ctl, 0, incarnation="i0-again").reply.error_code == c.NONE
    for dirs, message in [
        ((), "No directories specified in request"),
        (("TyNK6XSSQJaJc2q9uflNHg", DIRS[1]), "Broker 0 is already registered with directory Mj3CW3OSRi29cFeNJlXuAQ"),
        (("TyNK6XSSQJaJc2q9uflNHg", UNASSIGNED), "Reserved directory ID in request"),
        (("aR6lssMrSeyXRf65hiUovQ",) * 2, "Duplicate directory ID in request"),
    ]:
        reply = register(ctl, 1, dirs=dirs, incarnation="i1").reply
        assert (reply.error_code, reply.message) == (c.INVALID_REGISTRATION, message)


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


# -- replay (ClusterControlManager.replay is the reducer; checkBrokerEpoch is the heartbeat's check) ---

PLAINTEXT = BrokerEndpoint(name="PLAINTEXT", host="example.com", port=9092, security_protocol=0)


def broker_record(broker, *, epoch=100, offset=None, **fields) -> RegisterBroker:
    fields.setdefault("incarnation_id", uid(f"incarnation-{broker}"))
    fields.setdefault("end_points", (PLAINTEXT,))
    return RegisterBroker(broker_id=broker, broker_epoch=epoch, offset=offset, **fields)


def epoch_error(ctl: Controller, broker: int, epoch: int) -> int:
    """Kafka's ``checkBrokerEpoch``: a heartbeat with the wrong epoch is refused as stale."""
    return ctl.handle(c.Heartbeat(broker_id=broker, broker_epoch=epoch, current_metadata_offset=-1)).reply.error_code


def unfenced(view, broker) -> bool:
    reg = view.brokers.get(broker)
    return reg is not None and not reg.fenced


def in_controlled_shutdown(view, broker) -> bool:
    reg = view.brokers.get(broker)
    return reg is not None and reg.in_controlled_shutdown


@pytest.mark.parametrize("mv", [1, 6])  # 3.0-IV1, 3.3-IV2
def test_testReplay(mv):
    ctl = controller(mv)
    assert not unfenced(ctl.view, 0)
    ctl.append([broker_record(1)])
    assert epoch_error(ctl, 1, 100) == c.NONE
    assert epoch_error(ctl, 1, 101) == c.STALE_BROKER_EPOCH
    assert epoch_error(ctl, 2, 100) == c.STALE_BROKER_EPOCH
    assert not unfenced(ctl.view, 0) and not unfenced(ctl.view, 1)
    if mv < 6:
        ctl.append([UnfenceBroker(id=1, epoch=100)])
    else:
        ctl.append([BrokerRegistrationChange(version=0, broker_id=1, broker_epoch=100, fenced=UNFENCE)])
    assert not unfenced(ctl.view, 0) and unfenced(ctl.view, 1)
    if mv < 6:
        ctl.append([FenceBroker(id=1, epoch=100)])
    else:
        ctl.append([BrokerRegistrationChange(version=0, broker_id=1, broker_epoch=100, fenced=FENCE)])
    assert not unfenced(ctl.view, 0) and not unfenced(ctl.view, 1)


def test_testReplayRegisterBrokerRecord():
    """Kafka replays the three registrations at offset 100; a log's offsets grow, so the repeats
    land at 101 and 102, and the registration offset is the last one's."""
    view = reducer.replay([FeatureLevel(name="metadata.version", feature_level=21)])
    assert not unfenced(view, 0) and not in_controlled_shutdown(view, 0)
    reducer.apply(view, broker_record(0, offset=100, fenced=True, in_controlled_shutdown=True))
    assert not unfenced(view, 0) and in_controlled_shutdown(view, 0)
    reducer.apply(view, broker_record(0, offset=101, fenced=True, in_controlled_shutdown=False))
    assert not unfenced(view, 0) and not in_controlled_shutdown(view, 0)
    assert view.brokers[0].registered_at == 101
    reducer.apply(view, broker_record(0, offset=102, fenced=False))
    assert unfenced(view, 0) and not in_controlled_shutdown(view, 0)


def test_testReplayBrokerRegistrationChangeRecord():
    view = reducer.replay([FeatureLevel(name="metadata.version", feature_level=21)])
    assert not unfenced(view, 0) and not in_controlled_shutdown(view, 0)
    reducer.apply(view, broker_record(0, offset=100, fenced=False))
    assert unfenced(view, 0) and not in_controlled_shutdown(view, 0)
    reducer.apply(view, BrokerRegistrationChange(broker_id=0, broker_epoch=100, in_controlled_shutdown=1))
    assert unfenced(view, 0) and in_controlled_shutdown(view, 0)
    reducer.apply(view, BrokerRegistrationChange(broker_id=0, broker_epoch=100, fenced=UNFENCE))
    assert unfenced(view, 0) and in_controlled_shutdown(view, 0)


@pytest.mark.parametrize(("mv", "expected_version"), [(6, 0), (7, 1), (17, 3), (MV_4_1_IV1, 3)])
def test_testRegisterBrokerRecordVersion(mv, expected_version):
    """Kafka hands ``registerBroker`` an empty finalized-feature map, so a broker that sends no
    ranges is recorded with metadata.version [1, 1]. kraftlake reads the finalized features from
    the log, which holds ``metadata.version``; the broker sends its release's ranges (level 1 alone
    would be refused) and the record carries them."""
    ctl = controller(mv)
    dirs = ("63k9SN1nQOS0dFHSCIMA0A", "Vm1MjsOCR1OjDDydOsDbzg") if mv >= 17 else ()
    first = ctl.view.offset + 1
    d = ctl.handle(
        c.RegisterBroker(
            broker_id=0, incarnation_id="0H4fUu1xQEKXFYwB1aBjhg", log_dirs=dirs, features=supported_features(mv)
        )
    )
    assert [msgspec.structs.replace(r, offset=None) for r in d.records] == [
        RegisterBroker(
            version=expected_version,
            broker_epoch=first,
            broker_id=0,
            rack=None,
            incarnation_id="0H4fUu1xQEKXFYwB1aBjhg",
            fenced=True,
            log_dirs=sorted_dirs(dirs),
            features=supported_features(mv),
            in_controlled_shutdown=False,
        )
    ]


def test_testUnregister():
    view = reducer.replay([FeatureLevel(name="metadata.version", feature_level=21)])
    record = broker_record(1, offset=100, incarnation_id="fPZv1VBsRFmnlRvmGcOW9w", rack="arack")
    reducer.apply(view, record)
    reg = view.brokers[1]
    assert (reg.id, reg.epoch, reg.incarnation_id, reg.end_points, reg.rack) == (
        1,
        100,
        "fPZv1VBsRFmnlRvmGcOW9w",
        (PLAINTEXT,),
        "arack",
    )
    assert reg.fenced and not reg.in_controlled_shutdown
    assert reg.registered_at == 100
    reducer.apply(view, UnregisterBroker(broker_id=1, broker_epoch=100))
    assert 1 not in view.brokers


@pytest.mark.parametrize("num_usable_brokers", [3, 10])
def test_testPlaceReplicas(num_usable_brokers):
    """Kafka places through its striped placer; kraftlake through ``CreateTopic``'s free-disk
    weighting. The Java test's assertions hold for both: 100 placements of one partition with
    three replicas, each on distinct registered, unfenced brokers."""
    ctl = controller(1)
    for i in range(num_usable_brokers):
        ctl.append([broker_record(i), UnfenceBroker(id=i, epoch=100)])
    assert all(unfenced(ctl.view, i) for i in range(num_usable_brokers))
    for i in range(100):
        d = ctl.handle(c.CreateTopic(name=f"t{i}", partitions=1, replication_factor=3))
        assert d.reply.error_code == c.NONE
        [replicas] = d.reply.assignments
        assert all(0 <= r < num_usable_brokers for r in replicas)
        assert len(set(replicas)) == 3


@pytest.mark.parametrize("mv", [6, 7])  # 3.3-IV2, 3.3-IV3
def test_testRegistrationsToRecords(mv):
    """kraftlake writes no registration back as a RegisterBroker record (its snapshots are its own
    image), so Kafka's dropping of the in-controlled-shutdown flag below 3.3-IV3 never arises;
    the replayed registrations the records would be written from are checked instead."""
    ctl = controller(mv)
    assert not unfenced(ctl.view, 0)
    ctl.append(
        [broker_record(i, end_points=(msgspec.structs.replace(PLAINTEXT, port=9092 + i),), rack=None) for i in range(3)]
    )
    ctl.append([UnfenceBroker(id=i, epoch=100) for i in range(2)])
    ctl.append([BrokerRegistrationChange(broker_id=0, broker_epoch=100, in_controlled_shutdown=1)])
    regs = ctl.view.brokers
    assert [(regs[i].epoch, regs[i].end_points[0].port, regs[i].fenced) for i in range(3)] == [
        (100, 9092, False),
        (100, 9093, False),
        (100, 9094, True),
    ]
    assert [regs[i].in_controlled_shutdown for i in range(3)] == [True, False, False]


def test_testRegistrationWithUnsupportedKraftVersion():
    """Kafka's QuorumController adds the Raft ``kraft.version`` to the finalized features it hands
    ``registerBroker``; kraftlake's decider reads them from the log, so the log carries it here."""
    ctl = controller(21, FeatureLevel(name="kraft.version", feature_level=1))  # 3.9-IV0
    mv39 = mv_range(21, 21)
    kraft = "kraft.version"
    message = (
        "Unable to register because the broker does not support finalized version 1 of kraft.version."
        " The broker wants a version between 0 and 0, inclusive."
    )
    reply = register(ctl, features=(mv39,)).reply
    assert (reply.error_code, reply.message) == (c.UNSUPPORTED_VERSION, message)
    zero = BrokerFeature(name=kraft, min_supported_version=0, max_supported_version=0)
    reply = register(ctl, features=(mv39, zero)).reply
    assert (reply.error_code, reply.message) == (c.UNSUPPORTED_VERSION, message)
    one = BrokerFeature(name=kraft, min_supported_version=1, max_supported_version=1)
    assert register(ctl, features=(mv39, one)).reply.error_code == c.NONE


def test_a_live_incarnation_is_refused_before_the_new_one_s_directories_are_checked():
    """``registerBroker`` checks the old incarnation's session first: a new incarnation with an
    invalid directory list, while the old one is live (unfenced here), is a duplicate
    registration, not an invalid one."""
    ctl = controller(21)
    assert register(ctl, 1, dirs=(uid("d1"),), incarnation="old").reply.error_code == c.NONE
    ctl.append([BrokerRegistrationChange(broker_id=1, broker_epoch=ctl.view.brokers[1].epoch, fenced=UNFENCE)])
    reply = register(ctl, 1, dirs=(), incarnation="new").reply
    assert (reply.error_code, reply.message) == (
        c.DUPLICATE_BROKER_REGISTRATION,
        "Another broker is registered with that broker id.",
    )
    ctl.append([BrokerRegistrationChange(broker_id=1, broker_epoch=ctl.view.brokers[1].epoch, fenced=FENCE)])
    assert register(ctl, 1, dirs=(), incarnation="new").reply.error_code == c.INVALID_REGISTRATION


@pytest.mark.parametrize("mv", [8, 21, MV_4_1_IV1])  # 3.4-IV0 (ZK migration), 3.9-IV0, 4.1-IV1
def test_a_zookeeper_broker_is_not_registered(mv):
    """``registerBroker`` refuses a ZooKeeper broker (Kafka 4.x always; 3.9 unless the controller is
    configured for the migration, which the log does not say), and writes nothing."""
    ctl = controller(mv)
    d = ctl.handle(
        c.RegisterBroker(
            broker_id=0,
            incarnation_id=uid("zk"),
            log_dirs=DIRS,
            features=supported_features(mv),
            is_migrating_zk_broker=True,
        )
    )
    assert (d.records, d.reply.error_code, d.reply.message) == (
        (),
        c.BROKER_ID_NOT_REGISTERED,
        "Controller does not support registering ZK brokers.",
    )


@pytest.mark.parametrize("is_clean_shutdown", [True, False])
def test_a_new_incarnation_takes_a_new_epoch_after_a_clean_or_an_unclean_shutdown(is_clean_shutdown):
    """KAFKA-18635's case (Kafka 4.0): whatever the previous epoch the broker reports (its own
    registration's: a clean shutdown; another: unclean), a new incarnation is registered with a
    new epoch and out of controlled shutdown."""
    ctl = controller(MV_4_1_IV1, FeatureLevel(name="eligible.leader.replicas.version", feature_level=1))
    dirs = ("Vv1gzkM2QpuE-PPrIc6XEw",)
    first = register(ctl, 1, dirs=dirs, incarnation="mISEfEFwQIuaD1gKCc5tzQ").reply.broker_epoch
    ctl.append([BrokerRegistrationChange(broker_id=1, broker_epoch=first, in_controlled_shutdown=1)])
    assert ctl.view.brokers[1].in_controlled_shutdown
    again = ctl.handle(
        c.RegisterBroker(
            broker_id=1,
            incarnation_id=uid("07OOcU7MQFeSmGAFPP2Zww"),
            log_dirs=dirs,
            features=supported_features(MV_4_1_IV1),
            previous_broker_epoch=first if is_clean_shutdown else first - 1,
        )
    )
    reg = ctl.view.brokers[1]
    assert reg.incarnation_id == uid("07OOcU7MQFeSmGAFPP2Zww") and not reg.in_controlled_shutdown
    assert reg.epoch == again.reply.broker_epoch > first


def _register_again(ctl, broker: int, log_dir: str, incarnation: str, *, session_alive=None) -> c.Decision:
    return ctl.handle(
        c.RegisterBroker(
            broker_id=broker,
            incarnation_id=uid(incarnation),
            log_dirs=(log_dir,),
            features=(mv_range(7, MV_4_2_IV1),),
            old_session_alive=session_alive,
        )
    )


def test_testDuplicateBrokerRegistrationWithActiveOldBroker():
    """While the old incarnation's session is valid a new one is refused; once it has expired the
    new one registers. The session is the heartbeat manager's clock state: unless the command
    says, an unfenced registration stands for a live session."""
    ctl = controller(MV_4_2_IV1)  # LATEST_PRODUCTION at 4.2
    ctl.append(
        [RegisterBroker(broker_id=0, broker_epoch=100, incarnation_id=uid("old"), log_dirs=(DIRS[1],), fenced=False)]
    )
    assert ctl.view.brokers[0].fenced is False
    # While the session is still valid for the old broker, a duplicate fails.
    d = _register_again(ctl, 0, "TyNK6XSSQJaJc2q9uflNHg", "0H4fUu1xQEKXFYwB1aBjhg")
    assert (d.records, d.reply.error_code) == ((), c.DUPLICATE_BROKER_REGISTRATION)
    # Once it has expired, the new registration succeeds.
    d = _register_again(ctl, 0, "TyNK6XSSQJaJc2q9uflNHg", "0H4fUu1xQEKXFYwB1aBjhg", session_alive=False)
    assert d.reply.error_code == c.NONE and ctl.view.brokers[0].incarnation_id == uid("0H4fUu1xQEKXFYwB1aBjhg")


def test_testDuplicateBrokerRegistrationWithInactiveBroker():
    """A fenced broker has no session: a new incarnation registers. A broker in controlled
    shutdown still heartbeats: a new incarnation is refused."""
    ctl = controller(MV_4_2_IV1)
    ctl.append(
        [
            RegisterBroker(broker_id=0, broker_epoch=100, incarnation_id=uid("b0"), log_dirs=(DIRS[1],), fenced=True),
            RegisterBroker(
                broker_id=1,
                broker_epoch=200,
                incarnation_id=uid("b1"),
                log_dirs=("TyNK6XSSQJaJc2q9uflNHg",),
                fenced=False,
                in_controlled_shutdown=True,
            ),
        ]
    )
    assert _register_again(ctl, 0, DIRS[0], "0H4fUu1xQEKXFYwB1aBjhg").reply.error_code == c.NONE
    d = _register_again(ctl, 1, "b66ybsWIQoygs01vdjH07A", "vZKYST0pSA2HO5x_6hoO2Q")
    assert (d.records, d.reply.error_code) == ((), c.DUPLICATE_BROKER_REGISTRATION)
