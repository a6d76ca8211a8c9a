"""The family audits' one interface (``replay.family.FamilyAudit``): each is driven by ``feed``,
``finish`` and ``state_hash`` alone, and so driven reports what the engine reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlake.records import iter_lines
from kraftlake.records.catalog import RECORD_TYPES
from kraftlake.replay import bookkeeper_audit, kraft_audit, s3stream_audit
from kraftlake.replay.audit import Audit, _family_of
from kraftlake.replay.bookkeeper_audit import BookiesAudit
from kraftlake.replay.books import AuditConfig, Books
from kraftlake.replay.family import FamilyAudit
from kraftlake.replay.kraft_audit import KraftAudit
from kraftlake.replay.s3stream_audit import StreamsAudit

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize(
    ("make", "fixture", "family_hash"),
    [
        (KraftAudit, "kraft/audit/broker-silent-dir-failure.jsonl", "state_hash"),
        (StreamsAudit, "s3stream/audit/commit-gap.jsonl", "streams_state_hash"),
        (BookiesAudit, "bookkeeper/audit/ignore-recovery-delay.jsonl", "bookies_state_hash"),
    ],
)
def test_a_family_audit_driven_through_the_interface_alone_reports_what_the_engine_does(make, fixture, family_hash):
    """Every record of these histories is the family's (S3Stream's: with the automq.version
    FeatureLevel and the objects' index blocks), so the family audit fed them all, with the
    graces promoted as the engine promotes them, has the engine's violations and hash."""
    records = list(iter_lines((FIXTURES / fixture).open("rb")))
    engine = Audit()
    engine.feed(records)
    want = engine.report()

    books = Books(AuditConfig())
    family: FamilyAudit = make(books)
    for r in records:
        family.feed(r, r.offset)
        if books.holding:
            books.promote(r.offset, r.ts_ms)
    family.finish()
    family.finish()  # a second finish judges nothing twice

    assert want.violations, "a history with a story to tell"
    assert books.violations() == list(want.violations)
    assert family.state_hash() == getattr(want, family_hash)
    assert family.view.offset == records[-1].offset
    checked = {i.id: i.checked for i in want.invariants}
    # The L invariants (offsets, refusals, transactions) are the engine's, counted per record it audits.
    assert {k: n for k, n in books.checked.items() if not k.startswith("L")} == {
        k: n for k, n in checked.items() if not k.startswith("L")
    }


@pytest.mark.parametrize(
    ("tables", "family"),
    [
        ((kraft_audit._CHECKS,), "kraft"),
        ((s3stream_audit._CHECKS,), "s3stream"),
        ((bookkeeper_audit._BEFORE, bookkeeper_audit._AFTER), "bookkeeper"),
    ],
)
def test_checks_are_registered_by_record_class_for_records_the_engine_routes_to_them(tables, family):
    """Each family audit dispatches on one table per step keyed by record class, as the reducers
    do; a class the engine sends to another family would be a check that never runs."""
    for table in tables:
        assert table
        for cls, check in table.items():
            assert cls in RECORD_TYPES and _family_of(cls) == family, cls
            assert callable(check)
