"""The broker's start-up under KIP-858: which log directories are online, which are offline, and
whether the broker may start at all; and what ``format-dirs`` writes (kafka-storage format).

Pure: the caller reads the ``meta.properties`` files (``records.meta_properties``) and passes
what each directory holds (its properties, ``None`` for an empty directory, ``UNREADABLE`` when
the disk failed), plus a source of fresh directory ids (seeded in tests and simulations). The
answer is a ``Started`` (with the files to write and the ``LogDirsLoaded`` observation) or a
``Refused`` naming the rule. Rules, in the order they are checked:

- S-START-1 the metadata log directory must be readable and formatted (Kafka refuses an I/O error
  there, and a node whose metadata directory has no ``meta.properties``).
- S-START-2 every file agrees on ``cluster.id`` and ``node.id`` (and with the configuration).
- S-START-3 no ``directory.id`` is a reserved id (``DirectoryId.reserved``).
- S-START-4 no two directories share a ``directory.id`` (duplicate ids: refuse to start).
- S-START-5 every file that lists ``directory.ids`` lists the same set.
- S-START-6 a readable directory with no file or no ``directory.id`` gets a new id (written).
- S-START-7 the offline ids are ``directory.ids`` minus the ids read. When more ids are missing
  than directories are unreadable, some directory was removed from the configuration: with no
  unreadable directory that is a plain removal (``directory.ids`` is rewritten); with one, which
  missing id is the offline directory and which was removed cannot be told: "unresolvable
  mismatch", refuse to start.
- S-START-8 the metadata log's directory, when it is not also a data directory, is in neither set.
- S-START-9 at least one data directory must be online.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from kraftlake.records.meta_properties import MetaProperties
from kraftlake.records.observations import LogDirsLoaded
from kraftlake.records.types import is_reserved

from .directory_ids import sorted_dirs

UNREADABLE = "unreadable"
"""What a directory holds when its disk failed (reading it raised an I/O error)."""

Found = MetaProperties | None | str
"""Per directory: its properties, None (no ``meta.properties``), or ``UNREADABLE``."""


class Started(msgspec.Struct, frozen=True, kw_only=True):
    online: tuple[str, ...]
    """Ids of the data directories the broker serves, in Kafka's uuid order."""
    offline: tuple[str, ...]
    metadata_dir: str | None
    """The metadata log directory's id when it is not a data directory, else None."""
    writes: tuple[tuple[str, MetaProperties], ...]
    """(directory path, new contents) of the files to (re)write before serving, path order."""
    removed: tuple[str, ...] = ()
    """Ids ``directory.ids`` listed that no configured directory has any more (taken out)."""
    unidentified: tuple[str, ...] = ()
    """Paths of the unreadable directories when they outnumber the recorded ids missing (some
    never had an id, or no file lists ``directory.ids``): which one is which cannot be told."""
    paths: tuple[tuple[str, str], ...] = ()
    """(directory id, path) where known: every online one, an offline one when it is the only
    unreadable path."""

    def record(self, broker_id: int) -> LogDirsLoaded:
        where = dict(self.paths)
        return LogDirsLoaded(
            broker_id=broker_id,
            online_dirs=self.online,
            offline_dirs=self.offline,
            metadata_dir=self.metadata_dir,
            paths=tuple(where.get(d, "") for d in (*self.online, *self.offline)) if where else (),
        )


class Refused(msgspec.Struct, frozen=True, kw_only=True):
    rule: str
    reason: str


def _identity(
    found: Mapping[str, Found], cluster_id: str | None, node_id: int | None
) -> Refused | tuple[str | None, int | None]:
    """S-START-2: the one cluster id and node id every readable file (and the caller) agrees on."""
    for path in sorted(found):
        meta = found[path]
        if not isinstance(meta, MetaProperties):
            continue
        if meta.cluster_id is not None:
            if cluster_id is None:
                cluster_id = meta.cluster_id
            elif meta.cluster_id != cluster_id:
                return Refused(
                    rule="S-START-2", reason=f"{path}: cluster.id {meta.cluster_id} where {cluster_id} was expected"
                )
        if meta.node_id is not None:
            if node_id is None:
                node_id = meta.node_id
            elif meta.node_id != node_id:
                return Refused(rule="S-START-2", reason=f"{path}: node.id {meta.node_id} where {node_id} was expected")
    return cluster_id, node_id


def _fresh_id(new_id: Callable[[], str], taken: set[str]) -> str:
    """Kafka's ``generateValidDirectoryId``: not reserved, not starting with '-', not taken."""
    while True:
        d = new_id()
        if not is_reserved(d) and not d.startswith("-") and d not in taken:
            taken.add(d)
            return d


def load_dirs(
    log_dirs: Sequence[str],
    found: Mapping[str, Found],
    new_id: Callable[[], str],
    *,
    metadata_dir: str | None = None,
    cluster_id: str | None = None,
    node_id: int | None = None,
) -> Started | Refused:
    """Start-up: ``log_dirs`` (paths, as configured), ``found`` (what each of them and the
    metadata directory holds), ``new_id`` (fresh ids for S-START-6)."""
    paths = sorted(set(log_dirs) | ({metadata_dir} if metadata_dir is not None else set()))
    missing = [p for p in paths if p not in found]
    if missing:
        raise ValueError(f"nothing found for configured directories {missing}")
    if metadata_dir is not None:
        if found[metadata_dir] == UNREADABLE:
            return Refused(rule="S-START-1", reason=f"I/O error in the metadata log directory {metadata_dir}")
        if found[metadata_dir] is None:
            return Refused(
                rule="S-START-1",
                reason=f"the metadata log directory {metadata_dir} has no meta.properties (format it first)",
            )
    identity = _identity({p: found[p] for p in paths}, cluster_id, node_id)
    if isinstance(identity, Refused):
        return identity
    cluster_id, node_id = identity
    owner: dict[str, str] = {}
    listed: tuple[str, ...] | None = None
    listed_by = ""
    for path in paths:
        meta = found[path]
        if not isinstance(meta, MetaProperties):
            continue
        d = meta.directory_id
        if d is not None:
            if is_reserved(d):
                return Refused(rule="S-START-3", reason=f"{path}: directory.id {d} is a reserved id")
            if d in owner:
                return Refused(
                    rule="S-START-4", reason=f"duplicate directory.id {d}: it is the id of {owner[d]} and of {path}"
                )
            owner[d] = path
        if meta.directory_ids is not None:
            if listed is not None and set(meta.directory_ids) != set(listed):
                return Refused(rule="S-START-5", reason=f"{path} and {listed_by} list different directory.ids")
            listed, listed_by = meta.directory_ids, path
    unreadable = [p for p in paths if found[p] == UNREADABLE]
    read_ids = set(owner)
    absent = sorted_dirs(set(listed or ()) - read_ids)
    offline: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unidentified: tuple[str, ...] = ()
    if len(absent) > len(unreadable):
        if unreadable:
            return Refused(
                rule="S-START-7",
                reason=f"unresolvable mismatch: {len(absent)} recorded directory id(s) ({', '.join(absent)}) are missing but "
                f"only {len(unreadable)} configured directory(ies) are unreadable ({', '.join(unreadable)}): a directory was "
                "removed from the configuration while another is offline",
            )
        removed = absent
    else:
        offline = absent
        if len(absent) < len(unreadable):  # which unreadable one has which recorded id is unknown
            unidentified = tuple(unreadable)
    taken = read_ids | set(listed or ())
    ids: dict[str, str] = {}
    writes: dict[str, MetaProperties] = {}
    for path in paths:
        meta = found[path]
        if meta == UNREADABLE:
            continue
        if isinstance(meta, MetaProperties) and meta.directory_id is not None:
            ids[path] = meta.directory_id
        else:
            base = meta if isinstance(meta, MetaProperties) else MetaProperties(cluster_id=cluster_id, node_id=node_id)
            ids[path] = fresh = _fresh_id(new_id, taken)
            writes[path] = msgspec.structs.replace(base, version=max(1, base.version), directory_id=fresh)
    every = sorted_dirs(set(ids.values()) | set(offline))
    for path in ids:
        current = writes.get(path, found[path])
        assert isinstance(current, MetaProperties)
        if current.directory_ids is None or set(current.directory_ids) != set(every):
            writes[path] = msgspec.structs.replace(current, directory_ids=every)
    data = set(log_dirs)
    online = sorted_dirs(ids[p] for p in ids if p in data)
    if not online:
        return Refused(rule="S-START-9", reason="no log directory is online")
    meta_id = ids.get(metadata_dir) if metadata_dir is not None and metadata_dir not in data else None
    path_of = {d: p for p, d in ids.items() if p in data}
    if len(offline) == 1 and len(unreadable) == 1:
        path_of[offline[0]] = unreadable[0]
    return Started(
        paths=tuple(sorted(path_of.items())),
        online=online,
        offline=offline,
        metadata_dir=meta_id,
        writes=tuple(sorted(writes.items())),
        removed=removed,
        unidentified=unidentified,
    )


def plan_format(
    dirs: Sequence[str], found: Mapping[str, Found], new_id: Callable[[], str], *, cluster_id: str, node_id: int
) -> dict[str, MetaProperties] | Refused:
    """``kraftlake format-dirs``: every directory gets a ``meta.properties`` with this cluster
    and node, its own ``directory.id`` (kept when it has one) and ``directory.ids`` naming all of
    them. Refused (S-FORMAT) when a directory is unreadable (formatting needs them all), belongs
    to another cluster or node, or shares an id. Returns the contents per path, changed or not."""
    paths = sorted(set(dirs))
    bad = [p for p in paths if found.get(p) == UNREADABLE]
    if bad:
        return Refused(
            rule="S-FORMAT", reason=f"unreadable: {', '.join(bad)} (every directory must be available to format)"
        )
    identity = _identity({p: found.get(p) for p in paths}, cluster_id, node_id)
    if isinstance(identity, Refused):
        return Refused(rule="S-FORMAT", reason=identity.reason)
    owner: dict[str, str] = {}
    for p in paths:
        meta = found.get(p)
        if isinstance(meta, MetaProperties) and meta.directory_id is not None:
            if is_reserved(meta.directory_id):
                return Refused(rule="S-FORMAT", reason=f"{p}: directory.id {meta.directory_id} is a reserved id")
            if meta.directory_id in owner:
                return Refused(
                    rule="S-FORMAT",
                    reason=f"duplicate directory.id {meta.directory_id} in {owner[meta.directory_id]} and {p}",
                )
            owner[meta.directory_id] = p
    taken = set(owner)
    out: dict[str, MetaProperties] = {}
    ids: list[str] = []
    for p in paths:
        meta = found.get(p)
        base = meta if isinstance(meta, MetaProperties) else MetaProperties(cluster_id=cluster_id, node_id=node_id)
        d = base.directory_id or _fresh_id(new_id, taken)
        ids.append(d)
        out[p] = msgspec.structs.replace(
            base, version=max(1, base.version), cluster_id=cluster_id, node_id=node_id, directory_id=d
        )
    every = sorted_dirs(ids)
    return {p: msgspec.structs.replace(m, directory_ids=every) for p, m in out.items()}
