"""The simulator and the bugs it can inject: the correct controller gives no violation on 20
seeds, and every injected bug is caught by its named invariant on every seed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.replay.audit import Audit
from kraftlake.statemachine.kraft.bugs import BUGS
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

SEEDS = range(20)
CAUGHT_BY = {
    "ignore-offline-dirs": "K6",
    "keep-offline-replica-in-isr": "K5",
    "elect-offline-leader": "K7",
    "no-leader-epoch-bump": "K3",
    "leader-outside-isr": "K1",
    "stale-broker-epoch": "L4",
    "skip-dir-assignment": "K9",
    "elr-overlaps-isr": "K13",
    "elect-outside-elr": "K14",
}
ELR_BUGS = {"elr-overlaps-isr", "elect-outside-elr"}
"""KIP-966 bugs: they show only where ELR is on, so they run on a Kafka 4.1 cluster (4.1-IV1)."""
runner = CliRunner()


def violated(seed: int, bug: str | None, metadata_version: int = 21) -> set[str]:
    if bug in ELR_BUGS:
        metadata_version = 27
    cfg = WorkloadConfig(
        brokers=5, dirs_per_broker=3, topics=3, partitions=18, seed=seed, bug=bug, metadata_version=metadata_version
    )
    a = Audit()
    for batch in generate(cfg, records=1200):
        a.feed(batch)
    return {v.invariant for v in a.report().violations}


def test_reassignments_complete_and_audit_clean_on_20_seeds():
    """With every fault, reassignments among them: they start (adding/removing set), complete
    once the new replica is in the ISR, and the audit finds nothing."""
    from kraftlake.records import PartitionChange
    from kraftlake.statemachine.kraft.workload import FAULTS

    started = completed = 0
    for seed in SEEDS:
        cfg = WorkloadConfig(brokers=5, dirs_per_broker=3, topics=3, partitions=18, seed=seed, faults=FAULTS)
        a = Audit()
        for batch in generate(cfg, records=1200):
            a.feed(batch)
            for r in batch:
                if isinstance(r, PartitionChange) and r.removing_replicas:
                    started += 1
                elif isinstance(r, PartitionChange) and r.removing_replicas == () and r.replicas is not None:
                    completed += 1
        assert a.report().violations == [], seed
    assert started > 20 and completed > 0.8 * started


def test_a_kafka_41_cluster_with_elr_audits_clean_and_uses_the_elr():
    """--metadata-version 4.1-IV1, every fault (min.insync.replicas changes among them): ELR on;
    ISRs empty and ELRs fill as brokers crash, ClearElr records follow the config changes, and
    the correct controller gives no error (K15's warnings are Kafka's own behaviour)."""
    from kraftlake.records import ClearElr, PartitionChange
    from kraftlake.statemachine.kraft.workload import FAULTS

    elr = empty = cleared = offline_elr = 0
    for seed in range(8):
        cfg = WorkloadConfig(
            brokers=5, dirs_per_broker=3, topics=3, partitions=18, seed=seed, metadata_version=27, faults=FAULTS
        )
        a = Audit()
        for batch in generate(cfg, records=1200):
            a.feed(batch)
            elr += sum(1 for r in batch if isinstance(r, PartitionChange) and r.eligible_leader_replicas)
            empty += sum(1 for r in batch if isinstance(r, PartitionChange) and r.isr == ())
            cleared += sum(1 for r in batch if isinstance(r, ClearElr))
        violations = a.report().violations
        # Kafka 4.1 keeps a replica whose directory failed in the ELR (and puts it there when the
        # failure shrinks the ISR below min.insync.replicas): K15 warns, nothing else is wrong.
        assert {(v.invariant, v.severity) for v in violations} <= {("K15", "warning")}, seed
        offline_elr += len(violations)
    assert elr > 50 and empty > 5 and cleared > 3 and offline_elr > 0, (elr, empty, cleared, offline_elr)


def test_every_bug_is_named():
    assert set(CAUGHT_BY) == set(BUGS)


@pytest.mark.slow  # every bug on several seeds: make test's
@pytest.mark.parametrize("bug", [None, *BUGS])
def test_the_correct_controller_passes_and_every_bug_is_caught_on_every_seed(bug, record_property):
    found = {seed: violated(seed, bug) for seed in SEEDS}
    if bug is None:
        assert all(v == set() for v in found.values()), {s: v for s, v in found.items() if v}
        return
    caught = [seed for seed, v in found.items() if CAUGHT_BY[bug] in v]
    record_property("caught", f"{bug} -> {CAUGHT_BY[bug]}: {len(caught)}/{len(SEEDS)} seeds")
    print(
        f"\n{bug:<28} -> {CAUGHT_BY[bug]}: caught on {len(caught)}/{len(SEEDS)} seeds; also {sorted(set().union(*found.values()) - {CAUGHT_BY[bug]})}"
    )
    assert caught == list(SEEDS)


def test_simulate_is_byte_identical_for_a_seed_and_appends_and_audits(tmp_path: Path):
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    for path, seed in ((a, 5), (b, 5), (c, 6)):
        res = runner.invoke(app, ["simulate", "--seed", str(seed), "--records", "800", "--out", str(path)])
        assert res.exit_code == 0, res.output
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    log = tmp_path / "log"
    runner.invoke(app, ["init", str(log)])
    assert runner.invoke(app, ["append", str(log), str(a)]).exit_code == 0
    assert runner.invoke(app, ["audit", str(log)]).exit_code == 0
    buggy = tmp_path / "buggy.jsonl"
    runner.invoke(
        app, ["simulate", "--seed", "5", "--records", "800", "--out", str(buggy), "--bug", "elect-offline-leader"]
    )
    bad = tmp_path / "bad"
    runner.invoke(app, ["init", str(bad)])
    runner.invoke(app, ["append", str(bad), str(buggy)])
    res = runner.invoke(app, ["audit", str(bad)])
    assert res.exit_code == 1 and "K7" in res.stdout
    assert runner.invoke(app, ["simulate", "--seed", "1", "--out", str(c), "--bug", "nope"]).exit_code == 2
    assert runner.invoke(app, ["simulate", "--seed", "1", "--out", str(c), "--faults", "meteor"]).exit_code == 2


def test_dir_failures_alone_go_on_with_disk_replacements():
    """Once every live broker is down to one directory, an operator replaces failed disks (a
    re-registration with new directories) instead of the history stopping (it used to hang)."""
    from kraftlake.records.kraft import RegisterBroker
    from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

    cfg = WorkloadConfig(
        brokers=3, dirs_per_broker=2, topics=1, partitions=3, replication_factor=2, seed=4, faults=("dir-failure",)
    )
    records = [r for batch in generate(cfg, records=800) for r in batch]
    assert len(records) >= 800
    assert sum(type(r) is RegisterBroker for r in records) > cfg.brokers  # re-registrations happened


def test_simulate_metadata_version_flag(tmp_path: Path):
    """--metadata-version takes Kafka's names or levels; 4.1-IV1 turns ELR on; a bad one is exit 2."""
    out = tmp_path / "elr.jsonl"
    args = ["simulate", "--seed", "2", "--records", "300", "--out", str(out), "--metadata-version", "4.1-IV1"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert '"feature_level":27' in text and '"eligible.leader.replicas.version"' in text
    bad = runner.invoke(app, [*args[:-1], "5.0-IV9"])
    assert bad.exit_code == 2 and "unknown metadata.version" in bad.output
    assert "--metadata-version" in runner.invoke(app, ["simulate", "--help"]).output


OPERATIONS = ("delete-topic", "create-partitions", "cancel-reassign", "elect-leaders")
"""The operator's operations that are not faults: opt-in, on top of the default faults."""


def _history(seed: int, bug: str | None, faults: tuple[str, ...], metadata_version: int) -> list:
    cfg = WorkloadConfig(
        brokers=5,
        dirs_per_broker=3,
        topics=3,
        partitions=18,
        seed=seed,
        bug=bug,
        metadata_version=metadata_version,
        faults=faults,
    )
    return [r for batch in generate(cfg, records=1200) for r in batch]


@pytest.mark.parametrize("metadata_version", [17, 21, 27])
def test_deleted_topics_new_partitions_cancelled_moves_and_elections_audit_clean(metadata_version):
    """The operator's operations with the default faults: topics deleted (and new ones created),
    partitions added, reassignments cancelled before they complete, preferred and unclean
    elections. Each happens, and the correct controller breaks no invariant (K15's warnings are
    Kafka 4.1's own behaviour)."""
    from collections import Counter

    from kraftlake.records import Partition, PartitionChange, RemoveTopic, Topic
    from kraftlake.statemachine.kraft.workload import FAULTS

    faults = (*FAULTS[:3], *OPERATIONS)
    seen: Counter = Counter()
    for seed in range(6):
        history = _history(seed, None, faults, metadata_version)
        a = Audit()
        a.feed(history)
        errors = [v for v in a.report().violations if v.severity == "error"]
        assert errors == [], (seed, errors[:3])
        seen["deleted"] += sum(isinstance(r, RemoveTopic) for r in history)
        seen["created"] += sum(isinstance(r, Topic) for r in history) - 3
        # Topics have 6 partitions: a 7th and beyond come from CreatePartitions.
        seen["added partitions"] += sum(isinstance(r, Partition) and r.partition_id >= 6 for r in history)
        # A move ends completed (its adding replicas stay) or reverted (they leave).
        adding: dict = {}
        for r in history:
            if isinstance(r, RemoveTopic):
                adding = {k: v for k, v in adding.items() if k[0] != r.topic_id}
            if not isinstance(r, PartitionChange) or r.adding_replicas is None:
                continue
            key = (r.topic_id, r.partition_id)
            if r.adding_replicas:
                adding[key] = r.adding_replicas
            elif key in adding and r.replicas is not None:
                seen["completed" if set(adding.pop(key)) <= set(r.replicas) else "reverted"] += 1
    assert seen["deleted"] > 5 and seen["created"] >= seen["deleted"], seen
    assert seen["added partitions"] > 5 and seen["reverted"] > 5, seen


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_every_bug_is_caught_where_it_acts_among_the_operators_operations(bug):
    """With the operator's operations on top of the default faults, each controller bug is caught
    by its invariant on every seed where it changed the history (the correct controller's history
    of the same seed differs), and it acts on most seeds."""
    from kraftlake.statemachine.kraft.workload import FAULTS

    faults = (*FAULTS[:3], *OPERATIONS)
    mv = 27 if bug in ELR_BUGS else 21
    acted = 0
    for seed in range(6):
        buggy = _history(seed, bug, faults, mv)
        if msgspec.to_builtins(buggy) == msgspec.to_builtins(_history(seed, None, faults, mv)):
            continue
        acted += 1
        a = Audit()
        a.feed(buggy)
        assert CAUGHT_BY[bug] in {v.invariant for v in a.report().violations}, seed
    assert acted >= 4, acted
