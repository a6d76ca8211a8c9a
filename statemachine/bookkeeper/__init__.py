"""The BookKeeper family's state machines: the bookies view and its reducer, the auditor, replication
workers, ledger writers and the bookie lifecycle as deciders, the invariants and the simulator."""

from .reducer import apply, replay
from .view import BookiesView

__all__ = ["BookiesView", "apply", "replay"]
