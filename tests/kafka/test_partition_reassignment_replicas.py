"""Kafka's ``PartitionReassignmentReplicasTest`` (org.apache.kafka.controller), case by case, against
``statemachine.kraft.reassignment``. Kafka builds its ``PartitionAssignment`` with directories the
cases never read; here the replica lists are enough. All 12 methods of the class are here."""

from __future__ import annotations

from kraftlake.statemachine.kraft.reassignment import PartitionReassignmentReplicas as R


def test_testNoneAddedOrRemoved():
    r = R.of((3, 2, 1), (3, 2, 1))
    assert (r.removing, r.adding, r.replicas) == ((), (), (3, 2, 1))


def test_testAdditions():
    r = R.of((3, 2, 1), (3, 6, 2, 1, 5))
    assert (r.removing, r.adding, r.replicas) == ((), (5, 6), (3, 6, 2, 1, 5))


def test_testRemovals():
    r = R.of((3, 2, 1, 0), (3, 1))
    assert (r.removing, r.adding, r.replicas) == ((0, 2), (), (3, 1, 0, 2))


def test_testAdditionsAndRemovals():
    r = R.of((3, 2, 1, 0), (7, 3, 1, 9))
    assert (r.removing, r.adding, r.replicas) == ((0, 2), (7, 9), (7, 3, 1, 9, 0, 2))


def test_testRearrangement():
    r = R.of((3, 2, 1, 0), (0, 1, 3, 2))
    assert (r.removing, r.adding, r.replicas) == ((), (), (0, 1, 3, 2))


def test_testDoesNotCompleteReassignment():
    r = R.of((0, 1, 2), (3, 4, 5))
    assert r.in_progress()
    assert r.maybe_complete((0, 1, 2, 3, 4)) is None


def test_testDoesNotCompleteReassignmentIfNoneOngoing():
    r = R((), (), (0, 1, 2))
    assert not r.in_progress()
    assert r.maybe_complete((0, 1, 2)) is None


def test_testDoesCompleteReassignmentAllNewReplicas():
    r = R.of((0, 1, 2), (3, 4, 5))
    assert r.in_progress()
    assert r.maybe_complete((0, 1, 2, 3, 4, 5)) == ((3, 4, 5), (3, 4, 5))


def test_testDoesCompleteReassignmentSomeNewReplicas():
    r = R.of((0, 1, 2), (0, 1, 3))
    assert r.maybe_complete((0, 1, 2, 3)) == ((0, 1, 3), (0, 1, 3))


def test_testIsReassignmentInProgress():
    # Kafka asks a PartitionRegistration; its removing/adding lists are what decide.
    assert R((2,), (3,), (0, 1, 3, 2)).in_progress()
    assert R((2,), (), (0, 1, 3, 2)).in_progress()
    assert R((), (3,), (0, 1, 3, 2)).in_progress()
    assert not R((), (), (0, 1, 2)).in_progress()


def test_testDoesNotCompleteReassignmentIfIsrDoesNotHaveAllTargetReplicas():
    r = R.of((0, 1, 2), (0, 1, 3))
    assert r.in_progress()
    assert r.maybe_complete((3,)) is None


def test_testOriginalReplicas():
    assert R.of((0, 1, 2), (0, 1, 3)).original_replicas() == (0, 1, 2)
