"""The audit on Spark: the audit plan's SQL (``replay.plan``) through ``spark.sql``, the same
catalogue and the same report as ``kraftlake audit``.

The partition records (nine in ten of a history) are audited by the plan's queries, no Python in
the hot path; everything else is small and replayed on the driver by the local audit itself
(``replay.plan.control``). The tables the plan reads more than once are kept in a scratch directory
every executor sees (``spark.scratch``).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from kraftlake.replay.books import AuditConfig, AuditReport
from kraftlake.replay.plan.run import audit as plan_audit

from .engine import SparkEngine


def audit(
    spark,
    df,
    config: AuditConfig | None = None,
    *,
    step: Callable[[str], None] | None = None,
    scratch: str | None = None,
) -> AuditReport:
    """Audit a log DataFrame (``read_log``) on Spark: the report ``kraftlake audit`` gives for
    the same records. ``step(name)`` is told as each stage begins (for progress). ``scratch``:
    a directory every executor sees, for the tables the plan keeps (default: a local temporary
    one for a local session, the checkpoint directory on a cluster, else Spark's cache)."""
    with SparkEngine(spark, scratch=scratch) as engine:
        engine.read(df)
        return plan_audit(engine, config, step=step)


def violations(spark, df, config: AuditConfig | None = None) -> list[dict]:
    """The audit's violations as dicts in ``kraftlake audit``'s JSON shape."""
    return [msgspec.to_builtins(v) for v in audit(spark, df, config).violations]
