"""How the reports name what they speak of, for people: one spelling each, ids kept beside it
for machines.

- a partition is ``<topic>/<partition>`` (``orders/11``; Kafka's topic names hold no ``/``, so
  the spelling is unambiguous), its topic id where the log never named the topic;
- a replica is its partition and broker (``orders/11 on broker 3``);
- a broker is ``broker 3``; a directory is its broker and its path where the log gives one
  (``broker 3 /data/d1``), else its id (reserved ids by name: ``UNASSIGNED``…).

Audit entities (``partition/<topic id>/<p>``, ``replica/…/<broker>``, ``broker/<id>``,
``dir/<broker>/<dir>``, ``topic/<id>``) are what machines match on; ``entity_name`` is the words
a person reads beside them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kraftlake.records import RESERVED_DIRECTORIES


def partition_name(topics: Mapping[str, str], topic_id: str, partition: int, topic: str | None = None) -> str:
    """``orders/11``: the topic's name (``topic``, else ``topics[topic_id]``, else the id)."""
    return f"{topic or topics.get(topic_id) or topic_id}/{partition}"


def directory_name(directory: str, path: str | None = None) -> str:
    """A directory as a person knows it: its path, else its id (reserved ids by name)."""
    return path or RESERVED_DIRECTORIES.get(directory, directory)


def short_id(directory: str, keep: int = 8) -> str:
    """A directory id cut to its first ``keep`` characters (a uuid's base64 is 22), for beside a path."""
    named = RESERVED_DIRECTORIES.get(directory)
    if named is not None:
        return named
    return directory if len(directory) <= keep + 1 else directory[:keep] + "…"


def entity_name(entity: str, topics: Mapping[str, str], dir_paths: Mapping[str, str] | None = None) -> str:
    """The audit entity ``entity`` in words (``partition/<id>/11`` as ``orders/11``); an entity
    of another kind (``stream/7``, ``log``) as it is."""
    parts = entity.split("/")
    kind = parts[0]
    if kind == "partition" and len(parts) == 3:
        return partition_name(topics, parts[1], int(parts[2]))
    if kind == "replica" and len(parts) == 4:
        return f"{partition_name(topics, parts[1], int(parts[2]))} on broker {parts[3]}"
    if kind == "broker" and len(parts) == 2:
        return f"broker {parts[1]}"
    if kind == "dir" and len(parts) == 3:
        path = (dir_paths or {}).get(parts[2])
        return f"broker {parts[1]} {directory_name(parts[2], path)}"
    if kind == "topic" and len(parts) == 2:
        return topics.get(parts[1], parts[1])
    return entity


def incident_where(kind: str, broker: int, directory: str | None, path: str | None) -> str:
    """What an incident hit, in words: ``broker 3`` or ``broker 3 /data/d1 (dir Ab12cd34…)``."""
    where = f"broker {broker}"
    if directory is None:
        return where
    if path:
        return f"{where} {path} (dir {short_id(directory)})"
    return f"{where} dir {directory_name(directory)}"
