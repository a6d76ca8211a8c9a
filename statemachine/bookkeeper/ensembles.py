"""Where ledger data goes: new ensembles and replacement bookies, chosen among the writable
bookies by free-disk weighted random selection (the shared ``statemachine.placement``, BookKeeper's
``WeightedRandomSelectionImpl`` with ``bookieMaxMultipleForWeightBasedPlacement`` = 3),
seeded from the log offset the decision is written at, under the rack rule (after
``RackawareEnsemblePlacementPolicyImpl.isEnsembleAdheringToPlacementPolicy``).

The rack rule, as kraftlake applies it: neighbours in an ensemble's ring sit in different racks
whenever a bookie in another rack is available, so that every write set (W >= 2 consecutive
positions) spans at least two racks. Position 0 of a new ensemble is drawn from the weights alone;
each later position, and each replacement, is drawn from the weights over the bookies allowed
(``allowed``), which the audit (B7) recomputes to hold every draw to its distribution. A
replacement never comes from the ensemble it joins (the placement policies' ``replaceBookie``
excludes the current ensemble)."""

from __future__ import annotations

import random
from collections.abc import Collection

from kraftlake.statemachine import placement

from .view import BookiesView


def allowed(
    view: BookiesView, candidates: list[str], exclude: Collection[str], neighbours: Collection[str]
) -> list[str]:
    """Candidates not excluded whose rack differs from every neighbour's, if there are any;
    otherwise the candidates not excluded (the rule is soft, as BookKeeper's MEETS_SOFT)."""
    free = [b for b in candidates if b not in exclude]
    racks = {view.bookies[n].rack for n in neighbours if n in view.bookies}
    apart = [b for b in free if view.bookies[b].rack not in racks]
    return apart or free


def _pick(
    view: BookiesView,
    candidates: list[str],
    weights: dict[str, int],
    rng: random.Random,
    exclude: Collection[str],
    neighbours: Collection[str],
    n: int,
) -> str:
    ok = allowed(view, candidates, exclude, neighbours)
    if not ok:
        raise placement.NotEnoughCandidates(
            f"no writable bookie is left outside the ensemble ({len(candidates)} writable)", needed=n, eligible=n - 1
        )
    sel = placement.WeightedSelection(weights)
    return sel.pick(rng, 1, exclude=[b for b in candidates if b not in ok])[0]


def new_ensemble(
    view: BookiesView, size: int, *, seed: int, exclude: Collection[str] = (), weighted: bool = True
) -> tuple[str, ...]:
    """``size`` distinct writable bookies, position by position. Raises ``placement.NotEnoughCandidates``."""
    candidates = view.writable()
    if len([b for b in candidates if b not in exclude]) < size:
        raise placement.NotEnoughCandidates(
            f"need {size} bookies, {len(candidates)} are writable", needed=size, eligible=len(candidates)
        )
    weights = view.weights(candidates) if weighted else dict.fromkeys(candidates, 1)
    rng = random.Random(seed)
    chosen: list[str] = []
    for p in range(size):
        neighbours = chosen[-1:] + (chosen[:1] if p == size - 1 and size > 2 else [])
        chosen.append(_pick(view, candidates, weights, rng, set(exclude) | set(chosen), neighbours, p + 1))
    return tuple(chosen)


def replace_bookie(
    view: BookiesView,
    ensemble: tuple[str, ...],
    position: int,
    *,
    seed: int,
    exclude: Collection[str] = (),
    weighted: bool = True,
    exclude_ensemble: bool = True,
) -> str:
    """One writable bookie for ``position``: outside ``ensemble`` (as ``replaceBookie``; the faulty
    worker of ``bugs`` only leaves out the bookie it replaces) and ``exclude``, apart from its
    neighbours' racks."""
    candidates = view.writable()
    weights = view.weights(candidates) if weighted else dict.fromkeys(candidates, 1)
    if not candidates:
        raise placement.NotEnoughCandidates("no bookie is writable", needed=1, eligible=0)
    out = set(exclude) | (set(ensemble) if exclude_ensemble else {ensemble[position]})
    return _pick(view, candidates, weights, random.Random(seed), out, neighbours_of(ensemble, position), 1)


def neighbours_of(ensemble: tuple[str, ...] | list[str], position: int) -> list[str]:
    e = len(ensemble)
    if e < 2:
        return []
    return sorted({ensemble[(position - 1) % e], ensemble[(position + 1) % e]} - {ensemble[position]})
