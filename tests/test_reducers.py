"""The shape every family's reducer shares (``statemachine.reducer``): the same ``apply`` and
``replay``, which agree record for record, and the same order rule (R-REPLAY-ORDER)."""

from __future__ import annotations

from functools import reduce
from pathlib import Path

import pytest

from kraftlake.records import iter_lines
from kraftlake.records.errors import ReplayError
from kraftlake.records.kraft import NoOp
from kraftlake.statemachine import bookkeeper, kraft, s3stream

FIXTURES = Path(__file__).parent.parent / "fixtures"
FAMILIES = {
    "kraft": (kraft, "kraft/audit/correct.jsonl"),
    "s3stream": (s3stream, "s3stream/audit/correct.jsonl"),
    "bookkeeper": (bookkeeper, "bookkeeper/audit/drain-success.jsonl"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_apply_record_by_record_is_replay(family):
    reducer, fixture = FAMILIES[family]
    records = list(iter_lines((FIXTURES / fixture).open("rb")))
    whole = reducer.replay(records)
    assert reduce(reducer.apply, records, reducer.replay([])).state_hash() == whole.state_hash()
    assert whole.offset == records[-1].offset


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_refuses_an_offset_that_does_not_increase(family):
    reducer, _ = FAMILIES[family]
    view = reducer.replay([NoOp(offset=5)])
    for fold in (reducer.apply, lambda v, r: reducer.replay([r], v)):
        with pytest.raises(ReplayError) as info:
            fold(view, NoOp(offset=5))
        assert (info.value.rule, info.value.offset, info.value.record_type) == ("R-REPLAY-ORDER", 5, "NoOp")
        assert view.offset == 5
    assert reducer.apply(view, NoOp()).offset == 6  # fresh from a decider: the next offset
