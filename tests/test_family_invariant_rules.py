"""The S3Stream and BookKeeper rules that live beside their definitions
(``statemachine/s3stream/invariants.py``, ``statemachine/bookkeeper/invariants.py``), each asked
directly: a right state gives None, a wrong one the exact words of the report. The audits
(``replay.s3stream_audit``, ``replay.bookkeeper_audit``) only decide when to ask them; the fixtures
and the parity cases hold the two together."""

from __future__ import annotations

import msgspec

from kraftlake.records.bookkeeper import (
    Availability,
    BookieDecommissioned,
    BookieDecommissionStarted,
    BookieState,
    LedgerEntriesWritten,
    LedgerReplicated,
    LedgerReplicationLock,
    LedgerUnderReplicated,
)
from kraftlake.records.s3stream import (
    AssignedS3ObjectId,
    AssignedStreamId,
    KeyValue,
    ObjectState,
    RemoveS3Object,
    S3Object,
    S3StreamObject,
    S3StreamSetObject,
    StreamState,
    UncommittedOffset,
)
from kraftlake.statemachine.bookkeeper import invariants as binv
from kraftlake.statemachine.bookkeeper.view import CLOSED, Bookie, BookiesView, Ledger, Mark
from kraftlake.statemachine.s3stream import invariants as sinv
from kraftlake.statemachine.s3stream.nodes import NODE_KEY_PREFIX, registration_epoch
from kraftlake.statemachine.s3stream.view import ObjectMeta, RangeMeta, Stream, StreamsView

# -- S3Stream ------------------------------------------------------------------------------------


def _objects(*objects: tuple[int, ObjectState, int]) -> StreamsView:
    """A view holding objects (id, state, timestamp), ids assigned up to 10."""
    view = StreamsView()
    view.next_stream_id = view.next_object_id = 10
    for object_id, state, ts in objects:
        view.objects[object_id] = ObjectMeta(object_id, 1, state, ts, 0)
    return view


def _owned(node: int = 0, end: int = 10) -> Stream:
    """Stream 0, OPENED, its current range owned by ``node``, holding [0, end)."""
    return Stream(
        stream_id=0,
        epoch=0,
        range_index=0,
        end_offset=end,
        state=StreamState.OPENED,
        ranges={0: RangeMeta(0, 0, 0, end, node)},
    )


def test_s8_an_id_is_below_its_mark_and_a_new_stream_id_is_not_used_again():
    assert sinv.id_assigned("object", 9, 10) is None
    assert sinv.id_assigned("stream", 3, 10, used={1, 2}) is None
    assert sinv.id_assigned("object", 10, 10) == "object id 10 was never assigned (next is 10)"
    assert sinv.id_assigned("stream", 2, 10, used={1, 2}) == "stream id 2 is used again"


def test_s8_an_object_is_prepared_once():
    view = _objects((1, ObjectState.PREPARED, 500), (2, ObjectState.COMMITTED, 1))
    prepare = {
        i: S3Object(object_id=i, object_size=1, object_state=ObjectState.PREPARED, timestamp=900) for i in (1, 2, 3)
    }
    assert sinv.prepared_once(view, prepare[1], used={1, 2, 3}) is None  # its deadline moved
    assert sinv.prepared_once(view, prepare[3], used={1, 2}) is None  # a new object
    assert sinv.prepared_once(view, prepare[3], used={1, 2, 3}) == "object id 3 is prepared again"
    assert sinv.prepared_once(view, prepare[2], used={1, 2}) == "object 2 goes back to PREPARED from COMMITTED"
    committed = S3Object(object_id=2, object_size=1, object_state=ObjectState.COMMITTED, timestamp=1)
    assert sinv.prepared_once(view, committed, used={1, 2}) is None  # not a preparation


def test_s8_an_id_high_water_mark_never_moves_back():
    view = _objects()
    assert sinv.mark_never_back(view, AssignedStreamId(assigned_stream_id=9)) is None
    assert sinv.mark_never_back(view, AssignedS3ObjectId(assigned_s3_object_id=12)) is None
    assert (
        sinv.mark_never_back(view, AssignedStreamId(assigned_stream_id=4))
        == "the stream id high-water mark moves back from 10 to 5"
    )
    assert (
        sinv.mark_never_back(view, AssignedS3ObjectId(assigned_s3_object_id=8))
        == "the object id high-water mark moves back from 10 to 9"
    )


def test_s9_a_duty_entry_does_not_start_above_its_end():
    assert sinv.duty_entry_forward(UncommittedOffset(stream_id=0, start_offset=5, end_offset=5)) is None
    assert (
        sinv.duty_entry_forward(UncommittedOffset(stream_id=0, start_offset=6, end_offset=5))
        == "entry [6, 5) has its start above its end (ignored)"
    )


def test_s11_a_prepared_object_is_gone_within_the_check_interval_after_its_deadline():
    view = _objects((1, ObjectState.PREPARED, 1_000), (2, ObjectState.COMMITTED, 1_000))
    assert sinv.prepared_in_time(view, 1, 1_000, 1_500, 500) is None  # not past the interval yet
    assert sinv.prepared_in_time(view, 2, 1_000, 9_000, 500) is None  # committed
    assert sinv.prepared_in_time(view, 1, 900, 9_000, 500) is None  # prepared again since, with 1000
    assert sinv.prepared_in_time(view, 3, 1_000, 9_000, 500) is None  # gone
    assert sinv.prepared_in_time(view, 1, 1_000, 1_501, 500) == "PREPARED past its deadline 1000 by more than 500 ms"


def test_s12_a_stream_object_continues_the_logical_end():
    s = _owned(end=10)
    assert (
        sinv.stream_object_advances_end(s, S3StreamObject(stream_id=0, start_offset=10, end_offset=20, object_id=7))
        is None
    )
    assert (
        sinv.stream_object_advances_end(s, S3StreamObject(stream_id=0, start_offset=0, end_offset=10, object_id=7))
        is None
    )
    assert (
        sinv.stream_object_advances_end(s, S3StreamObject(stream_id=0, start_offset=12, end_offset=20, object_id=7))
        == "stream object 7: [12, 20) leaves a gap at the logical end 10"
    )


def test_s12_a_stream_set_object_range_comes_from_the_owner():
    view, s = StreamsView(), _owned(node=0, end=10)
    assert (
        sinv.stream_set_range_advances_end(view, s, S3StreamSetObject(node_id=0, object_id=8, order_id=8), 10, 20)
        is None
    )
    assert (
        sinv.stream_set_range_advances_end(view, s, S3StreamSetObject(node_id=1, object_id=8, order_id=8), 10, 20)
        == "stream-set object 8 of node 1: node 1 moves the logical end 10 -> 20 but node 0 owns the stream"
    )


def test_s13_a_marked_object_is_deleted_no_sooner_than_the_retention():
    view = _objects((1, ObjectState.MARK_DESTROYED, 0))
    view.marked_at[1] = 1_000
    assert sinv.deleted_after_retention(view, RemoveS3Object(object_id=1, ts_ms=61_000), 60_000) is None
    assert sinv.deleted_after_retention(view, RemoveS3Object(object_id=2, ts_ms=1_001), 60_000) is None  # not marked
    assert sinv.deleted_after_retention(view, RemoveS3Object(object_id=1), 60_000) is None  # no time
    assert (
        sinv.deleted_after_retention(view, RemoveS3Object(object_id=1, ts_ms=60_999), 60_000)
        == "deleted 59999 ms after it was marked destroyed, before the retention of 60000 ms"
    )


def test_s14_a_registration_never_goes_back_to_a_lower_epoch():
    view = StreamsView()
    view.kv[None] = {f"{NODE_KEY_PREFIX}1": msgspec.json.encode({"i": 1, "e": 5, "w": "", "t": {}})}
    assert sinv.epoch_never_back(view, 1, 5) is None
    assert sinv.epoch_never_back(view, 2, 0) is None  # not registered
    assert sinv.epoch_never_back(view, 1, 4) == "registered at epoch 4, below its epoch 5"


def test_s14_reads_the_registrations_automq_can_read():
    def kv(key: str, value: bytes, namespace: str | None = None) -> KeyValue:
        return KeyValue(key=key, value=value, namespace=namespace)

    assert registration_epoch(kv(f"{NODE_KEY_PREFIX}3", b'{"i": 3, "e": 7}')) == (3, 7)
    assert registration_epoch(kv(f"{NODE_KEY_PREFIX}3", b'{"e": 7}', namespace="ns")) is None
    assert registration_epoch(kv("other/3", b'{"e": 7}')) is None
    for value in (b"not json", b"[7]", b'{"i": 3}', b'{"e": "x"}'):
        assert registration_epoch(kv(f"{NODE_KEY_PREFIX}3", value)) is None, value
    assert registration_epoch(kv(f"{NODE_KEY_PREFIX}x", b'{"e": 7}')) is None


# -- BookKeeper ----------------------------------------------------------------------------------


def _bookies(*lost: str) -> BookiesView:
    """Bookies b1-b4, ``lost`` ones LOST; ledger 7 (E/W/A 3/2/2, entries 0-3 written) on b1-b3."""
    view = BookiesView()
    for b in ("b1", "b2", "b3", "b4"):
        view.bookies[b] = Bookie(bookie_id=b, availability=Availability.LOST.value if b in lost else "WRITABLE")
    view.ledgers[7] = Ledger(
        ledger_id=7,
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        ensembles={0: ("b1", "b2", "b3")},
        last_add_confirmed=3,
    )
    for b in ("b1", "b2", "b3"):
        view.refs[b] = {7}
    return view


def test_b1_a_lost_bookies_ledgers_are_not_marked_before_its_audit_falls_due():
    view = _bookies("b1")
    view.audit_due["b1"] = 10_000
    assert (
        binv.marked_after_delay(view, LedgerUnderReplicated(ledger_id=7, missing=("b1",), ts_ms=10_000), "b1") is None
    )
    assert binv.marked_after_delay(view, LedgerUnderReplicated(ledger_id=7, missing=("b2",), ts_ms=1_000), "b2") is None
    early = LedgerUnderReplicated(ledger_id=7, missing=("b1",), ts_ms=9_000)
    assert binv.marked_after_delay(view, early, "b1") == "ledger 7 marked 1000 ms before the recovery delay ends"
    view.bookies["b1"].state = BookieState.DRAINING.value
    assert binv.marked_after_delay(view, early, "b1") is None  # its drain marks them


def test_b1_a_lost_bookies_ledgers_are_marked_once_its_audit_fell_due():
    view = _bookies("b1")
    view.audit_due["b1"] = 10_000
    assert binv.marked_in_time(view, "b1", 10_000) is None
    assert binv.marked_in_time(view, "b2", 99_000) is None  # not lost
    assert (
        binv.marked_in_time(view, "b1", 10_001)
        == "lost, its audit fell due at 10000; 1 ledger(s) naming it are not all marked"
    )
    view.replication_enabled = False
    assert binv.marked_in_time(view, "b1", 10_001) is None  # the auditor waits


def test_b3_a_ledger_marked_replicated_has_every_entry_on_a_bookies():
    assert binv.replicated_to_ack_quorum(_bookies(), LedgerReplicated(ledger_id=7)) is None
    assert binv.replicated_to_ack_quorum(_bookies(), LedgerReplicated(ledger_id=8)) is None  # no such ledger
    assert (
        binv.replicated_to_ack_quorum(_bookies("b2"), LedgerReplicated(ledger_id=7))
        == "marked replicated with entry 0 on 1 bookie(s), below A = 2"
    )


def test_b4_a_bookie_becomes_drained_only_when_nothing_names_it():
    view = _bookies()
    assert binv.drained_when_clean(view, "b4") is None
    assert binv.drained_when_clean(view, "b1") == "DRAINED while ledgers [7] still name it in an ensemble"
    view.under_replicated[8] = Mark(missing=("b4",), since_ms=0)
    assert binv.drained_when_clean(view, "b4") == "DRAINED while under-replication marks of ledgers [8] still list it"


def test_b5_no_entry_is_written_after_close_or_fence():
    view = _bookies()
    view.ledgers[7].state, view.ledgers[7].last_entry_id = CLOSED, 3
    assert binv.written_while_open(view, LedgerEntriesWritten(ledger_id=7, last_add_confirmed=3)) is None
    assert (
        binv.written_while_open(view, LedgerEntriesWritten(ledger_id=7, last_add_confirmed=5))
        == "entries up to 5 written after the ledger was closed at 3"
    )
    view.ledgers[7].fenced = True
    assert (
        binv.written_while_open(view, LedgerEntriesWritten(ledger_id=7, last_add_confirmed=5))
        == "entries up to 5 written after the ledger was fenced at 3"
    )
    view.ledgers[7].state = "OPEN"
    assert binv.written_while_open(view, LedgerEntriesWritten(ledger_id=7, last_add_confirmed=9)) is None


def test_b6_a_replication_lock_has_one_holder():
    view = _bookies()
    view.locks[7] = "w1"
    assert binv.lock_has_one_holder(view, LedgerReplicationLock(ledger_id=7, worker="w1")) is None
    assert binv.lock_has_one_holder(view, LedgerReplicationLock(ledger_id=8, worker="w2")) is None
    assert (
        binv.lock_has_one_holder(view, LedgerReplicationLock(ledger_id=7, worker="w2"))
        == "worker w2 takes the lock w1 holds"
    )


def test_b9_a_lock_held_after_a_failed_repair_is_released_when_its_hold_ends():
    view = _bookies()
    view.locks[7], view.held_until[7], view.failures["w1 7"] = "w1", 5_000, 2
    assert binv.lock_released_after_hold(view, 7, 5_000) is None
    assert binv.lock_released_after_hold(view, 8, 9_000) is None  # not held
    assert (
        binv.lock_released_after_hold(view, 7, 5_001)
        == "locked by w1 past the end of its hold at 5000 (after 2 failed repair(s))"
    )


def test_b10_a_decommission_starts_on_a_stopped_bookie_and_ends_on_a_clean_one():
    view = _bookies("b1", "b4")
    assert binv.decommission_allowed(view, BookieDecommissionStarted(bookie_id="b1")) is None
    assert binv.decommission_allowed(view, BookieDecommissioned(bookie_id="b4")) is None
    assert binv.decommission_allowed(view, BookieDecommissioned(bookie_id="b9")) is None  # L3's
    assert binv.decommission_allowed(view, BookieDecommissionStarted(bookie_id="b2")) == "decommissioned while WRITABLE"
    assert (
        binv.decommission_allowed(view, BookieDecommissioned(bookie_id="b1"))
        == "decommissioned while ledgers [7] still name it in an ensemble"
    )
