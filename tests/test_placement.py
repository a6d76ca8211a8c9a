"""Placement: BookKeeper's weighted random selection (``WeightedRandomSelectionImpl.updateMap`` and
the cases of its TestWeightedRandomSelection), exact numbers, sampling, distinct choice with
exclusions, and determinism across processes."""

from __future__ import annotations

import doctest
import hashlib
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlake.statemachine import placement
from kraftlake.statemachine.placement import (
    NotEnoughCandidates,
    PlacementError,
    WeightedSelection,
    choose,
    seed_for,
)

# --------------------------------------------------------------------------------------------
# Reference: WeightedRandomSelectionImpl.updateMap written out literally, in exact fractions.


def _median(ordered: list[int]) -> Fraction:
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return Fraction(ordered[mid])
    return Fraction(ordered[mid - 1] + ordered[mid], 2)


def reference(weights: dict, max_multiple: int) -> tuple[dict, Fraction | None]:
    """Effective probabilities per updateMap and the cap as a fraction of sum p (None = no cap)."""
    ordered = sorted(weights.values())
    total = sum(ordered)
    if total == 0:
        low, median, total = Fraction(1), Fraction(1), len(ordered)
    else:
        low, median = Fraction(min(w for w in ordered if w > 0)), _median(ordered)
    min_p, cap_p = low / total, max_multiple * median / total
    p = {}
    for k, w in weights.items():
        pk = Fraction(w, total) if w > 0 else min_p
        if cap_p > 0 and pk > cap_p:
            pk = cap_p
        p[k] = pk
    s = sum(p.values())
    return {k: v / s for k, v in p.items()}, (cap_p / s if cap_p > 0 else None)


def _some_zero() -> dict[int, int]:
    return {k: 0 if k < 16 else 100 if k < 32 else 200 for k in range(50)}


def _unequal() -> dict[int, int]:
    return {k: 100 if k < 16 else 200 if k < 32 else 1000 for k in range(50)}


def _hot() -> dict[int, int]:
    return {k: 49000 if k == 49 else 100 for k in range(50)}


# (id, weights, M, {key: exact probability}, {key: (printed %, decimals)}). The equal, hot node,
# all zero, some zero and unequal rows are TestWeightedRandomSelection's testSelectionWith* cases;
# the others are worked out from updateMap.
TABLE = [
    (
        "3.4 capped",
        {"a": 10, "b": 20, "c": 30, "d": 1000},
        3,
        {"a": Fraction(2, 27), "b": Fraction(4, 27), "c": Fraction(6, 27), "d": Fraction(15, 27)},
        {"a": (7.41, 2), "b": (14.81, 2), "c": (22.22, 2), "d": (55.56, 2)},
    ),
    (
        "3.4 unknown gets min",
        {"a": 0, "b": 100, "c": 200, "d": 300},
        3,
        {"a": Fraction(1, 7), "b": Fraction(1, 7), "c": Fraction(2, 7), "d": Fraction(3, 7)},
        {"a": (14.29, 2), "b": (14.29, 2), "c": (28.57, 2), "d": (42.86, 2)},
    ),
    *[
        (
            f"3.4/3.6 equal M={m}",
            dict.fromkeys(range(50), 100),
            m,
            dict.fromkeys(range(50), Fraction(1, 50)),
            {0: (2.0, 2), 49: (2.0, 2)},
        )
        for m in (-1, 0, 1, 3)
    ],
    (
        "3.4/3.6 hot node",
        _hot(),
        3,
        {**dict.fromkeys(range(49), Fraction(1, 52)), 49: Fraction(3, 52)},
        {0: (1.923, 3), 48: (1.923, 3), 49: (5.769, 3)},
    ),
    ("3.4 hot node uncapped", _hot(), -1, {49: Fraction(49000, 53900)}, {49: (90.91, 2)}),
    *[
        (
            f"3.6 all zero M={m}",
            dict.fromkeys(range(50), 0),
            m,
            dict.fromkeys(range(50), Fraction(1, 50)),
            {0: (2.0, 2)},
        )
        for m in (-1, 3)
    ],
    (
        "3.6 some zero",
        _some_zero(),
        3,
        {k: Fraction(1, 68) if k < 32 else Fraction(2, 68) for k in range(50)},
        {0: (1.471, 3), 16: (1.471, 3), 32: (2.941, 3)},
    ),
    (
        "3.6 unequal M=4",
        _unequal(),
        4,
        {k: Fraction(1, 192) if k < 16 else Fraction(2, 192) if k < 32 else Fraction(8, 192) for k in range(50)},
        {0: (0.521, 3), 16: (1.042, 3), 32: (4.167, 3)},
    ),
    *[
        (
            f"cap disabled M={m}",
            {"a": 10, "b": 20, "c": 30, "d": 1000},
            m,
            {"a": Fraction(10, 1060), "b": Fraction(20, 1060), "c": Fraction(30, 1060), "d": Fraction(1000, 1060)},
            {},
        )
        for m in (0, -1, -5)
    ],
]


@pytest.mark.parametrize(("weights", "m", "exact", "printed"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_exact_probabilities(weights, m, exact, printed):
    probs = WeightedSelection(weights, max_multiple=m).probabilities()
    assert list(probs) == sorted(weights)
    assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-12)
    for k, p in exact.items():
        assert probs[k] == pytest.approx(float(p), rel=1e-12, abs=0), k
    for k, (pct, decimals) in printed.items():
        assert round(100 * probs[k], decimals) == pct, k
    ref, _ = reference(weights, m)
    assert probs == pytest.approx({k: float(v) for k, v in ref.items()}, rel=1e-12)


def test_default_multiple_is_bookkeepers_three():
    weights = {"a": 10, "b": 20, "c": 30, "d": 1000}
    assert WeightedSelection(weights).probabilities() == WeightedSelection(weights, max_multiple=3).probabilities()


def test_median_counts_zeros_and_zero_median_means_no_cap():
    # sorted 0, 0, 0, 100: median 0 -> cap 0 -> no cap; zeros get min = 100 -> all equal.
    probs = WeightedSelection({"a": 0, "b": 0, "c": 0, "d": 100}, max_multiple=1).probabilities()
    assert probs == pytest.approx(dict.fromkeys("abcd", 0.25))
    # sorted 0, 0, 100, 100: median 50; M=1 caps everyone (zeros too, after getting min) to 50.
    probs = WeightedSelection({"a": 0, "b": 0, "c": 100, "d": 300}, max_multiple=1).probabilities()
    assert probs == pytest.approx(dict.fromkeys("abcd", 0.25))


# --------------------------------------------------------------------------------------------
# Sampling


def _within_sigmas(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


def test_million_draws_match_bookkeeper_numbers():
    sel = WeightedSelection({"a": 10, "b": 20, "c": 30, "d": 1000})
    n = 1_000_000
    counts = Counter(sel.draws(random.Random(20170401), n))
    expected = {"a": 2 / 27, "b": 4 / 27, "c": 6 / 27, "d": 15 / 27}
    assert set(counts) == set(expected)
    for k, p in expected.items():
        assert _within_sigmas(counts[k], n, p), (k, counts[k] / n, p)
        assert abs(counts[k] / n - p) / p < 0.05, k  # TestWeightedRandomSelection's relative check
    # ... and BookKeeper's form of it: observed / median-observed vs expected / median-expected.
    obs_median = _median(sorted(counts.values())) / n
    exp_median = (expected["b"] + expected["c"]) / 2
    for k, p in expected.items():
        assert abs((counts[k] / n / float(obs_median)) / (p / exp_median) - 1) < 0.05, k


@pytest.mark.parametrize(
    ("weights", "m"),
    [
        (dict.fromkeys(range(50), 100), -1),
        (dict.fromkeys(range(50), 0), -1),
        (_some_zero(), 3),
        (_unequal(), 4),
        (_hot(), 3),
    ],
    ids=["equal", "all-zero", "some-zero", "unequal", "hot"],
)
def test_bookkeeper_selection_tests_sampled(weights, m):
    sel = WeightedSelection(weights, max_multiple=m)
    n = 200_000
    counts = Counter(sel.draws(random.Random(m * 1000 + len(weights)), n))
    for k, p in sel.probabilities().items():
        assert _within_sigmas(counts[k], n, p), (k, counts[k] / n, p)


def test_draws_matches_draw_sequence_for_sequence():
    sel = WeightedSelection({"a": 1, "b": 2**70, "c": 0, "d": 12345}, max_multiple=2)
    for seed in range(5):
        one, many = random.Random(seed), random.Random(seed)
        assert [sel.draw(one) for _ in range(2000)] == sel.draws(many, 2000)
        assert one.getstate() == many.getstate()
    assert sel.draws(random.Random(0), 0) == []


def test_draw_uses_only_the_given_rng():
    sel = WeightedSelection(dict.fromkeys("abcdefgh", 10))
    random.seed(1)
    first = sel.draws(random.Random(5), 50)
    random.seed(2)
    assert sel.draws(random.Random(5), 50) == first
    random.seed(3)
    assert choose(dict.fromkeys("abcdefgh", 10), 4, seed=5) == choose(dict.fromkeys("abcdefgh", 10), 4, seed=5)


# --------------------------------------------------------------------------------------------
# Errors


def test_errors():
    assert issubclass(PlacementError, ValueError)
    assert issubclass(NotEnoughCandidates, PlacementError)
    with pytest.raises(PlacementError, match="empty"):
        WeightedSelection({})
    with pytest.raises(PlacementError, match=r"key 'dir-2' is negative: -1"):
        WeightedSelection({"dir-1": 5, "dir-2": -1})
    with pytest.raises(PlacementError, match=r"key 3 is not an int"):
        WeightedSelection({3: 1.5})
    with pytest.raises(PlacementError, match="orderable"):
        WeightedSelection({1: 1, "a": 1})
    with pytest.raises(PlacementError, match="count"):
        choose({1: 1}, -1, seed=0)
    with pytest.raises(PlacementError, match="offset"):
        seed_for(-1)


def test_not_enough_candidates():
    weights = {1: 100, 2: 200, 3: 300, 4: 0, 5: 50}
    message = r"need 3 distinct keys but only 1 of 5 are eligible \(4 excluded\)"
    with pytest.raises(NotEnoughCandidates, match=message) as err:
        choose(weights, 3, seed=1, exclude={1, 2, 3, 4})
    assert (err.value.needed, err.value.eligible) == (3, 1)
    with pytest.raises(NotEnoughCandidates, match="need 6"):
        choose(weights, 6, seed=1)
    assert choose(weights, 1, seed=1, exclude={1, 2, 3, 4}) == (5,)  # (1,1,1) still works
    assert choose(weights, 0, seed=1, exclude=weights) == ()


# --------------------------------------------------------------------------------------------
# choose


def test_choose_distinct_excluded_and_repeatable():
    weights = {f"b{i}": (i * 37) % 11 * 1000 for i in range(12)}
    exclude = {"b0", "b5", "b7", "not-a-candidate"}
    for seed in range(300):
        picked = choose(weights, 6, seed=seed, exclude=exclude)
        assert len(picked) == len(set(picked)) == 6
        assert not set(picked) & exclude
        assert set(picked) <= set(weights)
        assert choose(weights, 6, seed=seed, exclude=exclude) == picked
    assert len({choose(weights, 6, seed=s, exclude=exclude) for s in range(50)}) > 40
    everyone = choose(weights, 9, seed=3, exclude=exclude)
    assert sorted(everyone) == sorted(set(weights) - exclude)


def test_choose_does_not_spin_on_tiny_weights():
    # A rejection loop would need ~1e15 draws to find "c" once "a" and "b" are taken.
    assert sorted(choose({"a": 10**15, "b": 10**15, "c": 1}, 3, seed=9, max_multiple=-1)) == ["a", "b", "c"]


def test_choose_matches_rejection_sampling_distribution():
    """Ordered pairs from choose vs the exact law of BookKeeper's redraw-until-fresh loop."""
    weights = {"a": 0, "b": 100, "c": 300, "d": 900, "e": 5000}
    exclude = {"b"}
    q = WeightedSelection(weights).probabilities()
    eligible = [k for k in q if k not in exclude]
    total = sum(q[k] for k in eligible)
    law = {(x, y): q[x] / total * q[y] / (total - q[x]) for x in eligible for y in eligible if x != y}
    n = 20_000
    counts = Counter(choose(weights, 2, seed=s, exclude=exclude) for s in range(n))
    assert set(counts) <= set(law)
    for pair, p in law.items():
        assert _within_sigmas(counts[pair], n, p), (pair, counts[pair] / n, p)


def test_excluded_keys_still_set_the_median():
    """TestRackawareEnsemblePlacementPolicy...WithoutEnoughBookiesInSameRack: weights 50, 100, 100,
    200, 500, M = 4, replacing b2: median stays 100, so 500 is capped to 400 (ratio b4/b3 = 2,
    not the 2.5 it would be if b2 left the map)."""
    weights = {"b0": 50, "b1": 100, "b2": 100, "b3": 200, "b4": 500}
    n = 20_000
    counts = Counter(choose(weights, 1, seed=s, max_multiple=4, exclude={"b2"})[0] for s in range(n))
    assert "b2" not in counts
    law = {"b0": 100 / 1500, "b1": 200 / 1500, "b3": 400 / 1500, "b4": 800 / 1500}
    for k, p in law.items():
        assert _within_sigmas(counts[k], n, p), (k, counts[k] / n, p)
    assert abs(counts["b4"] / counts["b3"] - 2) < 0.2
    assert abs(counts["b4"] / counts["b1"] - 4) < 0.5


# --------------------------------------------------------------------------------------------
# seed_for


def test_seed_for():
    assert seed_for(41, "replica-dir") == int.from_bytes(hashlib.sha256(b"41:replica-dir").digest()[:8], "big")
    assert seed_for(7) == seed_for(7, "") == int.from_bytes(hashlib.sha256(b"7:").digest()[:8], "big")
    seeds = {seed_for(o, p) for o in range(500) for p in ("", "a", "b")}
    assert len(seeds) == 1500
    assert all(0 <= s < 2**64 for s in seeds)


# --------------------------------------------------------------------------------------------
# Determinism across processes (hash randomisation, dict insertion order)

_SCRIPT = """
import json, random, sys
from kraftlake.statemachine.placement import WeightedSelection, choose, seed_for
items = [(f"broker-{i}", (i * 7919) % 1000 * 10**9) for i in range(40)] + [("zero", 0)]
if sys.argv[1] == "reversed":
    items.reverse()
weights = dict(items)
exclude = {f"broker-{i}" for i in range(0, 40, 7)}
sel = WeightedSelection(weights)
print(json.dumps({
    "choose": [choose(weights, 5, seed=seed_for(o, "t"), exclude=exclude) for o in range(50)],
    "probabilities": list(sel.probabilities().items()),
    "draws": sel.draws(random.Random(seed_for(9)), 300),
    "seeds": [seed_for(o, "x") for o in range(10)],
    "hash": hash("broker-1"),
}))
"""


def test_same_decisions_in_other_processes():
    outputs = []
    for hashseed, order in (("1", "forward"), ("2", "reversed")):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        proc = subprocess.run(
            [sys.executable, "-c", _SCRIPT, order], env=env, capture_output=True, text=True, check=True, timeout=60
        )
        outputs.append(json.loads(proc.stdout))
    first, second = outputs
    assert first.pop("hash") != second.pop("hash")  # the processes really hash strings differently
    assert first == second
    assert len(first["choose"]) == 50


# --------------------------------------------------------------------------------------------
# Properties

_weight = st.one_of(st.just(0), st.integers(1, 5), st.integers(0, 10**15))
_weights = st.one_of(
    st.dictionaries(st.integers(-1000, 1000), _weight, min_size=1, max_size=30),
    st.dictionaries(st.text(max_size=6), _weight, min_size=1, max_size=30),
)
_multiple = st.integers(-2, 6)


@given(_weights, _multiple)
def test_probabilities_follow_the_formula(weights, m):
    probs = WeightedSelection(weights, max_multiple=m).probabilities()
    assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-9)
    ref, cap = reference(weights, m)
    for k, p in probs.items():
        assert math.isclose(p, float(ref[k]), rel_tol=1e-12), k
        if cap is not None:
            assert p <= float(cap) * (1 + 1e-12), k


@given(_weights, _multiple)
def test_zero_weight_keys_get_the_lightest_keys_probability(weights, m):
    probs = WeightedSelection(weights, max_multiple=m).probabilities()
    nonzero = [k for k, w in weights.items() if w > 0]
    zero = [k for k, w in weights.items() if w == 0]
    if not nonzero:
        assert len(set(probs.values())) == 1
    elif zero:
        lightest = min(nonzero, key=lambda k: weights[k])
        assert {probs[k] for k in zero} == {probs[lightest]}


@given(_weights, _multiple, st.data())
def test_insertion_order_does_not_matter(weights, m, data):
    shuffled = dict(data.draw(st.permutations(list(weights.items()))))
    a, b = WeightedSelection(weights, max_multiple=m), WeightedSelection(shuffled, max_multiple=m)
    assert list(a.probabilities().items()) == list(b.probabilities().items())
    assert a.keys == b.keys == tuple(sorted(weights))
    seed = data.draw(st.integers(0, 2**64 - 1))
    assert a.draws(random.Random(seed), 20) == b.draws(random.Random(seed), 20)
    count = data.draw(st.integers(0, len(weights)))
    assert choose(weights, count, seed=seed, max_multiple=m) == choose(shuffled, count, seed=seed, max_multiple=m)


@given(_weights, _multiple, st.data())
def test_choose_properties(weights, m, data):
    keys = sorted(weights)
    exclude = set(data.draw(st.lists(st.sampled_from(keys), unique=True)))
    eligible = len(keys) - len(exclude)
    count = data.draw(st.integers(0, len(keys)))
    seed = data.draw(st.integers(0, 2**64 - 1))
    if count > eligible:
        with pytest.raises(NotEnoughCandidates):
            choose(weights, count, seed=seed, max_multiple=m, exclude=exclude)
        return
    picked = choose(weights, count, seed=seed, max_multiple=m, exclude=exclude)
    assert len(picked) == len(set(picked)) == count
    assert set(picked) <= set(keys) - exclude


def test_docstring_examples():
    assert doctest.testmod(placement).failed == 0
