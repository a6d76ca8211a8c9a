"""BookKeeper's ``TestWeightedRandomSelection``, case by case, against kraftlake's
``statemachine.placement.WeightedSelection`` (BookKeeper's ``WeightedRandomSelectionImpl``), with
BookKeeper's own million draws and its own check (``verifyResult``: each key's observed share, as
a multiple of the median observed share, within 5 % of the expected multiple)."""

from __future__ import annotations

import random
from collections import Counter

from kraftlake.statemachine.placement import WeightedSelection

TRIES = 1_000_000


def _draw(weights: dict[str, int], multiplier: int, seed: int) -> Counter:
    return Counter(WeightedSelection(weights, max_multiple=multiplier).draws(random.Random(seed), TRIES))


def _verify_result(weights, counts, multiplier, min_weight, median_weight, total) -> None:
    """``verifyResult``, line for line."""
    values = sorted(counts[k] for k in weights)
    mid = len(values) // 2
    median_observed = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    median_observed_weight = median_observed / TRIES
    median_expected_weight = median_weight / total
    for k, w in weights.items():
        observed = counts[k] / TRIES
        expected = (min_weight if w == 0 else w) / total
        if multiplier > 0 and expected > multiplier * median_expected_weight:
            expected = multiplier * median_expected_weight
        expected_multiple = expected / median_expected_weight
        observed_multiple = observed / median_observed_weight
        assert abs(expected_multiple - observed_multiple) / expected_multiple * 100 < 5, k


def _uniform(counts: Counter, keys: int) -> None:
    expected_pct = 100 / keys
    for k, n in counts.items():
        assert abs(expected_pct - 100 * n / TRIES) / expected_pct * 100 < 5, k


def test_testSelectionWithEqualWeights():
    counts = _draw({str(i): 100 for i in range(50)}, -1, 1)
    assert len(counts) == 50
    _uniform(counts, 50)


def test_testSelectionWithAllZeroWeights():
    counts = _draw({str(i): 0 for i in range(50)}, -1, 2)
    assert len(counts) == 50
    _uniform(counts, 50)


def test_testSelectionWithSomeZeroWeights():
    weights = {str(i): 0 if i < 16 else 100 if i < 32 else 200 for i in range(50)}
    _verify_result(weights, _draw(weights, 3, 3), 3, 100, 100, sum(weights.values()))


def test_testSelectionWithUnequalWeights():
    weights = {str(i): 100 if i < 16 else 200 if i < 32 else 1000 for i in range(50)}
    _verify_result(weights, _draw(weights, 4, 4), 4, 100, 200, sum(weights.values()))


def _hot() -> dict[str, int]:
    return {str(i): 10 * 49 * 100 if i == 49 else 100 for i in range(50)}


def test_testSelectionWithHotNode():
    weights = _hot()
    _verify_result(weights, _draw(weights, 3, 5), 3, 100, 100, sum(weights.values()))


def test_testSelectionWithHotNodeWithLimit():
    weights = _hot()
    counts = _draw(weights, 3, 6)
    _verify_result(weights, counts, 3, 100, 100, sum(weights.values()))
    assert counts["49"] < 4 * counts["0"]  # the hot node is held to about 3x the median


def test_testSelectionFromSelectedNodesWithEqualWeights():
    """BookKeeper's ``DynamicWeightedRandomSelectionImpl.getNextRandom(selectFrom)``: kraftlake picks
    among the keys not excluded."""
    sel = WeightedSelection({str(i): 100 for i in range(50)})
    select_from = {str(i) for i in range(25)}
    rng = random.Random(7)
    out = [sel.pick(rng, 1, exclude=[k for k in map(str, range(50)) if k not in select_from])[0] for _ in range(1000)]
    assert set(out) <= select_from and len(set(out)) > 20
