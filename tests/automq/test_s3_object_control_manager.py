"""AutoMQ's ``S3ObjectControlManagerTest``, case by case, read at AutoMQ/automq f1ce98ec (the
nightly after tag 1.7.3, which added testPreparedObjectTimeoutUsesDeadline). AutoMQ's test mocks
the controller's event queue, its timer and the object storage client; here kraftlake's real
view, decider and reducer run on a simulated clock (``statemachine.simulation.Simulation``): the
storage deletion is the ``DeleteMarkedObjects`` decision, the timer the ``CheckObjectLifecycle``
command."""

from __future__ import annotations

import pytest

from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.s3stream import AssignedS3ObjectId, ObjectState, RemoveS3Object, S3Object
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.decider import decide
from kraftlake.statemachine.s3stream.reducer import apply
from kraftlake.statemachine.s3stream.view import LATEST, V0, StreamsView
from kraftlake.statemachine.simulation import Simulation

RETENTION = 1_000


def _controller(version: int = LATEST) -> Simulation:
    k = Simulation(StreamsView(), decide, apply, 1_700_000_000_000)
    k.emit([FeatureLevel(name="automq.version", feature_level=version)])
    return k


def test_testPrepareObject():
    k = _controller()
    d = k.run(c.PrepareObjects(node_id=1, count=3, ttl_ms=1000, now_ms=k.now))
    assert d.reply.first_object_id == 0 and isinstance(d.records[0], AssignedS3ObjectId)
    assert d.records[0].assigned_s3_object_id == 2 and k.view.next_object_id == 3
    assert [(o.object_id, o.state, o.timestamp) for o in k.view.prepared()] == [
        (i, ObjectState.PREPARED, k.now + 1000) for i in range(3)
    ]
    assert k.run(c.PrepareObjects(node_id=1, count=2, ttl_ms=1000, now_ms=k.now)).reply.first_object_id == 3


def test_testPreparedObjectTimeoutUsesDeadline():
    k = _controller()
    k.run(c.PrepareObjects(node_id=1, count=1, ttl_ms=3000, now_ms=k.now))
    deadline = k.now + 3000
    assert k.run(c.CheckObjectLifecycle(now_ms=deadline)).records == ()  # at the deadline: not yet
    marked = k.run(c.CheckObjectLifecycle(now_ms=deadline + 1)).records
    assert [(r.object_id, r.object_state) for r in marked] == [(0, ObjectState.MARK_DESTROYED)]


def test_testCommitObject():
    """Commit through a stream object: committing twice is REDUNDANT_OPERATION, an unknown id
    OBJECT_NOT_EXIST (AutoMQ's commitObject, driven by kraftlake's commit path)."""
    from kraftlake.statemachine.s3stream.objects import commit

    k = _controller()
    k.run(c.PrepareObjects(node_id=1, count=1, ttl_ms=3000, now_ms=k.now))
    err, recs = commit(k.view, 0, 100, k.now, 0, {})
    assert err == c.NONE and [(r.object_id, r.object_state, r.object_size) for r in recs] == [
        (0, ObjectState.COMMITTED, 100)
    ]
    k.emit(recs)
    assert commit(k.view, 0, 100, k.now, 0, {})[0] == c.REDUNDANT_OPERATION
    assert commit(k.view, 9, 100, k.now, 0, {})[0] == c.OBJECT_NOT_EXIST


class _Replay(Simulation):
    """AutoMQ's test replays what the manager decided as it decided it: records with no log time
    (``ts_ms`` None), where the simulation stamps each with its clock."""

    def emit(self, records) -> None:
        for r in records:
            self._apply(self.view, r)
            self.records.append(r)


@pytest.mark.parametrize("log_times", [True, False])
@pytest.mark.parametrize("version", [V0, LATEST])
def test_testExpiredCheck(version, log_times):
    """An expired PREPARED object is marked destroyed (from V2 with timestamp 0, as AutoMQ writes
    it), then deleted only once the retention has passed since it was marked, not at the next check,
    whether its records carry a log time or come straight from the decider (``log_times`` False:
    the mark time is the decision's, which the record carries, since its timestamp says nothing)."""
    k = _controller(version)
    if not log_times:
        k = _Replay(k.view, decide, apply, k.now)
    k.run(c.PrepareObjects(node_id=1, count=1, ttl_ms=3000, now_ms=k.now))
    k.now += 4000
    (mark,) = k.run(c.CheckObjectLifecycle(now_ms=k.now)).records
    assert isinstance(mark, S3Object) and mark.object_state == ObjectState.MARK_DESTROYED
    assert mark.timestamp == (0 if version == LATEST else k.now - 1000)
    assert k.view.marked_at == {0: k.now}
    k.now += RETENTION // 2
    assert k.run(c.DeleteMarkedObjects(now_ms=k.now, retention_ms=RETENTION)).records == ()
    k.now += RETENTION // 2 + 100
    (gone,) = k.run(c.DeleteMarkedObjects(now_ms=k.now, retention_ms=RETENTION)).records
    assert isinstance(gone, RemoveS3Object) and gone.object_id == 0 and k.view.objects == {}
    assert k.run(c.DeleteMarkedObjects(now_ms=k.now + 10 * RETENTION, retention_ms=RETENTION)).records == ()


def test_testCheckS3ObjectsLifecycle_inflightLimit():
    """While the last storage deletion is in flight (AutoMQ's ``lastCleanCf``; the test's delayed
    storage mock), a check neither marks nor deletes; once it finished, the next object goes."""
    k = _controller()
    k.run(c.PrepareObjects(node_id=1, count=1, ttl_ms=1000, now_ms=k.now))
    k.now += 1001
    k.run(c.CheckObjectLifecycle(now_ms=k.now))
    k.now += RETENTION + 1
    first = k.run(c.DeleteMarkedObjects(now_ms=k.now, retention_ms=RETENTION)).records
    assert [r.object_id for r in first] == [0]
    k.run(c.PrepareObjects(node_id=1, count=1, ttl_ms=1000, now_ms=k.now))
    k.now += 1001
    assert k.run(c.CheckObjectLifecycle(now_ms=k.now, deletion_in_flight=True)).records == ()
    assert k.view.prepared_ids == {1}
    k.run(c.CheckObjectLifecycle(now_ms=k.now))
    k.now += RETENTION + 1
    assert k.run(c.DeleteMarkedObjects(now_ms=k.now, retention_ms=RETENTION, deletion_in_flight=True)).records == ()
    second = k.run(c.DeleteMarkedObjects(now_ms=k.now, retention_ms=RETENTION)).records
    assert [r.object_id for r in second] == [1] and k.view.objects == {}


def test_testDeleteTooManyOneRequest():
    """1700 objects expire; the check marks them (at most ``limit`` per round) and the deletion
    removes them all after the retention, in rounds of at most ``limit`` (AutoMQ: 1000 keys per
    storage call, 2000 per round)."""
    k = _controller()
    k.run(c.PrepareObjects(node_id=1, count=1700, ttl_ms=3000, now_ms=k.now))
    k.now += 4000
    first = k.run(c.CheckObjectLifecycle(now_ms=k.now, limit=1000)).records
    second = k.run(c.CheckObjectLifecycle(now_ms=k.now, limit=1000)).records
    assert (len(first), len(second)) == (1000, 700) and not k.view.prepared_ids
    k.now += RETENTION
    rounds = [len(k.run(c.DeleteMarkedObjects(now_ms=k.now, retention_ms=RETENTION, limit=1000)).records) for _ in "ab"]
    assert rounds == [1000, 700] and k.view.objects == {} and k.view.marked_at == {}
