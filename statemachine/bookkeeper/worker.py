"""A replication worker (BookKeeper's ``ReplicationWorker.rereplicate``): take the lock of an
under-replicated ledger, replace its bad bookies fragment by fragment at the same positions with
bookies outside the ensemble (``BookKeeperAdmin.replicateLedgerFragment`` with the placement
policy's ``replaceBookie``), copying each entry from a surviving replica; wait out the open-ledger
grace (``openLedgerRereplicationGracePeriod``), then fence and seal an open ledger whose tail is
bad; mark the ledger replicated when nothing is bad any more, else release it (a drain that cannot
finish becomes DRAINING_FAILED).

A bookie is bad in a fragment when it is unavailable, or when the mark lists it and it is
draining (its data moves off while it still serves reads)."""

from __future__ import annotations

import random

from kraftlake.records.bookkeeper import (
    BookieState,
    BookieStateChange,
    LedgerClosed,
    LedgerEnsembleChange,
    LedgerReplicated,
    LedgerReplicationLock,
    LedgerReplicationUnlock,
)
from kraftlake.statemachine import placement

from . import commands as c
from .ensembles import replace_bookie
from .view import CLOSED, BookiesView, Ledger, Mark

DRAINING = BookieState.DRAINING.value


def _bad(view: BookiesView, mark: Mark, bookie: str) -> bool:
    if not view.available(bookie):
        return True
    b = view.bookies.get(bookie)
    return bookie in mark.missing and b is not None and b.state == DRAINING


def _source(view: BookiesView, ledger: Ledger, entry: int, target: str) -> bool:
    """Some available bookie of the entry's write set holds it (the target itself, if draining)."""
    return any(view.available(b) and entry not in ledger.lost.get(b, ()) for b in ledger.write_set(entry))


def _can_seal(view: BookiesView, ledger: Ledger) -> bool:
    """Recovery coverage, as ``RoundRobinDistributionSchedule``'s ``RRQuorumCoverageSet.checkCovered``
    decides it: every write set of the last ensemble has fewer than A bookies that cannot answer."""
    ens = ledger.ensembles[ledger.keys()[-1]]
    e, w = len(ens), ledger.write_quorum
    return all(sum(not view.available(ens[(i + j) % e]) for j in range(w)) < ledger.ack_quorum for i in range(e))


def release_due(view: BookiesView, now_ms: int) -> list[LedgerReplicationUnlock]:
    """The deferred releases whose hold ended: ``deferLedgerLockReleaseOfFailedLedger`` releases on
    a timer of its own, whoever holds the lock and whatever its holder does meanwhile (kraftlake
    fires the timers at the next worker's decision)."""
    return [
        LedgerReplicationUnlock(ledger_id=i, worker=view.locks[i])
        for i, until in sorted(view.held_until.items())
        if until <= now_ms and i in view.locks
    ]


def pick(view: BookiesView, free: list[int], worker: str) -> int:
    """The ledger a worker takes among the free marked ones: at random, as
    ``ZkLedgerUnderreplicationManager.getLedgerToRereplicate`` shuffles the marks before it tries
    their locks (seeded from the log offset), so a released ledger goes to any waiting worker."""
    return random.Random(placement.seed_for(view.offset + 1, f"take/{worker}")).choice(free)


def replicate(
    view: BookiesView,
    cmd: c.Replicate,
    *,
    exclude_ensemble: bool = True,
    weighted: bool = True,
    release: bool = True,
) -> c.Decision:
    """``release`` False: the faulty worker of ``bugs`` never releases a deferred lock."""
    records: list = release_due(view, cmd.now_ms) if release else []
    if not view.replication_enabled:  # ``getLedgerToRereplicate`` waits; the release timers still fire
        return c.Decision(records=tuple(records), reply=c.Reply(error_code=c.REPLICATION_DISABLED))
    released = {r.ledger_id for r in records}
    held = sorted(
        i for i, w in view.locks.items() if w == cmd.worker and i in view.under_replicated and i not in view.held_until
    )
    free = sorted(i for i in view.under_replicated if i not in view.locks or i in released)
    if not held and not free:
        return c.Decision(records=tuple(records), reply=c.Reply(error_code=c.NOTHING_TO_DO))
    ledger_id = held[0] if held else pick(view, free, cmd.worker)
    ledger, mark = view.ledgers[ledger_id], view.under_replicated[ledger_id]
    if not held:
        records.append(LedgerReplicationLock(ledger_id=ledger_id, worker=cmd.worker))
    failures = view.failures.get(f"{cmd.worker} {ledger_id}", 0) + 1
    defer = LedgerReplicationLock(
        ledger_id=ledger_id,
        worker=cmd.worker,
        failures=failures,
        held_until_ms=cmd.now_ms + c.lock_hold_ms(failures, cmd.lock_release_ms),
    )
    done = LedgerReplicationUnlock(ledger_id=ledger_id, worker=cmd.worker)
    last_key = ledger.keys()[-1]
    tail_bad = any(_bad(view, mark, b) for b in ledger.ensembles[last_key])
    if ledger.state != CLOSED and tail_bad:
        if cmd.now_ms - mark.since_ms < cmd.grace_ms:
            # Keep the lock: the writer may still replace the bookie itself within the grace.
            return c.Decision(records=tuple(records), reply=c.Reply(error_code=c.WAITING, ledger_id=ledger_id))
        if not _can_seal(view, ledger):
            return _failed(
                view,
                mark,
                ledger_id,
                records + [defer],
                "the open ledger cannot be sealed: a write set of its last ensemble lost its ack quorum",
            )
        lac = ledger.last_add_confirmed
        records.append(LedgerClosed(ledger_id=ledger_id, last_entry_id=lac, length=(lac + 1) * 1024, fenced=True))
    if cmd.read_fails:  # a transient failure: the lock is deferred, a drain is not failed for it
        why = "a bookie's read failed (BKException)"
        reply = c.Reply(error_code=c.REPAIR_FAILED, ledger_id=ledger_id, message=why)
        return c.Decision(records=tuple(records + [defer]), reply=reply)
    unreadable: list[str] = []
    picks = 0
    for first, last, ens in ledger.segments():
        bad = [i for i, b in enumerate(ens) if _bad(view, mark, b)]
        if not bad:
            continue
        lost = [e for i in bad for e in ledger.stored_on(first, last, i) if not _source(view, ledger, e, ens[i])]
        if lost:
            unreadable.append(f"entries {_ranges(lost)} (no replica to copy from)")
            continue
        new = list(ens)
        for i in bad:
            try:
                new[i] = _replacement(
                    view,
                    ens,
                    new,
                    i,
                    cmd.worker,
                    exclude_ensemble,
                    weighted,
                    placement.seed_for(view.offset + 1, f"replace/{ledger_id}/{first}/{i}"),
                )
            except placement.NotEnoughCandidates as exc:
                unreadable.append(f"segment {first}: {exc}")
                break
        else:
            records.append(LedgerEnsembleChange(ledger_id=ledger_id, first_entry_id=first, ensemble=tuple(new)))
            picks += len(bad)
    if unreadable:
        return _failed(view, mark, ledger_id, records + [defer], "; ".join(unreadable))
    records += [LedgerReplicated(ledger_id=ledger_id, worker=cmd.worker), done]
    return c.Decision(records=tuple(records), reply=c.Reply(ledger_id=ledger_id))


def _replacement(
    view: BookiesView,
    ens: tuple[str, ...],
    new: list[str],
    i: int,
    worker: str,
    exclude_ensemble: bool,
    weighted: bool,
    seed: int,
) -> str:
    # Picks made for this segment so far are taken too (``new``); the faulty worker excludes only
    # the bookie it replaces.
    picked = {b for j, b in enumerate(new) if b != ens[j]}
    return replace_bookie(
        view,
        tuple(new),
        i,
        exclude=picked | ({ens[i]} if not exclude_ensemble else set(ens)),
        seed=seed,
        weighted=weighted,
        exclude_ensemble=exclude_ensemble,
    )


def _failed(view: BookiesView, mark: Mark, ledger_id: int, records: list, why: str) -> c.Decision:
    """The repair cannot finish: the worker keeps the ledger locked for the backoff (the last
    record of ``records``), then releases it; a drain waiting on it has failed."""
    for b in mark.missing:
        bookie = view.bookies.get(b)
        if bookie is not None and bookie.state == DRAINING:
            records.append(
                BookieStateChange(bookie_id=b, state=BookieState.DRAINING_FAILED, reason=f"ledger {ledger_id}: {why}")
            )
    return c.Decision(
        records=tuple(records), reply=c.Reply(error_code=c.REPAIR_FAILED, ledger_id=ledger_id, message=why)
    )


def _ranges(entries: list[int]) -> str:
    out: list[list[int]] = []
    for e in sorted(set(entries)):
        if out and out[-1][1] == e - 1:
            out[-1][1] = e
        else:
            out.append([e, e])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)
