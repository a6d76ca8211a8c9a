"""The columnar audit plan, written once as SQL (``sql``, ``elr``, ``incidents``) in the subset
DuckDB and Spark SQL share (``statemachine.sql_dialect``), run by an engine (``duck``: DuckDB in
this process, the default; ``kraftlake.spark.engine``: Spark, for clusters), with the driver's
side (``control``, ``driver``, ``run``) shared by both. It lives beside the per-record engine (``replay.audit``), which
it is held to; ``spark/`` keeps only what Spark alone needs."""

from __future__ import annotations

from .run import ENGINE_PARTS, audit, families


def audit_snapshot(snap, config=None, *, step=None, threads=None, memory_limit=None, temp_directory=None, dataset=None):
    """The audit report of a ``LogSnapshot`` (cut at its ``last_offset``) by the plan on DuckDB,
    in this process. ``dataset``: the snapshot's rows as a pyarrow dataset (default: its local
    Parquet files; for object storage, a dataset over ``pyarrow.fs``)."""
    from .duck import DuckEngine

    with DuckEngine(threads=threads, memory_limit=memory_limit, temp_directory=temp_directory) as engine:
        if dataset is not None:
            engine.read(dataset, snap.last_offset)
        else:
            engine.read_snapshot(snap)
        return audit(engine, config, step=step)


__all__ = ["ENGINE_PARTS", "audit", "audit_snapshot", "families"]
