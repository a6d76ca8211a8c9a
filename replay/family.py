"""The one interface every family's audit keeps, for the engine (``replay.audit``) to drive.

A family audit (KRaft's ``replay.kraft_audit``, S3Stream's ``replay.s3stream_audit``,
BookKeeper's ``replay.bookkeeper_audit``) owns its view and its invariants' state. The engine
chooses the audit a record belongs to, once per record, and hands it over with ``feed``: the audit
checks what the record can change, folds it into its view and reports through the audit's
``Books``. ``finish`` is the end of the records fed so far (a report is made): what is judged only
then (a batch still open, statistics over the whole history) is judged there, once. ``state_hash``
is the family view's canonical hash, the one every engine must agree on.

Each is built on the audit's ``Books``; KRaft's and S3Stream's also take the view before the first
record fed (``--from``), an empty one by default.
"""

from __future__ import annotations

from typing import Any, Protocol

from kraftlake.statemachine.reducer import View


class FamilyAudit(Protocol):
    """One family's part of the audit (see the module)."""

    @property
    def view(self) -> View:
        """The family's view after the records fed so far."""
        ...

    def feed(self, record: Any, offset: int) -> None:
        """Check and fold in one record of the family, at ``offset`` (the records come in offset
        order). Any: each audit reads the fields of the record's class."""
        ...

    def finish(self) -> None:
        """Judge what waits for the end of the records fed so far; a second call judges nothing twice."""
        ...

    def state_hash(self) -> str:
        """sha256 of the family view's canonical form."""
        ...


__all__ = ["FamilyAudit"]
