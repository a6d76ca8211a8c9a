"""Structs in columns (``replay.columns``): what goes in comes out, a row changed in place reads
changed, rows taken across string tables keep their strings, and a field the columns cannot
hold is refused by name."""

from __future__ import annotations

from array import array
from unittest.mock import patch

import msgspec
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.replay.columns import Strings, StructColumns, spill
from kraftlake.replay.incidents import (
    Effect,
    EffectArena,
    EffectList,
    Incident,
    Outage,
    OutageList,
    effect_pairs,
    effect_topics,
    link_violations,
    outage_spans,
)
from kraftlake.replay.violations import Violation, ViolationList

from helpers.tiers import examples


class Row(msgspec.Struct, kw_only=True):
    name: str
    note: str | None
    n: int
    m: int | None
    xs: list[int]


class Rows(StructColumns[Row]):
    struct = Row
    __slots__ = ()


texts = st.sampled_from(["", "a", "b", "ü", "a b"]) | st.text(max_size=3)
big = st.integers(-(2**63) + 1, 2**63 - 1)
rows = st.builds(Row, name=texts, note=st.none() | texts, n=big, m=st.none() | big, xs=st.lists(big, max_size=3))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(rows, max_size=30), st.data())
def test_rows_read_back_and_change_in_place(items, data):
    held = Rows(items)
    assert held == items and held[1:4] == items[1:4]
    if not items:
        return
    i = data.draw(st.integers(0, len(items) - 1))
    changes = data.draw(
        st.fixed_dictionaries({}, optional={"name": texts, "note": st.none() | texts, "m": st.none() | big})
    )
    held.set(i, **changes)
    items[i] = msgspec.structs.replace(items[i], **changes)
    assert list(held) == items
    assert all(held.get(i, f) == getattr(items[i], f) for f in Row.__struct_fields__)


class Flat(msgspec.Struct, kw_only=True):
    name: str
    note: str | None
    n: int
    m: int | None


class Flats(StructColumns[Flat]):
    struct = Flat
    __slots__ = ()


flats = st.builds(Flat, name=texts, note=st.none() | texts, n=big, m=st.none() | big)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(flats, max_size=20), st.lists(flats, max_size=30), st.booleans())
def test_rows_read_from_arrow_columns_are_the_rows_written(head, more, as_dictionary):
    """``extend_arrow``: an engine's result (strings plain or dictionary-encoded, as DuckDB
    gives an ENUM; nulls for None) appended as rows, strings numbered in the list's table."""
    held = Flats(head)
    table = pa.table(
        {
            "name": pa.array([r.name for r in more], pa.string()),
            "note": pa.array([r.note for r in more], pa.string()),
            "n": pa.array([r.n for r in more], pa.int64()),
            "m": pa.array([r.m for r in more], pa.int64()),
        }
    )
    if as_dictionary:
        table = table.set_column(0, "name", table.column("name").dictionary_encode())
    held.extend_arrow(table)
    assert list(held) == head + more
    assert held.to_arrow().to_pylist() == [msgspec.structs.asdict(r) for r in head + more]
    with pytest.raises(TypeError, match="Row.xs: a list field"):
        Rows().extend_arrow(pa.table({"name": ["a"], "note": [None], "n": [1], "m": [None], "xs": [[1]]}))


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(rows, max_size=20), st.lists(rows, min_size=1, max_size=20), st.data())
def test_rows_taken_across_string_tables_keep_their_strings(head, other, data):
    picks = data.draw(st.lists(st.integers(0, len(other) - 1), max_size=20))
    held = Rows(head)
    held.extend_rows(Rows(other), pa.array(picks, pa.int64()))
    assert list(held) == head + [other[i] for i in picks]
    shared = Strings()
    a, b = Rows(head, strings=shared), Rows(other, strings=shared)
    a.extend_rows(b, pa.array(picks, pa.int64()))
    assert list(a) == head + [other[i] for i in picks]


def test_a_list_field_is_not_changed_in_place_and_other_types_are_refused():
    held = Rows([Row(name="a", note=None, n=1, m=None, xs=[1])])
    with pytest.raises(TypeError, match="xs"):
        held.set(0, xs=[2])

    class Odd(msgspec.Struct):
        when: float

    with pytest.raises(TypeError, match=r"Odd\.when"):

        class Odds(StructColumns[Odd]):
            struct = Odd


effects = st.builds(
    Effect,
    topic_id=st.sampled_from(["t1", "t2", "t3"]),
    topic=st.none() | st.sampled_from(["a", "b"]),
    partition=st.integers(0, 3),
    role=st.sampled_from(["leader", "isr"]),
    caused_by=st.integers(0, 100),
)


@given(st.lists(effects, max_size=30))
def test_an_incidents_effects_give_their_partitions_and_topic_names(items):
    held = EffectList(items)
    assert effect_pairs(held) == effect_pairs(items) == {(e.topic_id, e.partition) for e in items}

    named: dict[str, str] = {}
    effect_topics([Incident(id="i", kind="dir-failure", broker=1, failed_at=0, effects=held)], named)
    assert set(named.items()) <= {(e.topic_id, e.topic) for e in items if e.topic is not None}
    assert set(named) == {e.topic_id for e in items if e.topic is not None}


@given(st.lists(texts, max_size=30), texts)
def test_strings_are_numbered_as_first_seen_and_a_get_numbers_nothing(words, other):
    strings = Strings()
    codes = [strings.code(w) for w in words]
    first = list(dict.fromkeys(words))
    assert strings.table == first and codes == [first.index(w) for w in words]
    assert strings.codes.get(other) == (first.index(other) if other in first else None)
    assert strings.table == first


@given(st.lists(effects, min_size=1, max_size=10), st.data())
def test_an_effect_ended_reads_as_its_fields_set(items, data):
    i = data.draw(st.integers(0, len(items) - 1))
    ended_by, outcome, leads = data.draw(st.integers(0, 100)), data.draw(texts), data.draw(st.booleans())
    new_leader, took = data.draw(st.none() | st.integers(-1, 9)), data.draw(st.none() | big)
    ended, expected = EffectList(items), EffectList(items)
    ended.end(i, ended_by, outcome, leads, new_leader, took)
    fields = {"ended_by": ended_by, "outcome": outcome}
    if leads:
        fields["new_leader"] = new_leader
    if took is not None:
        fields["time_to_move_ms"] = took
    expected.set(i, **fields)
    assert list(ended) == list(expected)
    assert ended[i] == msgspec.structs.replace(items[i], **fields)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.lists(effects, max_size=6), min_size=1, max_size=8), st.integers(1, 12), st.data())
def test_closed_incidents_effects_in_an_arena_read_and_end_as_their_own_list(
    tmp_path_factory, per_incident, rows, data
):
    """``EffectArena.seal``: an incident's effects moved into a chunk shared with others (spilled
    every ``rows`` rows, and the last on ``flush``) read, slice, convert and end in place as its
    own ``EffectList`` did; a closed incident's list takes no more rows."""
    strings = Strings()
    arena = EffectArena(strings, tmp_path_factory.mktemp("arena"), rows)
    incs = [
        Incident(id=f"i{k}", kind="dir-failure", broker=1, failed_at=k, effects=EffectList(items, strings=strings))
        for k, items in enumerate(per_incident)
    ]
    expected = [list(items) for items in per_incident]
    sealed = data.draw(st.lists(st.sampled_from(range(len(incs))), unique=True))
    for k in sealed:
        arena.seal(incs[k])
    if data.draw(st.booleans()):
        arena.flush()
    for k, inc in enumerate(incs):
        for i in data.draw(st.lists(st.integers(0, max(0, len(expected[k]) - 1)), max_size=2)) if expected[k] else []:
            ended_by, outcome, took = data.draw(st.integers(0, 100)), data.draw(texts), data.draw(st.none() | big)
            inc.effects.end(i, ended_by, outcome, True, 3, took)
            fields = {"ended_by": ended_by, "outcome": outcome, "new_leader": 3}
            if took is not None:
                fields["time_to_move_ms"] = took
            expected[k][i] = msgspec.structs.replace(expected[k][i], **fields)
    for k, inc in enumerate(incs):
        assert list(inc.effects) == expected[k] and len(inc.effects) == len(expected[k])
        assert inc.effects[1:3] == expected[k][1:3]
        assert inc.effects.to_arrow().to_pylist() == [msgspec.structs.asdict(e) for e in expected[k]]
        assert effect_pairs(inc.effects) == {(e.topic_id, e.partition) for e in expected[k]}
        inc.effects.drop_pages()
        assert list(inc.effects) == expected[k]
        if k in sealed and expected[k]:
            with pytest.raises(TypeError, match="no more rows"):
                inc.effects.add_row(*msgspec.structs.astuple(expected[k][0]))


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(rows, max_size=30), st.data())
def test_rows_as_dicts_are_the_structs_fields_and_encode_alike(items, data):
    held = Rows(items)
    lo = data.draw(st.integers(0, len(items)))
    hi = data.draw(st.integers(lo, len(items)))
    got = held.dicts(lo, hi)
    assert got == [msgspec.structs.asdict(r) for r in items[lo:hi]]
    assert msgspec.json.encode(got) == msgspec.json.encode(items[lo:hi])


# -- outages: the plan's spans and order against the tracker's ----------------------------------

topic_ids = st.sampled_from(["b-topic", "a-topic", "c", "ü"])
ms = st.integers(0, 10**13)


@st.composite
def partition_outages(draw):
    """Outages as the plan finds them: a partition's one after another in time order (a topic
    id's later life later), every one timed, the last maybe still open."""
    keys = draw(st.lists(st.tuples(topic_ids, st.integers(0, 5)), max_size=8))
    out = []
    t = 0
    for topic, p in keys:
        for _ in range(draw(st.integers(1, 4))):
            t += draw(st.integers(1, 1000))
            end = draw(st.none() | st.integers(t, t + 1000))
            out.append(Outage(topic_id=topic, partition=p, why=draw(st.sampled_from(["no leader", "leader offline"])),
                              first_offset=draw(st.integers(0, 50)), last_offset=None if end is None else end,
                              from_ms=t, to_ms=end))  # fmt: skip
            if end is None:
                break
            t = end
    return out


@settings(max_examples=examples(200), deadline=None)
@given(partition_outages(), ms, st.data())
def test_outage_spans_and_order_are_the_trackers(outages, end_ms, data):
    held = OutageList(outages)
    want = outage_spans(outages)
    got = held.spans(end_ms)
    assert sorted(got.ranges) == sorted(want.ranges)
    for key, (lo, hi) in want.ranges.items():
        glo, ghi = got.ranges[key]
        assert list(got.froms[glo:ghi]) == want.froms[lo:hi]
        assert list(got.tos[glo:ghi]) == [end_ms if x is None else x for x in want.tos[lo:hi]]
    steps = data.draw(st.lists(st.integers(0, 3), min_size=len(outages), max_size=len(outages)))
    held.sort(array("q", steps))
    order = sorted(
        range(len(outages)),
        key=lambda i: (outages[i].first_offset, steps[i], outages[i].topic_id, outages[i].partition),
    )
    assert list(held) == [outages[i] for i in order]


violations = st.builds(
    Violation,
    invariant=st.sampled_from(["K1", "K4", "K8"]),
    severity=st.just("error"),
    entity=st.sampled_from(["broker/1", "broker/2", "dir/1/d", "partition/t1/0", "replica/t1/0/1", "partition/t2/1"]),
    first_offset=st.integers(0, 50),
    last_offset=st.none() | st.integers(0, 50),
    message=st.just("m"),
    evidence=st.lists(st.integers(0, 50), max_size=2),
)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(violations, max_size=30),
    st.lists(
        st.tuples(st.integers(1, 2), st.none() | st.just("d"), st.integers(0, 40), st.none() | st.integers(0, 60)),
        min_size=1,
        max_size=4,
    ),
    st.lists(effects, max_size=4),
)
def test_violations_in_columns_link_to_incidents_as_a_list_does(found, shapes, hit):
    def incidents():
        return [
            Incident(
                id=f"i{n}",
                kind="dir-failure" if d else "broker-fenced",
                broker=b,
                directory=d,
                failed_at=at,
                ended_at=None if end is None else max(at, end),
                effects=EffectList(hit),
            )
            for n, (b, d, at, end) in enumerate(shapes)
        ]

    as_list, as_columns = incidents(), incidents()
    link_violations(as_list, found)
    with patch("kraftlake.replay.violations._HITS_AT_ONCE", 3):  # read across several slices
        link_violations(as_columns, ViolationList(found))
    assert [(i.violations, i.invariants) for i in as_columns] == [(i.violations, i.invariants) for i in as_list]
    for inc in as_list:  # and each link is a violation of the incident's entities, in its span
        for i in inc.violations:
            v = found[i]
            assert v.entity in inc.entities and v.first_offset <= (inc.ended_at if inc.ended_at is not None else 99)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.lists(rows, max_size=12), min_size=1, max_size=4), st.data())
def test_spilled_rows_read_change_and_take_as_in_memory(lists, data):
    shared = Strings()
    held = [Rows(items, strings=shared) for items in lists]
    spill(held, None)
    assert [list(h) for h in held] == lists
    assert all(h.spilled for h, items in zip(held, lists, strict=True) if items)
    assert [h.dicts(0, len(h)) for h in held] == [[msgspec.to_builtins(r) for r in items] for items in lists]
    which = data.draw(st.sampled_from([i for i, items in enumerate(lists) if items] or [None]))
    if which is None:
        return
    items, h = lists[which], held[which]
    i = data.draw(st.integers(0, len(items) - 1))
    changes = data.draw(st.fixed_dictionaries({}, optional={"name": texts, "m": st.none() | big}))
    h.set(i, **changes)
    items[i] = msgspec.structs.replace(items[i], **changes)
    assert [list(x) for x in held] == lists  # the change is the row's alone
    for x in held:  # the pages let go are read back from the file, the change with them
        x.drop_pages()
    assert [list(x) for x in held] == lists
    picks = data.draw(st.lists(st.integers(0, len(items) - 1), max_size=10))
    taken = Rows()
    taken.extend_rows(h, pa.array(picks, pa.int64()))
    assert list(taken) == [items[j] for j in picks]
    with pytest.raises(AttributeError):
        h.append(items[0])


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(violations, max_size=30))
def test_a_spilled_violation_list_sorts_counts_and_links_as_before(found):
    held, spilled = ViolationList(found), ViolationList(found)
    spill([spilled], None)
    assert spilled.counts() == held.counts() and spilled.entities() == held.entities()
    assert list(spilled.of_entities(["broker/1", "partition/t1/0"])) == list(
        held.of_entities(["broker/1", "partition/t1/0"])
    )
    held.sort()
    spilled.sort()
    assert list(spilled) == list(held)


ended_effects = st.builds(
    Effect,
    topic_id=st.just("t1"),
    topic=st.none(),
    partition=st.integers(0, 3),
    role=st.sampled_from(["leader", "isr"]),
    caused_by=st.just(0),
    ended_by=st.none() | st.integers(1, 9),
    time_to_move_ms=st.none() | st.integers(-5, 10**12),
    new_leader=st.none() | st.sampled_from([-1, 2, 3]),
)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.lists(ended_effects, max_size=15), max_size=4), st.booleans())
def test_handling_counts_and_nearest_rank_percentiles(lists, spilled):
    import math

    from kraftlake.replay.incidents import TIME_BUCKETS_MS, handling

    incs = [
        Incident(id=f"i{n}", kind="broker-fenced", broker=1, failed_at=0, effects=EffectList(items))
        for n, items in enumerate(lists)
    ]
    if spilled:
        spill([i.effects for i in incs], None)
    got = handling(incs)
    for role, stats in (("leader", got.leadership), ("isr", got.isr)):
        mine = [e for items in lists for e in items if e.role == role]
        # A leadership moved is one a live leader followed; one left with no leader (-1) or
        # ended with none named (the topic removed) is counted apart.
        moved = [e for e in mine if e.ended_by is not None and (role == "isr" or e.new_leader not in (-1, None))]
        times = sorted(e.time_to_move_ms for e in moved if e.time_to_move_ms is not None)
        rank = {q: times[max(1, math.ceil(q * len(times))) - 1] if times else None for q in (0.5, 0.99)}
        assert (stats.moved, stats.open) == (len(moved), sum(e.ended_by is None for e in mine))
        assert (stats.p50_ms, stats.p99_ms, stats.max_ms) == (rank[0.5], rank[0.99], times[-1] if times else None)
        # The histogram Prometheus reads: how many took at most each bound, how many, their sum.
        assert stats.buckets == [sum(t <= b for t in times) for b in TIME_BUCKETS_MS]
        assert (stats.timed, stats.total_ms) == (len(times), sum(times))
    ended_leaders = [e for items in lists for e in items if e.role == "leader" and e.ended_by is not None]
    assert got.leaderless.partitions == sum(e.new_leader == -1 for e in ended_leaders)
    assert got.other == sum(e.new_leader is None for e in ended_leaders)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(rows, max_size=25), st.data())
def test_rows_reordered_into_files_a_field_at_a_time_are_those_reordered_in_memory(items, data):
    picks = data.draw(st.lists(st.integers(0, max(0, len(items) - 1)), max_size=25) if items else st.just([]))
    order = pa.array(picks, pa.int64())
    in_memory, spilled = Rows(items), Rows(items)
    in_memory.reorder(order)
    spilled.reorder(order, spill_to=None)
    assert list(spilled) == list(in_memory) == [items[i] for i in picks]
    if picks:
        assert spilled.spilled and not in_memory.spilled
        spilled.drop_pages()
        assert list(spilled) == [items[i] for i in picks]


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(violations, max_size=30))
def test_violations_sorted_into_files_are_those_sorted_in_memory(found):
    held, spilled = ViolationList(found), ViolationList(found)
    held.sort()
    spilled.sort(spill_to=None)
    assert list(spilled) == list(held)
    assert spilled.spilled or not found
