"""The invariant catalogue: every invariant the audits check, defined once, assembled here.

Each invariant has its id, family, severity, one-line definition, whether a grace applies (states
the cluster passes through legitimately may be wrong for up to the grace, in records or in
milliseconds of ``ts_ms``, before they count) and the templates of its messages
(``statemachine.invariant.Invariant``). Each family's entries live beside its rules, in
``statemachine/<family>/catalogue.py`` (its per-record checks in ``invariants.py`` there); the
log's own (L1-L5) are here, for every family's replay enforces them (``statemachine.reducer``'s
refusals, ``REPLAY_RULE_TO_INVARIANT``) and the books check L1. Every engine takes them from the
catalogue: the checks beside each family and the per-record audit (``replay``) word a violation
with ``say``; so does the SQL plan's driver (``replay.plan.run``), from the kinds and fields its
queries return. A rule's words change in its entry and nowhere else.

A report's ``checked`` says how many times each invariant was asked, on every engine alike: the
subjects it judges, each counted once, at the record that brings it (``counts`` names them where
a rule judges more than records), not how often an engine looks at a subject again (the Python
engine re-checks a partition at its brokers' records; the plan joins its states with intervals;
neither counts that). A check is one evaluation of the invariant's rule at one record for one
subject, counted whether it finds the subject right or wrong: a finding is not a second check,
and a wrong state that closes because its subject went (a stream, reference, duty, object,
ledger or topic removed, a hold or an audit over) is no check. Every record is held to the rules the replay enforces (L3, L4, L5)
as it is applied: a report counts the records audited for each, as for L1
(``books.assemble_report`` says it); K2 counts the partition records.
``CHECKED`` and ``FINDS`` (each entry's ``checks`` and ``finds``) say it in a few words, for a
report's reader.
"""

from __future__ import annotations

from . import invariant
from .bookkeeper.catalogue import INVARIANTS as _BOOKKEEPER
from .invariant import (
    BOOKKEEPER,
    ERROR,
    KRAFT,
    LOG,
    REFUSED,
    S3STREAM,
    SEVERITIES,
    WARNING,
    Invariant,
    say,
    words,
)
from .kraft.catalogue import INVARIANTS as _KRAFT
from .s3stream.catalogue import INVARIANTS as _S3STREAM

__all__ = [
    "BOOKKEEPER",
    "BY_ID",
    "CATALOGUE",
    "CHECKED",
    "ERROR",
    "FINDS",
    "KRAFT",
    "LOG",
    "LOG_INVARIANTS",
    "ORDER",
    "REFUSED",
    "REPLAY_RULE_TO_INVARIANT",
    "S3STREAM",
    "SEVERITIES",
    "WARNING",
    "Invariant",
    "say",
    "words",
]

LOG_INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "L1",
        LOG,
        ERROR,
        "offsets are gapless and increasing",
        messages={"gap": "offset {offset} follows {last}"},
        checks="records",
    ),
    Invariant(
        "L3",
        LOG,
        ERROR,
        "records refer to existing entities (broker, topic, partition; bookie, ledger)",
        messages={
            "refused": REFUSED,
            "topic_missing": "topic {topic} does not exist",
            "partition_missing": "partition {partition} does not exist",
        },
        checks="records",
    ),
    Invariant(
        "L4",
        LOG,
        ERROR,
        "broker epochs of registration changes, fences and unfences match the registration",
        messages={"refused": REFUSED},
        checks="records",
    ),
    Invariant(
        "L5",
        LOG,
        ERROR,
        "Kafka's other replay checks hold (transactions, directory ownership, producer ids)",
        messages={"refused": REFUSED},
        checks="records",
    ),
)
"""The log's own invariants: every family's replay holds each record to L3-L5 as it applies it
(a refusal, ``REPLAY_RULE_TO_INVARIANT``) and the books check L1, so they belong to no family."""

ORDER = (
    *("L1", "L3", "L4", "L5"),
    *("K1", "K2", "K3", "K4", "K5", "K6", "K7", "K9", "K8", "K10", "K11", "K12", "K13", "K14", "K15"),
    *("S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10", "S11"),
    *("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B9", "B10"),
    *("S13", "S14", "S12"),
)
"""The order reports list the invariants in: the order they were added (K9 before K8, issue 35's
S13 and S14 and then S12 after the BookKeeper family), kept so that reports stay byte-identical."""


def _assemble(*families: tuple[Invariant, ...]) -> tuple[Invariant, ...]:
    """The families' entries in ``ORDER``: each defined once, and each in ``ORDER`` once."""
    ids = [i.id for family in families for i in family]
    if sorted(ids) != sorted(ORDER) or len(set(ids)) != len(ids):
        raise ValueError(f"the families' invariants {sorted(ids)} are not ORDER's {sorted(ORDER)}, each once")
    by_id = {i.id: i for family in families for i in family}
    return tuple(by_id[i] for i in ORDER)


CATALOGUE: tuple[Invariant, ...] = _assemble(LOG_INVARIANTS, _KRAFT, _S3STREAM, _BOOKKEEPER)
BY_ID = {i.id: i for i in CATALOGUE}

CHECKED = {i.id: i.checks for i in CATALOGUE if i.checks}
"""What a report's ``checked`` counts of each invariant, in a few words (``counts`` says it
whole); "checks" where not said. L3-L5 hold every record as it is applied: they count records."""

FINDS = {i.id: i.finds for i in CATALOGUE if i.finds}
"""Where one check can find several violations, or one subject is checked more than once: what
a violation is, so that a reader can hold ``violations`` against ``checked``."""

_TEMPLATES = invariant._TEMPLATES
_TEMPLATES.update({(i.id, kind): template for i in CATALOGUE for kind, template in i.messages.items()})

REPLAY_RULE_TO_INVARIANT = {
    "R-REPLAY-ORDER": "L1",
    "R-REPLAY-BROKER": "L3",
    "R-REPLAY-TOPIC": "L3",
    "R-REPLAY-PARTITION": "L3",
    "R-REPLAY-BROKER-EPOCH": "L4",
    "R-REPLAY-DIRECTORIES": "K2",
    "R-REPLAY-DIR-OWNER": "L5",
    "R-REPLAY-TXN": "L5",
    "R-REPLAY-PRODUCER-IDS": "L5",
    "R-REPLAY-LEDGER": "L3",
    "R-REPLAY-BOOKIE": "L3",
}
"""A record the reducer refuses is a violation of this invariant (and is skipped)."""
