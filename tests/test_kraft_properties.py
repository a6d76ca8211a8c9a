"""Properties of the KRaft partition change builder and of ``merge`` (Kafka's
``PartitionChangeBuilder.build`` and ``PartitionRegistration.merge``), and determinism of the state
hash across processes.

The builder is checked against a reference written from the steps of
``PartitionChangeBuilder.build`` (no reassignment, ELR off): for random consistent partitions and
random targets (ISR, election type, per-replica directory overrides, recovery state, acceptor,
metadata.version) the change it builds must be exactly the reference's, ``merge`` of it must give
the reference's partition, and the derived rules must hold: the ISR becomes the target ISR (when
non-empty and the election was clean), the leader is valid or -1, ``build()`` returns None iff
nothing but the epochs would change, PartitionEpoch +1 and LeaderEpoch +1 iff Leader != -2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kraftlake.records import iter_lines
from kraftlake.records.kraft import (
    LEADER_UNCHANGED,
    LOST,
    LRS_RECOVERED,
    LRS_RECOVERING,
    LRS_UNCHANGED,
    MIGRATING,
    UNASSIGNED,
    PartitionChange,
    ReplicaDirectory,
)
from kraftlake.records.observations import OBSERVATION_RECORDS
from kraftlake.records.types import uuid_from_bytes
from kraftlake.statemachine.kraft import Election, PartitionChangeBuilder, PartitionRegistration, merge, replay
from kraftlake.statemachine.kraft.features import partition_record_version
from kraftlake.statemachine.kraft.view import partition_image
from kraftlake.statemachine.state_hash import state_hash_of, streamed_state_hash

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"

TOPIC = uuid_from_bytes(bytes(range(1, 17)))
REAL_DIRS = tuple(uuid_from_bytes(bytes([0x40 + i] * 16)) for i in range(3))
DIR_POOL = (UNASSIGNED, MIGRATING, LOST, *REAL_DIRS)
BROKERS = range(0, 6)
# 3.3-IV3, 3.5-IV2 (ISR shrink bumps the leader epoch), 3.6-IV0, 3.7-IV2 (directories), 3.9-IV0.
VERSIONS = (7, 11, 12, 17, 21)
MV_3_2_IV0, MV_3_6_IV0, MV_3_7_IV2 = 3, 12, 17


# -- strategies ----------------------------------------------------------------------------------


@st.composite
def partitions(draw) -> PartitionRegistration:
    """A consistent partition: ISR a non-empty subset of the replicas, leader in it or -1, one
    directory per replica from a small pool (real ids and UNASSIGNED / MIGRATING / LOST)."""
    replicas = tuple(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True)))
    isr = tuple(draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True)))
    leader = draw(st.sampled_from((*isr, -1)))
    return PartitionRegistration(
        topic_id=TOPIC,
        partition_id=draw(st.integers(0, 3)),
        replicas=replicas,
        directories=tuple(draw(st.sampled_from(DIR_POOL)) for _ in replicas),
        isr=isr,
        leader=leader,
        leader_recovery_state=draw(st.sampled_from((LRS_RECOVERED, LRS_RECOVERING))),
        leader_epoch=draw(st.integers(0, 1000)),
        partition_epoch=draw(st.integers(0, 1000)),
    )


@st.composite
def targets(draw, p: PartitionRegistration) -> dict:
    acceptable = frozenset(draw(st.sets(st.sampled_from(BROKERS))))
    target_isr = tuple(draw(st.lists(st.sampled_from(p.replicas), max_size=len(p.replicas), unique=True)))
    overrides = draw(st.dictionaries(st.sampled_from((*p.replicas, 9)), st.sampled_from(DIR_POOL), max_size=3))
    return {
        "acceptable": acceptable,
        "isr": target_isr,
        "election": draw(st.sampled_from(list(Election))),
        "overrides": overrides,
        "lrs": draw(st.sampled_from((None, LRS_RECOVERED, LRS_RECOVERING))),
        "mv": draw(st.sampled_from(VERSIONS)),
    }


def _build(p: PartitionRegistration, t: dict) -> PartitionChange | None:
    b = PartitionChangeBuilder(p, acceptor=t["acceptable"].__contains__, metadata_version=t["mv"])
    b.set_target_isr(t["isr"]).set_election(t["election"]).set_directories(t["overrides"])
    if t["lrs"] is not None:
        b.set_target_leader_recovery_state(t["lrs"])
    return b.build()


# -- the reference: PartitionChangeBuilder.build, no reassignment, ELR off ---------------------------
# (tryElection, the target ISR, triggerLeaderEpochBumpForIsrShrinkIfNeeded, setAssignmentChanges,
# the target recovery state; no record when no field is set, as changeRecordIsNoOp says)


def reference(p: PartitionRegistration, t: dict) -> tuple[dict, bool]:
    """The fields the change record must carry, and whether the election was unclean."""
    acc, target, mv, replicas = t["acceptable"], t["isr"], t["mv"], p.replicas

    def valid(r: int) -> bool:
        return r in target and r in acc

    unclean = False
    if t["election"] is Election.PREFERRED:
        if valid(replicas[0]):
            new = replicas[0]
        elif valid(p.leader):
            new = p.leader
        else:
            new = next((r for r in replicas[1:] if valid(r)), -1)
    else:
        if valid(p.leader):
            new = p.leader
        else:
            new = next((r for r in replicas if valid(r)), -1)
            if new == -1 and t["election"] is Election.UNCLEAN:
                new = next((r for r in replicas if r in acc), -1)
                unclean = new != -1
    fields: dict = {}
    if new != p.leader:
        fields["leader"] = new
        if unclean:
            fields["isr"] = (new,)
            if p.leader_recovery_state != LRS_RECOVERING and mv >= MV_3_2_IV0:
                fields["leader_recovery_state"] = LRS_RECOVERING
    else:
        unclean = False  # an "unclean" pick of the current leader changes nothing (Kafka too)
    if "isr" not in fields and target and target != p.isr:
        fields["isr"] = target
    if "leader" not in fields and mv < MV_3_6_IV0 and "isr" in fields and not set(p.isr) <= set(fields["isr"]):
        # triggerLeaderEpochBumpForIsrShrinkIfNeeded (KAFKA-15021): an ISR shrink bumps before 3.6-IV0,
        # keyed on the ISR the record sets, which an emptied target does not (KAFKA-16624).
        fields["leader"] = p.leader
    if mv >= MV_3_7_IV2:
        dirs = tuple(t["overrides"].get(r, d) for r, d in zip(replicas, p.directories))
        if dirs != p.directories:
            fields["assignment"] = tuple(ReplicaDirectory(broker=r, directory=d) for r, d in zip(replicas, dirs))
    if t["lrs"] is not None and t["lrs"] != p.leader_recovery_state:
        fields["leader_recovery_state"] = t["lrs"]
    return fields, unclean


def _fields(c: PartitionChange) -> dict:
    out = {}
    if c.leader != LEADER_UNCHANGED:
        out["leader"] = c.leader
    if c.isr is not None:
        out["isr"] = c.isr
    if c.assignment is not None:
        out["assignment"] = c.assignment
    if c.leader_recovery_state != LRS_UNCHANGED:
        out["leader_recovery_state"] = c.leader_recovery_state
    for name in ("replicas", "removing_replicas", "adding_replicas", "eligible_leader_replicas", "last_known_elr"):
        assert getattr(c, name) is None, f"{name} set without a reassignment / ELR: {c!r}"
    return out


def _without_epochs(p: PartitionRegistration) -> PartitionRegistration:
    return msgspec.structs.replace(p, leader_epoch=0, partition_epoch=0)


def _controller_precondition(p: PartitionRegistration, t: dict) -> bool:
    """What every controller caller guarantees: an acceptable current leader is in the target ISR
    (bulk updates only drop the broker being removed, which is never acceptable; AlterPartition
    requires the leader in the new ISR; directory changes keep the ISR)."""
    return p.leader == -1 or p.leader not in t["acceptable"] or p.leader in t["isr"]


# -- builder properties ------------------------------------------------------------------------------


@given(data=st.data(), p=partitions())
def test_builder_matches_the_reference(data, p):
    t = data.draw(targets(p))
    change = _build(p, t)
    expected, _ = reference(p, t)
    if change is None:
        assert expected == {}, f"build() returned None, expected {expected}"
        return
    assert _fields(change) == expected
    assert (change.topic_id, change.partition_id) == (p.topic_id, p.partition_id)
    assert change.version == partition_record_version(t["mv"])


@given(data=st.data(), p=partitions())
def test_merge_of_the_built_change(data, p):
    t = data.draw(targets(p))
    change = _build(p, t)
    expected, unclean = reference(p, t)
    if change is None:
        return
    q = merge(p, change)

    # PartitionRegistration.merge: partition epoch +1, leader epoch +1 iff Leader is set.
    assert q.partition_epoch == p.partition_epoch + 1
    assert q.leader_epoch == p.leader_epoch + (1 if change.leader != LEADER_UNCHANGED else 0)
    if t["mv"] >= MV_3_6_IV0:
        # No forced bump from 3.6-IV0 on (and no reassignment): the leader epoch moves only with
        # the leader.
        assert (q.leader_epoch != p.leader_epoch) == (q.leader != p.leader)
        # build() returns None iff nothing but the epochs would change: here something did.
        assert _without_epochs(q) != _without_epochs(p)
    else:
        # Before 3.6-IV0 the only epoch-only change is the forced bump of an ISR shrink.
        if _without_epochs(q) == _without_epochs(p):
            assert change.leader == p.leader and not set(p.isr) <= set(t["isr"])

    # The ISR becomes the target ISR when that is non-empty and the election was clean; an
    # empty target never empties the ISR (ELR off); an unclean election leaves ISR = [leader].
    if unclean:
        assert q.isr == (q.leader,) and q.leader_recovery_state in (
            (LRS_RECOVERING,) if t["lrs"] is None and t["mv"] >= MV_3_2_IV0 else (LRS_RECOVERED, LRS_RECOVERING)
        )
    elif t["isr"]:
        assert q.isr == t["isr"]
    else:
        assert q.isr == p.isr
    assert q.isr

    # The leader is valid (in the new ISR and acceptable) or -1, whenever the caller keeps the
    # controller's precondition (see test_unclean_pick_of_the_current_leader for the rest).
    if _controller_precondition(p, t):
        assert q.leader == -1 or (q.leader in q.isr and q.leader in t["acceptable"])

    # Directories: overrides for replicas, everything else kept (MV >= 3.7-IV2).
    if t["mv"] >= MV_3_7_IV2:
        assert q.directories == tuple(t["overrides"].get(r, d) for r, d in zip(p.replicas, p.directories))
    else:
        assert q.directories == p.directories
    assert q.replicas == p.replicas and len(q.directories) == len(q.replicas)
    # The reference's partition, field by field.
    ref = PartitionChange(topic_id=p.topic_id, partition_id=p.partition_id, version=change.version, **expected)
    assert q == merge(p, ref)


@given(data=st.data(), p=partitions())
def test_nothing_to_do_builds_nothing(data, p):
    """Targets equal to the current state (any acceptor, any election that keeps a valid
    leader) build no record."""
    mv = data.draw(st.sampled_from(VERSIONS))
    assume(p.leader != -1)
    # The leader is acceptable (else the builder rightly moves it): drawn so, not filtered for.
    acceptable = frozenset(data.draw(st.sets(st.sampled_from(BROKERS)))) | {p.leader}
    b = PartitionChangeBuilder(p, acceptor=acceptable.__contains__, metadata_version=mv)
    b.set_election(data.draw(st.sampled_from([Election.ONLINE, Election.UNCLEAN])))
    b.set_directories({r: d for r, d in zip(p.replicas, p.directories) if data.draw(st.booleans())})
    assert b.build() is None


def test_unclean_pick_of_the_current_leader():
    """Outside the controller's precondition (an acceptable current leader missing from the
    target ISR) an UNCLEAN election can pick the current leader; as in Kafka's tryElection the
    leader does not change, no unclean handling happens, and the ISR becomes the target, which
    does not contain the leader. No controller path gives the builder such targets."""
    p = PartitionRegistration(
        topic_id=TOPIC, partition_id=0, replicas=(1, 2), directories=(UNASSIGNED, UNASSIGNED), isr=(1, 2), leader=1
    )
    change = (
        PartitionChangeBuilder(p, acceptor=lambda r: r == 1, metadata_version=21)
        .set_target_isr((2,))
        .set_election(Election.UNCLEAN)
        .build()
    )
    assert change is not None and change.leader == LEADER_UNCHANGED and change.isr == (2,)
    q = merge(p, change)
    assert q.leader == 1 and q.isr == (2,)


# -- merge properties ----------------------------------------------------------------------------------


@st.composite
def changes(draw, p: PartitionRegistration) -> PartitionChange:
    replicas = draw(
        st.one_of(st.none(), st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True).map(tuple))
    )
    now = p.replicas if replicas is None else replicas
    assignment = draw(
        st.one_of(
            st.none(),
            st.just(tuple(ReplicaDirectory(broker=r, directory=draw(st.sampled_from(DIR_POOL))) for r in now)),
        )
    )
    return PartitionChange(
        topic_id=p.topic_id,
        partition_id=p.partition_id,
        replicas=replicas,
        assignment=assignment,
        isr=draw(st.one_of(st.none(), st.lists(st.sampled_from(now), min_size=1, unique=True).map(tuple))),
        leader=draw(st.sampled_from((LEADER_UNCHANGED, -1, *now))),
        leader_recovery_state=draw(st.sampled_from((LRS_UNCHANGED, LRS_RECOVERED, LRS_RECOVERING))),
    )


@given(data=st.data(), p=partitions())
def test_merge_epochs_and_fields(data, p):
    """Kafka's ``PartitionRegistration.merge``: the epochs, the leader recovery state
    (``LeaderRecoveryState.changeTo``) and the directory rules."""
    c = data.draw(changes(p))
    q = merge(p, c)
    assert q.partition_epoch == p.partition_epoch + 1
    if c.leader == LEADER_UNCHANGED:
        assert (q.leader, q.leader_epoch) == (p.leader, p.leader_epoch)
    else:
        assert (q.leader, q.leader_epoch) == (c.leader, p.leader_epoch + 1)
    assert q.isr == (p.isr if c.isr is None else c.isr)
    assert q.replicas == (p.replicas if c.replicas is None else c.replicas)
    assert q.leader_recovery_state == (
        p.leader_recovery_state if c.leader_recovery_state == LRS_UNCHANGED else c.leader_recovery_state
    )
    if c.assignment:
        assert q.directories == tuple(a.directory for a in c.assignment)
    elif c.replicas is not None and all(d == MIGRATING for d in p.directories):
        # KAFKA-16583 (``defaultToMigrating``): a partition still all MIGRATING stays so, new replicas too.
        assert q.directories == (MIGRATING,) * len(c.replicas)
    elif c.replicas is not None:
        # DirectoryId.createDirectoriesFrom: directories follow their replicas, new ones UNASSIGNED.
        where = dict(zip(p.replicas, p.directories))
        assert q.directories == tuple(where.get(r, UNASSIGNED) for r in c.replicas)
    else:
        assert q.directories == p.directories
    assert len(q.directories) == len(q.replicas)
    assert (q.topic_id, q.partition_id) == (p.topic_id, p.partition_id)


@given(data=st.data(), p=partitions())
def test_merge_rejects_directories_that_do_not_fit(data, p):
    n = data.draw(st.integers(1, 5).filter(lambda k: k != len(p.replicas)))
    bad = tuple(ReplicaDirectory(broker=i, directory=UNASSIGNED) for i in range(10, 10 + n))
    with pytest.raises(ValueError):
        merge(p, PartitionChange(topic_id=p.topic_id, partition_id=p.partition_id, assignment=bad))


# -- state hash determinism across processes -------------------------------------------------------------

_HASH_SCRIPT = """
import json, sys
from kraftlake.records import iter_lines
from kraftlake.statemachine.kraft import replay
from kraftlake.statemachine.kraft.broker_view import broker_view
with open(sys.argv[1], "rb") as f:
    records = list(iter_lines(f))
view = replay(records)
print(json.dumps({"view": view.state_hash(), "broker_101": broker_view(view, 101).state_hash,
                  "image": view.image().state_hash, "offset": view.offset}))
"""


def _hash_in_subprocess(seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", _HASH_SCRIPT, str(FIXTURE)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _records():
    with open(FIXTURE, "rb") as f:
        return list(iter_lines(f))


def test_state_hash_is_the_same_in_every_process():
    from kraftlake.statemachine.kraft.broker_view import broker_view

    one, two = _hash_in_subprocess("1"), _hash_in_subprocess("2")
    assert one == two
    here = replay(_records())
    assert one == {
        "view": here.state_hash(),
        "broker_101": broker_view(here, 101).state_hash,
        "image": here.image().state_hash,
        "offset": here.offset,
    }
    assert one["view"] == one["image"]


def test_state_hash_changes_when_a_record_is_dropped():
    """Every state-changing record matters to the hash: dropping any one of them either makes
    the log unreplayable or changes the hash. Observation records (facts for the audits) leave
    the controller view, and so the hash, unchanged."""
    records = _records()
    full = replay(records).state_hash()
    checked = 0
    for i, r in enumerate(records):
        rest = records[:i] + records[i + 1 :]
        try:
            h = replay(rest).state_hash()
        except Exception:
            continue  # e.g. a BrokerRegistrationChange for a broker no longer registered
        if isinstance(r, OBSERVATION_RECORDS):
            assert h == full, f"observation record {i} ({type(r).__name__}) changed the view"
        else:
            assert h != full, f"dropping record {i} ({type(r).__name__}) left the hash unchanged"
            checked += 1
    assert checked >= 10


def test_state_hash_of_partitions_given_in_order_is_the_views():
    """The columnar audit hashes the final partitions as its engine returns them (in order, a
    batch at a time, never all held): the same hash as the view's own, on the fixture's view,
    with a batch of one and of several, and on the view with no partitions at all."""
    view = replay(_records())
    assert view.partition_count() > 2
    parts = list(view.iter_partitions())
    assert view.state_hash(iter(parts)) == view.state_hash()
    assert streamed_state_hash(view._image_fields(partitions=False), "partitions", map(partition_image, parts), 1) == (
        view.state_hash()
    )
    assert view.state_hash(iter(parts[:-1])) != view.state_hash()
    assert view.state_hash(reversed(parts)) != view.state_hash()
    empty = replay([])
    assert empty.state_hash(iter(())) == empty.state_hash()


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(
    fields=st.dictionaries(st.text(max_size=4), _json_values, max_size=5),
    key=st.text(max_size=4),
    items=st.lists(_json_values, max_size=12),
    batch=st.integers(1, 5),
)
def test_streamed_state_hash_hashes_the_whole_encoding(fields, key, items, batch):
    """Spliced piece by piece, the bytes hashed are the canonical encoding of the whole dict,
    wherever the key sorts among the others (first, last, alone) and whatever the items."""
    fields.pop(key, None)
    assert streamed_state_hash(fields, key, iter(items), batch) == state_hash_of({**fields, key: items})


# -- the audit's fast screen ---------------------------------------------------------------------


@st.composite
def any_partition_and_brokers(draw):
    """Any partition, consistent or not (ISR outside the replicas, leader outside the ISR, empty
    ISR), and any registrations: missing, fenced, with or without directories."""
    from kraftlake.statemachine.kraft.view import BrokerRegistration, ControllerView

    replicas = tuple(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True)))
    isr = tuple(draw(st.lists(st.sampled_from(BROKERS), max_size=4, unique=True)))
    leader = draw(st.sampled_from((-1, *BROKERS)))
    dirs = tuple(draw(st.sampled_from(DIR_POOL)) for _ in replicas)
    view = ControllerView()
    for b in BROKERS:
        if draw(st.booleans()):
            view.brokers[b] = BrokerRegistration(
                id=b,
                epoch=1,
                incarnation_id=TOPIC,
                registered_at=1,
                fenced=draw(st.booleans()),
                log_dirs=tuple(draw(st.lists(st.sampled_from(REAL_DIRS), unique=True))),
            )
    return view, PartitionRegistration(TOPIC, 0, replicas, dirs, isr, leader=leader)


@given(case=any_partition_and_brokers())
def test_the_audit_screen_never_passes_what_a_check_fails(case):
    """``partition_is_sound`` (the audit's fast path) is True exactly when K1, K4 and K5 all hold."""
    from kraftlake.statemachine.kraft import invariants as kinv

    view, p = case
    checks = (kinv.leader_in_isr_in_replicas(p), kinv.leader_is_healthy(view, p), kinv.isr_is_online(view, p))
    assert kinv.partition_is_sound(view.brokers, p) == all(c is None for c in checks), checks
