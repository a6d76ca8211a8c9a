"""The report's violations in columns (``replay.violations``) read back as the Structs they
were given, sort as ``Books.violations`` sorts, and take rows as a list would."""

from __future__ import annotations

import msgspec
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.replay.books import AuditConfig, assemble_report, violation
from kraftlake.replay.report_json import encode
from kraftlake.replay.violations import ViolationList

from helpers.tiers import examples

# Few distinct values, so that sorting meets ties on every key.
violations = st.builds(
    violation,
    st.sampled_from(["K1", "K8", "K10", "K11", "L1"]),
    st.sampled_from(["broker/1", "broker/2", "partition/t/0", "log", "é/∞"]),
    st.integers(-1, 12) | st.integers(0, 2**62),
    st.none() | st.integers(0, 2**62),
    st.sampled_from(["", "a message", 'another, with "quotes"']),
    st.lists(st.integers(-(2**63) + 1, 2**63 - 1), max_size=4),
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(violations, max_size=60))
def test_a_list_reads_back_what_it_was_given(vs):
    held = ViolationList(vs)
    assert len(held) == len(vs)
    assert list(held) == vs and held == vs
    assert held[2:7] == vs[2:7] and held[::-3] == vs[::-3]
    if vs:
        assert held[-1] == vs[-1] and held[0] == vs[0]
    assert held.counts() == {inv: sum(v.invariant == inv for v in vs) for inv in {v.invariant for v in vs}}
    assert held.severities() == {v.severity for v in vs}


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(violations, max_size=60))
def test_sorting_is_the_books_stable_sort(vs):
    held = ViolationList(vs)
    held.sort()
    assert list(held) == sorted(vs, key=lambda v: (v.first_offset, v.invariant, v.entity))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(violations, max_size=40), st.lists(violations, max_size=40), st.data())
def test_rows_taken_from_another_list_append_as_the_list_would(head, other, data):
    rows = data.draw(st.lists(st.integers(0, len(other) - 1), max_size=30)) if other else []
    held = ViolationList(head)
    held.extend_rows(ViolationList(other), pa.array(rows, pa.int64()))
    assert list(held) == head + [other[i] for i in rows]
    held.extend(ViolationList(head))
    assert list(held) == head + [other[i] for i in rows] + head


@given(st.lists(st.tuples(st.integers(0, 10**12), st.none() | st.integers(1, 10**6)), max_size=30))
def test_intervals_give_the_grace_their_ends(spans):
    held = ViolationList()
    for first, length in spans:
        held.add_interval("K10", "broker/3", first, "m", None if length is None else first + length)
    got = held.interval_columns().to_pylist()
    assert got == [
        {"i": i, "first_offset": f, "fixed_by": None if n is None else f + n} for i, (f, n) in enumerate(spans)
    ]
    assert [v.evidence for v in held] == [[f] if n is None else [f, f + n] for f, n in spans]
    assert [v.last_offset for v in held] == [None if n is None else f + n - 1 for f, n in spans]


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(violations, max_size=100))
def test_a_report_of_them_encodes_as_msgspec_encodes_the_list(vs):
    report = assemble_report(AuditConfig(), vs, {}, records=1, first_offset=0, last_offset=0, state_hash="h")
    assert isinstance(report.violations, ViolationList)
    as_list = msgspec.structs.replace(report, violations=list(vs))
    assert encode(report) == msgspec.json.encode(as_list)
    assert report.verdict == ("fail" if any(v.severity == "error" for v in vs) else "pass")
    assert [i.violations for i in report.invariants if i.violations] == [
        n for n in (sum(v.invariant == i.id for v in vs) for i in report.invariants) if n
    ]
