"""The audit under KIP-966 on hand-made histories: K1 accepts an empty ISR without a leader only
with ELR on; K13 (ELR within the replicas, apart from the ISR), K14 (a leader from outside ISR and
ELR in a clean election) and K15 (an ELR member on an offline directory, a warning) each fire on
the one state they are about and on nothing else."""

from __future__ import annotations

import msgspec
import pytest

from kraftlake.records import BrokerRegistrationChange, ClearElr, FeatureLevel, NoOp, Partition, PartitionChange, Topic
from kraftlake.records.kraft import ReplicaDirectory
from kraftlake.replay.audit import Audit, AuditConfig
from tests.helpers.kraft import registration, uid

T = uid("elr-audit-topic")
D = {b: uid(f"elr-audit-dir-{b}") for b in (1, 2, 3)}
D2 = uid("elr-audit-dir-1b")


def history(*body, elr: bool = True) -> list:
    head = [
        FeatureLevel(name="metadata.version", feature_level=23),
        *([FeatureLevel(name="eligible.leader.replicas.version", feature_level=1)] if elr else []),
        registration(1, [D[1], D2], fenced=False),
        registration(2, [D[2]], fenced=False),
        registration(3, [D[3]], fenced=False),
        Topic(name="t", topic_id=T),
        Partition(
            topic_id=T,
            partition_id=0,
            replicas=(1, 2, 3),
            isr=(1, 2, 3),
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
            assignment=tuple(ReplicaDirectory(broker=b, directory=D[b]) for b in (1, 2, 3)),
        ),
    ]
    return [*head, *body, NoOp(), NoOp()]


def found(records, grace: int = 0) -> list[tuple[str, str]]:
    a = Audit(AuditConfig(grace_records=grace))
    a.feed(msgspec.structs.replace(r, offset=i) for i, r in enumerate(records))
    return sorted((v.invariant, v.severity) for v in a.report().violations)


def pcr(**kw) -> PartitionChange:
    return PartitionChange(topic_id=T, partition_id=0, **kw)


def test_an_empty_isr_is_legitimate_only_with_elr_on():
    leaderless = pcr(isr=(), leader=-1, eligible_leader_replicas=(1, 2, 3), last_known_elr=(1,))
    assert found(history(leaderless)) == []
    assert found(history(pcr(isr=(), leader=-1), elr=False)) == [("K1", "error")]
    # With ELR on a leader is still needed in the ISR: an empty ISR with a leader is K1.
    assert found(history(pcr(isr=(), eligible_leader_replicas=(2, 3)))) == [("K1", "error")]


@pytest.mark.parametrize(
    "change",
    [
        pcr(isr=(1,), eligible_leader_replicas=(1, 2)),  # ELR shares 1 with the ISR
        pcr(isr=(1, 2), eligible_leader_replicas=(4,)),  # 4 is no replica
    ],
)
def test_k13_elr_within_replicas_and_apart_from_the_isr(change):
    assert found(history(change)) == [("K13", "error")]


def test_k13_closes_when_clear_elr_empties_the_elr():
    bad = pcr(isr=(1,), eligible_leader_replicas=(1, 2))
    assert found(history(bad, ClearElr(topic_name="t"))) == [("K13", "error")]
    a = Audit(AuditConfig(grace_records=0))
    records = history(bad, ClearElr(topic_name="t"))
    a.feed(msgspec.structs.replace(r, offset=i) for i, r in enumerate(records))
    [v] = a.report().violations
    assert v.last_offset == len(records) - 4  # ended by the ClearElr's offset, one before it still wrong


def test_k14_leader_from_outside_isr_and_elr_in_a_clean_election():
    shrink = pcr(isr=(1,), eligible_leader_replicas=(2,))
    from_elr = pcr(isr=(2,), leader=2, eligible_leader_replicas=())
    assert found(history(shrink, pcr(isr=(), leader=-1, eligible_leader_replicas=(1, 2)), from_elr)) == []
    outside = pcr(isr=(3,), leader=3)  # 3 left the ISR, is not in the ELR, and no RECOVERING
    assert found(history(shrink, outside)) == [("K14", "error")]
    unclean = pcr(isr=(3,), leader=3, leader_recovery_state=1, eligible_leader_replicas=())
    assert found(history(shrink, unclean)) == []


def test_k15_warns_about_an_elr_member_on_an_offline_directory():
    shrink = pcr(isr=(1,), eligible_leader_replicas=(2, 3))
    dir_gone = BrokerRegistrationChange(broker_id=2, broker_epoch=102, log_dirs=(uid("elr-audit-other"),))
    assert found(history(shrink, dir_gone)) == [("K15", "warning")]
    # Within the grace, and fixed before it ends, nothing is reported.
    assert found(history(shrink, dir_gone, pcr(eligible_leader_replicas=(3,))), grace=5) == []
    # A directory of broker 1 going offline does not touch the ELR members.
    assert found(history(shrink, BrokerRegistrationChange(broker_id=1, broker_epoch=101, log_dirs=(D[1],)))) == []
