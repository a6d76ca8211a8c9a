"""Directory ids as the KRaft controller sees them (KIP-858, DirectoryId.java).

A broker's registration lists only its *online* directories, sorted the way Kafka sorts uuids
(most significant long, then least significant, both signed). Whether a replica is online is
``is_online(dir, broker_dirs)``; which directory a newly placed replica gets is ``default_dir``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from kraftlake.records.kraft import LOST, MIGRATING, UNASSIGNED
from kraftlake.records.types import uuid_from_ints, uuid_to_ints

ONLINE_RESERVED = frozenset({MIGRATING, UNASSIGNED})


@lru_cache(maxsize=1 << 16)
def uuid_sort_key(text: str) -> tuple[int, int]:
    """Kafka's ``Uuid.compareTo`` order: signed msb, then signed lsb."""
    return uuid_to_ints(text)


def sorted_dirs(dirs: Iterable[str]) -> tuple[str, ...]:
    """Directory ids in the order Kafka keeps them in a registration."""
    return tuple(sorted(dirs, key=uuid_sort_key))


def is_online(directory: str, broker_dirs: tuple[str, ...]) -> bool:
    """``DirectoryId.isOnline``: UNASSIGNED and MIGRATING are online, LOST is offline, any dir is
    online on a broker registered without directories (before 3.7-IV2), else membership."""
    if directory in ONLINE_RESERVED:
        return True
    if directory == LOST:
        return False
    if not broker_dirs:
        return True
    return directory in broker_dirs


def default_dir(broker_dirs: tuple[str, ...] | None, *, directories_supported: bool) -> str:
    """The directory a replica newly placed on a broker starts in (Kafka's
    ``ClusterControlManager.defaultDir``).

    ``broker_dirs`` is None when the broker is not registered.
    """
    if not directories_supported:
        return MIGRATING
    if broker_dirs is None:
        return UNASSIGNED
    if not broker_dirs:
        return MIGRATING
    if len(broker_dirs) == 1:
        return broker_dirs[0]
    return UNASSIGNED


RESERVED_IDS = frozenset(uuid_from_ints(0, lsb) for lsb in range(100))
"""Kafka's whole reserved range (``DirectoryId.reserved``): MIGRATING, UNASSIGNED, LOST and the
97 ids after them. Never indexed by directory, as Kafka's
``ReplicationControlManager.directoriesToPartitions`` is not."""
