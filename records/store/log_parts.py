"""What the parts of ``Log`` use of one another, declared for the type checker.

``Log`` (``log.py``) is put together from one mixin per job (``appending``, ``compaction``,
``follow``, ``history``, ``time_travel``); they use the table, the version and the locks ``Log``
holds, and each other's methods. Each mixin derives from ``LogParts``: ``object`` at run time, and
for a type checker the names they share, checked against where ``Log`` defines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading

    from deltalake import DeltaTable

    from .delta_commit import DataFile, Upkeep
    from .history import Commit
    from .lineage import Lineage
    from .location import Location

    class LogParts:
        location: Location
        path: str
        _dt: DeltaTable
        _head: int
        """The version this object stands on."""
        _commit_lock: threading.Lock
        _commits_since_open: int
        _checkpoint_interval: int
        _legacy_cache: dict[str, tuple[int, int, int, int] | None]
        _upkeep: Upkeep | None
        _lineage: Lineage
        _txn_cache: dict[str, int | None]

        @property
        def last_offset(self) -> int: ...
        def refresh(self) -> None: ...
        def _fresh(self) -> DeltaTable: ...
        def _catch_up(self) -> None: ...
        def _settle_load(self) -> None: ...
        def _load_in_background(self) -> None: ...
        def producer_seq(self, producer: str) -> int | None: ...
        def _txn(self, app_id: str) -> int | None: ...
        def _commit_on_store(
            self,
            version: int,
            files: list[DataFile],
            txns: list[tuple[str, int]],
            meta: dict[str, str],
            removed: Sequence[tuple[str, int]] = (),
        ) -> bool: ...
        def _put_commit(self, version: int, body: bytes) -> bool: ...
        def history(self, limit: int | None = None) -> list[Commit]: ...

else:
    LogParts = object
