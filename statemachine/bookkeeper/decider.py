"""The BookKeeper decider: ``decide(view, command) -> Decision``, one dispatch point for the
writer, the auditor, the replication workers and the operator. Pure: the view is read, never
changed; fold the records with ``reducer.apply``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import auditor, decommission, lifecycle, schedule, worker, writer
from . import commands as c
from .view import BookiesView

# Each handler takes the command of its key's class, which a dict type cannot say: Any, as in the reducers.
_DECIDE: dict[type, Callable[[BookiesView, Any], c.Decision]] = {
    c.CreateLedger: writer.create,
    c.WriteEntries: writer.write,
    c.CloseLedger: writer.close,
    c.DeleteLedger: writer.delete,
    c.AuditorTick: auditor.tick,
    c.PeriodicCheck: auditor.periodic,
    c.SetRecoveryDelay: auditor.set_delay,
    c.ElectAuditor: auditor.elect,
    c.Replicate: worker.replicate,
    c.ChangeBookieState: lifecycle.change_state,
    c.CheckDrains: lifecycle.check_drains,
    c.DecommissionBookie: decommission.decommission,
    c.CheckDecommissions: decommission.check,
    c.SetReplicationEnabled: decommission.set_replication,
    c.RunPeriodicChecks: schedule.run,
}


def decide(view: BookiesView, command: c.Command) -> c.Decision:
    try:
        fn = _DECIDE[type(command)]
    except KeyError:
        raise TypeError(f"not a BookKeeper command: {type(command).__name__}") from None
    return fn(view, command)
