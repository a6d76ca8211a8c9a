"""The plan's state hash: the engine writes each final partition's canonical form
(``sql.final_images``) and the driver hashes the column's bytes as they come. Those bytes are
``state_hash.CANONICAL``'s encoding of ``partition_image`` for the registrations the driver's
rows path makes (negative ids, nulls, a directory list shorter or longer than the replicas, empty
lists), in the view's partition order, and hash as that path does. Only ids JSON writes as they
stand take this path. (A topic id registered twice takes the rows path: ``test_plan``'s
``test_a_topic_recreated_under_its_id_is_a_new_partition_history`` and Spark's smoke log.)"""

from __future__ import annotations

import string

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.replay.plan import sql
from kraftlake.replay.plan.driver import partition_of
from kraftlake.replay.plan.duck import DuckEngine
from kraftlake.replay.plan.run import LIVES, _images, _registrations
from kraftlake.statemachine.kraft.view import ControllerView, partition_image
from kraftlake.statemachine.state_hash import CANONICAL

from helpers.tiers import examples

IDS = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=22)
INTS = st.integers(-(2**31), 2**31 - 1)
LISTS = st.lists(INTS | st.none(), max_size=4)
_INTS, _LIST = pa.int64(), pa.list_(pa.int64())
FINALS = pa.schema([
    ("pk", _INTS), ("replicas", _LIST), ("dirs", pa.list_(pa.string())), ("isr", _LIST), ("leader", _INTS),
    ("leader_epoch", _INTS), ("partition_epoch", _INTS), ("set_removing", _LIST), ("set_adding", _LIST),
    ("set_lrs", _INTS), ("set_elr", _LIST), ("set_lkelr", _LIST),
])  # fmt: skip
"""``sql.final_states``'s columns."""


@st.composite
def finals(draw):
    """Final states of partitions of distinct topics' lives: (lives, rows)."""
    topics = draw(st.lists(IDS, min_size=1, max_size=4, unique=True))
    rows = []
    for life in range(len(topics)):
        for p in draw(st.lists(INTS, max_size=3, unique=True)):
            pk = life * (1 << 32) + (p & 0xFFFFFFFF)
            dirs = draw(st.lists(IDS | st.none(), max_size=4))
            rows.append(
                (pk, draw(LISTS), dirs, draw(LISTS), *draw(st.tuples(*[INTS | st.none()] * 3)), draw(LISTS),
                 draw(LISTS), draw(INTS | st.none()), draw(LISTS), draw(LISTS))
            )  # fmt: skip
    return [(t, 0, None) for t in topics], rows


def _engine_images(lives, rows) -> bytes:
    """``final_images`` of ``rows`` on DuckDB, read three rows a batch, end to end."""
    with DuckEngine(threads=1) as engine:
        engine.table("lives", [(i, *life) for i, life in enumerate(lives)], LIVES)
        engine.arrow_table("finals", pa.Table.from_pylist([dict(zip(FINALS.names, r)) for r in rows], FINALS))
        return b"".join(
            bytes(b) for b in _images(engine.arrow_batches(sql.final_images(engine.dialect, "SELECT * FROM finals"), 3))
        )


@settings(max_examples=examples(60), deadline=None)
@given(finals())
def test_the_engines_images_are_the_canonical_encoding_in_the_views_order(given_finals):
    lives, rows = given_finals
    # The rows path the images replace: the driver's registrations, in the view's order.
    regs = list(_registrations(lives, sorted(rows, key=lambda row: partition_of(lives, row[0]))))
    want = b",".join(CANONICAL.encode(partition_image(p)) for p in regs)
    assert _engine_images(lives, rows) == want
    view = ControllerView()
    assert view.state_hash_encoded([want[:7], want[7:]]) == view.state_hash(iter(regs))


@pytest.mark.parametrize(
    ("ids", "plain"),
    [("AAAAAAAAAAAAAAAAAAAAAA", True), ("MkS_dir-2", True), ('a"b', False), ("a\\b", False), ("a\nb", False),
     ("é", False), ("a\x7fb", False)],
)  # fmt: skip
def test_only_ids_json_writes_as_they_stand_take_the_engines_images(ids, plain):
    assert sql.json_plain(ids) is plain
