"""Kafka's ``PartitionReassignmentRevertTest`` (org.apache.kafka.controller), case by case: what
cancelling a reassignment goes back to (``statemachine.kraft.reassignment``). All 5 methods of the
class are here."""

from __future__ import annotations

from kraftlake.statemachine.kraft.reassignment import PartitionReassignmentRevert


def revert(replicas, isr, removing=(), adding=()):
    r = PartitionReassignmentRevert.of(replicas, isr, removing, adding)
    return r.replicas, r.isr, r.unclean


def test_testNoneAddedOrRemoved():
    assert revert((3, 2, 1), (3, 2)) == ((3, 2, 1), (3, 2), False)


def test_testSomeRemoving():
    assert revert((3, 2, 1), (3, 2), removing=(2, 1)) == ((3, 2, 1), (3, 2), False)


def test_testSomeAdding():
    assert revert((4, 5, 3, 2, 1), (4, 5, 2), adding=(4, 5)) == ((3, 2, 1), (2,), False)


def test_testSomeRemovingAndAdding():
    assert revert((4, 5, 3, 2, 1), (4, 5, 2), removing=(2,), adding=(4, 5)) == ((3, 2, 1), (2,), False)


def test_testIsrSpecialCase():
    assert revert((4, 5, 3, 2, 1), (4, 5), removing=(2,), adding=(4, 5)) == ((3, 2, 1), (3,), True)
