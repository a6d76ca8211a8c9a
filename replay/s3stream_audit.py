"""The S3Stream family's part of the audit: replays S3Stream records into a ``StreamsView`` and
checks S1-S14 (the catalogue's, ``statemachine.invariants``) on exactly the streams, nodes and
objects a record touched. What is wrong is each rule's to say (``statemachine.s3stream.invariants``);
this module decides when to ask, counts the checks, names the entities and keeps the graces.

It reports through the audit's books (``replay.books``): states and graces, instants, intervals,
evidence, all as for the KRaft invariants; the engine (``replay.audit``) feeds it records
(``replay.family.FamilyAudit``), each to the handler of its class (``_CHECKS``, as the reducer's
``_APPLY``). Indexes of its own (which objects hold which stream's offsets, who references an
object, PREPARED deadlines) keep every check proportional to what a record changed, not to the
size of the state.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    KV,
    AssignedS3ObjectId,
    AssignedStreamId,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveNodeWALMetadata,
    RemoveRange,
    RemoveS3Object,
    RemoveS3Stream,
    RemoveS3StreamObject,
    RemoveStreamSetObject,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
)
from kraftlake.statemachine.s3stream import invariants as sinv
from kraftlake.statemachine.s3stream.nodes import registration_epoch
from kraftlake.statemachine.s3stream.reducer import apply
from kraftlake.statemachine.s3stream.view import StreamsView

if TYPE_CHECKING:
    from .books import Books

STREAM_STATE_INVARIANTS = ("S1", "S2", "S3", "S10")
COVERAGE_INVARIANTS = ("S5", "S6")
NO_END = -(1 << 62)
"""``StreamsAudit.end_floor`` of a stream it knows no end of."""


class StreamsAudit:
    """S1-S14 over the records of one log, fed in offset order by ``Audit``."""

    def __init__(self, books: Books, view: StreamsView | None = None) -> None:
        """``view``: the state before the first record fed (``--from``; empty by default). Ids
        used and removed before it are not known: S8's "used again" sees only what still exists."""
        self.books = books
        self._state = books.state
        self._instant = books.instant
        self.view = StreamsView()
        self.cover = sinv.Coverage()
        self.refs: dict[int, set[str]] = {}
        """Object id -> entities referencing it (``stream/<s>`` for SOs, ``node/<n>`` for SSOs)."""
        self.deadlines: list[tuple[int, int]] = []
        """Heap of (deadline, object id) of PREPARED objects (S11)."""
        self.seen_streams: set[int] = set()
        self.seen_objects: set[int] = set()
        self.duty_nodes: dict[int, set[int]] = {}
        """Stream -> the nodes holding a historical WAL duty for it (S9 is re-checked there)."""
        self.pending: set[int] = set()
        """Streams whose coverage (S5, S6) changed in the current batch."""
        self.uncovered: set[int] = set()
        """Streams whose coverage was last found wrong (an S5 or S6 state may be open)."""
        self.batch: tuple[int, int | None] | None = None
        """(offset, ts_ms) of the last record of the current batch: a run of records with one time."""
        self.end_floor = sinv.IdArray(NO_END)
        """Stream -> a logical end it has reached (at most its end now: ends only grow while a
        stream exists). A stream-set object's range ending at or below it moves no end, and S12
        has nothing to check: a compaction's hundreds of ranges pass in one array comparison."""
        if view is not None:
            self._start_from(view)

    def _start_from(self, view: StreamsView) -> None:
        """Index ``view``, the state before the first record fed, as its records would have."""
        self.view = view
        for sid in view.streams:
            self.cover.add_stream(sid)
        for node_id, node in sorted(view.nodes.items()):
            for object_id in sorted(node.stream_set_objects):
                self.cover.add_sso(view, node_id, object_id)
                self.refs.setdefault(object_id, set()).add(f"node/{node_id}")
            for sid in node.uncommitted:
                self.duty_nodes.setdefault(sid, set()).add(node_id)
        for sid, s in sorted(view.streams.items()):
            for o in s.objects.values():
                self.cover.add(sid, o.object_id, o.start_offset, o.end_offset)
                self.refs.setdefault(o.object_id, set()).add(f"stream/{sid}")
        self.cover.settle()
        self.cover.changed.clear()  # judged when a record touches them, as before ``--from``
        self.deadlines = sorted((view.objects[i].timestamp, i) for i in view.prepared_ids)
        self.seen_streams = set(view.streams)
        self.seen_objects = set(view.objects)

    def _stream_states(self, sid: int, offset: int, ts: int | None) -> None:
        s = self.view.streams.get(sid)
        entity = f"stream/{sid}"
        if s is None:  # what was wrong of it closes with it: no check (nothing left to judge)
            self.pending.discard(sid)
            for inv in (*STREAM_STATE_INVARIANTS, *COVERAGE_INVARIANTS):
                if self.books.is_wrong(inv, entity):
                    self._state(inv, entity, offset, ts, None, count=False)
            return
        self._state("S1", entity, offset, ts, sinv.ranges_ordered(s))
        self._state("S2", entity, offset, ts, sinv.current_range_is_last(s))
        self._state("S3", entity, offset, ts, sinv.start_within_end(s))
        self._state("S10", entity, offset, ts, sinv.epoch_and_state_agree(s))

    def _coverage(self, sid: int, offset: int, ts: int | None) -> None:
        """Coverage is judged once per batch: AutoMQ's controller applies a result's records
        together (``ControllerResult.atomicOf``), and a compaction overlaps its sources until their
        removal a few records on, in the same result."""
        self.pending.add(sid)

    def finish(self) -> None:
        """The end of the records fed so far (a report is made): judge the batch that ended."""
        self._flush()

    def _flush(self) -> None:
        """S5, S6 for the streams the batch that just ended touched, as of its last record: those
        whose entries no longer sum as before (``Coverage.changed``), or whose start, end or
        duties moved (``pending``). A stream none of that happened to is as it was."""
        cover = self.cover
        cover.settle()
        self.pending |= cover.changed
        cover.changed.clear()
        if not self.pending or self.batch is None:
            self.pending.clear()
            return
        offset, ts = self.batch
        streams = self.view.streams
        duties, uncovered = self.duty_nodes, self.uncovered
        right = 0  # right and not wrong before: only the counts move (as ``_state`` would count them)
        for sid in sorted(self.pending):
            s = streams.get(sid)
            if s is None or cover.unindexed:
                continue
            if sid not in duties and cover.exact(sid, s.start_offset, s.end_offset):
                if sid not in uncovered:
                    right += 1
                    continue
                overlap = gap = None
            else:  # wrong, or a duty may fill a gap: find the first overlap and gap, and word them
                overlap, gap = sinv.coverage(self.view, s, cover.of(sid), duties.get(sid, ()))
            entity = f"stream/{sid}"
            self._state("S5", entity, offset, ts, overlap)
            self._state("S6", entity, offset, ts, gap)
            if overlap is None and gap is None:
                uncovered.discard(sid)
            else:
                uncovered.add(sid)
        self.books.checked["S5"] += right
        self.books.checked["S6"] += right
        self.pending.clear()

    def _early_delete(self, r: RemoveS3Object, offset: int) -> None:
        """S13 (``invariants.deleted_after_retention``) at the deletion of a marked object."""
        if r.object_id not in self.view.marked_at or r.ts_ms is None:
            return  # not marked (KEEP_DATA drops the metadata at once), or no time to judge by
        self.books.checked["S13"] += 1
        bad = sinv.deleted_after_retention(self.view, r, self.books.config.object_retention_ms)
        if bad:
            self._instant("S13", f"object/{r.object_id}", offset, bad, count=False)

    def _object_refs(self, object_id: int, offset: int, ts: int | None) -> None:
        """S7 for every entity referencing ``object_id``."""
        for entity in sorted(self.refs.get(object_id, ())):
            self._state("S7", f"{entity}/object/{object_id}", offset, ts, sinv.object_committed(self.view, object_id))

    def _ref(self, object_id: int, entity: str, offset: int, ts: int | None, add: bool) -> None:
        refs = self.refs.setdefault(object_id, set())
        if add:
            refs.add(entity)
            self._state("S7", f"{entity}/object/{object_id}", offset, ts, sinv.object_committed(self.view, object_id))
        else:  # the reference goes: what was wrong of it closes, no check
            refs.discard(entity)
            if not refs:
                del self.refs[object_id]
            self._state("S7", f"{entity}/object/{object_id}", offset, ts, None, count=False)

    def _duties(self, node_id: int, offset: int, ts: int | None, streams: list[int] | None = None) -> None:
        """S9 for the node's historical duties (all, or those of ``streams``): one check of each
        duty there is; one gone closes what was wrong of it, no check."""
        node = self.view.nodes.get(node_id)
        entries = {} if node is None else node.uncommitted
        wrong = self.books.is_wrong
        for sid in sorted(entries) if streams is None else streams:
            e = entries.get(sid)
            entity = f"duty/{node_id}/{sid}"
            if e is None:
                if wrong("S9", entity):
                    self._state("S9", entity, offset, ts, None, count=False)
                continue
            self.books.checked["S9"] += 1
            msg = sinv.duty_matches_range(self.view, node_id, e)
            if msg is not None or wrong("S9", entity):
                self._state("S9", entity, offset, ts, msg, count=False)

    def _duties_of_stream(self, sid: int, offset: int, ts: int | None) -> None:
        for node_id in sorted(self.duty_nodes.get(sid, ())):
            self._duties(node_id, offset, ts, [sid])

    def _index_duties(self, node_id: int, streams: list[int]) -> None:
        """Keep ``duty_nodes`` (stream -> nodes with a duty or an open S9 state for it)."""
        node = self.view.nodes.get(node_id)
        wrong = self.books.is_wrong
        for sid in streams:
            nodes = self.duty_nodes.setdefault(sid, set())
            if (node is not None and sid in node.uncommitted) or wrong("S9", f"duty/{node_id}/{sid}"):
                nodes.add(node_id)
            else:
                nodes.discard(node_id)
                if not nodes:
                    del self.duty_nodes[sid]

    # -- the records -----------------------------------------------------------------------------

    def feed(self, r: Any, offset: int) -> None:
        """Check and apply one record of the family (or ``ObjectWritten``, ``FeatureLevel``): what
        every record starts (a batch, deadlines passing), then its class's handler (``_CHECKS``),
        else the fold alone."""
        ts = r.ts_ms
        if ts is None or self.batch is None or ts != self.batch[1]:
            self._flush()
        self.batch = (offset, ts)
        if ts is not None:
            self._overdue(offset, ts)
        check = _CHECKS.get(type(r))
        if check is None:  # RemoveKV, NodeWALMetadata, UpdateNextNodeId, FeatureLevel
            apply(self.view, r)
        else:
            check(self, r, offset)
        self.view.offset = offset

    # -- the records: one handler per class the checks read (``_CHECKS``) --------------------------

    def _on_stream(self, r: S3Stream, offset: int) -> None:
        view, ts = self.view, r.ts_ms
        created = r.stream_id not in view.streams
        if created:
            self._ids("stream", r.stream_id, view.next_stream_id, self.seen_streams, offset)
        apply(view, r)
        if created:
            self.cover.add_stream(r.stream_id)
        self._stream_states(r.stream_id, offset, ts)
        self._coverage(r.stream_id, offset, ts)
        self._duties_of_stream(r.stream_id, offset, ts)

    def _on_remove_stream(self, r: RemoveS3Stream, offset: int) -> None:
        ts = r.ts_ms
        apply(self.view, r)
        self.end_floor[r.stream_id] = NO_END  # a stream made again under its id starts afresh
        self._stream_states(r.stream_id, offset, ts)
        for object_id in self.cover.drop_stream(r.stream_id):
            self._ref(object_id, f"stream/{r.stream_id}", offset, ts, False)
        self._duties_of_stream(r.stream_id, offset, ts)

    def _on_range(self, r: Range | RemoveRange, offset: int) -> None:
        """Range, RemoveRange."""
        apply(self.view, r)
        self._stream_states(r.stream_id, offset, r.ts_ms)
        self._duties_of_stream(r.stream_id, offset, r.ts_ms)

    def _on_stream_object(self, r: S3StreamObject, offset: int) -> None:
        view, ts = self.view, r.ts_ms
        self._ids("object", r.object_id, view.next_object_id, None, offset)
        s = view.streams.get(r.stream_id)
        if s is not None and r.end_offset > s.end_offset:  # data that moves the end: S12's to check
            self.books.checked["S12"] += 1
            bad = sinv.stream_object_advances_end(s, r)
            if bad:
                self._instant("S12", f"stream/{r.stream_id}", offset, bad, count=False)
        apply(view, r)
        if s is not None:
            self.cover.add(r.stream_id, r.object_id, r.start_offset, r.end_offset)
            self._ref(r.object_id, f"stream/{r.stream_id}", offset, ts, True)
            self._stream_states(r.stream_id, offset, ts)

    def _on_remove_stream_object(self, r: RemoveS3StreamObject, offset: int) -> None:
        apply(self.view, r)
        if self.cover.remove(r.stream_id, r.object_id):
            self._ref(r.object_id, f"stream/{r.stream_id}", offset, r.ts_ms, False)
            self._stream_states(r.stream_id, offset, r.ts_ms)

    def _on_remove_stream_set_object(self, r: RemoveStreamSetObject, offset: int) -> None:
        node = self.view.nodes.get(r.node_id)
        known = node is not None and r.object_id in node.stream_set_objects
        apply(self.view, r)
        if known:
            self.cover.drop_sso(r.object_id)  # coverage, at the end of the batch
            self._ref(r.object_id, f"node/{r.node_id}", offset, r.ts_ms, False)

    def _on_remove_object(self, r: RemoveS3Object, offset: int) -> None:
        ts = r.ts_ms
        self._early_delete(r, offset)
        apply(self.view, r)
        self._object_refs(r.object_id, offset, ts)
        self._state("S11", f"object/{r.object_id}", offset, ts, None, count=False)  # gone: no check

    def _on_assigned_id(self, r: AssignedStreamId | AssignedS3ObjectId, offset: int) -> None:
        """AssignedStreamId, AssignedS3ObjectId: S8's high-water mark (``invariants.mark_never_back``)."""
        self.books.checked["S8"] += 1
        bad = sinv.mark_never_back(self.view, r)
        if bad:
            self._instant("S8", "ids", offset, bad, count=False)
        apply(self.view, r)

    def _on_end_offsets(self, r: S3StreamEndOffsets, offset: int) -> None:
        view, ts = self.view, r.ts_ms
        for e in r.end_offsets:
            s = view.streams.get(e.stream_id)
            bad = None if s is None else sinv.end_never_back(s, e.end_offset)
            if bad:
                self._instant("S4", f"stream/{e.stream_id}", offset, bad, count=False)
            self.books.checked["S4"] += 1
        apply(view, r)
        for sid in sorted({e.stream_id for e in r.end_offsets}):
            self._coverage(sid, offset, ts)
            s = view.streams.get(sid)
            if s is not None:  # only the logical end moved: S3 is the state check that reads it
                self._state("S3", f"stream/{sid}", offset, ts, sinv.start_within_end(s))

    def _on_uncommitted_offsets(self, r: NodeWALUncommittedOffsets, offset: int) -> None:
        ts = r.ts_ms
        self.books.checked["S9"] += len(r.entries)  # each entry's direction, then the duties it leaves
        for e in r.entries:
            bad = sinv.duty_entry_forward(e)
            if bad:
                self._instant("S9", f"duty/{r.node_id}/{e.stream_id}", offset, bad, count=False)
        apply(self.view, r)
        streams = sorted({e.stream_id for e in r.entries})
        self._duties(r.node_id, offset, ts, streams)
        self._index_duties(r.node_id, streams)
        for sid in streams:
            self._coverage(sid, offset, ts)

    def _on_remove_node(self, r: RemoveNodeWALMetadata, offset: int) -> None:
        ts = r.ts_ms
        node = self.view.nodes.get(r.node_id)
        gone = [] if node is None else sorted(node.stream_set_objects)
        duties = [] if node is None else sorted(node.uncommitted)
        apply(self.view, r)
        self._duties(r.node_id, offset, ts, duties)
        self._index_duties(r.node_id, duties)
        for object_id in gone:
            self.cover.drop_sso(object_id)
            self._ref(object_id, f"node/{r.node_id}", offset, ts, False)

    def _on_object_written(self, r: ObjectWritten, offset: int) -> None:
        apply(self.view, r)
        self.cover.index(self.view, r.object_id)

    def _on_kv(self, r: KV, offset: int) -> None:
        self._registrations(r, offset)
        apply(self.view, r)

    def _registrations(self, r: KV, offset: int) -> None:
        """S14 (``invariants.epoch_never_back``) for each node registration the KV record writes."""
        for e in r.key_values:
            registration = registration_epoch(e)
            if registration is None:
                continue
            node_id, epoch = registration
            self.books.checked["S14"] += 1
            bad = sinv.epoch_never_back(self.view, node_id, epoch)
            if bad:
                self._instant("S14", f"node/{node_id}", offset, bad, count=False)

    def _ids(self, kind: str, ident: int, high: int, seen: set[int] | None, offset: int) -> None:
        """S8 (``invariants.id_assigned``) for an id a record uses; ``seen``: the ids of its kind
        used before, where a new one must not be one of them (streams), kept here."""
        self.books.checked["S8"] += 1
        bad = sinv.id_assigned(kind, ident, high, seen)
        if bad:
            self._instant("S8", f"{kind}/{ident}", offset, bad, count=False)
        if seen is not None and ident < high:
            seen.add(ident)

    def _on_stream_set_object(self, r: S3StreamSetObject, offset: int) -> None:
        view, ts = self.view, r.ts_ms
        self._ids("object", r.object_id, view.next_object_id, None, offset)
        node = view.nodes.get(r.node_id)
        columns = None
        if node is not None:
            columns = ids, starts, ends = sinv.range_columns(r.ranges or view.object_index.get(r.object_id, ()))
            floor = self.end_floor.take(ids)
            if floor is not None:
                ask = np.flatnonzero(ends > floor)
                ids, starts, ends = ids[ask], starts[ask], ends[ask]
            get = view.streams.get
            for sid, start, end in zip(ids.tolist(), starts.tolist(), ends.tolist()):
                s = get(sid)
                if s is None:
                    continue
                if end <= s.end_offset:  # moves no end: nothing for S12 to check
                    self.end_floor[sid] = s.end_offset
                    continue
                self.books.checked["S12"] += 1
                bad = sinv.stream_set_range_advances_end(view, s, r, start, end)
                if bad:
                    self._instant("S12", f"stream/{sid}", offset, bad, count=False)
        replaced = node is not None and r.object_id in node.stream_set_objects
        apply(view, r)
        if node is None:
            return
        if replaced:
            self.cover.drop_sso(r.object_id)
        self.cover.add_sso(view, r.node_id, r.object_id, columns)  # coverage, at the end of the batch
        self._ref(r.object_id, f"node/{r.node_id}", offset, ts, True)
        if r.ranges:  # inline ranges (before V2) move the logical end: S3 and coverage read it
            moved = sorted({x.stream_id for x in r.ranges if x.stream_id in view.streams})
            self.pending.update(moved)
            for sid in moved:
                self._state("S3", f"stream/{sid}", offset, ts, sinv.start_within_end(view.streams[sid]))

    def _on_object(self, r: S3Object, offset: int) -> None:
        view, ts = self.view, r.ts_ms
        if r.object_state == ObjectState.PREPARED:
            self._ids("object", r.object_id, view.next_object_id, None, offset)  # the id's one check
            bad = sinv.prepared_once(view, r, self.seen_objects)
            if bad:
                self._instant("S8", f"object/{r.object_id}", offset, bad, count=False)
            heapq.heappush(self.deadlines, (r.timestamp, r.object_id))
        self.seen_objects.add(r.object_id)
        apply(view, r)
        if r.object_state != ObjectState.PREPARED:  # no longer PREPARED: closes, no check
            self._state("S11", f"object/{r.object_id}", offset, ts, None, count=False)
        if r.object_id in self.refs:
            self._object_refs(r.object_id, offset, ts)

    def _overdue(self, offset: int, ts: int) -> None:
        """S11: PREPARED objects whose deadline passed more than the check interval ago."""
        heap, interval = self.deadlines, self.books.config.prepared_check_ms
        while heap and heap[0][0] < ts - interval:
            deadline, object_id = heapq.heappop(heap)
            self.books.checked["S11"] += 1
            bad = sinv.prepared_in_time(self.view, object_id, deadline, ts, interval)
            if bad:
                self._state("S11", f"object/{object_id}", offset, ts, bad, count=False)

    def state_hash(self) -> str:
        return self.view.state_hash()


Check = Callable[[StreamsAudit, Any, int], None]
"""``(audit, record, offset)``: checks what a record of its class can change and folds it in."""

_CHECKS: dict[type, Check] = {
    S3Stream: StreamsAudit._on_stream,
    RemoveS3Stream: StreamsAudit._on_remove_stream,
    Range: StreamsAudit._on_range,
    RemoveRange: StreamsAudit._on_range,
    S3StreamObject: StreamsAudit._on_stream_object,
    RemoveS3StreamObject: StreamsAudit._on_remove_stream_object,
    S3StreamSetObject: StreamsAudit._on_stream_set_object,
    RemoveStreamSetObject: StreamsAudit._on_remove_stream_set_object,
    S3Object: StreamsAudit._on_object,
    RemoveS3Object: StreamsAudit._on_remove_object,
    AssignedStreamId: StreamsAudit._on_assigned_id,
    AssignedS3ObjectId: StreamsAudit._on_assigned_id,
    S3StreamEndOffsets: StreamsAudit._on_end_offsets,
    NodeWALUncommittedOffsets: StreamsAudit._on_uncommitted_offsets,
    RemoveNodeWALMetadata: StreamsAudit._on_remove_node,
    ObjectWritten: StreamsAudit._on_object_written,
    KV: StreamsAudit._on_kv,
}
"""Record class -> its handler; every other record is folded in with nothing to check."""

__all__ = ["StreamsAudit"]
