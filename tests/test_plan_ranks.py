"""The plan's ranked lookups (``replay.plan.ranks``): a position's rank among a key's sorted
offsets, read through the key's own buckets (clamped into them), is ``bisect_right``'s, for any
offsets, positions before, inside and after them, and any bucket size."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.replay.plan import ranks
from kraftlake.replay.plan.duck import DuckEngine

from helpers.tiers import examples

offsets = st.lists(st.integers(0, 400), max_size=40).map(sorted)


def _ranks_by_sql(marks, probes, per):
    """Per probe (id, b, dir, lo, hi): the ranks of lo and hi in each list, by the lookup's SQL."""
    with DuckEngine(threads=1) as engine:
        rows, keys = ranks.rank_rows(marks, per)
        engine.table(
            "rk_t",
            rows,
            [("b", "INT"), ("dir", "STRING"), ("bucket", "BIGINT"), ("a_before", "BIGINT"), ("a_offs", "ARRAY<BIGINT>"),
             ("z_before", "BIGINT"), ("z_offs", "ARRAY<BIGINT>")],
        )  # fmt: skip
        engine.table(
            "rk_t_keys",
            keys,
            [("b", "INT"), ("dir", "STRING"), ("first_", "BIGINT"), ("width", "BIGINT"), ("nb", "BIGINT")],
        )
        engine.table(
            "probe",
            probes,
            [("id", "BIGINT"), ("b", "INT"), ("dir", "STRING"), ("lo", "BIGINT"), ("hi", "BIGINT")],
        )
        d = engine.dialect
        on = "{r}.b = p.b AND {r}.dir = p.dir"
        ranked = ranks.lookup(d, "rk_t", "probe", "p", on, "p.lo", "p.hi", ["a", "z"], ["a", "z"])
        return {row[0]: row[1:] for row in engine.rows(f"SELECT id, a_lo, a_hi, z_lo, z_hi FROM {ranked}")}


@settings(max_examples=examples(60), deadline=None)
@given(
    lists=st.dictionaries(
        st.tuples(st.integers(0, 3), st.sampled_from(["*", "d1"])), st.tuples(offsets, offsets), max_size=5
    ),
    positions=st.lists(st.tuples(st.integers(-5, 450), st.integers(-5, 450)), min_size=1, max_size=30),
    per=st.sampled_from([1, 2, 3, 8, 100]),
)
def test_a_lookup_ranks_as_bisect_does(lists, positions, per):
    marks = {k: [list(a), list(z)] for k, (a, z) in lists.items()}
    keys = sorted(marks) or [(0, "*")]
    probes = [(i, *keys[i % len(keys)], lo, hi) for i, (lo, hi) in enumerate(positions)]
    got = _ranks_by_sql(marks, probes, per)
    expected = {}
    for i, b, dd, lo, hi in probes:
        lists_of = marks.get((b, dd))
        if lists_of and any(lists_of):  # a key without offsets is left out (an inner join)
            a, z = lists_of
            expected[i] = tuple(bisect.bisect_right(x, p) for x in (a, z) for p in (lo, hi))
    assert got == expected


def test_a_key_reads_buckets_of_its_own_a_few_offsets_each():
    """A key whose offsets sit in a small part of a long history is cut into buckets over its
    own span: about ``per`` offsets each, however far the others' offsets reach."""
    marks = {(1, "*"): [list(range(1000, 1100))], (2, "*"): [[5, 10_000_000]]}
    rows, keys = ranks.rank_rows(marks, 8)
    assert keys == [(1, "*", 1000, 8, 13), (2, "*", 5, 9_999_996, 1)]
    lengths = [len(r[4]) for r in rows if r[0] == 1]
    assert len(lengths) == 13 and max(lengths) == 8 and sum(lengths) == 100
    assert [r[3] for r in rows if r[0] == 1] == list(range(0, 100, 8))
