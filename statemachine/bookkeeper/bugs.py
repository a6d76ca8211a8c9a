"""Faulty variants of the BookKeeper deciders, for proving the audits catch them (test equipment)."""

from __future__ import annotations

from collections.abc import Callable

from . import auditor, lifecycle, worker, writer
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


BUGS: dict[str, Decide] = {
    "drain-before-replicated": drain_before_replicated,
    "repair-into-same-ensemble": repair_into_same_ensemble,
    "ignore-recovery-delay": ignore_recovery_delay,
    "unweighted-placement": unweighted_placement,
}
CAUGHT_BY = {
    "drain-before-replicated": "B4",
    "repair-into-same-ensemble": "B2",
    "ignore-recovery-delay": "B1",
    "unweighted-placement": "B7",
}
