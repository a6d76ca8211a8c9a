"""What an invariant is, and how its messages are worded: the ``Invariant`` type, the severities
and families, ``say`` and ``words``. The entries themselves live beside their rules, in each
family's ``catalogue`` module (``statemachine/<family>/catalogue.py``; the log's own in
``statemachine/invariants.py``, which assembles the catalogue). This module imports none of
them, so that a family's rules and entries can import it without a cycle.

A template's fields are filled by ``words``: a sequence as ``[a, b]``, anything else as ``str``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field

ERROR, WARNING = "error", "warning"
SEVERITIES = (WARNING, ERROR)
LOG, KRAFT, S3STREAM, BOOKKEEPER = "log", "kraft", "s3stream", "bookkeeper"

REFUSED = "{rule}: {message} (record skipped)"
"""A record the reducer refuses (Kafka's replay would have): its rule and reason."""


def words(value: object) -> str:
    """How a template shows a value: a sequence as ``[a, b]`` (Python's list of ints), else str."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(x) for x in value) + "]"
    return str(value)


@dataclass(frozen=True)
class Invariant:
    id: str
    family: str
    severity: str
    definition: str
    graced: bool = False
    """True: the state may be wrong for up to the grace (records and ms) before it counts."""
    messages: Mapping[str, str] = field(default_factory=dict)
    """Message templates by kind (``say``)."""
    counts: str = ""
    """What one check is, for the report's ``checked``, where it is not one per record the rule
    applies to (``statemachine.invariants``' docstring)."""
    checks: str = ""
    """What a report's ``checked`` counts, in a few words, for its reader ("checks" where empty;
    ``counts`` says it whole)."""
    finds: str = ""
    """Where one check can find several violations, or one subject is checked more than once:
    what a violation is, so that a reader can hold ``violations`` against ``checked``."""


_TEMPLATES: dict[tuple[str, str], str] = {}
"""Every message template by (invariant, kind): filled by ``statemachine.invariants`` as it
assembles the catalogue, which ``say`` imports on its first call if no one has (importing it here
would be a cycle: the families' entries import this module)."""


def say(invariant: str, kind: str, **fields: object) -> str:
    """The message of kind ``kind`` of ``invariant``, its fields filled in (``words``). Kept to
    about a microsecond: an audit words every wrong state it re-checks, hundreds of thousands in
    a history with many violations (the templates load once, on the first call)."""
    for name, value in fields.items():
        if isinstance(value, (list, tuple)):
            fields[name] = words(value)
    try:
        template = _TEMPLATES[invariant, kind]
    except KeyError:
        if _TEMPLATES:
            raise
        importlib.import_module("kraftlake.statemachine.invariants")
        template = _TEMPLATES[invariant, kind]
    return template.format_map(fields)
