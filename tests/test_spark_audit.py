"""The Spark audit agrees with the local one: identical violation lists (ids, entities, offsets,
messages, evidence) for the invariants Spark checks so far, on every audit fixture and on
simulated histories that hypothesis picks (seeds, sizes, faults, bugs)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import Log, iter_lines
from kraftlake.replay.audit import Audit
from kraftlake.spark import read_log
from kraftlake.spark.audit import violations
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "kraft" / "audit").glob("*.jsonl"))
SPARK_INVARIANTS = ("K1", "K3", "L3", "L4")


def _local(log: Log) -> list[dict]:
    audit = Audit()
    audit.feed(log.at().records())
    return [
        msgspec.to_builtins(v)
        for v in audit.report().violations
        # Spark's L3 covers broker records so far (not topics and partitions).
        if v.invariant in SPARK_INVARIANTS and (v.invariant != "L3" or v.entity.startswith("broker/"))
    ]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_spark_finds_the_local_violations_on_every_fixture(spark, tmp_path, fixture):
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines(fixture.open("rb"))))
    local = _local(log)
    assert violations(read_log(spark, log.path), SPARK_INVARIANTS) == local
    # The differential test is not comparing two empty lists where the story is about these.
    if fixture.name == "leader-outside-isr.jsonl":
        assert sum(v["invariant"] == "K1" for v in local) >= 5
    if fixture.name == "no-leader-epoch-bump.jsonl":
        assert sum(v["invariant"] == "K3" for v in local) >= 1
    if fixture.name == "stale-broker-epoch.jsonl":
        assert sum(v["invariant"] == "L4" for v in local) >= 1


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    records=st.integers(100, 1500),
    bug=st.sampled_from([None, "leader-outside-isr", "no-leader-epoch-bump", "keep-offline-replica-in-isr", "stale-broker-epoch"]),
    faults=st.sets(st.sampled_from(["dir-failure", "controlled-shutdown", "broker-crash", "reassign"]), min_size=1),
)
def test_spark_and_local_agree_on_simulated_histories(spark, tmp_path_factory, seed, records, bug, faults):
    cfg = WorkloadConfig(brokers=5, dirs_per_broker=2, topics=2, partitions=10, seed=seed, bug=bug, faults=tuple(sorted(faults)))
    log = Log.create(tmp_path_factory.mktemp("sim") / "log")
    log.append([r for batch in generate(cfg, records=records) for r in batch])
    assert violations(read_log(spark, log.path), SPARK_INVARIANTS) == _local(log)


def test_broker_records_against_the_registration_in_force(spark, tmp_path):
    """L3/L4 on Spark as the local reducer rules them: a change of a broker never registered, a
    stale epoch, a valid unregistration, then changes of the broker it removed; a re-registration
    starts over."""
    from kraft_helpers import bootstrap, registration, uid

    from kraftlake.records import BrokerRegistrationChange, FenceBroker, UnregisterBroker

    records = [
        *bootstrap(),
        registration(1, [uid("d1")], epoch=10),
        BrokerRegistrationChange(broker_id=2, broker_epoch=5, fenced=-1),  # L3: never registered
        BrokerRegistrationChange(broker_id=1, broker_epoch=9, fenced=-1),  # L4: stale epoch
        UnregisterBroker(broker_id=1, broker_epoch=7),  # L4: stale, not removed
        UnregisterBroker(broker_id=1, broker_epoch=10),  # removed
        FenceBroker(id=1, epoch=10),  # L3: no longer registered
        UnregisterBroker(broker_id=1, broker_epoch=10),  # L3
        registration(1, [uid("d1")], epoch=20),
        BrokerRegistrationChange(broker_id=1, broker_epoch=20, fenced=-1),  # fine
        BrokerRegistrationChange(broker_id=1, broker_epoch=10, fenced=1),  # L4: the old epoch
    ]
    log = Log.create(tmp_path / "log")
    log.append(records)
    local = _local(log)
    assert [(v["invariant"], v["first_offset"]) for v in local] == [
        ("L3", 2), ("L4", 3), ("L4", 4), ("L3", 6), ("L3", 7), ("L4", 10)
    ]  # fmt: skip
    assert violations(read_log(spark, log.path), ("L3", "L4")) == local
