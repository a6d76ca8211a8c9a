"""The broker's side of KIP-858: meta.properties (the real files parse and round-trip),
``format-dirs``, the start-up rules (S-START-n, one test each), the replica-management cases
(S-REPL-n, one test each), and broker + controller deciders together on random histories."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import LOST, MIGRATING, UNASSIGNED, LogDirsLoaded, UnfenceRequested
from kraftlake.records import meta_properties as mp
from kraftlake.records.meta_properties import MetaProperties, MetaPropertiesError
from kraftlake.replay.audit import Audit
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft.replica_manager import LocalStorage, disks_from_observations, plan
from kraftlake.statemachine.kraft.startup import UNREADABLE, Refused, Started, load_dirs, plan_format
from kraftlake.statemachine.kraft.workload import BROKER_BUGS, FAULTS, WorkloadConfig, generate

from helpers.kafka_logs import KAFKA_LOGS
from helpers.kraft import controller_with_brokers, uid
from helpers.tiers import examples

runner = CliRunner()


# -- meta.properties -----------------------------------------------------------------------------

KNOWN = {
    "codecrafters-single": ("rwd2jqiwRaCycLq7mKVHXA", "AiSXPLrdRM-HREWplhnaNA"),
    "kafka37-jbod-dirs": ("q1w2e3r4t5y6u7i8o9p0", "XHhkr4tkSsD900pOQ8pPfg"),
    "three-snapshots": ("5L6g3nShT-eMCtK--X86sw", "5ku1T2893dpA5NE1_XtqrQ"),
    "single-snapshot": ("Bt6TqF2QR0u4xKafxE_Cqg", None),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_real_meta_properties_parse_and_round_trip(name, tmp_path):
    meta = mp.read(KAFKA_LOGS / name)
    assert (meta.version, meta.node_id, meta.cluster_id, meta.directory_id, meta.directory_ids) == (
        1,
        1,
        *KNOWN[name],
        None,
    )
    assert mp.parse(mp.render(meta)) == meta
    mp.write(tmp_path, meta)
    assert mp.read(tmp_path) == meta and not (tmp_path / "meta.properties.tmp").exists()


def test_java_properties_syntax_and_kip_fields():
    text = (
        "# comment\n! another\n  version : 1\ncluster.id=a\\=b\\:c\\\n    d\nnode.id 7\n"
        "directory.id=AiSXPLrdRM-HREWplhnaNA\ndirectory.ids=AiSXPLrdRM-HREWplhnaNA, XHhkr4tkSsD900pOQ8pPfg\nx.y=\\u00e9\n"
    )
    meta = mp.parse(text)
    assert meta.cluster_id == "a=b:cd" and meta.node_id == 7
    assert meta.directory_ids == ("AiSXPLrdRM-HREWplhnaNA", "XHhkr4tkSsD900pOQ8pPfg")
    assert meta.other == (("x.y", "é"),)
    assert mp.parse(mp.render(meta)) == meta
    v0 = mp.parse("broker.id=3\n")
    assert (v0.version, v0.node_id, v0.cluster_id) == (0, 3, None) and "broker.id=3" in mp.render(v0)


@given(
    cluster=st.text(min_size=1, max_size=30),
    node=st.integers(0, 2**31 - 1),
    ids=st.lists(st.binary(min_size=16, max_size=16), max_size=4, unique=True),
)
def test_meta_properties_round_trip_any_values(cluster, node, ids):
    from kraftlake.records.types import uuid_from_bytes

    dirs = tuple(dict.fromkeys(uuid_from_bytes(b) for b in ids))
    meta = MetaProperties(
        cluster_id=cluster, node_id=node, directory_id=dirs[0] if dirs else None, directory_ids=dirs or None
    )
    back = mp.parse(mp.render(meta))
    assert back.cluster_id == cluster and back.node_id == node and back.directory_id == meta.directory_id
    assert set(back.directory_ids or ()) == set(dirs)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("version=1\ncluster.id=x\n", "`node.id` was not found"),
        ("version=1\nnode.id=1\n", "`cluster.id` was not found"),
        ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=nope\n", "`directory.id`"),
        ("version=9\n", "`version` 9"),
        ("version=1\ncluster.id=x\nnode.id=-4\n", "negative"),
    ],
)
def test_bad_meta_properties_name_the_file_and_key(text, needle):
    with pytest.raises(MetaPropertiesError, match="/d/meta.properties") as exc:
        mp.parse(text, "/d/meta.properties")
    assert needle in str(exc.value)


# -- format-dirs ---------------------------------------------------------------------------------


def test_format_dirs_assigns_missing_ids_keeps_existing_and_lists_all(tmp_path):
    a, b, c_ = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.mkdir()
    (a / "meta.properties").write_bytes((KAFKA_LOGS / "codecrafters-single" / "meta.properties").read_bytes())
    args = ["format-dirs", "--cluster-id", "rwd2jqiwRaCycLq7mKVHXA", "--node-id", "1", str(a), str(b), str(c_)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    metas = [mp.read(d) for d in (a, b, c_)]
    assert metas[0].directory_id == "AiSXPLrdRM-HREWplhnaNA"  # left alone
    ids = {m.directory_id for m in metas}
    assert len(ids) == 3 and all(set(m.directory_ids) == ids for m in metas)
    assert all(m.cluster_id == "rwd2jqiwRaCycLq7mKVHXA" and m.node_id == 1 for m in metas)
    assert runner.invoke(app, args).exit_code == 0 and [mp.read(d) for d in (a, b, c_)] == metas  # idempotent
    assert "unchanged" in runner.invoke(app, args).output


def test_format_dirs_refuses_and_writes_nothing(tmp_path):
    a, b, bad = tmp_path / "a", tmp_path / "b", tmp_path / "bad"
    ok = ["--cluster-id", "C", "--node-id", "2"]
    assert runner.invoke(app, ["format-dirs", *ok, str(a)]).exit_code == 0
    before = (a / "meta.properties").read_bytes()
    res = runner.invoke(app, ["format-dirs", "--cluster-id", "other", "--node-id", "2", str(a), str(b)])
    assert res.exit_code == 2 and "cluster.id" in res.output and not b.exists()
    b.mkdir()
    (b / "meta.properties").write_bytes(before)  # a copied disk: the same directory.id twice
    res = runner.invoke(app, ["format-dirs", *ok, str(a), str(b)])
    assert res.exit_code == 2 and "duplicate directory.id" in res.output
    (bad / "meta.properties").mkdir(parents=True)  # reading it fails: an unavailable directory
    res = runner.invoke(app, ["format-dirs", *ok, str(a), str(bad)])
    assert res.exit_code == 2 and "unreadable" in res.output
    assert (a / "meta.properties").read_bytes() == before


# -- start-up (S-START-n) ------------------------------------------------------------------------

D1, D2, D3, DM = uid("d1"), uid("d2"), uid("d3"), uid("dm")


def fresh_ids():
    counter = itertools.count()
    return lambda: uid(f"new-{next(counter)}")


def meta(d: str | None, listed=(D1, D2, D3), node=1, cluster="C") -> MetaProperties:
    return MetaProperties(
        cluster_id=cluster, node_id=node, directory_id=d, directory_ids=tuple(listed) if listed else None
    )


def start(found, metadata_dir=None, **kw):
    dirs = [p for p in found if p != metadata_dir]
    return load_dirs(dirs, found, fresh_ids(), metadata_dir=metadata_dir, **kw)


def test_all_formatted_all_readable_starts_with_every_dir_online():
    s = start({"/1": meta(D1), "/2": meta(D2), "/3": meta(D3)})
    assert isinstance(s, Started) and set(s.online) == {D1, D2, D3} and s.offline == () and s.writes == ()
    where = {D1: "/1", D2: "/2", D3: "/3"}
    assert s.record(7) == LogDirsLoaded(
        broker_id=7, online_dirs=s.online, offline_dirs=(), paths=tuple(where[d] for d in s.online)
    )


def test_the_one_unreadable_directory_is_where_the_offline_id_was():
    """The start-up record names each directory's path for reports; an offline id gets the
    unreadable path only when there is one of each (else "": which is which cannot be told)."""
    s = start({"/1": meta(D1), "/2": UNREADABLE, "/3": meta(D3)})
    assert isinstance(s, Started) and s.offline == (D2,) and dict(s.paths) == {D1: "/1", D2: "/2", D3: "/3"}
    r = s.record(7)
    assert dict(zip((*r.online_dirs, *r.offline_dirs), r.paths)) == {D1: "/1", D2: "/2", D3: "/3"}
    two = start({"/1": meta(D1), "/2": UNREADABLE, "/3": UNREADABLE})
    assert isinstance(two, Started) and set(two.offline) == {D2, D3}
    r = two.record(7)
    assert r.online_dirs == (D1,) and r.paths == ("/1", "", "")


def test_s_start_1_metadata_dir_unreadable_or_unformatted_refuses():
    found = {"/1": meta(D1), "/2": meta(D2), "/m": UNREADABLE}
    assert start(found, metadata_dir="/m").rule == "S-START-1"
    found["/m"] = None
    r = start(found, metadata_dir="/m")
    assert isinstance(r, Refused) and r.rule == "S-START-1" and "format" in r.reason


def test_s_start_2_another_node_or_cluster_refuses():
    assert start({"/1": meta(D1), "/2": meta(D2, node=2)}).rule == "S-START-2"
    assert start({"/1": meta(D1), "/2": meta(D2)}, cluster_id="other").rule == "S-START-2"


def test_s_start_3_reserved_directory_id_refuses():
    assert start({"/1": meta(D1), "/2": meta(LOST)}).rule == "S-START-3"


def test_s_start_4_duplicate_directory_ids_refuse():
    r = start({"/1": meta(D1), "/2": meta(D1)})
    assert r.rule == "S-START-4" and "/1" in r.reason and "/2" in r.reason


def test_s_start_5_files_listing_different_directory_ids_refuse():
    assert start({"/1": meta(D1, listed=(D1, D2)), "/2": meta(D2, listed=(D1, D2, D3))}).rule == "S-START-5"


def test_s_start_6_missing_file_or_id_gets_a_new_id_written_everywhere():
    s = start({"/1": meta(D1, listed=(D1, D2)), "/2": meta(D2, listed=(D1, D2)), "/3": None})
    assert isinstance(s, Started) and len(s.online) == 3
    new = (set(s.online) - {D1, D2}).pop()
    written = dict(s.writes)
    assert written["/3"].directory_id == new and written["/3"].cluster_id == "C" and written["/3"].node_id == 1
    assert all(set(m.directory_ids) == {D1, D2, new} for m in written.values()) and set(written) == {"/1", "/2", "/3"}
    s = start({"/1": meta(D1, listed=None), "/2": MetaProperties(cluster_id="C", node_id=1)})
    assert isinstance(s, Started) and dict(s.writes)["/2"].directory_id not in (None, D1)


def test_s_start_7_offline_removed_and_unresolvable():
    # An unreadable directory: its recorded id is offline.
    s = start({"/1": meta(D1), "/2": meta(D2), "/3": UNREADABLE})
    assert isinstance(s, Started) and s.online == tuple(sorted_(D1, D2)) and s.offline == (D3,) and s.writes == ()
    # A directory taken out of the configuration (none unreadable): removed, the list rewritten.
    s = start({"/1": meta(D1), "/2": meta(D2)})
    assert isinstance(s, Started) and s.offline == () and s.removed == (D3,)
    assert all(set(m.directory_ids) == {D1, D2} for _, m in s.writes)
    # Taken out while another is offline: which id is which cannot be told.
    r = start({"/1": meta(D1, listed=(D1, D2, D3, uid("d4"))), "/3": UNREADABLE})
    assert isinstance(r, Refused) and r.rule == "S-START-7" and "unresolvable mismatch" in r.reason


def test_s_start_8_a_separate_metadata_dir_is_in_neither_set():
    s = start(
        {"/1": meta(D1, listed=(D1, D2, DM)), "/2": meta(D2, listed=(D1, D2, DM)), "/m": meta(DM, listed=(D1, D2, DM))},
        metadata_dir="/m",
    )
    assert isinstance(s, Started) and DM not in s.online + s.offline and s.metadata_dir == DM
    s = load_dirs(
        ["/1", "/m"], {"/1": meta(D1, listed=(D1, DM)), "/m": meta(DM, listed=(D1, DM))}, fresh_ids(), metadata_dir="/m"
    )
    assert isinstance(s, Started) and DM in s.online and s.metadata_dir is None  # also a data directory


def test_s_start_9_no_data_directory_online_refuses():
    assert start({"/1": UNREADABLE, "/2": UNREADABLE, "/3": UNREADABLE}).rule == "S-START-9"


def test_format_plan_matches_start_up():
    plan_ = plan_format(["/1", "/2"], {"/1": meta(D1, listed=None), "/2": None}, fresh_ids(), cluster_id="C", node_id=1)
    assert isinstance(plan_, dict)
    s = start(plan_)
    assert isinstance(s, Started) and s.writes == () and set(s.online) == {m.directory_id for m in plan_.values()}
    assert plan_format(["/1"], {"/1": UNREADABLE}, fresh_ids(), cluster_id="C", node_id=1).rule == "S-FORMAT"


def sorted_(*ids):
    from kraftlake.statemachine.kraft.directory_ids import sorted_dirs

    return sorted_dirs(ids)


# -- replica management (S-REPL-n) ---------------------------------------------------------------

X1, X2, Y = uid("x1"), uid("x2"), uid("y")


@pytest.fixture
def cluster():
    """Broker 1 with two dirs, broker 2 with one; topic t (4 partitions, RF 2): broker 1's replicas
    UNASSIGNED, broker 2's in Y (Kafka's ClusterControlManager.defaultDir)."""
    ctl = controller_with_brokers({1: [X1, X2], 2: [Y]})
    t = ctl.handle(
        c.CreateTopic(name="t", partitions=4, replication_factor=2, assignments=((1, 2),) * 4)
    ).reply.topic_id
    return ctl, t


def assign_all(ctl, t, d):
    """Broker 1 reports all of t's replicas in ``d``."""
    from kraftlake.records import AssignReplicasToDirsRequest, DirectoryReplicas, TopicPartitions

    request = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=101,
        directories=(DirectoryReplicas(id=d, topics=(TopicPartitions(topic_id=t, partitions=(0, 1, 2, 3)),)),),
    )
    assert ctl.handle(c.AssignReplicasToDirs(request=request)).records


def kinds(p):
    return [(a.kind, a.partition_id, a.directory, a.rule) for a in p.actions]


def test_s_repl_1_replica_where_metadata_says_needs_nothing(cluster):
    ctl, t = cluster
    p = plan(ctl.view, 2, LocalStorage(online=(Y,), logs={(t, i): Y for i in range(4)}), seed=1)
    assert p.actions == () and p.request is None and p.mismatched == 0 and not p.stay_fenced


def test_s_repl_3_unassigned_replicas_are_created_by_free_disk_and_reported(cluster):
    ctl, t = cluster
    p = plan(ctl.view, 1, LocalStorage(online=(X1, X2), free_bytes={X1: 1, X2: 10**9}), seed=3)
    assert [k[0] for k in kinds(p)] == ["create", "report"] * 4 and all(k[2] == X2 for k in kinds(p))
    assert p.mismatched == 4 and p.stay_fenced
    assert [(d.id, d.topics[0].partitions) for d in p.request.directories] == [(X2, (0, 1, 2, 3))]
    ctl.handle(c.AssignReplicasToDirs(request=p.request))
    after = plan(ctl.view, 1, LocalStorage(online=(X1, X2), logs={(t, i): X2 for i in range(4)}), seed=3)
    assert after.actions == () and after.mismatched == 0 and not after.stay_fenced


def test_s_repl_2_a_log_elsewhere_than_assigned_is_reported_where_it_is(cluster):
    ctl, t = cluster
    assign_all(ctl, t, X1)
    logs = {(t, 0): X2, (t, 1): X1, (t, 2): X1, (t, 3): X1}  # partition 0 was moved while the broker was down
    p = plan(ctl.view, 1, LocalStorage(online=(X1, X2), logs=logs), seed=0)
    assert kinds(p) == [("report", 0, X2, "S-REPL-2")] and p.mismatched == 1


def test_s_repl_3_a_dir_taken_out_of_the_configuration_is_recreated_unless_a_dir_is_offline(cluster):
    ctl, t = cluster
    assign_all(ctl, t, X1)
    new = uid("x3")  # X1 replaced by a new disk, X2 kept
    p = plan(ctl.view, 1, LocalStorage(online=(X2, new), free_bytes={X2: 10**9, new: 10**9}), seed=0)
    assert [k[:2] for k in kinds(p)] == [(k, i) for i in range(4) for k in ("create", "report")]
    assert {k[2] for k in kinds(p)} == {X2, new} and all(
        "not configured" in a.why for a in p.actions if a.kind == "create"
    )
    held = plan(ctl.view, 1, LocalStorage(online=(new,), offline=(X2,), free_bytes={new: 1}), seed=0)
    assert held.actions == () and {w.rule for w in held.waiting} == {"S-REPL-3"} and len(held.waiting) == 4


def test_s_repl_4_a_replica_assigned_here_without_a_log_is_created_there(cluster):
    ctl, t = cluster
    p = plan(ctl.view, 2, LocalStorage(online=(Y,)), seed=0)
    assert kinds(p) == [("create", i, Y, "S-REPL-4") for i in range(4)] and p.request is None and p.mismatched == 0


def test_s_repl_5_a_log_on_an_offline_dir_is_reported_there_first(cluster):
    ctl, t = cluster
    logs = {(t, 0): X1, (t, 1): X2}  # placed before the controller recorded them; then X1 failed
    p = plan(ctl.view, 1, LocalStorage(online=(X2,), offline=(X1,), logs=logs, free_bytes={X2: 1}), seed=0)
    assert kinds(p)[0] == ("report-offline", 0, X1, "S-REPL-5")
    assert p.request.directories[0].id == X1  # the offline directory's report goes first
    decision = ctl.handle(c.AssignReplicasToDirs(request=p.request))
    assert decision.reply.directories[0].partitions[0].error_code == 0
    assert ctl.view.partition(t, 0).directory(1) == X1
    # Then the heartbeat with X1 offline: the controller now knows the replica sits there.
    ctl.handle(
        c.Heartbeat(broker_id=1, broker_epoch=101, current_metadata_offset=ctl.view.offset, offline_log_dirs=(X1,))
    )
    moved = ctl.view.partition(t, 0)
    assert moved.leader == 2 and 1 not in moved.isr


def test_s_repl_6_replicas_on_offline_or_lost_dirs_are_left_alone(cluster):
    ctl, t = cluster
    assign_all(ctl, t, X1)
    p = plan(ctl.view, 1, LocalStorage(online=(X2,), offline=(X1,), logs={(t, i): X1 for i in range(4)}), seed=0)
    assert p.actions == () and [w.rule for w in p.waiting] == ["S-REPL-6"] * 4 and p.request is None


def test_s_repl_7_a_move_starts_a_future_replica_reports_it_then_promotes_it(cluster):
    ctl, t = cluster
    assign_all(ctl, t, X1)
    logs = {(t, i): X1 for i in range(4)}
    p = plan(ctl.view, 1, LocalStorage(online=(X1, X2), logs=logs, moves={(t, 0): X2}), seed=0)
    assert kinds(p) == [("start-move", 0, X2, "S-REPL-7")] and p.mismatched == 0
    copying = LocalStorage(online=(X1, X2), logs=logs, futures={(t, 0): X2})
    assert plan(ctl.view, 1, copying, seed=0).actions == ()  # not caught up yet: nothing to say
    caught = msgspec.structs.replace(copying, caught_up=frozenset({(t, 0)}))
    p = plan(ctl.view, 1, caught, seed=0)
    assert kinds(p) == [("report", 0, X2, "S-REPL-7")]
    ctl.handle(c.AssignReplicasToDirs(request=p.request))
    assert kinds(plan(ctl.view, 1, caught, seed=0)) == [("promote", 0, X2, "S-REPL-7")]


def test_s_repl_8_logs_of_partitions_no_longer_hosted_are_deleted(cluster):
    ctl, t = cluster
    gone = (uid("old-topic"), 0)
    p = plan(ctl.view, 2, LocalStorage(online=(Y,), logs={**{(t, i): Y for i in range(4)}, gone: Y}), seed=0)
    assert kinds(p) == [("delete", 0, Y, "S-REPL-8")] and p.actions[0].topic_id == gone[0]


def test_before_directories_are_supported_nothing_is_reported():
    from kraftlake.statemachine.kraft.features import MV_3_6_IV0

    ctl = controller_with_brokers({1: [X1, X2], 2: [Y]}, mv=MV_3_6_IV0)
    t = ctl.handle(
        c.CreateTopic(name="t", partitions=2, replication_factor=2, assignments=((1, 2),) * 2)
    ).reply.topic_id
    assert ctl.view.partition(t, 0).directory(1) == MIGRATING
    p = plan(ctl.view, 1, LocalStorage(online=(X1, X2), logs={(t, 0): X1}), seed=0)
    assert p.request is None and p.mismatched == 0 and [k[0] for k in kinds(p)] == ["create"]


def test_the_broker_s_directories_come_from_its_observations(cluster):
    from kraftlake.records import HeartbeatOfflineDirs, LogDirFailed

    ctl, _ = cluster
    obs = [
        LogDirsLoaded(broker_id=1, online_dirs=(X1, X2)),
        LogDirFailed(broker_id=1, directory=X1),
        LogDirsLoaded(broker_id=2, online_dirs=(Y,)),
        HeartbeatOfflineDirs(broker_id=1, broker_epoch=101, offline_log_dirs=(X1,)),
    ]
    assert disks_from_observations(ctl.view, 1, obs) == ((X2,), (X1,))
    assert disks_from_observations(ctl.view, 2, []) == ((Y,), ())  # no start on record: the registration


# -- broker and controller together --------------------------------------------------------------


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    dirs=st.integers(2, 4),
    faults=st.sets(st.sampled_from(FAULTS), min_size=1),
    records=st.integers(150, 900),
)
def test_broker_and_controller_deciders_together_keep_every_invariant(seed, dirs, faults, records):
    """Random histories with dir failures and restarts, brokers following KIP-858's policy: no
    violation at all (warnings included); every start is observed; every request to serve comes
    with no mismatch."""
    if not faults & {"controlled-shutdown", "broker-crash"}:
        faults = faults | {"broker-crash"}
    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=dirs, topics=2, partitions=12, seed=seed, faults=tuple(sorted(faults))
    )
    a = Audit()
    starts = registrations = 0
    for batch in generate(cfg, records=records):
        a.feed(batch)
        for r in batch:
            starts += isinstance(r, LogDirsLoaded)
            registrations += type(r).__name__ == "RegisterBroker"
            if isinstance(r, UnfenceRequested):
                assert r.mismatched_replicas == 0
    report = a.report()
    assert report.violations == [], [msgspec.to_builtins(v) for v in report.violations[:3]]
    assert starts == registrations >= 5
    checked = {i.id: i.checked for i in report.invariants}
    assert checked["K10"] > 0 and checked["K11"] >= 5


@pytest.mark.parametrize("bug", sorted(BROKER_BUGS))
def test_every_broker_bug_is_caught_by_its_invariant_on_every_seed(bug):
    for seed in range(8):
        cfg = WorkloadConfig(brokers=5, dirs_per_broker=3, topics=3, partitions=18, seed=seed, bug=bug)
        a = Audit()
        for batch in generate(cfg, records=1200):
            a.feed(batch)
        assert BROKER_BUGS[bug] in {v.invariant for v in a.report().violations}, seed


def test_kafka_as_shipped_unfences_first_and_k11_says_so():
    cfg = WorkloadConfig(brokers=5, dirs_per_broker=3, topics=3, partitions=18, seed=2, fence_policy=False)
    a = Audit()
    for batch in generate(cfg, records=1200):
        a.feed(batch)
    found = {(v.invariant, v.severity) for v in a.report().violations}
    assert found == {("K11", "warning")}


def test_broker_cli_shows_the_view_and_pending_actions(tmp_path):
    log = tmp_path / "log"
    assert runner.invoke(app, ["init", str(log)]).exit_code == 0
    fixture = Path(__file__).parent.parent / "fixtures" / "kraft" / "audit" / "broker-skip-assign.jsonl"
    assert runner.invoke(app, ["append", str(log), str(fixture)]).exit_code == 0
    res = runner.invoke(app, ["broker", str(log), "--broker", "1", "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    unassigned = [r for r in doc["view"]["replicas"] if r["directory"] == UNASSIGNED]
    reported = [a for a in doc["plan"]["actions"] if a["kind"] == "report"]
    assert unassigned and len(reported) == len(unassigned) == doc["plan"]["mismatched"] and doc["plan"]["stay_fenced"]
    assert {a["directory"] for a in reported} <= set(doc["disks"]["online"])
    table = runner.invoke(app, ["broker", str(log), "--broker", "1", "--offset", "40"])
    assert table.exit_code == 0 and ("pending actions" in table.stdout or "nothing to do" in table.stdout)
    assert runner.invoke(app, ["broker", str(log), "--broker", "999"]).exit_code == 2
