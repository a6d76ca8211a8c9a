"""Kafka's ``QuorumControllerTest`` (org.apache.kafka.controller), its eligible-leader-replicas
cases, read at apache/kafka tag 4.1.1 (be816b82; unchanged in 4.2.0-rc1 but for line numbers),
through kraftlake's controller: the deciders (``statemachine.kraft.decider``) and the reducer.

Kafka's ``QuorumControllerTestEnv`` runs a controller on a local Raft log; here a ``Controller``
folds what each command decided. Its ``activeController()`` activation is the ``Activate``
command (Kafka's ``ActivationRecordsGenerator``), with the bootstrap the test gives; the test
environment adds ``eligible.leader.replicas.version`` 1 to it when the metadata.version supports
ELR (``QuorumControllerTestEnv``), and so does ``activated`` here. Registration is the
``RegisterBroker`` command, a heartbeat unfences, a session that times out is ``ExpireSession``
(in broker order: Kafka's timer fences them in an order the cases do not depend on), a
``ConfigRecord`` the test replays directly is appended as is, ``incrementalAlterConfigs`` is
``AlterConfig``.

The class's other methods test the controller's runtime (its event queue, timeouts, snapshots,
the Raft client, metrics) rather than eligible leader replicas, and are outside this port."""

from __future__ import annotations

from kraftlake.records.kraft import Config, FeatureLevel
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.brokers import supported_features
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.replication import ELR_FEATURE, MIN_INSYNC_REPLICAS
from tests.helpers.kraft import strip, uid

MV_4_0_IV0, MV_4_0_IV1 = 22, 23
TOPIC, BROKER = 2, 4


def activated(mv: int, *extra: FeatureLevel) -> Controller:
    """A controller activated on an empty log with Kafka's ``BootstrapMetadata.fromVersion(mv)``
    plus ``extra`` features, as ``QuorumControllerTestEnv`` does (ELR 1 where ``mv`` has it)."""
    bootstrap = [FeatureLevel(name="metadata.version", feature_level=mv), *extra]
    if mv >= MV_4_0_IV1 and not any(f.name == ELR_FEATURE for f in extra):
        bootstrap.append(FeatureLevel(name=ELR_FEATURE, feature_level=1))
    ctl = Controller()
    d = ctl.handle(c.Activate(bootstrap=tuple(bootstrap)))
    assert d.reply.error_code == c.NONE, d.reply
    return ctl


def register(ctl: Controller, broker: int, log_dir: str, *, previous_epoch: int = -1, session_alive=None) -> int:
    """A new incarnation of ``broker`` registers; ``previous_epoch`` is the one its clean-shutdown
    file names (-1: none, an unclean shutdown); ``session_alive`` False says the old one's
    session timed out. Returns its new broker epoch."""
    d = ctl.handle(
        c.RegisterBroker(
            broker_id=broker,
            incarnation_id=uid(f"incarnation-{broker}-{len(ctl.records)}"),
            log_dirs=(log_dir,),
            features=supported_features(ctl.view.metadata_version),
            previous_broker_epoch=previous_epoch,
            old_session_alive=session_alive,
        )
    )
    assert d.reply.error_code == c.NONE, d.reply
    return d.reply.broker_epoch


def heartbeat(ctl: Controller, brokers, epochs: dict[int, int]) -> None:
    """``sendBrokerHeartbeatToUnfenceBrokers``: a heartbeat from each, caught up."""
    for b in brokers:
        ctl.handle(c.Heartbeat(broker_id=b, broker_epoch=epochs[b], current_metadata_offset=ctl.view.offset))


def cluster(mv: int, brokers=(1, 2, 3), *topics: str) -> tuple[Controller, dict[int, int], dict[int, str], dict]:
    """The cases' start: ``brokers`` registered (fenced), unfenced by a heartbeat, and ``topics``
    created with one partition on all of them. Returns the controller, the broker epochs, the
    brokers' log directories and the topic ids by name."""
    ctl = activated(mv)
    dirs = {b: uid(f"logdir-{b}") for b in brokers}
    epochs = {b: register(ctl, b, dirs[b]) for b in brokers}
    assert all(ctl.view.brokers[b].fenced for b in brokers)
    heartbeat(ctl, brokers, epochs)
    assert not any(ctl.view.brokers[b].fenced for b in brokers)
    ids = {}
    for name in topics:
        d = ctl.handle(c.CreateTopic(name=name, partitions=1, replication_factor=len(brokers)))
        assert d.reply.error_code == c.NONE, d.reply
        ids[name] = d.reply.topic_id
    return ctl, epochs, dirs, ids


def test_testElrEnabledByDefault():
    """A cluster bootstrapped with ELR on gets a cluster-level ``min.insync.replicas`` (4.1,
    KIP-966 on by default: the activation writes the controller's static value)."""
    ctl = activated(MV_4_0_IV1, FeatureLevel(name=ELR_FEATURE, feature_level=1))
    assert ctl.view.config(BROKER, "", MIN_INSYNC_REPLICAS) == "1"
    assert ctl.view.features[ELR_FEATURE] == 1 and ctl.view.transaction is None


def test_testUncleanShutdownBrokerElrEnabled():
    ctl, epochs, dirs, ids = cluster(MV_4_0_IV1, (1, 2, 3), "foo")
    foo = ids["foo"]
    ctl.append([Config(resource_type=TOPIC, resource_name="foo", name=MIN_INSYNC_REPLICAS, value="2")])
    # Fence all the brokers.
    for b in (1, 2, 3):
        ctl.handle(c.ExpireSession(broker_id=b))
    assert all(ctl.view.brokers[b].fenced for b in (1, 2, 3))
    p = ctl.view.partition(foo, 0)
    assert (len(p.last_known_elr), p.isr, p.leader, len(p.eligible_leader_replicas)) == (1, (), -1, 2)
    last_known_elr = p.last_known_elr
    # The last known ELR holds the last known leader.
    unclean = last_known_elr[0]
    (to_lead,) = set(p.eligible_leader_replicas) - {unclean}
    # An unclean shutdown removes the broker from the ELR; it stays in the last known ELR.
    epochs[unclean] = register(ctl, unclean, dirs[unclean])
    p = ctl.view.partition(foo, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((to_lead,), last_known_elr)
    # A clean shutdown (4.1: the registration names its previous epoch) removes nobody.
    epochs[to_lead] = register(ctl, to_lead, dirs[to_lead], previous_epoch=epochs[to_lead])
    p = ctl.view.partition(foo, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((to_lead,), last_known_elr)
    # Unfenced, the last one in the ELR is elected.
    heartbeat(ctl, [to_lead], epochs)
    assert not ctl.view.brokers[to_lead].fenced
    p = ctl.view.partition(foo, 0)
    assert (p.isr, p.eligible_leader_replicas, p.last_known_elr, p.leader) == ((to_lead,), (), (), to_lead)


def test_testUncleanShutdownElrDisabled():
    """At 4.0-IV0 (no ELR) an unclean shutdown is handled as if the broker were fenced: it leaves
    the ISR and a new leader is elected, until the last one standing."""
    ctl, epochs, dirs, ids = cluster(MV_4_0_IV0, (1, 2, 3), "foo")
    foo = ids["foo"]
    # Kafka sleeps a session timeout with its fencing timer set to 15 s: every session has timed
    # out and no broker is fenced, which the log cannot say and the command does.
    for i in range(3):
        p = ctl.view.partition(foo, 0)
        assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())
        last_standing = i == 2
        previous_leader, previous_epoch = p.leader, p.leader_epoch
        # An unclean shutdown removes the broker from the ISR and moves the leadership.
        register(ctl, previous_leader, uid(f"new-logdir-{previous_leader}-{i}"), session_alive=False)
        p = ctl.view.partition(foo, 0)
        assert p.leader != previous_leader and p.leader_epoch != previous_epoch
        if last_standing:
            assert (p.isr, p.leader) == ((previous_leader,), -1)
        else:
            assert previous_leader not in p.isr


def test_testMinIsrUpdateWithElr():
    ctl, epochs, _, ids = cluster(MV_4_0_IV1, (1, 2, 3), "foo", "bar")
    ctl.append([Config(resource_type=BROKER, resource_name="", name=MIN_INSYNC_REPLICAS, value="2")])
    # Fence brokers 2 and 3; broker 1 keeps heartbeating.
    for b in (2, 3):
        heartbeat(ctl, [1], epochs)
        ctl.handle(c.ExpireSession(broker_id=b))
    heartbeat(ctl, [1], epochs)
    assert [ctl.view.brokers[b].fenced for b in (1, 2, 3)] == [False, True, True]
    p = ctl.view.partition(ids["foo"], 0)
    assert p.isr == (1,) and len(p.eligible_leader_replicas) == 1  # which one is not determined
    # Lowering the topic's min ISR to 1 clears its ELR fields.
    d = ctl.handle(c.AlterConfig(resource_type=TOPIC, resource_name="foo", name=MIN_INSYNC_REPLICAS, value="1"))
    assert [type(r).__name__ for r in strip(d.records)] == ["Config", "ClearElr"]
    p = ctl.view.partition(ids["foo"], 0)
    assert (p.eligible_leader_replicas, p.isr) == ((), (1,))
    # So does the cluster-level config, for the other topic.
    p = ctl.view.partition(ids["bar"], 0)
    assert p.isr == (1,) and len(p.eligible_leader_replicas) == 1
    d = ctl.handle(c.AlterConfig(resource_type=BROKER, resource_name="", name=MIN_INSYNC_REPLICAS, value="1"))
    assert [type(r).__name__ for r in strip(d.records)] == ["Config", "ClearElr"]
    p = ctl.view.partition(ids["bar"], 0)
    assert (p.eligible_leader_replicas, p.isr) == ((), (1,))
