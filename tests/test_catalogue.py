"""The invariant catalogue is the one definition every engine reads: ids, families, severities,
definitions, graces and the words of each message. Every engine words a violation with
``statemachine.invariants.say``: the per-record engine as it finds one, the SQL plan
(``replay.plan``) on the driver, from the kinds and fields its queries return."""

from __future__ import annotations

import pytest

from kraftlake.statemachine.invariants import (
    BOOKKEEPER,
    BY_ID,
    CATALOGUE,
    KRAFT,
    LOG,
    REPLAY_RULE_TO_INVARIANT,
    S3STREAM,
    SEVERITIES,
    say,
    words,
)

TEMPLATES = [(i.id, kind) for i in CATALOGUE for kind in sorted(i.messages)]


def test_every_invariant_is_defined_once_with_its_family_and_severity():
    assert len(BY_ID) == len(CATALOGUE)
    prefix = {"L": LOG, "K": KRAFT, "S": S3STREAM, "B": BOOKKEEPER}
    for inv in CATALOGUE:
        assert inv.family == prefix[inv.id[0]], inv.id
        assert inv.severity in SEVERITIES and inv.definition
    assert set(REPLAY_RULE_TO_INVARIANT.values()) <= set(BY_ID)
    # A refused record is worded by the invariant its rule maps to.
    assert all("refused" in BY_ID[inv].messages for inv in set(REPLAY_RULE_TO_INVARIANT.values()) - {"L1"})


def test_say_fills_a_template_with_words():
    assert say("K1", "isr_outside_replicas", isr=(1, 4), outside=[4], replicas=(1, 2)) == (
        "ISR [1, 4] lists [4], not replicas [1, 2]"
    )
    assert say("L3", "refused", rule="R-REPLAY-TOPIC", message="topic t does not exist") == (
        "R-REPLAY-TOPIC: topic t does not exist (record skipped)"
    )
    assert words([]) == "[]" and words(["a", "b"]) == "[a, b]" and words(7) == "7"
    with pytest.raises(KeyError):
        say("K1", "no such kind")


def test_the_plans_kinds_of_wrong_state_are_the_catalogues():
    """The plan's queries name the kind of each wrong state (K1, K3) for the driver to word with
    ``say``: each kind they can return is a message of that invariant in the catalogue."""
    from kraftlake.statemachine.kraft import invariants_sql as sql
    from kraftlake.statemachine.sql_dialect import DUCKDB, SPARK

    for d in (DUCKDB, SPARK):
        assert set(sql.k1_kinds(d)) == set(BY_ID["K1"].messages)
        assert set(sql.k3_kinds(d, 14)) == set(BY_ID["K3"].messages)
