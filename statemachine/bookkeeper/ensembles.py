"""Where ledger data goes: new ensembles and replacement bookies, chosen among the writable
bookies by free-disk weighted random selection (the shared ``statemachine.placement``, BookKeeper's
``WeightedRandomSelectionImpl`` with ``bookieMaxMultipleForWeightBasedPlacement`` = 3), seeded
from the log offset the decision is written at (rule 15). A replacement never comes from the
ensemble it joins (rule 8)."""

from __future__ import annotations

from collections.abc import Collection

from kraftlake.statemachine import placement

from .view import BookiesView


def new_ensemble(view: BookiesView, size: int, *, seed: int, exclude: Collection[str] = (), weighted: bool = True) -> tuple[str, ...]:
    """``size`` distinct writable bookies, first drawn first. Raises ``placement.NotEnoughCandidates``."""
    candidates = view.writable()
    weights = view.weights(candidates) if weighted else dict.fromkeys(candidates, 1)
    if not weights:
        raise placement.NotEnoughCandidates(f"need {size} bookies, none is writable", needed=size, eligible=0)
    return placement.choose(weights, size, seed=seed, exclude=exclude)


def replace_bookie(view: BookiesView, ensemble: tuple[str, ...], *, seed: int, exclude: Collection[str] = (),
                   weighted: bool = True) -> str:  # fmt: skip
    """One writable bookie outside ``ensemble`` and ``exclude`` (``replaceBookie``)."""
    (chosen,) = new_ensemble(view, 1, seed=seed, exclude=set(ensemble) | set(exclude), weighted=weighted)
    return chosen
