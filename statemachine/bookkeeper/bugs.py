"""Faulty variants of the BookKeeper deciders, for proving the audits catch them (test equipment)."""

from __future__ import annotations

from collections.abc import Callable

from . import auditor, decommission, lifecycle, worker, writer
from . import commands as c
from .decider import decide
from .view import BookiesView

Decide = Callable[[BookiesView, c.Command], c.Decision]


def drain_before_replicated(view: BookiesView, cmd: c.Command) -> c.Decision:
    """A drain completes once the bookie's ledgers are marked for repair, not once they are repaired."""
    if isinstance(cmd, c.CheckDrains):
        return lifecycle.check_drains(view, cmd, wait_for_repairs=False)
    return decide(view, cmd)


def repair_into_same_ensemble(view: BookiesView, cmd: c.Command) -> c.Decision:
    """A repair may pick a bookie already in the ensemble (only the replaced one is excluded)."""
    if isinstance(cmd, c.Replicate):
        return worker.replicate(view, cmd, exclude_ensemble=False)
    return decide(view, cmd)


def ignore_recovery_delay(view: BookiesView, cmd: c.Command) -> c.Decision:
    """The auditor marks a lost bookie's ledgers at once, whatever lostBookieRecoveryDelay says."""
    if isinstance(cmd, c.AuditorTick):
        return auditor.tick(view, cmd, honour_delay=False)
    return decide(view, cmd)


def unweighted_placement(view: BookiesView, cmd: c.Command) -> c.Decision:
    """Ensembles and replacements ignore free disk (uniform choice)."""
    if isinstance(cmd, c.CreateLedger):
        return writer.create(view, cmd, weighted=False)
    if isinstance(cmd, c.WriteEntries):
        return writer.write(view, cmd, weighted=False)
    if isinstance(cmd, c.Replicate):
        return worker.replicate(view, cmd, weighted=False)
    return decide(view, cmd)


def auditor_ignores_unregistered(view: BookiesView, cmd: c.Command) -> c.Decision:
    """The audit counts as lost only registered bookies marked lost: a bookie an ensemble names that
    never registered (or whose registration is gone) keeps its ledgers unmarked."""
    if isinstance(cmd, c.AuditorTick):
        return auditor.tick(view, cmd, registered_only=True)
    if isinstance(cmd, c.PeriodicCheck):
        return c.Decision()
    d = decide(view, cmd)
    if isinstance(cmd, c.RunPeriodicChecks):  # its bookie check skips them too
        keep = tuple(r for r in d.records if all(b in view.bookies for b in getattr(r, "missing", ())))
        return c.Decision(records=keep, reply=d.reply)
    return d


def worker_never_releases(view: BookiesView, cmd: c.Command) -> c.Decision:
    """A worker that failed a repair keeps the ledger's lock for good: the deferred release never fires."""
    if isinstance(cmd, c.Replicate):
        return worker.replicate(view, cmd, release=False)
    return decide(view, cmd)


def decommission_live_bookie(view: BookiesView, cmd: c.Command) -> c.Decision:
    """The classic decommission takes a bookie that is still writable or read-only (no
    ``IllegalOpException``)."""
    if isinstance(cmd, c.DecommissionBookie):
        return decommission.decommission(view, cmd, refuse_available=False)
    return decide(view, cmd)


BUGS: dict[str, Decide] = {
    "drain-before-replicated": drain_before_replicated,
    "repair-into-same-ensemble": repair_into_same_ensemble,
    "ignore-recovery-delay": ignore_recovery_delay,
    "unweighted-placement": unweighted_placement,
    "auditor-ignores-unregistered": auditor_ignores_unregistered,
    "worker-never-releases": worker_never_releases,
    "decommission-live-bookie": decommission_live_bookie,
}
CAUGHT_BY = {
    "drain-before-replicated": "B4",
    "repair-into-same-ensemble": "B2",
    "ignore-recovery-delay": "B1",
    "unweighted-placement": "B7",
    "auditor-ignores-unregistered": "B1",
    "worker-never-releases": "B9",
    "decommission-live-bookie": "B10",
}
