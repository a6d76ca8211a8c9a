"""How much the suite's tiers run: ``make test-fast`` (the inner loop), ``make test`` (CI) and
``make test-thorough`` (before a change to codecs, reducers or deciders lands). The tier comes
from ``KRAFTLAKE_TEST_TIER`` (``fast``, ``default``, ``thorough``); property tests size their
examples, and loops their rounds, through ``examples`` and ``rounds``, so that one number in a
test says how much it does in CI and the tiers scale it."""

from __future__ import annotations

import os

TIERS = ("fast", "default", "thorough")
TIER = os.environ.get("KRAFTLAKE_TEST_TIER", "default")
if TIER not in TIERS:
    raise ValueError(f"KRAFTLAKE_TEST_TIER={TIER!r}: one of {', '.join(TIERS)}")

THOROUGH = 5
"""``thorough`` runs five times what CI runs."""


def examples(n: int) -> int:
    """A property test's examples in this tier, for ``n`` in CI's: a quarter in the inner loop
    (never fewer than two, nor more than ``n``), five times as many when thorough."""
    if TIER == "fast":
        return min(n, max(2, n // 4))
    return n * THOROUGH if TIER == "thorough" else n


def rounds(n: int) -> int:
    """A loop's rounds (kills, racing writers) in this tier, for ``n`` in CI's."""
    return examples(n)
