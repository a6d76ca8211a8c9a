"""The BookKeeper reducer: ``apply(view, record)`` folds one record into a ``BookiesView``, as the
metadata store (ZooKeeper) would hold it after the write, plus what the auditor derives from it, in
the shape every family's reducer has (``statemachine.reducer``).

By the strictness rule every family shares, it refuses what BookKeeper's metadata store refuses:
a ledger created twice and a change of a ledger it does not have (every change of ledger
metadata is a versioned update of that ledger's node: ``LedgerManager.writeLedgerMetadata``),
R-REPLAY-LEDGER; a
record of a bookie that never registered, R-REPLAY-BOOKIE. Under-replication marks and locks
live in nodes of their own, which outlive their ledger (a worker that finds its ledger deleted
marks it replicated: ``ReplicationWorker``), and entries are written to bookies, not to the metadata store: a
record of those for a ledger that is gone changes nothing.

Two derived facts are computed here, deterministically from the log: when a lost bookie's audit
falls due (``Auditor``: after ``lostBookieRecoveryDelay``, at once when a second bookie is lost),
and which entries a re-replication could not copy because no available bookie of their write set
held them (those entries are lost on the new bookie too).
"""

from __future__ import annotations

from typing import Any

from kraftlake.records.base import Record
from kraftlake.records.bookkeeper import (
    AuditorCheckRan,
    AuditorElected,
    Availability,
    BookieAvailability,
    BookieDecommissioned,
    BookieDecommissionStarted,
    BookieInfo,
    BookieRegistered,
    BookieStateChange,
    LedgerClosed,
    LedgerCreated,
    LedgerDeleted,
    LedgerEnsembleChange,
    LedgerEntriesWritten,
    LedgerReplicated,
    LedgerReplicationLock,
    LedgerReplicationToggled,
    LedgerReplicationUnlock,
    LedgerUnderReplicated,
    RecoveryDelayChanged,
)
from kraftlake.statemachine.reducer import Handler, Reducer, refusal

from .view import CLOSED, Bookie, BookiesView, Ledger, Mark


def _ts(r: Record) -> int:
    return r.ts_ms or 0


def _bookie(v: BookiesView, r: Any, offset: int) -> Bookie:
    b = v.bookies.get(r.bookie_id)
    if b is None:
        raise refusal(r, offset, "R-REPLAY-BOOKIE", f"bookie {r.bookie_id} is not registered")
    return b


def _ledger(v: BookiesView, r: LedgerEnsembleChange | LedgerClosed | LedgerDeleted, offset: int) -> Ledger:
    ledger = v.ledgers.get(r.ledger_id)
    if ledger is None:
        raise refusal(r, offset, "R-REPLAY-LEDGER", f"ledger {r.ledger_id} does not exist")
    return ledger


def _registered(v: BookiesView, r: BookieRegistered, offset: int) -> None:
    # A bookie id registered again is a new bookie (a decommissioned address re-used).
    old = v.bookies.get(r.bookie_id)
    v.bookies[r.bookie_id] = Bookie(
        bookie_id=r.bookie_id,
        rack=r.rack,
        free_bytes=0 if old is None else old.free_bytes,
        total_bytes=0 if old is None else old.total_bytes,
    )
    _back(v, r.bookie_id)


def _info(v: BookiesView, r: BookieInfo, offset: int) -> None:
    b = _bookie(v, r, offset)
    b.free_bytes, b.total_bytes = r.free_bytes, r.total_bytes


def _state(v: BookiesView, r: BookieStateChange, offset: int) -> None:
    b = _bookie(v, r, offset)
    b.state, b.state_reason = r.state.value, r.reason


def _back(v: BookiesView, bookie: str) -> None:
    v.lost_at.pop(bookie, None)
    v.audit_due.pop(bookie, None)


def _availability(v: BookiesView, r: BookieAvailability, offset: int) -> None:
    b = _bookie(v, r, offset)
    was = b.availability
    b.availability = r.availability.value
    if r.availability is not Availability.LOST:
        _back(v, r.bookie_id)
        return
    if was == Availability.LOST.value:
        return
    now = _ts(r)
    v.lost_at[r.bookie_id] = now
    if not v.refs.get(r.bookie_id):
        return  # nothing to audit
    if v.audit_due or v.recovery_delay_ms == 0:
        # A second lost bookie while one waits (or no delay): the audit runs now, for all.
        for other in v.audit_due:
            v.audit_due[other] = now
        v.audit_due[r.bookie_id] = now
    else:
        v.audit_due[r.bookie_id] = now + v.recovery_delay_ms
    _audited(v)  # a drain may have marked its ledgers already


def _index(v: BookiesView, ledger: Ledger, before: set[str]) -> None:
    after = ledger.bookies()
    for b in before - after:
        refs = v.refs.get(b)
        if refs is not None:
            refs.discard(ledger.ledger_id)
            if not refs:
                del v.refs[b]
    for b in after - before:
        v.refs.setdefault(b, set()).add(ledger.ledger_id)


def _created(v: BookiesView, r: LedgerCreated, offset: int) -> None:
    if r.ledger_id in v.ledgers:
        raise refusal(r, offset, "R-REPLAY-LEDGER", f"ledger {r.ledger_id} already exists")
    ledger = Ledger(
        ledger_id=r.ledger_id,
        ensemble_size=r.ensemble_size,
        write_quorum=r.write_quorum,
        ack_quorum=r.ack_quorum,
        ensembles={0: r.ensemble},
    )
    v.ledgers[r.ledger_id] = ledger
    _index(v, ledger, set())


def _ensemble_change(v: BookiesView, r: LedgerEnsembleChange, offset: int) -> None:
    ledger = _ledger(v, r, offset)
    before = ledger.bookies()
    old = ledger.ensembles.get(r.first_entry_id)
    if old is not None and len(old) == len(r.ensemble):
        _copy(v, ledger, r.first_entry_id, old, r.ensemble)
    ledger.ensembles[r.first_entry_id] = r.ensemble
    _index(v, ledger, before)
    if v.audit_due:
        _audited(v)  # a bookie no ensemble names any more has nothing left to audit


def _copy(v: BookiesView, ledger: Ledger, key: int, old: tuple[str, ...], new: tuple[str, ...]) -> None:
    """A re-replication under ``key``: each new bookie gets the entries of its position that some
    other available bookie of their write set held; the others are lost on it."""
    first, last = next((a, b) for a, b, _ in ledger.segments() if a == key)
    for pos, (was, now) in enumerate(zip(old, new)):
        if was == now:
            continue
        missing = []
        for e in ledger.stored_on(first, last, pos):
            sources = [
                b for b in ledger.write_set(e) if b != was and v.available(b) and e not in ledger.lost.get(b, ())
            ]
            if not sources and not (v.available(was) and e not in ledger.lost.get(was, ())):
                missing.append(e)
        gone = ledger.lost.pop(was, ())
        keep = tuple(e for e in gone if not first <= e <= last)
        if keep:
            ledger.lost[was] = keep
        if missing:
            ledger.lost[now] = tuple(sorted(set(ledger.lost.get(now, ())) | set(missing)))


def _closed(v: BookiesView, r: LedgerClosed, offset: int) -> None:
    ledger = _ledger(v, r, offset)
    ledger.state, ledger.last_entry_id, ledger.length = CLOSED, r.last_entry_id, r.length
    ledger.fenced = ledger.fenced or r.fenced


def _deleted(v: BookiesView, r: LedgerDeleted, offset: int) -> None:
    ledger = _ledger(v, r, offset)
    del v.ledgers[r.ledger_id]
    _index(
        v,
        Ledger(ledger_id=r.ledger_id, ensemble_size=0, write_quorum=0, ack_quorum=0, ensembles={}),
        ledger.bookies(),
    )
    v.under_replicated.pop(r.ledger_id, None)
    v.locks.pop(r.ledger_id, None)
    v.held_until.pop(r.ledger_id, None)
    for k in [k for k in v.failures if k.endswith(f" {r.ledger_id}")]:
        del v.failures[k]
    _audited(v)


def _marked(v: BookiesView, r: LedgerUnderReplicated, offset: int) -> None:
    if r.ledger_id not in v.ledgers:
        return
    mark = v.under_replicated.get(r.ledger_id)
    if mark is None:
        v.under_replicated[r.ledger_id] = Mark(missing=tuple(sorted(set(r.missing))), since_ms=_ts(r))
    else:
        grown = tuple(sorted(set(mark.missing) | set(r.missing)))
        if grown != mark.missing:
            mark.missing, mark.version = grown, mark.version + 1
    _audited(v)


def _audited(v: BookiesView) -> None:
    """A lost bookie is audited once every ledger naming it has a mark listing it."""
    for b in [
        b for b in v.audit_due if all(b in getattr(v.under_replicated.get(i), "missing", ()) for i in v.refs.get(b, ()))
    ]:
        del v.audit_due[b]


def _replicated(v: BookiesView, r: LedgerReplicated, offset: int) -> None:
    v.under_replicated.pop(r.ledger_id, None)
    for k in [k for k in v.failures if k.endswith(f" {r.ledger_id}")]:
        del v.failures[k]


def _lock(v: BookiesView, r: LedgerReplicationLock, offset: int) -> None:
    if r.ledger_id not in v.ledgers:
        return
    holder = v.locks.setdefault(r.ledger_id, r.worker)  # the znode exists: a second worker cannot take it
    if holder == r.worker and r.held_until_ms is not None:
        v.held_until[r.ledger_id] = r.held_until_ms
        v.failures[f"{r.worker} {r.ledger_id}"] = r.failures


def _unlock(v: BookiesView, r: LedgerReplicationUnlock, offset: int) -> None:
    if v.locks.get(r.ledger_id) == r.worker:
        del v.locks[r.ledger_id]
        v.held_until.pop(r.ledger_id, None)


def _full_audit(v: BookiesView, now: int) -> None:
    """A full bookie audit falls due now (``AuditorBookieCheckTask.auditBookies``): every bookie an
    ensemble names that is not available, registered or never seen, owes the marks of its ledgers."""
    for b in v.audit_due:
        v.audit_due[b] = now
    for b in v.unavailable_named():
        if v.unmarked(b):
            v.audit_due[b] = now


def _auditor(v: BookiesView, r: AuditorElected, offset: int) -> None:
    v.auditor = r.auditor
    v.auditor_since = _ts(r)
    v.check_fired.clear()  # a new auditor's schedules start again (the completion times stay)
    # The new auditor's periodic bookie check runs at once (``Auditor.scheduleBookieCheckTask``,
    # initial delay 0), unless a delayed audit is pending, which it skips for (``hasBookieCheckTask``).
    if not v.audit_due:
        _full_audit(v, _ts(r))


def _delay(v: BookiesView, r: RecoveryDelayChanged, offset: int) -> None:
    # ``Auditor.submitLostBookieRecoveryDelayChangedEvent``: a rewrite to 0 or to the same value
    # runs the full audit at once, pending task or not; another value restarts a pending wait.
    now = _ts(r)
    if r.delay_ms in (0, v.recovery_delay_ms):
        _full_audit(v, now)
    else:
        for b, due in v.audit_due.items():
            if due > now:  # a wait still running restarts; an audit already due runs as it is
                v.audit_due[b] = now + r.delay_ms
    v.recovery_delay_ms = r.delay_ms


def _decommission_started(v: BookiesView, r: BookieDecommissionStarted, offset: int) -> None:
    _bookie(v, r, offset)
    v.decommissioning.setdefault(r.bookie_id, r.delete_cookie)


def _decommissioned(v: BookiesView, r: BookieDecommissioned, offset: int) -> None:
    _bookie(v, r, offset)
    v.decommissioning.pop(r.bookie_id, None)
    if r.delete_cookie:  # the cookie is gone: the cluster forgets the bookie
        del v.bookies[r.bookie_id]
        _back(v, r.bookie_id)


def _replication(v: BookiesView, r: LedgerReplicationToggled, offset: int) -> None:
    if r.enabled and not v.replication_enabled:
        # The audits that waited (``waitIfLedgerReplicationDisabled``) run now.
        now = _ts(r)
        for b, due in v.audit_due.items():
            v.audit_due[b] = max(due, now)
    v.replication_enabled = r.enabled


def _check_ran(v: BookiesView, r: AuditorCheckRan, offset: int) -> None:
    v.check_fired[r.check.value] = _ts(r)
    if r.completed:
        v.check_ctime[r.check.value] = _ts(r)


def _written(v: BookiesView, r: LedgerEntriesWritten, offset: int) -> None:
    ledger = v.ledgers.get(r.ledger_id)
    if ledger is not None:
        ledger.last_add_confirmed = max(ledger.last_add_confirmed, r.last_add_confirmed)


_APPLY: dict[type, Handler] = {
    BookieRegistered: _registered,
    BookieInfo: _info,
    BookieStateChange: _state,
    BookieAvailability: _availability,
    LedgerCreated: _created,
    LedgerEnsembleChange: _ensemble_change,
    LedgerClosed: _closed,
    LedgerDeleted: _deleted,
    LedgerUnderReplicated: _marked,
    LedgerReplicated: _replicated,
    LedgerReplicationLock: _lock,
    LedgerReplicationUnlock: _unlock,
    AuditorElected: _auditor,
    RecoveryDelayChanged: _delay,
    LedgerEntriesWritten: _written,
    BookieDecommissionStarted: _decommission_started,
    BookieDecommissioned: _decommissioned,
    LedgerReplicationToggled: _replication,
    AuditorCheckRan: _check_ran,
}
"""Record class -> its handler; every other record leaves the bookies view alone."""

_REDUCER = Reducer(_APPLY, BookiesView)
apply = _REDUCER.apply
replay = _REDUCER.replay

__all__ = ["apply", "replay"]
