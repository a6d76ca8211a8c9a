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


CATALOGUE_ORDER = (
    *("L1", "L3", "L4", "L5"),
    *("K1", "K2", "K3", "K4", "K5", "K6", "K7", "K9", "K8", "K10", "K11", "K12", "K13", "K14", "K15"),
    *("S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10", "S11"),
    *("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B9", "B10"),
    *("S13", "S14", "S12"),
)
"""The catalogue's ids as issue 56 found them (commit d72e420): reports list invariants in this
order, so moving the entries beside their rules must not change it."""

FAMILY_MODULES = {
    LOG: ("kraftlake.statemachine.invariants", "LOG_INVARIANTS"),
    KRAFT: ("kraftlake.statemachine.kraft.catalogue", "INVARIANTS"),
    S3STREAM: ("kraftlake.statemachine.s3stream.catalogue", "INVARIANTS"),
    BOOKKEEPER: ("kraftlake.statemachine.bookkeeper.catalogue", "INVARIANTS"),
}
"""Where each family's entries are defined: beside its rules, in its own package (the log's own,
which every family's replay enforces, in the catalogue's module)."""


def test_each_entry_is_defined_in_its_familys_package_and_the_order_is_unchanged():
    import importlib
    import inspect

    assert tuple(i.id for i in CATALOGUE) == CATALOGUE_ORDER
    sources = {}
    for family, (name, attribute) in FAMILY_MODULES.items():
        module = importlib.import_module(name)
        sources[family] = inspect.getsource(module)
        # The catalogue holds the objects the family's module defines, in the catalogue's order.
        defined = sorted(getattr(module, attribute), key=lambda i: CATALOGUE_ORDER.index(i.id))
        assert [id(i) for i in defined] == [id(i) for i in CATALOGUE if i.family == family], name
    for i in CATALOGUE:
        written = {family for family, source in sources.items() if f'Invariant(\n        "{i.id}",' in source}
        assert written == {i.family}, i.id


def test_every_entry_says_what_a_report_counts_of_it():
    """A report's reader holds ``checked`` against ``violations`` by the entry's words: every
    entry says what a check is (``CHECKED``); those where one check can find several say what a
    violation is (``FINDS``), and no other does."""
    from kraftlake.statemachine.invariants import CHECKED, FINDS

    assert all(CHECKED[i.id] for i in CATALOGUE)
    assert set(FINDS) == {"K3", "K6", "K7", "K12", "S8"}


def test_say_loads_the_catalogue_when_a_rule_is_imported_alone():
    """A program that imports only a family's rules (not ``statemachine.invariants``) still
    words a violation of any family: ``say`` assembles the catalogue on its first call."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from kraftlake.statemachine.kraft.invariants import say\n"
        "assert 'kraftlake.statemachine.invariants' not in sys.modules\n"
        "print(say('B4', 'drained', reason='x'), say('L1', 'gap', offset=3, last=1), sep='|')"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "DRAINED while x|offset 3 follows 1"
