"""Hypothesis drives the S3Stream deciders with random commands, well-formed and not, from
random nodes at random epochs, through failovers: an error decides no records, and after every
controller result every state invariant (S1-S3, S5-S7, S9, S10) holds on the whole view."""

from __future__ import annotations

import msgspec
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kraftlake.records.s3stream import ObjectState
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.decider import decide
from kraftlake.statemachine.s3stream.invariants import check_view
from kraftlake.statemachine.s3stream.workload import Cluster, WorkloadConfig

from helpers.tiers import examples

nodes = st.integers(0, 3)
small = st.integers(-1, 3)
offsets = st.integers(0, 400)


class Deciders(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32), version=st.sampled_from([1, 3, 7]))
    def start(self, seed, version):
        self.k = Cluster(WorkloadConfig(seed=seed, nodes=4, streams=4, automq_version=version))
        self.k.bootstrap()

    def _run(self, cmd):
        before = self.k.view.state_hash()
        d = decide(self.k.view, cmd)
        if d.error_code:
            assert d.records == ()
            assert self.k.view.state_hash() == before
        else:
            self.k.emit(d.records)
        return d

    # well-formed node behaviour (the simulator's operations)
    @rule(
        op=st.sampled_from(
            [
                "append",
                "upload",
                "compact",
                "compact_stream_objects",
                "trim",
                "reassign",
                "failover",
                "delete",
                "leak",
                "tick",
            ]
        )
    )
    def operation(self, op):
        self.k.op += 1
        self.k.now += 200
        getattr(self.k, op)()

    # anything a node may send
    @rule(node=nodes, sid=small, epoch=small, node_epoch=small)
    def open_stream(self, node, sid, epoch, node_epoch):
        d = self._run(c.OpenStream(node_id=node, node_epoch=node_epoch, stream_id=max(sid, 0), stream_epoch=epoch))
        if d.error_code == c.NONE and d.records:
            self.k.wal[node][max(sid, 0)] = d.reply.next_offset

    @rule(node=nodes, sid=small, epoch=small, end=st.one_of(st.just(-1), offsets))
    def close_stream(self, node, sid, epoch, end):
        s = self.k.view.streams.get(max(sid, 0))
        wal_end = self.k.wal[node].get(max(sid, 0))
        # A node fast-closes at most at its WAL's end: beyond it, it would promise data it lacks.
        if end >= 0 and (s is None or wal_end is None or end > wal_end):
            end = -1 if s is None else s.end_offset
        self._run(
            c.CloseStream(
                node_id=node,
                node_epoch=self.k.node_epoch(node),
                stream_id=max(sid, 0),
                stream_epoch=epoch,
                end_offset=end,
            )
        )

    @rule(node=nodes, sid=small, epoch=small, start=offsets)
    def trim_stream(self, node, sid, epoch, start):
        self._run(
            c.TrimStream(
                node_id=node,
                node_epoch=self.k.node_epoch(node),
                stream_id=max(sid, 0),
                stream_epoch=epoch,
                new_start_offset=start,
            )
        )

    @rule(sid=small)
    def delete_stream(self, sid):
        self._run(c.DeleteStream(stream_id=max(sid, 0)))

    @rule(node=nodes, sid=small, start=offsets, length=st.integers(1, 100), failover=st.booleans(), node_epoch=small)
    def commit(self, node, sid, start, length, failover, node_epoch):
        """An upload with arbitrary offsets: the controller accepts only what continues a stream."""
        (oid,) = self.k.prepare(node, 1)
        from kraftlake.records.observations import ObjectWritten
        from kraftlake.records.s3stream import StreamRange

        sid = max(sid, 0)
        self.k.emit(
            [
                ObjectWritten(
                    node_id=node,
                    object_id=oid,
                    ranges=(StreamRange(stream_id=sid, start_offset=start, end_offset=start + length),),
                )
            ]
        )
        self._run(
            c.CommitStreamSetObject(
                node_id=node,
                node_epoch=node_epoch,
                object_id=oid,
                order_id=oid,
                object_size=1,
                failover_mode=failover,
                now_ms=self.k.now,
                ranges=(c.CommitRange(stream_id=sid, stream_epoch=0, start_offset=start, end_offset=start + length),),
            )
        )

    @rule(node=nodes, epoch=st.integers(-1, 5), failover=st.booleans())
    def register(self, node, epoch, failover):
        d = self._run(c.GetOpeningStreams(node_id=node, node_epoch=epoch, failover_mode=failover))
        if d.error_code == c.NONE:
            self.k.epochs[node] = max(self.k.epochs[node], epoch)

    @rule(ids=st.lists(st.integers(0, 60), max_size=4))
    def commit_objects_already_committed(self, ids):
        """Retried commits of committed objects are idempotent: NONE with no records."""
        for oid in ids:
            o = self.k.view.objects.get(oid)
            if o is not None and o.state == ObjectState.COMMITTED:
                d = self._run(
                    c.CommitStreamSetObject(
                        node_id=0,
                        node_epoch=self.k.node_epoch(0),
                        object_id=oid,
                        order_id=oid,
                        object_size=1,
                        now_ms=self.k.now,
                    )
                )
                assert d.error_code in (c.NONE, c.NODE_FENCED) and d.records == ()

    @invariant()
    def invariants_hold(self):
        if hasattr(self, "k"):
            assert check_view(self.k.view) == []

    @invariant()
    def image_round_trips(self):
        if hasattr(self, "k"):
            view = self.k.view
            image = msgspec.json.decode(msgspec.json.encode(view.image()), type=type(view.image()))
            assert image.state_hash == view.state_hash()


TestDeciders = Deciders.TestCase
TestDeciders.settings = settings(max_examples=examples(60), stateful_step_count=40, deadline=None)
