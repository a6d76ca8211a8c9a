"""One parity case per invariant of the catalogue, generated from it: for each invariant a history
that breaks it (``BREAKS``), audited by the per-record engine and by the plan on DuckDB, which
must both find it broken and agree on its violations and on how many times they checked it. And
one count case per invariant a family's rules word (KRaft, S3Stream, BookKeeper): its ``checked``
is the same on the histories that break it as on the same histories with its rules silenced
(``FURTHER`` adds histories that break them along other paths). And on all of these and every
audit fixture, both engines' reports say nothing that ends before it begins (``WINDOWS``).

An invariant added to the catalogue gets its case at once, failing until ``BREAKS`` has a
history for it. Histories are the audit fixtures (``fixtures/*/audit``), records made here with
the builders of the family tests, or the log's table as another writer left it (L1: a kraftlake
log cannot hold a gap, its store refuses one). A history that breaks several invariants is
audited once (the ``reports`` fixture), so that the module stays a few seconds long."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import kraftlake
from kraftlake.auditing import audit_config
from kraftlake.records import (
    BrokerRegistrationChange,
    FeatureLevel,
    Log,
    NoOp,
    Partition,
    PartitionChange,
    Topic,
    iter_lines,
)
from kraftlake.records.arrow import from_table
from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieInfo,
    BookieRegistered,
    LedgerClosed,
    LedgerCreated,
    LedgerEntriesWritten,
    LedgerReplicated,
    LedgerReplicationLock,
    LedgerReplicationUnlock,
    LedgerUnderReplicated,
)
from kraftlake.records.kraft import AbortTransaction, BeginTransaction, EndTransaction, ReplicaDirectory
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    KV,
    AssignedS3ObjectId,
    AssignedStreamId,
    KeyValue,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveNodeWALMetadata,
    RemoveS3Object,
    RemoveS3Stream,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamEndOffset,
    StreamRange,
    UncommittedOffset,
)
from kraftlake.replay import kraft_audit
from kraftlake.replay.audit import Audit
from kraftlake.replay.books import AuditReport, Books
from kraftlake.replay.grace import GRACE_MS
from kraftlake.replay.plan import audit_snapshot
from kraftlake.replay.plan import run as plan_run
from kraftlake.replay.plan.duck import DuckEngine
from kraftlake.statemachine.bookkeeper import invariants as bookkeeper_rules
from kraftlake.statemachine.invariants import (
    BOOKKEEPER,
    BY_ID,
    CATALOGUE,
    KRAFT,
    REPLAY_RULE_TO_INVARIANT,
    S3STREAM,
)
from kraftlake.statemachine.kraft import invariants as kraft_rules
from kraftlake.statemachine.kraft.features import ELIGIBLE_LEADER_REPLICAS, MV_4_1_IV1
from kraftlake.statemachine.kraft.invariants_sql import RELATIONAL, RELATIONS, STAGES, STATE_COLUMNS
from kraftlake.statemachine.s3stream import invariants as s3stream_rules

from helpers.kraft import bootstrap, registration, uid

FIXTURES = Path(__file__).parent.parent / "fixtures"
T0 = 1_700_000_000_000


@dataclass(frozen=True)
class History:
    """A history to audit: its records (``build``), with the grace it is audited under. Records
    made here without a time get one 100 ms after the last, so that a graced wrong state outlasts
    a grace of 0 at the next record. ``foreign``: the log's table as another writer changed it,
    read as a table by both engines (a kraftlake log refuses what it makes)."""

    name: str
    build: Callable[[], list]
    grace_records: int | None = None
    grace_ms: int = GRACE_MS
    foreign: Callable[[pa.Table], pa.Table] | None = None


def _timed(records: list) -> list:
    out, ts = [], T0
    for r in records:
        ts = r.ts_ms if r.ts_ms is not None else ts + 100
        out.append(r if r.ts_ms is not None else msgspec.structs.replace(r, ts_ms=ts))
    return out


def fixture(family: str, name: str) -> History:
    path = FIXTURES / family / "audit" / f"{name}.jsonl"
    return History(f"{family}/{name}", lambda: list(iter_lines(path.open("rb"))))


def crafted(name: str, build: Callable[[], list]) -> History:
    """Records made here, audited with a grace of 0: a graced wrong state counts at the next record."""
    return History(name, lambda: _timed(build()), grace_records=0, grace_ms=0)


# -- KRaft -------------------------------------------------------------------------------------

T = uid("parity-topic")
D = {b: uid(f"parity-dir-{b}") for b in (1, 2, 3)}


def _partition(p: int, **kw) -> Partition:
    fields = {
        "topic_id": T,
        "partition_id": p,
        "replicas": (1, 2, 3),
        "isr": (1, 2, 3),
        "leader": 1,
        "leader_epoch": 0,
        "partition_epoch": 0,
        "assignment": tuple(ReplicaDirectory(broker=b, directory=D[b]) for b in (1, 2, 3)),
    }
    return Partition(**(fields | kw))


def _change(p: int, **kw) -> PartitionChange:
    return PartitionChange(topic_id=T, partition_id=p, **kw)


def _kraft(*body, elr: bool = False) -> list:
    """Three brokers and a topic of three partitions, each on all three, led by broker 1; then
    ``body`` and two NoOps (the wrong states outlast the grace)."""
    head = [
        *(
            [
                FeatureLevel(name="metadata.version", feature_level=MV_4_1_IV1),
                FeatureLevel(name=ELIGIBLE_LEADER_REPLICAS, feature_level=1),
            ]
            if elr
            else bootstrap()
        ),
        *(registration(b, [D[b]], fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=T),
        *(_partition(p) for p in range(3)),
    ]
    return [*head, *body, NoOp(), NoOp()]


REFUSED = crafted(
    "kraft/refused-records",
    lambda: _kraft(
        _change(7, isr=(1, 2)),  # L3: no partition 7
        BrokerRegistrationChange(broker_id=2, broker_epoch=7, fenced=1),  # L4: broker 2's epoch is 102
        EndTransaction(),  # L5: no transaction is open
        _change(0, assignment=(ReplicaDirectory(broker=1, directory=D[1]),)),  # K2: one directory, three replicas
    ),
)
PARTITION_STATES = crafted(
    "kraft/partition-states",
    lambda: _kraft(
        _change(0, isr=(2, 3)),  # K1: leader 1 left the ISR
        _change(1, replicas=(1, 2), isr=(1, 2)),  # K3: replica 3 left without a leader-epoch bump
        # K4: broker 1 fenced and its directory gone in one record, still leading: of the two
        # reasons at once, the worse (fenced) is the one said.
        BrokerRegistrationChange(broker_id=1, broker_epoch=101, fenced=1, log_dirs=(uid("parity-dir-1b"),)),
    ),
)
ELR = crafted(
    "kraft/eligible-leader-replicas",
    lambda: _kraft(
        _change(0, isr=(1,), eligible_leader_replicas=(1, 2)),  # K13: 1 in both ISR and ELR
        _change(1, isr=(1,), eligible_leader_replicas=(2,)),
        _change(1, isr=(3,), leader=3),  # K14: 3 is in neither the ISR (1) nor the ELR (2)
        _change(2, isr=(1,), eligible_leader_replicas=(2, 3)),
        BrokerRegistrationChange(broker_id=2, broker_epoch=102, log_dirs=(uid("parity-dir-2b"),)),  # K15
        elr=True,
    ),
)


def _drop_offset(table: pa.Table) -> pa.Table:
    """The table without its second-to-last row: a gap before the last offset."""
    last = pc.max(table["offset"]).as_py()
    return table.filter(pc.not_equal(table["offset"], last - 1))


GAP = History("kraft/offset-gap", lambda: _timed(_kraft()), foreign=_drop_offset)

# -- S3Stream (the cases of tests/test_s3stream_audit.py) ----------------------------------------

V6 = FeatureLevel(name="automq.version", feature_level=7)


def _opened(sid: int = 0) -> list:
    return [
        AssignedStreamId(assigned_stream_id=sid),
        S3Stream(stream_id=sid, epoch=0, range_index=0, start_offset=0, stream_state=1),
        Range(stream_id=sid, epoch=0, range_index=0, start_offset=0, end_offset=0, node_id=0),
    ]


def _committed(oid: int) -> list:
    return [
        AssignedS3ObjectId(assigned_s3_object_id=oid),
        S3Object(object_id=oid, object_size=1, object_state=ObjectState.COMMITTED, timestamp=1),
    ]


def _sso(oid: int, start: int, end: int, node: int = 0) -> list:
    ranges = (StreamRange(stream_id=0, start_offset=start, end_offset=end),)
    return [
        ObjectWritten(node_id=node, object_id=oid, ranges=ranges),
        S3StreamSetObject(node_id=node, object_id=oid, order_id=oid),
    ]


def _end(end: int) -> S3StreamEndOffsets:
    return S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=0, end_offset=end),))


def _streams(*body) -> list:
    """Nodes 0 and 1, stream 0 opened on node 0, objects 0 and 1 committed; then ``body``."""
    head = [
        V6,
        NodeWALMetadata(node_id=0, node_epoch=0),
        NodeWALMetadata(node_id=1, node_epoch=0),
        *_opened(),
        *_committed(0),
        *_committed(1),
    ]
    return [*head, *body, V6, V6]


def _registration(node: int, epoch: int) -> KV:
    doc = msgspec.json.encode({"i": node, "e": epoch, "w": "", "t": {}})
    return KV(key_values=(KeyValue(key=f"__automq_node/{node}", value=doc),))


RANGES_OUT_OF_ORDER = crafted(
    "s3stream/ranges-out-of-order",
    lambda: _streams(
        Range(stream_id=0, epoch=1, range_index=1, start_offset=0, end_offset=0, node_id=0),
        Range(stream_id=0, epoch=0, range_index=0, start_offset=5, end_offset=5, node_id=0),
        S3Stream(stream_id=0, epoch=1, range_index=1, start_offset=0, stream_state=1),
    ),
)
CURRENT_NOT_LAST = crafted(
    "s3stream/current-not-last",
    lambda: _streams(Range(stream_id=0, epoch=1, range_index=1, start_offset=0, end_offset=0, node_id=1)),
)
START_ABOVE_END = crafted(
    "s3stream/start-above-end",
    lambda: _streams(
        S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1),
        *_sso(0, 0, 10),
        _end(10),
        Range(stream_id=0, epoch=1, range_index=1, start_offset=10, end_offset=10, node_id=0),
        S3Stream(stream_id=0, epoch=1, range_index=1, start_offset=0, stream_state=1),
        Range(stream_id=0, epoch=0, range_index=0, start_offset=0, end_offset=3, node_id=0),
        S3Stream(stream_id=0, epoch=1, range_index=1, start_offset=5, stream_state=1),
    ),
)
GAP_IN_OBJECTS = crafted("s3stream/gap", lambda: _streams(*_sso(0, 2, 10), _end(10)))
UNASSIGNED_ID = crafted(
    "s3stream/unassigned-id", lambda: _streams(S3StreamObject(stream_id=0, start_offset=0, end_offset=0, object_id=99))
)
DUTY_WITHOUT_RANGE = crafted(
    "s3stream/duty-without-range",
    lambda: _streams(
        NodeWALUncommittedOffsets(node_id=1, entries=(UncommittedOffset(stream_id=0, start_offset=0, end_offset=10),)),
        _end(10),
    ),
)
OPENED_AT_EPOCH_MINUS_1 = crafted(
    "s3stream/opened-at-epoch-minus-1",
    lambda: _streams(
        AssignedStreamId(assigned_stream_id=1),
        S3Stream(stream_id=1, epoch=-1, range_index=-1, start_offset=0, stream_state=1),
    ),
)
NODE_EPOCH_BACK = crafted("s3stream/node-epoch-back", lambda: _streams(_registration(0, 2), _registration(0, 1)))

# -- BookKeeper ----------------------------------------------------------------------------------

BOOKIES = [f"bookie-{i}:3181" for i in range(3)]


def _bookies(*body) -> list:
    """Three writable bookies with the same free space, ledger 0 on all three (E/W/A 3/2/2) with
    entries 0-5 written and closed; then ``body``."""
    head = []
    for b in BOOKIES:
        head += [
            BookieRegistered(bookie_id=b),
            BookieInfo(bookie_id=b, free_bytes=1 << 30, total_bytes=1 << 31),
            BookieAvailability(bookie_id=b, availability=Availability.WRITABLE),
        ]
    head += [
        LedgerCreated(ledger_id=0, ensemble_size=3, write_quorum=2, ack_quorum=2, ensemble=tuple(BOOKIES)),
        LedgerEntriesWritten(ledger_id=0, last_add_confirmed=5),
        LedgerClosed(ledger_id=0, last_entry_id=5),
    ]
    return [*head, *body]


REPLICATED_SHORT = crafted(
    "bookkeeper/replicated-below-ack",
    lambda: _bookies(
        BookieAvailability(bookie_id=BOOKIES[0], availability=Availability.LOST),
        LedgerUnderReplicated(ledger_id=0, missing=(BOOKIES[0],)),
        LedgerReplicated(ledger_id=0, worker="w1"),  # B3: no repair, entries 0-2 on one bookie
    ),
)
WRITTEN_AFTER_CLOSE = crafted(
    "bookkeeper/written-after-close", lambda: _bookies(LedgerEntriesWritten(ledger_id=0, last_add_confirmed=7))
)
LOCK_TAKEN = crafted(
    "bookkeeper/lock-taken",
    lambda: _bookies(
        BookieAvailability(bookie_id=BOOKIES[0], availability=Availability.LOST),
        LedgerUnderReplicated(ledger_id=0, missing=(BOOKIES[0],)),
        LedgerReplicationLock(ledger_id=0, worker="w1"),
        LedgerReplicationLock(ledger_id=0, worker="w2"),  # B6: w1 holds it
    ),
)
PLACED_ON_ONE = crafted(
    "bookkeeper/placed-on-one",
    # B7: 100 more ledgers, each placed on bookie 0 where the equal weights expect a third of them
    lambda: _bookies(
        *(
            LedgerCreated(ledger_id=i, ensemble_size=1, write_quorum=1, ack_quorum=1, ensemble=(BOOKIES[0],))
            for i in range(1, 101)
        )
    ),
)

BREAKS: dict[str, History] = {
    "L1": GAP,
    "L3": REFUSED,
    "L4": REFUSED,
    "L5": REFUSED,
    "K1": PARTITION_STATES,
    "K2": REFUSED,
    "K3": PARTITION_STATES,
    "K4": PARTITION_STATES,
    "K5": fixture("kraft", "elect-offline-leader"),
    "K6": fixture("kraft", "broker-silent-dir-failure"),
    "K7": fixture("kraft", "elect-offline-leader"),
    "K8": fixture("kraft", "skip-dir-assignment"),
    "K9": fixture("kraft", "skip-dir-assignment"),
    "K10": fixture("kraft", "skip-dir-assignment"),
    "K11": fixture("kraft", "skip-dir-assignment"),
    "K12": fixture("kraft", "broker-silent-dir-failure"),
    "K13": ELR,
    "K14": ELR,
    "K15": ELR,
    "S1": RANGES_OUT_OF_ORDER,
    "S2": CURRENT_NOT_LAST,
    "S3": START_ABOVE_END,
    "S4": fixture("s3stream", "end-offset-regress"),
    "S5": fixture("s3stream", "stale-epoch-commit"),
    "S6": GAP_IN_OBJECTS,
    "S7": fixture("s3stream", "reference-destroyed-object"),
    "S8": UNASSIGNED_ID,
    "S9": DUTY_WITHOUT_RANGE,
    "S10": OPENED_AT_EPOCH_MINUS_1,
    "S11": fixture("s3stream", "leak-prepared-object"),
    "S12": fixture("s3stream", "stale-epoch-commit"),
    "S13": fixture("s3stream", "delete-marked-at-once"),
    "S14": NODE_EPOCH_BACK,
    "B1": fixture("bookkeeper", "ignore-recovery-delay"),
    "B2": fixture("bookkeeper", "repair-into-same-ensemble"),
    "B3": REPLICATED_SHORT,
    "B4": fixture("bookkeeper", "drain-before-replicated"),
    "B5": WRITTEN_AFTER_CLOSE,
    "B6": LOCK_TAKEN,
    "B7": PLACED_ON_ONE,
    "B8": fixture("bookkeeper", "data-loss"),
    "B9": fixture("bookkeeper", "worker-never-releases"),
    "B10": fixture("bookkeeper", "decommission-live-bookie"),
}
"""Invariant id -> a history that breaks it."""


def _audit(history: History, tmp: Path) -> tuple[AuditReport, AuditReport]:
    """(the per-record engine's report, the plan's on DuckDB) of ``history``."""
    log = Log.create(tmp / "log")
    log.append(history.build())
    grace = {"grace_records": history.grace_records, "grace_ms": history.grace_ms}
    if history.foreign is None:
        # Engine "duckdb" runs the plan on every family (only "auto" leaves S3Stream and
        # BookKeeper logs to the per-record engine).
        return kraftlake.audit(log, engine="python", **grace), kraftlake.audit(log, engine="duckdb", **grace)
    table = history.foreign(log.at().table())
    config = audit_config(**grace)
    local = Audit(config)
    local.feed(from_table(table.sort_by("offset")))
    return local.report(), audit_snapshot(log.at(), config, dataset=table)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The reports of a history by its name, each history audited once however many
    invariants it breaks."""
    done: dict[str, tuple[AuditReport, AuditReport]] = {}

    def of(history: History) -> tuple[AuditReport, AuditReport]:
        if history.name not in done:
            done[history.name] = _audit(history, tmp_path_factory.mktemp(history.name.replace("/", "-")))
        return done[history.name]

    return of


def _of(report: AuditReport, invariant: str) -> tuple[list, int]:
    """The violations of ``invariant`` in ``report`` (as builtins) and how often it was checked."""
    [checked] = [i.checked for i in report.invariants if i.id == invariant]
    return [msgspec.to_builtins(v) for v in report.violations if v.invariant == invariant], checked


@pytest.mark.parametrize("invariant", [i.id for i in CATALOGUE])
def test_both_engines_find_each_invariant_broken_alike(invariant, reports):
    history = BREAKS.get(invariant)
    assert history is not None, (
        f"{invariant} has no history that breaks it: add one to BREAKS in {Path(__file__).name}"
        " (records, an audit fixture or a simulator bug)"
    )
    local, plan = reports(history)
    assert plan.engine.startswith("duckdb"), plan.engine  # the plan ran, not the per-record fallback
    found, checked = _of(local, invariant)
    assert found, f"{history.name} does not break {invariant} on the per-record engine"
    plan_found, plan_checked = _of(plan, invariant)
    assert plan_found == found, f"the plan's {invariant} violations of {history.name} differ"
    assert plan_checked == checked, (
        f"the plan checked {invariant} {plan_checked} times, the per-record engine {checked}"
    )


def test_k2_counts_every_published_partition_record_on_both_engines(reports):
    """K2 holds every partition record to its replicas as it is applied (the catalogue's
    ``counts``): both engines count each published one, refused or not, none of an aborted
    transaction."""
    aborted = crafted(
        "kraft/aborted-change", lambda: _kraft(BeginTransaction(), _change(0, isr=(1, 2)), AbortTransaction())
    )
    for history, unpublished in ((REFUSED, 0), (aborted, 1)):
        local, plan = reports(history)
        published = sum(type(r) in (Partition, PartitionChange) for r in history.build()) - unpublished
        assert _of(local, "K2")[1] == _of(plan, "K2")[1] == published, history.name


def test_every_history_in_the_table_is_for_an_invariant_of_the_catalogue():
    assert set(BREAKS) <= {i.id for i in CATALOGUE}


# -- checked: each check counted once, whether it fires or not -----------------------------------

RULES = {KRAFT: (kraft_rules, kraft_audit), S3STREAM: (s3stream_rules,), BOOKKEEPER: (bookkeeper_rules,)}
"""Family -> the modules that word its invariants' findings (each with ``say``)."""
REFUSALS = set(REPLAY_RULE_TO_INVARIANT.values())
"""Invariants whose findings are records the reducer refuses: they count records, found or not
(K2: ``test_k2_counts_every_published_partition_record_on_both_engines``)."""

FURTHER = (
    crafted(
        "s3stream/ids-misused",
        lambda: _streams(
            S3Object(object_id=0, object_size=1, object_state=ObjectState.PREPARED, timestamp=1),  # back to PREPARED
            RemoveS3Object(object_id=1),
            S3Object(object_id=1, object_size=1, object_state=ObjectState.PREPARED, timestamp=1),  # prepared again
            AssignedS3ObjectId(assigned_s3_object_id=0),  # the mark moves back from 2 to 1
            RemoveS3Stream(stream_id=0),
            S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1),  # stream id used again
        ),
    ),
    crafted(
        "s3stream/duties-reversed-and-gone",
        lambda: _streams(
            NodeWALUncommittedOffsets(
                node_id=1, entries=(UncommittedOffset(stream_id=0, start_offset=9, end_offset=2),)
            ),
            NodeWALUncommittedOffsets(  # node 1's duty [0, 10), which no range of node 1 holds
                node_id=1, entries=(UncommittedOffset(stream_id=0, start_offset=0, end_offset=10),)
            ),
            _end(10),
            RemoveNodeWALMetadata(node_id=1),  # the wrong duty goes with its node
        ),
    ),
    crafted(
        "s3stream/wrong-streams-removed",
        lambda: _streams(
            *_sso(0, 2, 10),
            _end(10),  # S6: [0, 2) is in no object
            AssignedStreamId(assigned_stream_id=1),
            S3Stream(stream_id=1, epoch=-1, range_index=-1, start_offset=0, stream_state=1),  # S10
            RemoveS3Stream(stream_id=0),
            RemoveS3Stream(stream_id=1),
        ),
    ),
    crafted(
        "s3stream/stream-object-gap",
        lambda: _streams(
            AssignedS3ObjectId(assigned_s3_object_id=2),
            S3Object(object_id=2, object_size=1, object_state=ObjectState.COMMITTED, timestamp=1),
            S3StreamObject(stream_id=0, start_offset=5, end_offset=10, object_id=2),  # S12: [0, 5) left out
        ),
    ),
    crafted(
        "bookkeeper/hold-released-late",
        lambda: _bookies(
            BookieAvailability(bookie_id=BOOKIES[0], availability=Availability.LOST),
            LedgerUnderReplicated(ledger_id=0, missing=(BOOKIES[0],)),
            LedgerReplicationLock(ledger_id=0, worker="w1"),
            LedgerReplicationLock(ledger_id=0, worker="w1", failures=1, held_until_ms=T0),  # B9: held past T0
            BookieInfo(bookie_id=BOOKIES[1], free_bytes=1 << 30, total_bytes=1 << 31),
            LedgerReplicationUnlock(ledger_id=0, worker="w1"),
            BookieInfo(bookie_id=BOOKIES[1], free_bytes=1 << 30, total_bytes=1 << 31),  # B9 closes
        ),
    ),
)
"""Histories that break invariants along paths ``BREAKS``' do not: S8's and S9's other rules,
wrong states closed with their stream, duty or node, S12 by a stream object, B9 closed when the
hold goes."""


def _per_record(history: History) -> AuditReport:
    a = Audit(audit_config(grace_records=history.grace_records, grace_ms=history.grace_ms))
    a.feed(history.build())
    return a.report()


_local = cache(_per_record)
"""The per-record engine's report of ``history``, each history audited once."""


def _findings(report: AuditReport, invariant: str) -> list:
    """The violations of ``invariant`` with words (a silenced rule's are empty)."""
    return [v for v in report.violations if v.invariant == invariant and v.message]


@pytest.mark.parametrize("invariant", [i.id for i in CATALOGUE if i.family in RULES and i.id not in REFUSALS])
def test_each_check_counts_once_whether_it_fires_or_not(invariant, monkeypatch):
    """``checked`` counts evaluations, not findings: on every history here that breaks
    ``invariant`` it is the same as on that history with ``invariant``'s rules silenced (their
    findings worded empty: no finding, ``Books.state`` reads an empty one as right)."""
    family = BY_ID[invariant].family
    histories = [h for h in dict.fromkeys((*BREAKS.values(), *FURTHER)) if h.name.startswith(f"{family}/")]
    broken = [h for h in histories if h.foreign is None and _findings(_local(h), invariant)]
    assert BREAKS[invariant] in broken, f"{BREAKS[invariant].name} does not break {invariant}"
    for module in RULES[family]:
        say = module.say
        monkeypatch.setattr(
            module, "say", lambda inv, kind, say=say, **f: "" if inv == invariant else say(inv, kind, **f)
        )
    state = Books.state
    monkeypatch.setattr(
        Books, "state", lambda self, inv, e, o, ts, m, **kw: state(self, inv, e, o, ts, m or None, **kw)
    )
    for history in broken:
        report, silenced, name = _local(history), _per_record(history), history.name
        assert not _findings(silenced, invariant), f"{invariant} is not silenced on {name}"
        [before] = [i.checked for i in report.invariants if i.id == invariant]
        [after] = [i.checked for i in silenced.invariants if i.id == invariant]
        assert before == after, f"{name}: {invariant} checked {before} times where it fires, {after} where it does not"


# -- intervals: nothing a report says ends before it begins --------------------------------------

_CRAFTED = {h.name: h for h in (*BREAKS.values(), *FURTHER)}
WINDOWS = [
    *_CRAFTED.values(),
    # The other audit fixtures, 0.25 s each on both engines (those in BREAKS the parity cases
    # audit anyway): make test's, not test-fast's.
    *(
        pytest.param(h, marks=pytest.mark.slow)
        for p in sorted(FIXTURES.glob("*/audit/*.jsonl"))
        if (h := fixture(p.parent.parent.name, p.stem)).name not in _CRAFTED
    ),
]
"""Every history here and every audit fixture (as tests/test_plan.py enumerates them), once each."""


def _backwards(report: AuditReport) -> list[str]:
    """What ``report`` places outside its window or ends before it begins: violations (first
    offset among the audited records, last at or after it), incidents (ended at or after they
    failed), their effects (ended by a record at or after the one that caused them) and outages
    (the last record after which the partition was still down at or after the first: one a
    record both opens and closes was down after no record, not an outage)."""
    lo, hi = report.first_offset, report.last_offset
    assert lo is not None and hi is not None
    bad = [
        f"{v.invariant} {v.entity} [{v.first_offset}, {v.last_offset}]"
        for v in report.violations
        if not lo <= v.first_offset <= hi or (v.last_offset is not None and not v.first_offset <= v.last_offset <= hi)
    ]
    for inc in report.incidents or ():
        if not lo <= inc.failed_at <= hi or (inc.ended_at is not None and inc.ended_at < inc.failed_at):
            bad.append(f"incident {inc.id} [{inc.failed_at}, {inc.ended_at}]")
        bad += [
            f"incident {inc.id}'s effect on {e.topic_id}/{e.partition} [{e.caused_by}, {e.ended_by}]"
            for e in inc.effects
            if e.ended_by is not None and e.ended_by < e.caused_by
        ]
    if report.availability is not None:
        bad += [
            f"outage of {o.topic_id}/{o.partition} [{o.first_offset}, {o.last_offset}]"
            for o in report.availability.outages
            if not lo <= o.first_offset <= hi or (o.last_offset is not None and o.last_offset < o.first_offset)
        ]
    return bad


@pytest.mark.parametrize("history", WINDOWS, ids=lambda h: h.name)
def test_nothing_a_report_says_ends_before_it_begins(history, reports):
    """Every violation, incident, effect and outage of both engines' reports lies in the audited
    window and ends (where it ended) at or after it began, whichever invariant, family or engine."""
    local, plan = reports(history)
    assert local.incidents is not None and plan.incidents is not None
    for engine, report in (("per-record", local), ("plan", plan)):
        assert not _backwards(report), f"{history.name} on the {engine} engine: {_backwards(report)}"


# -- the relational invariants: one case each, generated from their registry ------------------------

_KRAFT = [
    h
    for h in {h.name: h for h in (*BREAKS.values(), *FURTHER)}.values()
    if h.name.startswith("kraft/") and not h.foreign
]
RELATIONAL_CASES = [
    *(pytest.param(inv, h, id=f"{inv}-{h.name}") for inv in RELATIONAL for h in _KRAFT),
    # Every KRaft audit fixture besides (those in BREAKS are audited by the cases above): make
    # test's, not test-fast's, as ``WINDOWS``' fixtures.
    *(
        pytest.param(inv, h, id=f"{inv}-{h.name}", marks=pytest.mark.slow)
        for p in sorted((FIXTURES / "kraft" / "audit").glob("*.jsonl"))
        if (h := fixture("kraft", p.stem)).name not in _CRAFTED
        for inv in RELATIONAL
    ),
]
"""(relational invariant, KRaft history): each invariant of ``invariants_sql.RELATIONAL`` on
every KRaft history here and every KRaft audit fixture."""


@pytest.mark.parametrize(("invariant", "history"), RELATIONAL_CASES)
def test_each_relational_invariant_agrees_with_its_per_record_rule(invariant, history, reports):
    """The plan runs each relational invariant from its unit (``invariants_sql.RELATIONAL``: its
    statements and its wording) and finds what the per-record rule finds, with the same count of
    checks, on every KRaft history that exercises it (and nothing where none does)."""
    local, plan = reports(history)
    assert plan.engine.startswith("duckdb"), plan.engine
    assert _of(plan, invariant) == _of(local, invariant), f"{invariant} on {history.name}"


def test_the_registry_holds_every_kraft_invariant_the_partition_records_decide():
    """Every KRaft invariant is relational (its SQL in the registry) but those the driver decides
    from the control plane (K6, K12) and K2, a refusal (``sql.refusals``): the plan names no
    invariant's statement of its own."""
    kraft = {i.id for i in CATALOGUE if i.family == KRAFT}
    assert set(RELATIONAL) == kraft - {"K2", "K6", "K12"}
    assert list(RELATIONAL) == sorted(RELATIONAL, key=lambda i: STAGES.index(RELATIONAL[i].stage))
    assert {name for r in RELATIONAL.values() for name, _ in r.keeps} <= set(plan_run.AFTER_INVARIANTS)


@pytest.mark.parametrize("invariant", [i for i, r in RELATIONAL.items() if r.found is not None])
def test_the_plan_words_each_relational_invariant_with_its_units_found(invariant, monkeypatch, tmp_path):
    """The plan reads an invariant's rows through its registry entry: an entry whose ``found``
    words nothing leaves the plan's violations of it without words, and no other's."""
    history = BREAKS[invariant]
    entry = RELATIONAL[invariant]
    assert entry.found is not None
    found = entry.found
    silenced = dataclasses.replace(entry, found=lambda *row: found(*row)._replace(message=""))
    monkeypatch.setitem(RELATIONAL, invariant, silenced)
    log = Log.create(tmp_path / "log")
    log.append(history.build())
    plan = kraftlake.audit(log, engine="duckdb", grace_records=history.grace_records, grace_ms=history.grace_ms)
    mine = [v for v in plan.violations if v.invariant == invariant]
    assert mine and not any(v.message for v in mine), f"{invariant}'s words are not its entry's"
    assert all(v.message for v in plan.violations if v.invariant != invariant)


def test_the_relations_the_invariants_read_are_as_their_contract_says(monkeypatch, tmp_path):
    """Each relation of ``invariants_sql.RELATIONS`` has the columns it lists (read in the plan
    just before the invariants' tables are dropped), on a history where each one is made."""
    seen: dict[str, list[str]] = {}
    drop = DuckEngine.drop

    def read_then_drop(self, *names):
        for r in RELATIONS:
            if r.name not in seen:
                seen[r.name] = [c for (c, *_rest) in self.rows(f"DESCRIBE SELECT * FROM {r.name}")]
        return drop(self, *names)

    monkeypatch.setattr(DuckEngine, "drop", read_then_drop)
    log = Log.create(tmp_path / "log")
    log.append(ELR.build())
    kraftlake.audit(log, engine="duckdb", grace_records=ELR.grace_records, grace_ms=ELR.grace_ms)
    assert set(seen) == {r.name for r in RELATIONS}
    assert {r.name: [c for c in r.columns if c not in seen[r.name]] for r in RELATIONS} == {
        r.name: [] for r in RELATIONS
    }
    assert [c for c in seen["timeline"] if c in STATE_COLUMNS] == list(STATE_COLUMNS)
