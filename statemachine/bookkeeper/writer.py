"""A ledger writer: create a ledger on a weighted ensemble, add entries (replacing a failed bookie
of the last ensemble first, with a new ensemble keyed at LAC + 1, as BookKeeper's
``LedgerHandle.ensembleChangeLoop`` does), close, delete."""

from __future__ import annotations

from kraftlake.records.bookkeeper import (
    LedgerClosed,
    LedgerCreated,
    LedgerDeleted,
    LedgerEnsembleChange,
    LedgerEntriesWritten,
)
from kraftlake.statemachine import placement

from . import commands as c
from .ensembles import new_ensemble, replace_bookie
from .view import CLOSED, BookiesView


def create(view: BookiesView, cmd: c.CreateLedger, *, weighted: bool = True) -> c.Decision:
    if not cmd.ensemble_size >= cmd.write_quorum >= cmd.ack_quorum >= 1:
        return c.fail(
            c.NOT_ENOUGH_BOOKIES,
            f"E >= W >= A >= 1 does not hold: {cmd.ensemble_size}/{cmd.write_quorum}/{cmd.ack_quorum}",
        )
    ledger_id = max(view.ledgers, default=-1) + 1
    try:
        ensemble = new_ensemble(
            view, cmd.ensemble_size, seed=placement.seed_for(view.offset + 1, "ensemble"), weighted=weighted
        )
    except placement.NotEnoughCandidates as exc:
        return c.fail(c.NOT_ENOUGH_BOOKIES, str(exc))
    record = LedgerCreated(
        ledger_id=ledger_id,
        ensemble_size=cmd.ensemble_size,
        write_quorum=cmd.write_quorum,
        ack_quorum=cmd.ack_quorum,
        ensemble=ensemble,
    )
    return c.Decision(records=(record,), reply=c.Reply(ledger_id=ledger_id))


def write(view: BookiesView, cmd: c.WriteEntries, *, weighted: bool = True) -> c.Decision:
    ledger = view.ledgers.get(cmd.ledger_id)
    if ledger is None:
        return c.fail(c.NO_SUCH_LEDGER)
    if ledger.fenced:
        return c.fail(c.LEDGER_FENCED, "recovery fenced the ledger: the writer's adds fail")
    if ledger.state == CLOSED:
        return c.fail(c.LEDGER_CLOSED)
    records: list = []
    key = ledger.keys()[-1]
    ensemble = ledger.ensembles[key]
    writable = set(view.writable())
    failed = [i for i, b in enumerate(ensemble) if b not in writable]
    if failed:
        new = list(ensemble)
        picked: list[str] = []
        for n, i in enumerate(failed):
            try:
                new[i] = replace_bookie(
                    view,
                    tuple(new),
                    i,
                    exclude=set(picked) | set(ensemble),
                    weighted=weighted,
                    seed=placement.seed_for(view.offset + 1, f"ensemble-change/{n}"),
                )
            except placement.NotEnoughCandidates as exc:
                return c.fail(c.NOT_ENOUGH_BOOKIES, str(exc))
            picked.append(new[i])
        records.append(
            LedgerEnsembleChange(
                ledger_id=ledger.ledger_id, first_entry_id=ledger.last_add_confirmed + 1, ensemble=tuple(new)
            )
        )
    records.append(
        LedgerEntriesWritten(ledger_id=ledger.ledger_id, last_add_confirmed=ledger.last_add_confirmed + cmd.count)
    )
    return c.Decision(records=tuple(records))


def close(view: BookiesView, cmd: c.CloseLedger) -> c.Decision:
    ledger = view.ledgers.get(cmd.ledger_id)
    if ledger is None:
        return c.fail(c.NO_SUCH_LEDGER)
    if ledger.state == CLOSED:
        return c.fail(c.LEDGER_FENCED if ledger.fenced else c.LEDGER_CLOSED)
    lac = ledger.last_add_confirmed
    return c.Decision(records=(LedgerClosed(ledger_id=ledger.ledger_id, last_entry_id=lac, length=(lac + 1) * 1024),))


def delete(view: BookiesView, cmd: c.DeleteLedger) -> c.Decision:
    if cmd.ledger_id not in view.ledgers:
        return c.fail(c.NO_SUCH_LEDGER)
    return c.Decision(records=(LedgerDeleted(ledger_id=cmd.ledger_id),))
