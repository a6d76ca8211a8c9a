"""Free-disk weighted random placement, shared by every decider that puts data somewhere.

This module owns one thing: turning "candidate -> free bytes" into a reproducible random choice.
Kafka deciders use it to pick the brokers of a new partition and the log dir of a new replica;
the BookKeeper state machine uses it for ensembles and bookie replacement.

The weighting is BookKeeper's ``WeightedRandomSelectionImpl.updateMap`` (BP-2 "Resource aware
data placement", BOOKKEEPER-950), with ``bookieMaxMultipleForWeightBasedPlacement`` as
``max_multiple``; picking several distinct keys follows ``DefaultEnsemblePlacementPolicy``
(``newEnsemble`` / ``replaceBookie``). For weights w_k >= 0 over N keys and multiplier M:

1. Sort the weights; total = sum w, min = smallest NON-ZERO weight. If total == 0, every key
   counts as weight 1 (everyone equal). Otherwise median = middle weight (odd N) or the mean of
   the two middle ones (even N), over the sorted list INCLUDING zero weights.
2. p_k = w_k / total, except that a zero weight (unknown free space) gets min / total.
3. If M > 0 and the median is non-zero, p_k is capped at M x median / total.
4. The p_k are laid end to end and one draw is u uniform in [0, sum p) -- no renormalisation,
   so the effective probability of k is p_k / sum p.

Two deliberate differences in *mechanics*, none in the distribution:

- Arithmetic is exact integer arithmetic in units of half a weight (2 x w_k, 2 x min,
  M x (2 x median)) instead of Java doubles, so a result never depends on float rounding.
- BookKeeper gets distinct keys by redrawing until an unused, non-excluded key comes up.
  Conditioned on being accepted, such a draw returns k with probability p_k / (sum of p over the
  keys still allowed), so :func:`choose` draws from exactly that directly: same distribution,
  bounded time (the Java loop spins ~1/p times when only a near-full disk is left).

Everything is pure: no I/O, no clock, no unseeded randomness. Keys are laid out in sorted
order (never dict order) and randomness comes from ``random.Random(seed)`` with a seed made by
:func:`seed_for` from a log offset, so replaying the log repeats every decision exactly.

Example::

    >>> sel = WeightedSelection({"b1": 10, "b2": 20, "b3": 30, "b4": 1000})
    >>> {k: round(p, 4) for k, p in sel.probabilities().items()}
    {'b1': 0.0741, 'b2': 0.1481, 'b3': 0.2222, 'b4': 0.5556}
    >>> choose({1: 500, 2: 0, 3: 900}, 2, seed=seed_for(41, "partition-assignment"))
    (2, 3)
"""

from __future__ import annotations

import hashlib
import random
from bisect import bisect_right
from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

__all__ = [
    "NotEnoughCandidates",
    "PlacementError",
    "WeightedSelection",
    "choose",
    "seed_for",
]

K = TypeVar("K", bound=Hashable)

DEFAULT_MAX_MULTIPLE = 3
"""BookKeeper's ``bookieMaxMultipleForWeightBasedPlacement`` default."""


class PlacementError(ValueError):
    """Placement inputs make no sense: no candidates, a negative or non-integer weight, ...

    >>> WeightedSelection({"d1": 5, "d2": -1})
    Traceback (most recent call last):
        ...
    kraftlake.statemachine.placement.PlacementError: weight of key 'd2' is negative: -1
    """


class NotEnoughCandidates(PlacementError):
    """Fewer eligible keys than requested (BookKeeper's ``BKNotEnoughBookiesException``).

    ``needed`` is the count asked for, ``eligible`` the number of keys that were not excluded.

    >>> choose({1: 10, 2: 10}, 2, seed=0, exclude={2})
    Traceback (most recent call last):
        ...
    kraftlake.statemachine.placement.NotEnoughCandidates: need 2 distinct keys but only 1 of 2 are eligible (1 excluded)
    """

    def __init__(self, message: str, *, needed: int, eligible: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.eligible = eligible


def _below(getrandbits: Callable[[int], int], n: int, k: int) -> int:
    """Uniform integer in [0, n), ``k = n.bit_length()``; CPython's ``_randbelow``, pinned here
    so the consumed bit stream never changes with the Python version."""
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


class WeightedSelection(Generic[K]):
    """BookKeeper's ``WeightedRandomSelectionImpl`` over a fixed weight map.

    Args:
        weights: key -> weight (free bytes); ints >= 0. Keys must be hashable and mutually
            orderable; they are laid out in sorted order, so dict order never matters.
        max_multiple: no key gets more than ``max_multiple`` x the median probability;
            ``<= 0`` disables the cap.

    Raises:
        PlacementError: ``weights`` is empty, a weight is not an int, a weight is negative,
            or the keys cannot be sorted.

    Example:
        >>> sel = WeightedSelection({"d0": 0, "d1": 100, "d2": 200, "d3": 300})
        >>> {k: round(p, 4) for k, p in sel.probabilities().items()}
        {'d0': 0.1429, 'd1': 0.1429, 'd2': 0.2857, 'd3': 0.4286}
        >>> sel.draw(random.Random(7))
        'd2'
    """

    __slots__ = ("_bits", "_bounds", "_index", "_keys", "_total", "_units")

    def __init__(self, weights: Mapping[K, int], *, max_multiple: int = DEFAULT_MAX_MULTIPLE) -> None:
        if not weights:
            raise PlacementError("no candidates: weights is empty")
        try:
            keys = tuple(sorted(weights))  # type: ignore[type-var]  # K need only be hashable: else the TypeError below
        except TypeError as exc:
            raise PlacementError(f"keys must be mutually orderable: {exc}") from None
        for key in keys:
            w = weights[key]
            if not isinstance(w, int):
                raise PlacementError(f"weight of key {key!r} is not an int: {w!r}")
            if w < 0:
                raise PlacementError(f"weight of key {key!r} is negative: {w}")

        ordered = sorted(weights[key] for key in keys)
        n = len(ordered)
        if ordered[-1] == 0:
            # All unknown: BookKeeper sets min = median = 1, total = N -> everyone equal.
            min_units, median_units = 2, 2
        else:
            min_units = 2 * next(w for w in ordered if w > 0)
            mid = n // 2
            median_units = 2 * ordered[mid] if n % 2 else ordered[mid - 1] + ordered[mid]
        cap_units = max_multiple * median_units  # > 0 only if M > 0 and median > 0

        units: list[int] = []
        for key in keys:
            u = 2 * weights[key] if weights[key] > 0 else min_units
            if cap_units > 0 and u > cap_units:
                u = cap_units
            units.append(u)
        bounds: list[int] = []
        running = 0
        for u in units:
            running += u
            bounds.append(running)

        self._keys = keys
        self._index = frozenset(keys)
        self._units = tuple(units)
        self._bounds = bounds
        self._total = running
        self._bits = running.bit_length()

    @property
    def keys(self) -> tuple[K, ...]:
        """The candidate keys in sorted order (the order of the cumulative layout)."""
        return self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        probs = ", ".join(f"{k!r}: {p:.4f}" for k, p in self.probabilities().items())
        return f"WeightedSelection({{{probs}}})"

    def probabilities(self) -> dict[K, float]:
        """Effective probability of each key for one draw (p_k / sum p; sums to 1), sorted by key.

        >>> WeightedSelection({"a": 100, "b": 49000}).probabilities()  # median 24550: no cap
        {'a': 0.002036659877800407, 'b': 0.9979633401221996}
        """
        total = self._total
        return {k: u / total for k, u in zip(self._keys, self._units)}

    def draw(self, rng: random.Random) -> K:
        """One independent draw (with replacement): u in [0, sum p), the key whose interval holds u.

        >>> sel = WeightedSelection({"a": 1, "b": 3}, max_multiple=0)
        >>> rng = random.Random(1)
        >>> [sel.draw(rng) for _ in range(6)]
        ['b', 'a', 'b', 'a', 'b', 'b']
        """
        return self._keys[bisect_right(self._bounds, _below(rng.getrandbits, self._total, self._bits))]

    def draws(self, rng: random.Random, n: int) -> list[K]:
        """``n`` independent draws; the same sequence (and rng state) as ``n`` calls to :meth:`draw`.

        >>> sel = WeightedSelection({"a": 1, "b": 3}, max_multiple=0)
        >>> sel.draws(random.Random(1), 6)
        ['b', 'a', 'b', 'a', 'b', 'b']
        """
        keys, bounds, total, bits = self._keys, self._bounds, self._total, self._bits
        getrandbits = rng.getrandbits
        out: list[K] = []
        append = out.append
        for _ in range(n):
            r = getrandbits(bits)
            while r >= total:
                r = getrandbits(bits)
            append(keys[bisect_right(bounds, r)])
        return out

    def pick(self, rng: random.Random, count: int, exclude: Collection[K] = ()) -> tuple[K, ...]:
        """``count`` distinct keys not in ``exclude``, in draw order (see :func:`choose`).

        Draws as BookKeeper does (draw, keep the key unless taken or excluded) for a few tries,
        then draws from the allowed keys directly. A rejected draw followed by an accepted one
        returns k with probability p_k / (sum of p over allowed keys), and so does the direct
        draw, so the mix has exactly the loop's distribution; the first is O(log N) per key when
        most keys are allowed, the second bounds the time when few are.
        """
        if count < 0:
            raise PlacementError(f"count must be >= 0, got {count}")
        excluded = frozenset(exclude)
        eligible = len(self._keys) - sum(1 for k in excluded if k in self._index)
        if eligible < count:
            raise NotEnoughCandidates(
                f"need {count} distinct keys but only {eligible} of {len(self._keys)} "
                f"are eligible ({len(self._keys) - eligible} excluded)",
                needed=count,
                eligible=eligible,
            )
        keys, bounds, total, bits = self._keys, self._bounds, self._total, self._bits
        getrandbits = rng.getrandbits
        chosen: list[K] = []
        taken = set(excluded)
        for _ in range(count):
            for _try in range(_TRIES):
                r = getrandbits(bits)
                while r >= total:
                    r = getrandbits(bits)
                key = keys[bisect_right(bounds, r)]
                if key not in taken:
                    break
            else:
                remaining = [(k, u) for k, u in zip(keys, self._units) if k not in taken]
                left = sum(u for _, u in remaining)
                r = _below(getrandbits, left, left.bit_length())
                i = 0
                while r >= remaining[i][1]:
                    r -= remaining[i][1]
                    i += 1
                key = remaining[i][0]
            chosen.append(key)
            taken.add(key)
        return tuple(chosen)


_TRIES = 16
"""Rejection draws per key before drawing from the allowed keys directly."""


def choose(
    weights: Mapping[K, int],
    count: int,
    *,
    seed: int,
    max_multiple: int = DEFAULT_MAX_MULTIPLE,
    exclude: Collection[K] = (),
) -> tuple[K, ...]:
    """Pick ``count`` distinct keys, weighted as :class:`WeightedSelection`, in draw order.

    Same result as BookKeeper's ``DefaultEnsemblePlacementPolicy`` rejection loop (draw, keep the
    key unless already chosen or excluded, repeat), computed without retries. Excluded keys stay
    in the weight map, so they still move the median and cap, but are never returned; keys in
    ``exclude`` that are not in ``weights`` are ignored. Filter ``weights`` to live candidates
    (writable bookies, online dirs) first: only excluded keys keep a say in the median.

    Args:
        weights: key -> weight (free bytes), ints >= 0.
        count: how many distinct keys to return (>= 0).
        seed: seeds ``random.Random(seed)``; use :func:`seed_for` with the log offset.
        max_multiple: probability cap as a multiple of the median; ``<= 0`` disables it.
        exclude: keys that must not be returned.

    Returns:
        ``count`` distinct keys, first drawn first.

    Raises:
        NotEnoughCandidates: fewer than ``count`` keys are left after ``exclude``.
        PlacementError: bad weights (see :class:`WeightedSelection`) or ``count < 0``.

    Example:
        >>> free = {"dir-a": 4_000, "dir-b": 1_000, "dir-c": 9_000}
        >>> choose(free, 1, seed=seed_for(1234, "replica-dir"), exclude={"dir-c"})
        ('dir-a',)
    """
    return WeightedSelection(weights, max_multiple=max_multiple).pick(random.Random(seed), count, exclude)


def seed_for(offset: int, purpose: str = "") -> int:
    """64-bit seed for a decision made at log ``offset``: sha256 of ``f"{offset}:{purpose}"``,
    first 8 bytes big-endian.

    Pass the offset of the first record the decision will produce, so replay gets the same seed;
    ``purpose`` separates independent decisions produced at the same offset.

    >>> seed_for(0)
    13436079590000323820
    >>> seed_for(0, "replica-dir") != seed_for(0, "partition-assignment")
    True
    """
    if offset < 0:
        raise PlacementError(f"offset must be >= 0, got {offset}")
    return int.from_bytes(hashlib.sha256(f"{offset}:{purpose}".encode()).digest()[:8], "big")
