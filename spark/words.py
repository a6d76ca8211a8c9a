"""The catalogue's messages as Spark column expressions: the words ``statemachine.invariants``
gives the per-record audit, built from the same templates, so that both engines word a violation
alike and a rule's words change in one place."""

from __future__ import annotations

from kraftlake.statemachine.invariants import BY_ID, pieces


def say(invariant: str, kind: str, **fields):
    """The message of kind ``kind`` of ``invariant`` (a string column), its fields filled with
    ``fields`` (columns). Each field is cast to a string: Spark writes an array as ``[a, b]``,
    as ``statemachine.invariants.words`` does."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    parts = []
    for text, name in pieces(BY_ID[invariant].messages[kind]):
        if text:
            parts.append(F.lit(text))
        if name is not None:
            value = fields[name]
            parts.append((value if isinstance(value, Column) else F.lit(value)).cast("string"))
    return F.concat(*parts)


def severity(invariant: str):
    """The catalogue's severity of ``invariant``, as a literal column."""
    from pyspark.sql import functions as F

    return F.lit(BY_ID[invariant].severity)
