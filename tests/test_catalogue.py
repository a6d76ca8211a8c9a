"""The invariant catalogue is the one definition every engine reads: ids, families, severities,
definitions, graces and the words of each message. The per-record engine words a violation with
``statemachine.invariants.say``, the Spark plan with ``spark.words.say`` from the same template:
the two are held to each other here, template by template."""

from __future__ import annotations

import random

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
    pieces,
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


def _examples(template: str, seed: int) -> tuple[str, list[tuple]]:
    """(schema, rows) for a template's fields: each field an int, an int list or a directory-like
    string (chosen per seed), ten rows of values with their edges (-1, 0, [], one character)."""
    rng = random.Random(f"{template}/{seed}")
    names = sorted({name for _, name in pieces(template) if name is not None})
    kinds = {n: rng.choice(("long", "array<long>", "string")) for n in names}
    make = {
        "long": lambda i: [-1, 0, 10**12][i] if i < 3 else rng.randint(-1, 10**6),
        "array<long>": lambda i: (
            [[], [-1], [0, 1, 2]][i] if i < 3 else [rng.randint(0, 999) for _ in range(rng.randint(0, 5))]
        ),
        "string": lambda i: (
            ["A", "AAAAAAAAAAAAAAAAAAAAAQ", "x-y_z"][i] if i < 3 else "".join(rng.choices(ALPHABET, k=22))
        ),
    }
    rows = [tuple(make[kinds[n]](i) for n in names) for i in range(10)]
    return ", ".join(f"{n} {kinds[n]}" for n in names), rows


ALPHABET = "ABCDEFabcdef0123456789-_"


@pytest.mark.parametrize(("invariant", "kind"), TEMPLATES, ids=[f"{i}-{k}" for i, k in TEMPLATES])
def test_spark_words_every_template_as_the_per_record_engine_does(spark, invariant, kind):
    from pyspark.sql import functions as F

    from kraftlake.spark.words import say as spark_say

    template = BY_ID[invariant].messages[kind]
    for seed in range(2):
        schema, rows = _examples(template, seed)
        names = [field.split()[0] for field in schema.split(", ")] if schema else []
        df = spark.createDataFrame(rows, schema) if names else spark.range(1)
        column = spark_say(invariant, kind, **{n: F.col(n) for n in names})
        got = [r["m"] for r in df.select(column.alias("m")).collect()]
        assert (
            got == [say(invariant, kind, **dict(zip(names, row))) for row in rows] if names else [say(invariant, kind)]
        )
