"""The driver's side of the columnar audit, shared by every engine that runs the plan
(``plan.sql``): what is computed from the control plane (``plan.control``: brokers, topics,
observations, a few percent of a history) in plain Python, and the words and report of what the
engines find. Partitions are numbered per lifetime (``pk``) in the plan and named here."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from kraftlake.records.kraft import LOST
from kraftlake.replay.books import AuditReport, Violation, assemble_report, violation
from kraftlake.replay.violations import ViolationList
from kraftlake.statemachine.invariants import say as say_text
from kraftlake.statemachine.kraft.directory_ids import ONLINE_RESERVED
from kraftlake.statemachine.kraft.invariants import k10_live, k11_message

from .control import BrokerSegment, ControlPlane


def partition_of(lives: list[tuple[str, int, int | None]], pk: int) -> tuple[str, int]:
    """(topic id, partition id) of the partition ``pk`` numbers (``partition_key``)."""
    p = pk & 0xFFFFFFFF
    return lives[pk >> 32][0], p - 2**32 if p >= 2**31 else p


def partition_entity(lives: list[tuple[str, int, int | None]], pk: int) -> str:
    """The audit's entity of the partition ``pk`` numbers: ``partition/<topic id>/<p>``."""
    topic, p = partition_of(lives, pk)
    return f"partition/{topic}/{p}"


def interval(inv: str, entity: str, first: int, message: str, fixed_by: int | None) -> Violation:
    """An interval from ``first`` until the record ``fixed_by`` (None: still open)."""
    last = None if fixed_by is None else fixed_by - 1
    return violation(inv, entity, first, last, message, [first] if fixed_by is None else [first, fixed_by])


def driver_dirs(plane: ControlPlane) -> set[str]:
    """The directory ids the driver registers in the plan's tables beside the log's partition
    records and requests: the brokers' registered directories and the removed ones."""
    dirs = {d for s in plane.segments if s.registration is not None for d in s.registration.log_dirs}
    return dirs | {d for _off, _b, d in plane.dir_removals}


Offline = tuple[bool, frozenset]
"""Which of a broker's directories are offline in one of its states: (True, online) = all but
``online``; (False, offline) = just ``offline``."""

NOTHING_OFFLINE: Offline = (False, frozenset())


def offline_runs(marks: Iterable[tuple[int, Offline]], candidates: set[str]) -> list[tuple[str, int, int | None]]:
    """(directory, start, stop) for each run of states in which a directory of ``candidates``
    is offline, from one broker's states in offset order (``marks``: (offset, ``Offline``) where
    it changed; before the first, nothing is offline), sorted by directory and start.

    A sweep: from a state that names its online directories to another, only the directories
    that joined or left them change, so a broker's thousands of old directories (a directory
    failure gives it new ones) cost nothing at each of its fencings and restarts. Only a change
    to or from a state that names its offline directories (unregistered, registered without
    directories) looks at them all, as the runs it ends or begins do."""
    open_: dict[str, int] = {}
    runs: list[tuple[str, int, int | None]] = []
    prev = NOTHING_OFFLINE
    for start, state in marks:
        if state == prev:
            continue
        (complement, named), (was_complement, was_named) = state, prev
        ending: Iterable[str]
        beginning: Iterable[str]
        if complement and was_complement:
            ending = (named - was_named) & candidates
            beginning = (was_named - named) & candidates
        else:
            now = candidates - named if complement else named & candidates
            ending = [d for d in open_ if d not in now]
            beginning = [d for d in now if d not in open_]
        for d in ending:
            if d in open_:
                runs.append((d, open_.pop(d), start))
        for d in beginning:
            open_.setdefault(d, start)
        prev = state
    runs += [(d, start, None) for d, start in open_.items()]
    runs.sort(key=lambda r: (r[0], r[1]))
    return runs


def bad_intervals(plane: ControlPlane, referenced: dict[int, set[str]]):
    """From the broker segments: ``(broker_bad, dir_bad, known)``. ``broker_bad``: (broker,
    start, stop, reason) where a broker is not registered or fenced; ``dir_bad``: (broker, dir,
    start, stop) where a directory of a registered broker is offline (``is_online``), for every
    directory the broker ever registered or a partition placed on it, and LOST; ``known``: the
    brokers that ever registered. Offsets: the state after record ``start`` until before
    ``stop`` (null = the end)."""
    by_broker: dict[int, list] = {}
    for s in plane.segments:
        by_broker.setdefault(s.broker, []).append(s)
    broker_bad, dir_bad = [], []
    for b in sorted(by_broker):
        segs = by_broker[b]
        spans = [(-1, segs[0].start, None)] + [
            (s.start, segs[i + 1].start if i + 1 < len(segs) else None, s.registration) for i, s in enumerate(segs)
        ]
        for start, stop, reg in spans:
            if reg is None or reg.fenced:
                broker_bad.append((b, start, stop, "unregistered" if reg is None else "fenced"))
        candidates = {d for s in segs if s.registration is not None for d in s.registration.log_dirs}
        candidates |= referenced.get(b, set())
        candidates = (candidates | {LOST}) - ONLINE_RESERVED
        marks = ((start, _registered_offline(reg)) for start, _stop, reg in spans)
        dir_bad += [(b, d, start, stop) for d, start, stop in offline_runs(marks, candidates)]
    return broker_bad, dir_bad, sorted(by_broker)


def _registered_offline(reg) -> Offline:
    """K4/K5's offline directories of a broker (``is_online``): none unregistered, LOST alone
    registered without directories, else all but its registered ones."""
    if reg is None:
        return NOTHING_OFFLINE
    if not reg.log_dirs:
        return (False, frozenset({LOST}))
    return (True, frozenset(reg.log_dirs))


_NOT_MULTI = (("K8", False), ("K10", False))
"""K8 and K10 where the broker is not a live multi-directory broker with replicas UNASSIGNED."""


def broker_checks(
    plane: ControlPlane,
    counts: Iterable[tuple[int, int, int]],
    events: set[tuple[int, int]],
    found: ViolationList,
    candidates: ViolationList,
) -> int:
    """K8, K10 and K11 in one pass over the brokers' UNASSIGNED counts (``sql.unassigned_counts``,
    in (offset, broker, count) order, read as they come) merged with the broker segments and the
    requests to be unfenced. Adds K8 (a warning) and K10 to ``candidates`` as intervals, for the
    grace (a multi-directory broker unfenced, K8, or live, K10, while any of its replicas is
    UNASSIGNED, checked where the local audit checks them: each broker record it applied, each
    count crossing zero), and returns how many counts are such crossings rather than at a
    broker's own record (``events``). K11, at each request to be unfenced the driver kept, goes to ``found``: the
    broker's count and registration in force there, or its own count of mismatches.

    The intervals are added in the order they close, then those still open, after the caller's
    other graced ones: a long history's are tens of millions of rows, and copied from a list of
    their own they doubled the audit's peak at 10^8 records (bench/RESULTS.md)."""
    # (offset, broker, kind): at one offset a broker's record, then its count, then its request.
    segments = sorted(((s.start, s.broker, 0, s) for s in plane.segments), key=itemgetter(0, 1))
    requests = sorted((o, b, 2, counted) for o, b, counted in plane.unfence_requests)
    merged = heapq.merge(segments, ((o, b, 1, n) for o, b, n in counts), requests, key=itemgetter(0, 1, 2))
    seg: dict[int, BrokerSegment] = {}
    count: dict[int, int] = {}
    open_: dict[tuple[str, int], tuple[int, str]] = {}
    said: dict[tuple[str, int, int], str] = {}
    entities: dict[int, str] = {}  # one string per broker, shared by its many intervals
    crossings = 0
    x: Any  # a segment (kind 0), a count (1) or a request's own mismatches (2)
    for offset, b, kind, x in merged:
        if kind == 0:
            seg[b] = x
            continue
        s = seg.get(b)
        r = s.registration if s is not None else None
        entity = entities.get(b) or entities.setdefault(b, f"broker/{b}")
        if kind == 2:
            message = k11_message(len(r.log_dirs) if r is not None else 0, count.get(b, 0), x)
            if message is not None:
                found.add("K11", entity, offset, offset, message, (offset,))
            continue
        count[b] = n = x
        crossings += (offset, b) not in events
        dirs = len(r.log_dirs) if r is not None else 0
        if r is None or s is None or n <= 0 or dirs < 2:
            checks: tuple[tuple[str, bool], ...] = _NOT_MULTI
        else:
            checks = (("K8", not r.fenced), ("K10", k10_live(r, s.unfenced_since_registered)))
        for inv, bad in checks:
            opened = open_.get((inv, b))
            if bad and opened is None:  # worded where it opens (most checks change nothing)
                key = (inv, n, dirs)  # a few counts recur across the brokers
                words = said.get(key)
                if words is None:
                    wording = "unfenced" if inv == "K8" else "unassigned"
                    words = said[key] = say_text(inv, wording, unassigned=n, dirs=dirs)
                open_[(inv, b)] = (offset, words)
            elif not bad and opened is not None:
                del open_[(inv, b)]
                candidates.add_interval(inv, entity, opened[0], opened[1], offset)
    for (inv, b), (f, m) in open_.items():
        candidates.add_interval(inv, entities.get(b) or f"broker/{b}", f, m, None)
    return crossings


def report_of(config, found, plane, n, first, last, state_hash, counts) -> AuditReport:
    # ``checked`` as the catalogue defines it (``counts``), as the Python engine counts it: the
    # driver's counts (it runs that engine on the control plane), the partition records (K2),
    # states and changes, and the brokers' UNASSIGNED crossings, from the plan.
    checked = dict(plane.checked)
    checked["K2"] = counts["records"]
    for inv in ("K1", "K4", "K5"):
        checked[inv] = counts["rows"]
    checked["K3"] = counts["changes"]
    for inv in ("K8", "K10"):
        checked[inv] += counts["crossings"]
    checked.update(counts["plan"])  # K9, K13-K15: counted in SQL
    checked["L1"] = n
    return assemble_report(
        config,
        found,
        checked,
        records=n,
        first_offset=first,
        last_offset=last,
        state_hash=state_hash,
        streams_state_hash=plane.streams_state_hash,
        bookies_state_hash=plane.bookies_state_hash,
    )
