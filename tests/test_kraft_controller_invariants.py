"""A stateful model of a KRaft cluster (hypothesis ``RuleBasedStateMachine``) driving the in-memory
``Controller``: brokers register (1-3 real directories each), heartbeat (fence / shut down / catch
up / report failed directories, cumulatively), crash and come back as new incarnations (sometimes
with fewer disks), get their sessions expired or are unregistered; topics are created by manual
assignment and by weighted placement; brokers report where their replicas live
(AssignReplicasToDirs, including LOST and ids nobody has) and leaders change their ISR
(AlterPartition, with correct and with stale epochs).

After every step the controller view (built by the reducer from the emitted records only) must
satisfy what Kafka's controller keeps true: leader in ISR, ISR a non-empty subset of the replicas,
one directory per replica, a leader is registered, unfenced and on an online directory; and the
epochs move exactly as Kafka's ``PartitionRegistration.merge`` moves them for the PartitionChange
records of the step (partition epoch +1 per record, leader epoch +1 iff it sets Leader), Leader
being set only when ``PartitionChangeBuilder`` elects another leader (no reassignment here, and no
forced bump on ISR shrink from 3.6-IV0 on). Deciding is pure (the view's hash and indexes are
unchanged by ``decide``), replaying the whole log from scratch gives the same state hash, and a
rejected command (non-zero error code) writes nothing.

Two Kafka-faithful exceptions to "a leader's directory is online" exist, both because the records
of one controller operation are computed from the state before it (Kafka's
``ReplicationControlManager.processBrokerHeartbeat`` and ``handleAssignReplicasToDirs``): they
are pinned by ``test_unfence_and_offline_dir_in_one_heartbeat`` and
``test_assign_to_offline_dir_elects_on_old_dir`` in test_kraft_kafka_quirks.py, and the state
machine allows exactly those (the partition, leader and leader epoch they produced, until
leadership moves or the directory is online again) and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kraftlake.records.kraft import (
    LEADER_UNCHANGED,
    LOST,
    LRS_RECOVERED,
    LRS_RECOVERING,
    MIGRATING,
    UNASSIGNED,
    BrokerRegistrationChange,
    Partition,
    PartitionChange,
    RegisterBroker,
    UnregisterBroker,
)
from kraftlake.records.observations import AssignReplicasToDirsRequest, DirectoryReplicas, TopicPartitions
from kraftlake.records.types import is_reserved
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft import replay
from kraftlake.statemachine.kraft.brokers import supported_features
from kraftlake.statemachine.kraft.controller import Controller
from kraftlake.statemachine.kraft.decider import decide
from kraftlake.statemachine.kraft.directory_ids import is_online, sorted_dirs, uuid_sort_key

from helpers.kraft import dir_id, incarnation_id, new_controller, uid, without_offsets
from helpers.tiers import examples

BROKER_IDS = range(1, 7)
UNCLEAN = "unclean.leader.election.enable"


def _indexes(view) -> tuple:
    return (
        {b: frozenset(s) for b, s in view.isr_index.items()},
        {d: frozenset(s) for d, s in view.dir_index.items()},
        {b: frozenset(s) for b, s in view.replica_index.items()},
        frozenset(view.leaderless),
        dict(view.dir_owner),
    )


def _is_noop(r: PartitionChange) -> bool:
    return (
        r.isr is None
        and r.leader == LEADER_UNCHANGED
        and r.replicas is None
        and r.removing_replicas is None
        and r.adding_replicas is None
        and r.leader_recovery_state == -1
        and r.eligible_leader_replicas is None
        and r.last_known_elr is None
        and r.assignment is None
    )


class StepChecker:
    """Runs one command through ``decide`` and ``Controller.handle`` and checks what a single step
    must satisfy (purity, determinism, no records on error, the epoch rules, replay equality)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def run(self, cmd: c.Command) -> c.Decision:
        ctl = self.controller
        view = ctl.view
        before = {p.key: p for p in view.iter_partitions()}
        hash0, idx0, offset0 = view.state_hash(), _indexes(view), view.offset

        # decide is pure: same view (hash and indexes) after deciding.
        pure = decide(view, cmd, ctl.config)
        assert view.state_hash() == hash0, f"decide mutated the view for {cmd!r}"
        assert _indexes(view) == idx0, f"decide mutated the view's indexes for {cmd!r}"

        decision = ctl.handle(cmd)
        # Deterministic: the controller decided the same thing.
        assert without_offsets(decision.records) == without_offsets(pure.records)
        assert decision.reply == pure.reply
        # Offsets follow the view.
        assert [r.offset for r in decision.records] == list(range(offset0 + 1, offset0 + 1 + len(decision.records)))
        if decision.reply.error_code not in (c.NONE, c.NEW_LEADER_ELECTED):
            # NEW_LEADER_ELECTED is the one error Kafka answers *with* a record (AlterPartition).
            assert decision.records == (), f"{cmd!r} failed with {decision.reply!r} but wrote records"
            assert ctl.view.state_hash() == hash0
        self._check_epochs(before, decision.records)
        return decision

    def _check_epochs(self, before: dict, records) -> None:
        """The epochs over the step's records, against a shadow of the pre-step partitions: a new
        partition starts at 0/0 (Kafka's ``ReplicationControlManager.buildPartitionRegistration``),
        a change moves them as ``PartitionRegistration.merge`` does."""
        shadow = {k: (p.leader_epoch, p.partition_epoch) for k, p in before.items()}
        for r in records:
            if isinstance(r, Partition):
                key = (r.topic_id, r.partition_id)
                assert key not in before, f"PartitionRecord for existing partition {key}"
                assert (r.leader_epoch, r.partition_epoch) == (0, 0), "new partitions start at epochs 0/0"
                shadow[key] = (0, 0)
            elif isinstance(r, PartitionChange):
                key = (r.topic_id, r.partition_id)
                assert key in shadow, f"PartitionChange for unknown partition {key}"
                assert not _is_noop(r), f"no-op PartitionChange emitted: {r!r}"
                if r.leader_recovery_state == LRS_RECOVERING:
                    event("unclean election")
                if r.leader == -1:
                    event("partition left without a leader")
                le, pe = shadow[key]
                if r.leader != LEADER_UNCHANGED:
                    le += 1
                    if key in before:
                        # No reassignment and MV >= 3.6-IV0, so no forced bump of PartitionChangeBuilder:
                        # Leader is only set when the elected leader differs from the one the decider saw.
                        assert r.leader != before[key].leader, f"forced leader-epoch bump: {r!r}"
                shadow[key] = (le, pe + 1)
        after = {p.key: p for p in self.controller.view.iter_partitions()}
        assert set(after) == set(shadow)
        for key, p in after.items():
            assert (p.leader_epoch, p.partition_epoch) == shadow[key], (
                f"{key} epochs {(p.leader_epoch, p.partition_epoch)}, expected {shadow[key]}"
            )


@dataclass
class BrokerProcess:
    """One running broker process (one incarnation) as the broker sees itself."""

    broker_id: int
    incarnation: int
    dirs: tuple[str, ...]
    """The directories it started with (it registers the ones that are online)."""
    offline: set[str] = field(default_factory=set)
    """Directories failed since the process started; every heartbeat carries all of them."""
    alive: bool = True
    shutting_down: bool = False
    """Once a broker asks for a controlled shutdown it keeps asking until it stops
    (BrokerLifecycleManager.beginControlledShutdown is one-way)."""

    @property
    def incarnation_id(self) -> str:
        return incarnation_id(self.broker_id, self.incarnation)


class KraftCluster(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.controller = new_controller()
        self.checker = StepChecker(self.controller)
        self.procs: dict[int, BrokerProcess] = {}
        self.incarnations: dict[int, int] = {}
        self.topic_count = 0
        # Leaders left on an offline directory by the Kafka-faithful heartbeat quirk (see
        # test_unfence_and_offline_dir_in_one_heartbeat): partition -> (leader, leader epoch).
        self.quirk_leaders: dict[tuple[str, int], tuple[int, int]] = {}

    # -- helpers -------------------------------------------------------------------------------

    @property
    def view(self):
        return self.controller.view

    def run(self, cmd: c.Command) -> c.Decision:
        note(f"{type(cmd).__name__}: {cmd!r}")
        decision = self.checker.run(cmd)
        note(f"  -> {decision.reply!r}, {len(decision.records)} record(s)")
        for r in decision.records:
            note(f"     {r!r}")
        return decision

    def _start(self, b: int, dirs: tuple[str, ...]) -> BrokerProcess:
        n = self.incarnations.get(b, 0) + 1
        self.incarnations[b] = n
        proc = BrokerProcess(broker_id=b, incarnation=n, dirs=dirs)
        self.procs[b] = proc
        return proc

    def _register(self, proc: BrokerProcess) -> c.Decision:
        view = self.view
        existing = view.brokers.get(proc.broker_id)
        offset0 = view.offset
        dirs = tuple(d for d in proc.dirs if d not in proc.offline)
        d = self.run(
            c.RegisterBroker(
                broker_id=proc.broker_id,
                incarnation_id=proc.incarnation_id,
                log_dirs=dirs,
                features=supported_features(view.metadata_version),
            )
        )
        code = d.reply.error_code
        if not dirs:
            assert code == c.INVALID_REGISTRATION
            return d
        if existing is not None and existing.incarnation_id != proc.incarnation_id and not existing.fenced:
            assert code == c.DUPLICATE_BROKER_REGISTRATION  # registerBroker: the old session is alive
            return d
        assert code == c.NONE, d.reply
        (record,) = d.records
        assert isinstance(record, RegisterBroker)
        reg = self.view.brokers[proc.broker_id]
        assert reg.log_dirs == sorted_dirs(dirs)
        assert reg.incarnation_id == proc.incarnation_id
        if existing is not None and existing.incarnation_id == proc.incarnation_id:
            # Kafka's ClusterControlManager.registerBroker (KAFKA-16952): same incarnation keeps its
            # epoch and state.
            assert reg.epoch == existing.epoch == d.reply.broker_epoch
            assert (reg.fenced, reg.in_controlled_shutdown) == (existing.fenced, existing.in_controlled_shutdown)
        else:
            # registerBroker: a new incarnation is fenced, its epoch the offset of its first record
            # (the next write offset, which Kafka's QuorumController passes in).
            assert reg.epoch == d.reply.broker_epoch == offset0 + 1 == record.offset
            assert reg.fenced and not reg.in_controlled_shutdown
        return d

    def _removed_everywhere(self, b: int) -> None:
        """What Kafka's ``ReplicationControlManager.generateLeaderAndIsrUpdates`` leaves of a broker
        just fenced / shut down / unregistered: it leads nothing and is in no ISR, except as the last
        replica standing of a leaderless partition (without ELR the ISR is never emptied)."""
        for p in self.view.iter_partitions():
            assert p.leader != b, f"{p.key}: broker {b} still leads"
            if b in p.isr:
                assert p.isr == (b,) and p.leader == -1, f"{p.key}: {b} left in ISR {p.isr}"

    def _leads(self, b: int) -> bool:
        return any(p.leader == b for p in self.view.iter_partitions())

    def _live(self):
        return [b for b, p in sorted(self.procs.items()) if p.alive and b in self.view.brokers]

    def _all_dirs(self) -> list[str]:
        out = []
        for p in self.procs.values():
            out.extend(p.dirs)
        return sorted(set(out))

    def _some_dir(self, data, b: int) -> str:
        """A directory broker ``b`` might report: one of its own (online or failed), another
        broker's, LOST, or an id nobody has."""
        proc = self.procs.get(b)
        own = list(proc.dirs) if proc else []
        choices = []
        if own:
            choices += ["own", "own", "own"]
        others = [d for d in self._all_dirs() if d not in own]
        if others:
            choices.append("other")
        choices += ["lost", "unknown"]
        kind = data.draw(st.sampled_from(choices), label="dir kind")
        if kind == "own":
            return data.draw(st.sampled_from(own), label="own dir")
        if kind == "other":
            return data.draw(st.sampled_from(others), label="other broker's dir")
        if kind == "lost":
            return LOST
        return uid(f"unknown-dir-{data.draw(st.integers(0, 3), label='unknown dir')}")

    # -- setup ------------------------------------------------------------------------------------

    @initialize(data=st.data())
    def bootstrap(self, data) -> None:
        """Start with a few registered, unfenced brokers so the interesting rules fire early."""
        n = data.draw(st.integers(1, 5), label="initial brokers")
        for b in range(1, n + 1):
            ndirs = data.draw(st.integers(1, 3), label=f"dirs of {b}")
            proc = self._start(b, tuple(dir_id(b, i, 1) for i in range(ndirs)))
            self._register(proc)
        for b in range(1, n + 1):
            reg = self.view.brokers[b]
            d = self.run(c.Heartbeat(broker_id=b, broker_epoch=reg.epoch, current_metadata_offset=self.view.offset))
            assert not d.reply.is_fenced

    # -- broker lifecycle -------------------------------------------------------------------------

    @rule(b=st.sampled_from(BROKER_IDS), ndirs=st.integers(1, 3))
    def register_new_broker(self, b: int, ndirs: int) -> None:
        """A broker id that is not registered starts (first time, or after unregistration)."""
        if b in self.view.brokers:
            return
        n = self.incarnations.get(b, 0) + 1
        proc = self._start(b, tuple(dir_id(b, i, n) for i in range(ndirs)))
        self._register(proc)

    @rule(b=st.sampled_from(BROKER_IDS), data=st.data())
    def crash_and_restart(self, b: int, data) -> None:
        """The broker process dies and starts again as a new incarnation, keeping some of its
        disks (possibly fewer) and maybe getting a new one. Registering before the controller has
        fenced the old incarnation is refused while that one is unfenced (Kafka's
        ``ClusterControlManager.registerBroker`` throws DuplicateBrokerRegistrationException)."""
        old = self.procs.get(b)
        if old is None or b not in self.view.brokers:
            return
        old.alive = False
        n = self.incarnations[b] + 1
        kept = data.draw(st.lists(st.sampled_from(old.dirs), unique=True, max_size=len(old.dirs)), label="kept dirs")
        fresh = data.draw(st.integers(0 if kept else 1, 3 - len(kept)), label="new disks")
        dirs = tuple(kept) + tuple(dir_id(b, 10 + i, n) for i in range(fresh))
        proc = self._start(b, dirs)
        if data.draw(st.booleans(), label="register before expiry"):
            self._register(proc)  # refused if the old incarnation is unfenced
        if self.view.brokers.get(b) is not None and self.view.brokers[b].incarnation_id != proc.incarnation_id:
            self.expire_session(b)
            self._register(proc)
            self._check_state()

    @rule(b=st.sampled_from(BROKER_IDS))
    def retry_registration(self, b: int) -> None:
        """The broker re-sends its registration (lost response) before it has been unfenced."""
        proc = self.procs.get(b)
        reg = self.view.brokers.get(b)
        if proc is None or not proc.alive or reg is None or reg.incarnation_id != proc.incarnation_id:
            return
        if not reg.fenced:
            return
        self._register(proc)

    @rule(
        b=st.sampled_from(BROKER_IDS),
        want_fence=st.sampled_from([False] * 4 + [True]),
        want_shut_down=st.sampled_from([False] * 7 + [True]),
        caught_up=st.sampled_from([True] * 3 + [False]),
        epoch_error=st.sampled_from([False] * 9 + [True]),
        data=st.data(),
    )
    def heartbeat(self, b, want_fence, want_shut_down, caught_up, epoch_error, data) -> None:
        proc = self.procs.get(b)
        reg = self.view.brokers.get(b)
        if proc is None or not proc.alive:
            return
        want_shut_down = want_shut_down or proc.shutting_down
        if reg is None or epoch_error:
            epoch = (reg.epoch + data.draw(st.sampled_from([-1, 1]), label="epoch skew")) if reg else 0
            d = self.run(c.Heartbeat(broker_id=b, broker_epoch=epoch, current_metadata_offset=self.view.offset))
            assert d.reply.error_code == c.STALE_BROKER_EPOCH
            return
        # Disks fail; the broker reports every failed disk since it started (cumulative).
        if data.draw(st.integers(0, 4), label="disk failure?") == 0:
            proc.offline |= set(
                data.draw(
                    st.lists(st.sampled_from(proc.dirs), unique=True, min_size=1, max_size=len(proc.dirs)),
                    label="failing dirs",
                )
            )
        noise = data.draw(
            st.lists(st.sampled_from([LOST, UNASSIGNED, MIGRATING, *self._all_dirs(), uid("nobody's")]), max_size=2),
            label="other ids in the report",
        )
        offline = tuple(sorted(proc.offline | set(noise), key=uuid_sort_key))
        offset = self.view.offset if caught_up else reg.registered_at - 1

        current = "FENCED" if reg.fenced else "CS" if reg.in_controlled_shutdown else "UNFENCED"
        leads = self._leads(b)
        if current == "FENCED":
            nxt = "SHUTDOWN" if want_shut_down else "UNFENCED" if (not want_fence and caught_up) else "FENCED"
        elif current == "UNFENCED":
            if want_fence:
                nxt = "SHUTDOWN" if want_shut_down else "FENCED"
            elif want_shut_down:
                nxt = "CS" if leads else "SHUTDOWN"
            else:
                nxt = "UNFENCED"
        else:
            nxt = "CS" if leads else "SHUTDOWN"
        newly_offline = [x for x in reg.log_dirs if x in offline]
        before = {p.key: p for p in self.view.iter_partitions()}

        d = self.run(
            c.Heartbeat(
                broker_id=b,
                broker_epoch=reg.epoch,
                current_metadata_offset=offset,
                want_fence=want_fence,
                want_shut_down=want_shut_down,
                offline_log_dirs=offline,
            )
        )
        event(f"heartbeat {current} -> {nxt}")
        assert d.reply.error_code == c.NONE
        # BrokerHeartbeatManager.calculateNextBrokerState as seen in the reply and the registration.
        assert d.reply.is_fenced == (nxt in ("FENCED", "SHUTDOWN"))
        assert d.reply.should_shut_down == (nxt == "SHUTDOWN")
        assert d.reply.is_caught_up == caught_up
        after = self.view.brokers[b]
        assert after.fenced == (nxt in ("FENCED", "SHUTDOWN"))
        if nxt == "CS":
            assert after.in_controlled_shutdown
        if nxt in ("FENCED", "SHUTDOWN", "CS") and current != nxt:
            self._removed_everywhere(b)
        # handleDirectoriesOffline: one BRCR v2 after the PCRs when (and only when) a registered dir
        # went offline.
        brcr = [r for r in d.records if isinstance(r, BrokerRegistrationChange) and r.version == 2]
        if newly_offline:
            assert len(brcr) == 1 and d.records[-1] is brcr[0]
            remaining = tuple(x for x in reg.log_dirs if x not in offline)
            assert brcr[0].log_dirs == remaining
            assert after.log_dirs == (remaining or reg.log_dirs)  # replay: empty LogDirs = no change
            # K7 (JBOD completeness): no replica on a newly offline dir leads or stays in ISR,
            # except the last replica standing of a leaderless partition.
            for p in self.view.iter_partitions():
                if b not in p.replicas or p.directory(b) not in newly_offline or p.key not in before:
                    continue
                if p.leader == b and current == "FENCED" and nxt == "UNFENCED":
                    # The Kafka-faithful quirk: the unfence election ran on the pre-heartbeat dirs.
                    self.quirk_leaders[p.key] = (p.leader, p.leader_epoch)
                    event("quirk: unfenced onto a directory reported offline in the same heartbeat")
                    continue
                assert p.leader != b, f"{p.key}: {b} leads on offline dir {p.directory(b)}"
                if b in p.isr:
                    assert p.isr == (b,) and p.leader == -1, f"{p.key}: {b} kept in ISR {p.isr}"
        else:
            assert not brcr
            assert after.log_dirs == reg.log_dirs
        proc.shutting_down = want_shut_down
        if d.reply.should_shut_down:
            proc.alive = False

    @rule(b=st.sampled_from(BROKER_IDS))
    def expire_session(self, b: int) -> None:
        reg = self.view.brokers.get(b)
        d = self.run(c.ExpireSession(broker_id=b))
        if reg is None:
            assert d.reply.error_code == c.BROKER_ID_NOT_REGISTERED
            return
        assert d.reply.error_code == c.NONE
        if reg.fenced:
            assert d.records == ()
        assert self.view.brokers[b].fenced
        self._removed_everywhere(b)

    @rule(b=st.sampled_from(BROKER_IDS))
    def unregister(self, b: int) -> None:
        reg = self.view.brokers.get(b)
        d = self.run(c.UnregisterBroker(broker_id=b))
        if reg is None:
            assert d.reply.error_code == c.BROKER_ID_NOT_REGISTERED
            return
        assert d.reply.error_code == c.NONE
        assert isinstance(d.records[-1], UnregisterBroker)
        assert d.records[-1].broker_epoch == reg.epoch
        assert b not in self.view.brokers
        self._removed_everywhere(b)
        if b in self.procs:
            self.procs[b].alive = False

    # -- topics -------------------------------------------------------------------------------------

    def _topic_name(self, data) -> str:
        if self.view.topics and data.draw(st.integers(0, 9), label="reuse name?") == 0:
            return data.draw(st.sampled_from(sorted(self.view.topic_ids)), label="existing name")
        self.topic_count += 1
        return f"t{self.topic_count}"

    def _topic_configs(self, data) -> dict[str, str]:
        return {UNCLEAN: "true"} if data.draw(st.integers(0, 2), label="unclean topic?") == 0 else {}

    def _check_new_topic(self, name: str, d: c.Decision) -> None:
        tid = d.reply.topic_id
        assert self.view.topic_ids[name] == tid
        parts = self.view.partitions[tid]
        assert len(parts) == len(d.reply.assignments)
        for pid, replicas in enumerate(d.reply.assignments):
            p = parts[pid]
            assert p.replicas == tuple(replicas)
            # Kafka's ReplicationControlManager.createTopic: ISR = active replicas in replica order,
            # leader = ISR[0].
            assert p.isr == tuple(r for r in replicas if self.view.is_active(r))
            assert p.leader == p.isr[0]
            # The default directory per replica (Kafka's ClusterControlManager.defaultDir).
            for r in replicas:
                dirs = self.view.brokers[r].log_dirs
                expected = dirs[0] if len(dirs) == 1 else UNASSIGNED
                assert p.directory(r) == expected

    @rule(data=st.data())
    def create_topic_manual(self, data) -> None:
        name = self._topic_name(data)
        rf = data.draw(st.integers(1, 3), label="rf")
        n = data.draw(st.integers(1, 3), label="partitions")
        assignments = tuple(tuple(data.draw(st.permutations(list(BROKER_IDS)), label=f"p{i}")[:rf]) for i in range(n))
        exists = name in self.view.topic_ids
        d = self.run(c.CreateTopic(name=name, assignments=assignments, configs=self._topic_configs(data)))
        if exists:
            assert d.reply.error_code == c.TOPIC_ALREADY_EXISTS
            return
        brokers = self.view.brokers
        bad = any(r not in brokers for a in assignments for r in a) or any(
            not any(self.view.is_active(r) for r in a) for a in assignments
        )
        if bad:
            assert d.reply.error_code == c.INVALID_REPLICA_ASSIGNMENT, d.reply
            return
        assert d.reply.error_code == c.NONE, d.reply
        assert d.reply.assignments == assignments
        self._check_new_topic(name, d)

    @rule(data=st.data())
    def create_topic_placed(self, data) -> None:
        name = self._topic_name(data)
        rf = data.draw(st.integers(1, 3), label="rf")
        n = data.draw(st.integers(1, 4), label="partitions")
        active = [b for b in sorted(self.view.brokers) if self.view.is_active(b)]
        weights = None
        if active and data.draw(st.booleans(), label="weights?"):
            weights = {b: data.draw(st.integers(0, 1000), label=f"weight {b}") for b in active}
        exists = name in self.view.topic_ids
        d = self.run(
            c.CreateTopic(
                name=name,
                partitions=n,
                replication_factor=rf,
                broker_weights=weights,
                configs=self._topic_configs(data),
            )
        )
        if exists:
            assert d.reply.error_code == c.TOPIC_ALREADY_EXISTS
            return
        # Kafka's StripedReplicaPlacer over the registrations the log shows: every registered
        # broker, fenced ones included, as long as one is unfenced (one in controlled shutdown
        # counts as unfenced); the first replica is unfenced. A partition placed with no active
        # replica (its unfenced one is shutting down) refuses the topic.
        usable = sorted(self.view.brokers)
        unfenced = [b for b in usable if not self.view.brokers[b].fenced]
        if not unfenced or rf > len(usable):
            assert d.reply.error_code == c.INVALID_REPLICATION_FACTOR
            return
        if d.reply.error_code == c.INVALID_REPLICATION_FACTOR:
            assert d.reply.message.endswith("fenced or in controlled shutdown."), d.reply
            assert d.records == () and any(self.view.brokers[b].in_controlled_shutdown for b in unfenced)
            return
        assert d.reply.error_code == c.NONE, d.reply
        assert len(d.reply.assignments) == n
        for a in d.reply.assignments:
            assert len(a) == rf == len(set(a)) and a[0] in unfenced
            assert any(r in active for r in a)
        self._check_new_topic(name, d)

    # -- directories --------------------------------------------------------------------------------

    @rule(b=st.sampled_from(BROKER_IDS), data=st.data())
    def assign_replicas_to_dirs(self, b: int, data) -> None:
        view = self.view
        reg = view.brokers.get(b)
        proc = self.procs.get(b)
        if proc is None or not proc.alive:
            return
        stale = reg is None or data.draw(st.integers(0, 9), label="stale epoch?") == 0
        epoch = (reg.epoch - 1) if reg is not None and stale else (reg.epoch if reg else 0)

        mine = [p.key for p in view.iter_partitions() if b in p.replicas]
        not_mine = [p.key for p in view.iter_partitions() if b not in p.replicas]
        entries: list[tuple[str, str, int]] = []  # (dir, topic, partition)
        expected: dict[tuple[str, int], int] = {}
        picked = data.draw(st.lists(st.sampled_from(mine), unique=True, max_size=4), label="mine") if mine else []
        for key in picked:
            entries.append((self._some_dir(data, b), *key))
            expected[key] = c.NONE
        if not_mine and data.draw(st.integers(0, 3), label="foreign?") == 0:
            key = data.draw(st.sampled_from(not_mine), label="foreign partition")
            entries.append((self._some_dir(data, b), *key))
            expected[key] = c.NOT_LEADER_OR_FOLLOWER
        if view.topics and data.draw(st.integers(0, 3), label="bad index?") == 0:
            tid = data.draw(st.sampled_from(sorted(view.topics)), label="topic of bad index")
            key = (tid, len(view.partitions[tid]) + data.draw(st.integers(0, 5), label="bad index"))
            entries.append((self._some_dir(data, b), *key))
            expected[key] = c.UNKNOWN_TOPIC_OR_PARTITION
        if data.draw(st.integers(0, 3), label="unknown topic?") == 0:
            key = (uid(f"no-such-topic-{data.draw(st.integers(0, 2), label='unknown topic')}"), 0)
            entries.append((self._some_dir(data, b), *key))
            expected[key] = c.UNKNOWN_TOPIC_ID
        if not entries:
            return
        grouped: dict[str, dict[str, list[int]]] = {}
        for directory, tid, pid in entries:
            grouped.setdefault(directory, {}).setdefault(tid, []).append(pid)
        request = AssignReplicasToDirsRequest(
            broker_id=b,
            broker_epoch=epoch,
            directories=tuple(
                DirectoryReplicas(
                    id=directory,
                    topics=tuple(TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
                )
                for directory, topics in grouped.items()
            ),
        )
        before = {p.key: p for p in view.iter_partitions()}
        d = self.run(c.AssignReplicasToDirs(request=request))
        if stale:
            assert d.reply.error_code == c.STALE_BROKER_EPOCH
            return
        assert d.reply.error_code == c.NONE
        got = {(r.topic_id, r.partition_id): r.error_code for dres in d.reply.directories for r in dres.partitions}
        assert got == expected
        changed = {(r.topic_id, r.partition_id) for r in d.records if isinstance(r, PartitionChange)}
        assert changed <= {k for k, code in expected.items() if code == c.NONE}, "records for rejected entries"
        for directory, tid, pid in entries:
            key = (tid, pid)
            if expected[key] != c.NONE:
                continue
            p = self.view.partition(tid, pid)
            assert p.directory(b) == directory
            if not is_online(directory, reg.log_dirs):
                # handleAssignReplicasToDirs: a replica reported in a dir that is not online leaves
                # leadership and ISR.
                event("assigned to an offline directory")
                if p.leader == b and before[key].leader == -1:
                    # The Kafka-faithful quirk pinned by test_assign_to_offline_dir_elects_on_old_dir:
                    # the directory change's own election (on the pre-request directory) made b
                    # leader; the ISR update, computed from the pre-request state, saw nothing to do.
                    electing = [
                        r
                        for r in d.records
                        if isinstance(r, PartitionChange)
                        and (r.topic_id, r.partition_id) == key
                        and r.leader == b
                        and r.assignment is not None
                    ]
                    assert electing, f"{key}: {b} leads on offline dir {directory} without the quirk"
                    assert is_online(before[key].directory(b), reg.log_dirs)
                    self.quirk_leaders[key] = (p.leader, p.leader_epoch)
                    event("quirk: directory change elected the replica it moves to an offline dir")
                    continue
                assert p.leader != b
                if b in p.isr:
                    assert p.isr == (b,) and p.leader == -1
            elif before[key].directory(b) == directory:
                assert key not in changed or before[key].leader != p.leader

    # -- ISR changes ---------------------------------------------------------------------------------

    @rule(data=st.data())
    def alter_partition(self, data) -> None:
        view = self.view
        led = [p for p in view.iter_partitions() if p.leader != -1]
        if not led:
            return
        mode = data.draw(
            st.sampled_from(
                ["ok"] * 6 + ["stale_leader_epoch", "stale_partition_epoch", "stale_broker_epoch", "not_leader"]
            ),
            label="mode",
        )
        # Stale epochs need a partition that has moved on.
        moved = {
            "stale_leader_epoch": [p for p in led if p.leader_epoch > 0],
            "stale_partition_epoch": [p for p in led if p.partition_epoch > 0],
        }.get(mode)
        p = data.draw(st.sampled_from(moved or led), label="partition")
        leader = view.brokers[p.leader]
        note(f"leader registration: {leader!r}")
        others = [r for r in p.replicas if r != p.leader]
        new_isr = []
        if others:
            new_isr = data.draw(st.lists(st.sampled_from(others), unique=True, max_size=len(others)), label="isr")
        new_isr.insert(data.draw(st.integers(0, len(new_isr)), label="leader position"), p.leader)
        # The leader reports RECOVERED once it has recovered; RECOVERING is mostly (not always)
        # sent with a one-member ISR.
        if p.leader_recovery_state == LRS_RECOVERING and data.draw(st.integers(0, 3), label="still recovering?") == 0:
            lrs = LRS_RECOVERING
            if data.draw(st.booleans(), label="alone?"):
                new_isr = [p.leader]
        else:
            lrs = LRS_RECOVERING if data.draw(st.integers(0, 9), label="bogus RECOVERING?") == 0 else LRS_RECOVERED
        sender, broker_epoch = p.leader, leader.epoch
        leader_epoch, partition_epoch = p.leader_epoch, p.partition_epoch
        expect = None
        if mode == "stale_leader_epoch" and p.leader_epoch > 0:
            leader_epoch -= data.draw(st.integers(1, p.leader_epoch), label="behind")
            expect = c.FENCED_LEADER_EPOCH
        elif mode == "stale_partition_epoch" and p.partition_epoch > 0:
            partition_epoch -= data.draw(st.integers(1, p.partition_epoch), label="behind")
            expect = c.INVALID_UPDATE_VERSION
        elif mode == "stale_broker_epoch":
            broker_epoch -= 1
            expect = c.STALE_BROKER_EPOCH
        elif mode == "not_leader":
            candidates = [r for r in others if r in view.brokers]
            if candidates:
                sender = data.draw(st.sampled_from(candidates), label="sender")
                broker_epoch = view.brokers[sender].epoch
                expect = c.INVALID_REQUEST
        if expect is None:
            # A valid request by the leader: Kafka's validation order (ReplicationControlManager
            # .validateAlterPartitionData), then every member of the new ISR must be eligible.
            if lrs == LRS_RECOVERING and len(new_isr) > 1:
                expect = c.INVALID_REQUEST
            elif p.leader_recovery_state == LRS_RECOVERED and lrs == LRS_RECOVERING:
                expect = c.INVALID_REQUEST
            elif any(not view.is_active(r) for r in new_isr):
                expect = c.INELIGIBLE_REPLICA
            elif not is_online(p.directory(p.leader), leader.log_dirs):
                expect = c.NEW_LEADER_ELECTED
            else:
                expect = c.NONE
        d = self.run(
            c.AlterPartition(
                broker_id=sender,
                broker_epoch=broker_epoch,
                topic_id=p.topic_id,
                partition_id=p.partition_id,
                leader_epoch=leader_epoch,
                partition_epoch=partition_epoch,
                new_isr=tuple(new_isr),
                leader_recovery_state=lrs,
            )
        )
        event(f"alter_partition {mode} -> {d.reply.error_code}")
        assert d.reply.error_code == expect, (d.reply, expect)
        if expect not in (c.NONE, c.NEW_LEADER_ELECTED):
            return
        q = self.view.partition(p.topic_id, p.partition_id)
        if expect == c.NEW_LEADER_ELECTED:
            # The leader sits on an offline directory (a Kafka-faithful quirk): the builder's
            # acceptor rejects it, the change moves leadership away, Kafka answers NEW_LEADER_ELECTED.
            event("alter_partition by a leader on an offline directory")
            assert q.leader != p.leader and q.leader_epoch == p.leader_epoch + 1
            return
        assert q.isr == tuple(new_isr) and q.leader == p.leader and q.leader_epoch == p.leader_epoch
        assert q.leader_recovery_state == lrs
        assert (d.reply.leader, d.reply.leader_epoch, d.reply.partition_epoch, d.reply.isr) == (
            q.leader,
            q.leader_epoch,
            q.partition_epoch,
            q.isr,
        )

    # -- invariants ----------------------------------------------------------------------------------

    def _check_state(self) -> None:
        view = self.view
        for b, reg in view.brokers.items():
            assert reg.id == b
            assert reg.log_dirs, f"broker {b} has no directories"
            assert reg.log_dirs == sorted_dirs(reg.log_dirs)
            assert not any(is_reserved(d) for d in reg.log_dirs)
        owners: dict[str, int] = {}
        for b, reg in view.brokers.items():
            for d in reg.log_dirs:
                assert d not in owners, f"dir {d} registered to {owners[d]} and {b}"
                owners[d] = b
        for key in list(self.quirk_leaders):
            p = view.partition(*key)
            if (
                p is None
                or (p.leader, p.leader_epoch) != self.quirk_leaders[key]
                or is_online(p.directory(p.leader), view.brokers[p.leader].log_dirs)
            ):
                # Leadership moved, or the directory is online again: the exception is over.
                del self.quirk_leaders[key]
        for p in view.iter_partitions():
            assert len(set(p.replicas)) == len(p.replicas)
            assert len(set(p.isr)) == len(p.isr)
            assert p.isr, f"{p.key}: empty ISR"
            assert set(p.isr) <= set(p.replicas), f"{p.key}: ISR {p.isr} not in replicas {p.replicas}"
            assert len(p.directories) == len(p.replicas), f"{p.key}: directories do not fit replicas"
            assert p.leader == -1 or p.leader in p.isr, f"{p.key}: leader {p.leader} not in ISR {p.isr}"
            if p.leader != -1:
                reg = view.brokers.get(p.leader)
                assert reg is not None, f"{p.key}: leader {p.leader} is not registered"
                assert not reg.fenced, f"{p.key}: leader {p.leader} is fenced"
                # In controlled shutdown is allowed (K4: registered and unfenced); is_active is not
                # required.
                if reg.in_controlled_shutdown:
                    event("leader in controlled shutdown")
                if not is_online(p.directory(p.leader), reg.log_dirs):
                    assert self.quirk_leaders.get(p.key) == (p.leader, p.leader_epoch), (
                        f"{p.key}: leader {p.leader} on offline directory {p.directory(p.leader)}"
                    )

    @invariant()
    def state_is_consistent(self) -> None:
        self._check_state()

    @invariant()
    def indexes_match_a_rebuild(self) -> None:
        rebuilt = self.view.copy()
        rebuilt.reindex()
        assert _indexes(rebuilt) == _indexes(self.view)

    @invariant()
    def replay_from_scratch_agrees(self) -> None:
        again = replay(self.controller.records)
        assert again.offset == self.view.offset
        assert again.state_hash() == self.view.state_hash()
        assert _indexes(again) == _indexes(self.view)


TestKraftCluster = KraftCluster.TestCase
TestKraftCluster.settings = settings(max_examples=examples(200), stateful_step_count=60)
