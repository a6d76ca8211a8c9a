"""Committing to a table on an object store (``gs://``, ``az://``…) through delta-rs: the path
of every store but S3, and of S3 where ``Location.commits_by_put`` is False (a locking provider,
or ``KRAFTLAKE_S3_COMMIT=delta-rs``). S3 otherwise gets kraftlake's own commit file by a
conditional put: two requests an append where this path makes nine (bench/RESULTS.md).

The local commit (``delta_commit``) is put-if-absent by ``link(2)``; an object store has no
link, and its put-if-absent is the conditional put (S3's ``If-None-Match: *``, GCS's and Azure's
equivalents), which delta-rs's commit uses for the commit file: delta-rs 1.6 sends
``If-None-Match: *`` on every ``_delta_log/<version>.json`` it writes to S3, needing no lock
service as long as the store answers exactly one of several racing puts of a key (AWS S3 does;
moto's server does not by itself: docs/object-storage.md, tests/helpers/moto_server.py).

With ``max_commit_retries=0`` delta-rs writes exactly the version after the one its
``DeltaTable`` stands on, or refuses (``CommitFailedError``): it does not rebase the commit onto
a newer version as its own retries would (an append does not conflict with an append, so delta-rs
would land it with repeated offsets). So the fencing of ``Log`` holds here too: a commit lands on
exactly the version it read, or is refused. The app transactions (``kraftlake.offset``, the
producers' sequences) travel as ``CommitProperties.app_transactions``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, PostCommitHookProperties, RemoveAction

from .delta_commit import DataFile

NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
"""Checkpoints are ``Log``'s to write (in the commit that calls for one, or on its upkeep
thread), as for local tables."""


def commit(
    dt: DeltaTable,
    files: Sequence[DataFile],
    txns: Sequence[tuple[str, int]],
    metadata: Mapping[str, str],
    timestamp_ms: int,
    *,
    removed: Sequence[tuple[str, int]] = (),
) -> bool:
    """Commit version ``dt.version() + 1`` adding ``files`` (and, for a compaction, removing
    ``removed`` (path, size) without a data change) with the app transactions ``txns``. True
    when it landed (``dt`` then stands on it); False when another writer took that version first
    (nothing of this commit is in the log)."""
    compaction = bool(removed)
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(path, False, timestamp_ms, size, {}) for path, size in removed
    ]
    actions += [AddAction(f.path, f.size, {}, f.modification_time_ms, not compaction, f.stats) for f in files]
    properties = CommitProperties(
        custom_metadata=dict(metadata),
        max_commit_retries=0,
        app_transactions=[Transaction(app_id, version, timestamp_ms) for app_id, version in txns],
    )
    try:
        dt.create_write_transaction(
            actions,
            "append",
            dt.schema(),
            commit_properties=properties,
            post_commithook_properties=NO_HOOKS,
        )
    except CommitFailedError:
        return False
    return True
