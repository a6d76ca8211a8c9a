"""The whole audit on an engine that runs the plan (``plan.duck``, ``spark.engine``): the report
``kraftlake audit --engine python`` gives for the same records.

The control plane (brokers, topics, features, transactions, observations, and S3Stream and
BookKeeper records) is replayed on the driver by the local audit (``replay.plan.control``), read from
the engine a range of offsets at a time. The partition records (nine in ten of a KRaft history)
are audited by the plan's SQL (``plan.sql``: the partition states and what every invariant
shares) and by each relational invariant's own statements, beside its rule
(``statemachine.kraft.invariants_sql.RELATIONAL``, run a stage at a time by ``_Stage``), joined
with what the driver registers: topic lifetimes, the intervals where brokers and directories are
bad, directory removals, broker events, the brokers' registration epochs. The engine returns
kinds and fields of the few wrong rows; each invariant's entry words them (its ``found``, with
the rule's message functions and the catalogue's ``say``).

Graced invariants (K4, K5, K6, K8, K9, K10, K12, K15) are held to the grace in SQL, where the
records' times are (``sql.held``, the rule ``AuditConfig.past_grace`` states): a wrong state
from offset f, fixed at offset x (or still open at the end), counts when the record before x is
more than ``grace_ms`` ms of record time after f.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from kraftlake.logging import get_logger
from kraftlake.records.arrow import values_end_to_end
from kraftlake.records.base import gc_paused
from kraftlake.replay.books import AuditConfig, AuditReport, Violation, attach_incidents, violation
from kraftlake.replay.columns import spill
from kraftlake.replay.violations import ViolationList
from kraftlake.statemachine.invariants import BY_ID, REPLAY_RULE_TO_INVARIANT, say
from kraftlake.statemachine.kraft.features import MV_3_0_IV1, MV_3_6_IV0
from kraftlake.statemachine.kraft.invariants_sql import RELATIONAL, Counts, Facts, Relational, Rows, Runs
from kraftlake.statemachine.kraft.view import PartitionRegistration

from . import elr as elr_sql
from . import incidents as incidents_sql
from . import ranks, sql
from .control import Reports, replay_control_plane
from .driver import (
    bad_intervals,
    broker_checks,
    driver_dirs,
    partition_entity,
    partition_of,
    report_of,
)

log = get_logger(__name__)

CONTROL_WINDOW = 500_000
"""Control records per read at most (about): an S3Stream or BookKeeper history is nearly all
control records, so the driver holds a window's worth at a time, not the log's."""

ENGINE_PARTS = (
    "partition records (K1-K5, K7-K11, K13-K15, the timeline, the grace; incidents' effects and availability)"
    " in SQL; the control plane (L1-L5, K6, K12, S3Stream, BookKeeper; which incidents) by the Python engine"
    " on the driver"
)
"""What ran where, for the report (``AuditReport.engine``)."""

PLAN_TABLES = (
    "bad", "bad_ranks", "bad_ranks_keys", "known", "bad_overlaps", "removals", "events", "reg_epochs", "cands",
)  # fmt: skip
"""The tables the plan registers or keeps for the invariants (but the timeline's)."""

AFTER_INVARIANTS = PLAN_TABLES + tuple(dict.fromkeys(name for r in RELATIONAL.values() for name, _ in r.keeps))
"""The tables the invariants' statements keep, and the plan's for them, dropped before the
incidents' (``audit``)."""

REPORT = "AssignReplicasToDirsRequest"

LIVES = [("life_index", "BIGINT"), ("life_topic", "STRING"), ("life", "BIGINT"), ("removed", "BIGINT")]


def control_records(engine, first, last, count: int, window: int = CONTROL_WINDOW):
    """The ``count`` non-partition records of offsets ``first..last``, in offset order, a range
    of offsets holding about ``window`` of them at a time: decoded, but for the
    AssignReplicasToDirsRequests, of which only where each run of them between two other
    records ends is given (``Reports``)."""
    if not count or first is None or last is None:
        return
    held = None
    for r in _control_windows(engine, first, last, count, window):
        # A run cut by a window's edge is one run: the later part stands for it.
        if held is not None and not (type(r) is Reports and type(held) is Reports):
            yield held
        held = r
    if held is not None:
        yield held


def _control_windows(engine, first: int, last: int, count: int, window: int):
    import heapq

    import numpy as np

    from kraftlake.records.arrow import from_table

    d = engine.dialect
    o, t = d.q("offset"), d.q("type")
    ranges = -(-count // window)
    span = -(-(last - first + 1) // ranges)
    for lo in range(first, last + 1, span):
        within = f"{o} BETWEEN {lo} AND {lo + span - 1}"
        table = engine.arrow(
            f"SELECT {o}, record FROM log WHERE {t} NOT IN ('Partition', 'PartitionChange', '{REPORT}') AND {within}"
        )
        table = table.sort_by("offset")
        decoded = from_table(table) if table.num_rows else []
        reports = engine.arrow(f"SELECT {o}, ts_ms FROM log WHERE {t} = '{REPORT}' AND {within} ORDER BY {o}")
        runs = []
        if reports.num_rows:
            offsets = reports.column(0).to_numpy()
            # A run ends at each report the next one of which has another record before it.
            before = np.searchsorted(table.column("offset").to_numpy(), offsets)
            ends = np.flatnonzero(np.append(before[1:] != before[:-1], True))
            times = reports.column(1).take(pa.array(ends)).to_pylist()
            runs = [Reports(off, ts) for off, ts in zip(offsets[ends].tolist(), times, strict=True)]
        yield from heapq.merge(decoded, runs, key=lambda r: r.offset)  # type: ignore[attr-defined]  # records and Reports both have one


def _refused(kind: str, key: str, off: int, topic: str, partition: int, brokers, replicas) -> Violation:
    """A partition record the reducer refuses, worded as the local audit words it."""
    if kind == "topic":
        rule, reason = "R-REPLAY-TOPIC", say("L3", "topic_missing", topic=topic)
    elif kind == "partition":
        rule, reason = "R-REPLAY-PARTITION", say("L3", "partition_missing", partition=partition)
    else:
        rule = "R-REPLAY-DIRECTORIES"
        if len(brokers) != len(replicas):
            reason = say("K2", "assignment_length", entries=len(brokers), count=len(replicas), replicas=replicas)
        else:
            i = next(i for i, (b, r) in enumerate(zip(brokers, replicas)) if b != r)
            reason = say("K2", "assignment_order", index=i, broker=brokers[i], replica=replicas[i])
    inv = REPLAY_RULE_TO_INVARIANT[rule]
    return violation(inv, key, off, off, say(inv, "refused", rule=rule, message=reason), [off])


def _with_payload(islands_sql: str, source: str, columns: str) -> str:
    """Islands with ``columns`` of their first state (``source`` has pk, off and them)."""
    return (
        f"(SELECT i.pk, i.first_offset, i.fixed_by, {columns} FROM ({islands_sql}) i"
        f" JOIN {source} s ON s.pk = i.pk AND s.off = i.first_offset) c0"
    )


class _Stage:
    """Runs the relational invariants (``invariants_sql.RELATIONAL``) of a stage of the plan: each
    keeps its relations (once each), counts its checks (a statement shared by two invariants
    runs once) and words its wrong rows with its ``found``; a graced invariant's rows (the
    catalogue's ``graced``) are held to the grace (``held``: ``sql.held``)."""

    def __init__(self, engine, facts: Facts, held: Callable[[str], str], lives, found: ViolationList, checked):
        self.engine, self.facts, self.held, self.lives, self.found, self.checked = (
            engine, facts, held, lives, found, checked,
        )  # fmt: skip
        self.kept: set[str] = set()
        self.counted: dict[str, int] = {}

    def run(self, stage: str) -> None:
        engine, d, facts = self.engine, self.engine.dialect, self.facts
        for rule in RELATIONAL.values():
            if rule.stage != stage or rule.found is None:
                continue
            for name, statement in rule.keeps:
                if name not in self.kept:
                    engine.keep(name, statement(d, facts))
                    self.kept.add(name)
            if rule.guard is not None and not engine.rows(rule.guard):
                continue
            if rule.checked is not None:
                count = rule.checked(d, facts)
                if count not in self.counted:
                    ((self.counted[count],),) = engine.rows(count)
                self.checked[rule.invariant] = int(self.counted[count])
            self._found(rule, d)

    def _found(self, rule: Relational, d) -> None:
        inv, select, graced = rule.invariant, rule.select, BY_ID[rule.invariant].graced
        if isinstance(select, Runs):
            runs = sql.islands(d, select.source(d, self.facts), select.wrong)
            source = _with_payload(runs, select.payload_from, select.payload)
            statement = self.held(source) if graced else f"SELECT * FROM {source}"
        else:
            assert isinstance(select, Rows), select
            statement = select.statement(d, self.facts)
            if graced:
                statement = self.held(f"({statement}) {inv.lower()}")
        point = isinstance(select, Rows) and select.point
        assert rule.found is not None
        engine = self.engine
        for row in engine.rows(statement):
            f = rule.found(*row)
            if f.broker is None:
                entity = partition_entity(self.lives, f.pk)
            else:
                topic, p = partition_of(self.lives, f.pk)
                entity = f"replica/{topic}/{p}/{f.broker}"
            if point:
                self.found.add(inv, entity, f.first, f.first, f.message, (f.first,))
            else:
                self.found.add_interval(inv, entity, f.first, f.message, f.fixed_by)


def audit(engine, config: AuditConfig | None = None, *, step: Callable[[str], None] | None = None) -> AuditReport:
    """Audit the log ``engine`` reads (its relation ``log``) with the plan."""
    # The rows the engines return, the candidates and the violations are millions of Python
    # objects in no reference cycle: collections that re-scan them all cost about a sixth of
    # the audit at 10^6 records (bench/RESULTS.md), and free nothing.
    with gc_paused():
        return _audit(engine, config, step)


def _audit(engine, config: AuditConfig | None, step: Callable[[str], None] | None) -> AuditReport:
    config = config or AuditConfig()
    tell = step or (lambda _name: None)
    d = engine.dialect
    o, ty = d.q("offset"), d.q("type")
    started = time.perf_counter()
    tell("scanning the log")
    ((n, first, last, control),) = engine.rows(
        f"SELECT count(*), min({o}), max({o}),"
        f" count(CASE WHEN {ty} NOT IN ('Partition', 'PartitionChange') THEN 1 END) FROM log"
    )
    end = last if last is not None else -1
    tell("replaying brokers, topics and observations on the driver")
    observer = incidents_sql.Observer()
    plane = replay_control_plane(control_records(engine, first, last, control), config, observer)
    lives = plane.topics
    engine.table("lives", [(i, *life) for i, life in enumerate(lives)], LIVES)
    # Aborted (or unfinished) metadata transactions are audited as NoOps: their partition
    # records are no state (``replay.transactions``).
    skip = plane.unpublished + ([] if plane.unfinished is None else [(plane.unfinished, end)])
    # K2's checks (``checked``): the published partition records. Where no transaction is left
    # unpublished the filter is false and the engine answers without reading the log.
    unpublished = f"{ty} IN ('Partition', 'PartitionChange') AND NOT ({sql.published(d, skip)})"
    ((partition_records,),) = engine.rows(f"SELECT {n - control} - count(*) FROM log WHERE {unpublished}")
    tell("forward-filling partition states")
    if plane.clears:
        # KIP-966 (plan.elr): a state per partition each ClearElr changes joins the records.
        engine.table("clears", plane.clears, [("at_", "BIGINT"), ("topic", "STRING")])
    referenced = build_timeline(engine, skip, plane.mv_levels, clears=bool(plane.clears), dirs=driver_dirs(plane))

    # The violations (and the graced candidates) as columns: a broker's bug can make them tens
    # of millions (``replay.violations``).
    found = ViolationList(v for v in plane.violations if not BY_ID[v.invariant].graced)
    # Graced candidates as intervals: only those held beyond the grace become violations.
    candidates = ViolationList()
    for v in plane.violations:
        if BY_ID[v.invariant].graced:
            fixed = None if v.last_offset is None else v.last_offset + 1
            candidates.add_interval(v.invariant, v.entity, v.first_offset, v.message, fixed)
    if n and end - first + 1 != n:
        found.extend(_l1(engine, d))
    refused = [_refused(*r) for r in engine.rows(sql.refusals(d))] if engine.rows(sql.ANY_REFUSED) else []
    found.extend(refused)
    # Each relational invariant's statements are its own (``invariants_sql.RELATIONAL``), run at
    # the stage where the relations they read exist.
    facts = Facts(plane.elr_levels, plane.mv_levels, sql.published(d, skip))
    held = lambda source: sql.held(d, source, end, config)  # noqa: E731
    sql_checked: dict[str, int] = {}
    stage = _Stage(engine, facts, held, lives, found, sql_checked)
    tell("K1: leader in ISR in replicas")  # and K3, one statement more on the same states
    stage.run("timeline")

    tell("K4/K5, K7: leaders and ISR on online brokers and directories, directory removals")
    broker_bad, dir_bad, known = bad_intervals(plane, referenced)
    by_key: dict[tuple[int, str], list[tuple[int, int | None, str]]] = {}
    for b, s, e, reason in broker_bad:
        by_key.setdefault((b, sql.ANY_DIR), []).append((s, e, reason))
    for b, dd, s, e in dir_bad:
        by_key.setdefault((b, dd), []).append((s, e, "offline"))
    engine.table(
        "bad",
        [(b, dd, i, *span) for (b, dd), spans in by_key.items() for i, span in enumerate(spans)],
        [
            ("bad_broker", "INT"), ("bad_dir", "DIR"), ("idx", "BIGINT"), ("start_", "BIGINT"), ("stop_", "BIGINT"),
            ("reason", "STRING"),
        ],
    )  # fmt: skip
    marks = {k: [[e for _s, e, _r in v if e is not None], [s for s, _e, _r in v]] for k, v in by_key.items()}
    ranks.register(engine, "bad_ranks", marks, [("b", "INT"), ("dir", "DIR")], ["sp", "st"])
    engine.view("members", sql.members(d))
    engine.table("known", [(b,) for b in known], [("b", "INT")])
    # Every join of the overlaps has its small side (rank tables, intervals) on the right.
    engine.keep("bad_overlaps", sql.overlaps(d, end), sides_as_written=True)
    stage.run("bad_overlaps")
    if plane.dir_removals:
        engine.table("removals", plane.dir_removals, [("at_", "BIGINT"), ("bad_broker", "INT"), ("bad_dir", "DIR")])
        stage.run("removals")

    if any(on for _off, on in plane.elr_levels):
        tell("K13-K15: eligible leader replicas")
        stage.run("elr")

    tell("K8-K11: UNASSIGNED replicas, reported directories, requests to serve")
    events = sorted(plane.broker_events + [(o_, b) for o_, b, _ in plane.unfence_requests])
    engine.table("events", events, [("off", "BIGINT"), ("broker", "INT")])
    # K8, K10 and K11 share one statement, judged by the driver in one pass (``broker_checks``).
    # Read as they come, in the order the checks take them: held whole, the counts would be the
    # driver's largest list (two rows per K8/K10 interval).
    [unassigned] = {r.select for r in RELATIONAL.values() if r.stage == "events" and isinstance(r.select, Counts)}
    counts = engine.iter_rows(f"SELECT * FROM ({unassigned.statement(d, facts)}) c ORDER BY off, broker, after")
    crossings = broker_checks(plane, counts, set(events), found, candidates)
    # Only read from here on (the grace's intervals, the rows held beyond it): out of memory
    # while K9 and the grace run (two per replica a broker leaves UNASSIGNED: tens of millions
    # in a long history, bench/RESULTS.md).
    spill([candidates], engine.spill)
    epochs = [(s.start, s.broker, None if s.registration is None else s.registration.epoch) for s in plane.segments]
    engine.table("reg_epochs", epochs, [("off", "BIGINT"), ("broker", "INT"), ("epoch", "BIGINT")])
    del epochs
    stage.run("accepted")

    tell("holding graced states to the grace")
    engine.arrow_table("cands", candidates.interval_columns())
    held_ones = engine.arrow(f"SELECT i FROM ({held('cands')}) h ORDER BY i").column(0).combine_chunks()
    found.extend_rows(candidates, held_ones)
    del candidates, held_ones
    # Nothing is found after the grace. Out of memory from here on: the state hash, the
    # incidents' and availability's statements and the driver's replay run beside them (a long
    # history's violations are tens of millions, bench/RESULTS.md). Sorted into files a field at
    # a time: never two copies of them held.
    found.sort(spill_to=engine.spill)

    tell("state hash")
    view = plane.view
    if any(view.partitions.values()):  # the driver replays topics (each an empty dict), never partitions
        raise AssertionError("the control plane's view holds partitions")
    state_hash = _state_hash(engine, view, lives, referenced)
    ((rows, changes),) = engine.rows("SELECT count(*), count(CASE WHEN changed THEN 1 END) FROM timeline")
    # K8/K10 judge a broker at its own records (the driver counted those) and where its
    # UNASSIGNED count leaves or returns to zero: ``crossings``, the counts' rows at other offsets.
    tally = {
        "records": partition_records,
        "rows": rows,
        "changes": changes,
        "crossings": crossings,
        "plan": sql_checked,
    }
    report = report_of(config, found, plane, n, first, last, state_hash, tally)
    report.engine = f"{engine.name}: {ENGINE_PARTS}"
    # The invariants' tables are read no more: the incidents' statements (the audit's peak on a
    # history of dense failures) run in the memory they held.
    engine.drop(*AFTER_INVARIANTS)
    tell("incidents and availability")
    attach_incidents(
        report, incidents_sql.incidents(engine, plane, observer, first=first, last=last, referenced=referenced)
    )
    log.info(
        "plan.audit",
        engine=engine.name,
        records=n,
        violations=len(found),
        seconds=round(time.perf_counter() - started, 2),
    )
    return report


def _state_hash(engine, view, lives, referenced: dict[int, set[str]]) -> str:
    """The controller view's state hash, its partitions' from the engine's final states, hashed in
    (topic id, partition id) order as the engine returns them, a batch at a time: the partitions
    (10^7 in 10^8 records) are never all held. The engine writes each partition's canonical form
    (``sql.final_images``) and the driver hashes the column's bytes as they come; where it cannot
    (an id JSON would escape, a topic id registered twice), the driver encodes the rows."""
    d = engine.dialect
    topics = [topic for topic, *_ in lives]
    ids = [*topics, *sql.RESERVED_DIRS, *(dd for dirs in referenced.values() for dd in dirs)]
    if len(set(topics)) == len(topics) and all(sql.json_plain(x) for x in ids if x is not None):
        return view.state_hash_encoded(_images(engine.arrow_batches(sql.final_images(d))))
    return view.state_hash(_registrations(lives, engine.iter_rows(sql.final_states_ordered(d))))


def _images(batches) -> Iterator[pa.Buffer]:
    """``final_images``'s column end to end, without the first row's leading comma."""
    first = True
    for batch in batches:
        column = batch.column(0)
        if column.null_count:  # a null's bytes would be left out of the hash, unseen
            raise AssertionError("the engine wrote no image of a final partition state")
        if len(column):
            values = values_end_to_end(column)
            yield values.slice(1) if first else values
            first = False


def _registrations(lives, rows: Iterable[tuple]) -> Iterator[PartitionRegistration]:
    """The partitions' final registrations from ``final_states_ordered``'s rows; of two lives
    of one partition (a topic id registered again), the later, as the reducer keeps it."""
    held = None
    for pk, replicas, dirs, isr, leader, le, pe, removing, adding, lrs, elr, lkelr in rows:
        topic, p = partition_of(lives, pk)
        reg = PartitionRegistration(
            topic, p, tuple(replicas), tuple(dirs), tuple(isr), tuple(removing), tuple(adding), leader, lrs, le, pe,
            tuple(elr), tuple(lkelr),
        )  # fmt: skip
        if held is not None and (held.topic_id, held.partition_id) != (topic, p):
            yield held
        held = reg
    if held is not None:
        yield held


def build_timeline(
    engine,
    skip: list[tuple[int, int]],
    mv_levels: list[tuple[int, int]],
    *,
    clears: bool = False,
    dirs: Iterable[str] = (),
) -> dict[int, set[str]]:
    """The partition states (``timeline``) of the log's published partition records (``skip``:
    offset ranges left out), from one window pass (``fills``), and for the few partitions it
    cannot state (``unclean``) the general form. ``clears``: the driver registered ``clears``
    (ClearElr records), whose states join the records (``plan.elr.with_clears``). ``dirs``: the
    directory ids the driver will name (``known_dirs``: the engine's dictionary of directory ids
    is built first, from them, the partition records' and the requests' reports). Returns the
    directories the records assign to each broker."""
    d = engine.dialect
    referenced: dict[int, set[str]] = {}
    for b, dd in engine.rows(sql.assigned(d, skip)):
        referenced.setdefault(b, set()).add(dd)
    named = {*sql.RESERVED_DIRS, *dirs, *(dd for ds in referenced.values() for dd in ds)} - {None}
    engine.table("known_dirs", [(x,) for x in sorted(named)], [("dir", "STRING")])
    engine.directories(f"SELECT dir FROM known_dirs UNION ALL {sql.reported_dirs(d)}")
    if clears:
        engine.view("partition_records", sql.partition_rows(d, skip))
        engine.keep("partition_rows", elr_sql.with_clears(d))
    else:
        engine.view("partition_rows", sql.partition_rows(d, skip))
    engine.keep("fills", sql.fills(d, mv_levels, MV_3_0_IV1, MV_3_6_IV0))
    engine.keep("unclean", sql.unclean())
    general = bool(engine.rows("SELECT 1 FROM unclean LIMIT 1"))
    if general:
        engine.view("judged", sql.judged(d))
        engine.keep("general_states", sql.general_states(d, mv_levels, MV_3_0_IV1, MV_3_6_IV0))
    engine.view("timeline", sql.timeline(general))
    return referenced


def families(engine) -> set[str]:
    """The record families (``kraft``, ``s3stream``, ``bookkeeper``, ``log``) the log has."""
    from kraftlake.records.catalog import BY_NAME

    types = [t for (t,) in engine.rows(f"SELECT DISTINCT {engine.dialect.q('type')} FROM log")]
    return {BY_NAME[t].__module__.rsplit(".", 1)[-1] if t in BY_NAME else "log" for t in types}


def _l1(engine, d) -> list[Violation]:
    """L1: offsets gapless and increasing. A Delta log written by kraftlake always is; only a
    table written by something else needs the (global) sort that finds the gaps."""
    o = d.q("offset")
    gaps = engine.rows(
        f"SELECT off, prev FROM (SELECT {o} AS off, lag({o}) OVER (ORDER BY {o}) AS prev FROM log) g"
        " WHERE off <> prev + 1 ORDER BY off"
    )
    return [violation("L1", "log", off, off, say("L1", "gap", offset=off, last=prev), [off]) for off, prev in gaps]
