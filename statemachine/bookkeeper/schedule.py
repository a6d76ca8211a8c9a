"""The auditor's periodic checks as BookKeeper's ``Auditor`` schedules them
(``scheduleBookieCheckTask``, ``scheduleCheckAllLedgersTask``): each at a fixed rate from the
auditor's election; the bookie check first at once, checkAllLedgers after an initial delay read from
when it last completed (``checkallledgersctime``, kept across auditors so that fail-overs do not
postpone the weekly check for ever: 0 if it never ran or ran longer than an interval ago, else the
rest of the interval). A check that fires while a delayed audit waits is skipped
(``hasBookieCheckTask``), and the schedule moves on. What the bookie check does is
``auditor.periodic``; what checkAllLedgers checks (each ledger's fragments read from its bookies) is
entry I/O, which kraftlake does not model: its run is recorded, its content is not."""

from __future__ import annotations

from kraftlake.records.bookkeeper import AuditorCheck, AuditorCheckRan

from . import auditor
from . import commands as c
from .view import BookiesView

BOOKIE, ALL_LEDGERS = AuditorCheck.BOOKIE.value, AuditorCheck.ALL_LEDGERS.value


def initial_delay(interval_ms: int, last_completed_ms: int | None, now_ms: int) -> int:
    """``scheduleCheckAllLedgersTask``'s initial delay (BookKeeper counts whole seconds)."""
    if last_completed_ms is None:
        return 0
    elapsed = max(0, (now_ms - last_completed_ms) // 1000 * 1000)
    return 0 if elapsed > interval_ms else interval_ms - elapsed


def next_due(view: BookiesView, check: str, interval_ms: int) -> int | None:
    """When ``check`` fires next under the auditor in office (None: no auditor, or disabled)."""
    if view.auditor_since is None or interval_ms <= 0:
        return None
    fired = view.check_fired.get(check)
    if fired is not None:
        return fired + interval_ms
    if check == BOOKIE:
        return view.auditor_since
    return view.auditor_since + initial_delay(interval_ms, view.check_ctime.get(check), view.auditor_since)


def run(view: BookiesView, cmd: c.RunPeriodicChecks) -> c.Decision:
    if not view.replication_enabled:
        return c.fail(c.REPLICATION_DISABLED, "the checks wait for ledger replication to be enabled")
    records: list = []
    due = next_due(view, BOOKIE, cmd.bookie_interval_ms)
    if due is not None and due <= cmd.now_ms:
        check = auditor.periodic(view, c.PeriodicCheck(now_ms=cmd.now_ms))
        records += [*check.records, AuditorCheckRan(check=AuditorCheck.BOOKIE, completed=check.error_code == c.OK)]
    due = next_due(view, ALL_LEDGERS, cmd.all_ledgers_interval_ms)
    if due is not None and due <= cmd.now_ms:
        records.append(AuditorCheckRan(check=AuditorCheck.ALL_LEDGERS, completed=not view.audit_due))
    return c.Decision(records=tuple(records))
