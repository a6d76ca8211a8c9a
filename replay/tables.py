"""The audit's complete rows as tables: violations, incidents, effects, outages and availability.

The JSON, HTML and text reports are a summary whose size does not grow with the log
(``replay.summary``); the rows behind it are these tables, as Arrow (``batches``: what the
notebook facade turns into DataFrames) or as Parquet files in a directory (``write``:
``kraftlake audit --tables DIR``), which DuckDB, pandas and Spark read as they are. Each table is
built a slice of rows at a time from the report's columns (``replay.columns``), so a report of
tens of millions of rows is written without a Python object per row, and ``SCHEMAS`` is the
documented shape (``docs/report-tables.md``).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.replay.books import AuditReport
from kraftlake.replay.columns import StructColumns
from kraftlake.replay.incidents import Incident
from kraftlake.replay.names import entity_name
from kraftlake.replay.summary import Times

ROWS_PER_BATCH = 1 << 20
"""Rows converted and written at once."""

_OFFSET, _MS = pa.int64(), pa.int64()

SCHEMAS: dict[str, pa.Schema] = {
    "violations": pa.schema(
        [
            ("invariant", pa.string()),
            ("severity", pa.string()),
            ("entity", pa.string()),
            ("first_offset", _OFFSET),
            ("last_offset", _OFFSET),
            ("message", pa.string()),
            ("evidence", pa.list_(_OFFSET)),
            ("incident", pa.string()),
            ("name", pa.string()),
            ("first_ms", _MS),
            ("last_ms", _MS),
        ]
    ),
    "incidents": pa.schema(
        [
            ("id", pa.string()),
            ("kind", pa.string()),
            ("broker", pa.int64()),
            ("directory", pa.string()),
            ("path", pa.string()),
            ("failed_at", _OFFSET),
            ("failed_at_ms", _MS),
            ("reported_at", _OFFSET),
            ("reported_at_ms", _MS),
            ("removed_at", _OFFSET),
            ("removed_at_ms", _MS),
            ("ended_at", _OFFSET),
            ("ended_at_ms", _MS),
            ("unavailable_ms", _MS),
            ("effects", pa.int64()),
            ("violations", pa.int64()),
            ("invariants", pa.map_(pa.string(), pa.int64())),
            ("unavailable_after_ms", _MS),
            ("leaderless", pa.int64()),
            ("overlaps", pa.list_(pa.string())),
        ]
    ),
    "effects": pa.schema(
        [
            ("incident", pa.string()),
            ("topic_id", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int64()),
            ("role", pa.string()),
            ("caused_by", _OFFSET),
            ("ended_by", _OFFSET),
            ("outcome", pa.string()),
            ("new_leader", pa.int64()),
            ("time_to_move_ms", _MS),
            ("name", pa.string()),
            ("ended_ms", _MS),
        ]
    ),
    "outages": pa.schema(
        [
            ("topic_id", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int64()),
            ("why", pa.string()),
            ("first_offset", _OFFSET),
            ("last_offset", _OFFSET),
            ("from_ms", _MS),
            ("to_ms", _MS),
            ("name", pa.string()),
            ("incident", pa.string()),
        ]
    ),
    "availability": pa.schema(
        [
            ("topic_id", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int64()),
            ("no_leader_ms", _MS),
            ("under_min_isr_ms", _MS),
            ("leader_offline_ms", _MS),
            ("isr_offline_ms", _MS),
            ("unavailable_ms", _MS),
            ("name", pa.string()),
        ]
    ),
}
"""Each table's columns. Offsets are the log's (``*_offset``, ``*_at``, ``caused_by``,
``ended_by``, ``evidence``), times are record time in ms since the epoch (``*_ms``); null: none
(a violation or outage still open at the end, an effect never ended). ``name`` is what a person
reads for the row's entity (``replay.names``: ``orders/11``), ids beside it."""

NAMES = tuple(SCHEMAS)


def batches(report: AuditReport, times: Times | None = None) -> dict[str, Callable[[], Iterator[pa.Table]]]:
    """Per table, a function giving its rows a slice at a time, in ``SCHEMAS``' shape
    (``times``: the record times of offsets, for the violations'; without it they are null)."""
    return {
        "violations": lambda: _violations(report, times),
        "incidents": lambda: _incidents(report.incidents or []),
        "effects": lambda: _effects(report.incidents or [], report.topics),
        "outages": lambda: _outages(report),
        "availability": lambda: _availability(report),
    }


def table(report: AuditReport, name: str, times: Times | None = None) -> pa.Table:
    """One table whole (a notebook's DataFrame)."""
    return pa.Table.from_batches([b for t in batches(report, times)[name]() for b in t.to_batches()], SCHEMAS[name])


def write(report: AuditReport, directory: str | os.PathLike, times: Times | None = None) -> dict[str, int]:
    """Every table as ``<directory>/<name>.parquet`` (zstd); returns the rows of each."""
    import pyarrow.parquet as pq

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    rows: dict[str, int] = {}
    for name, make in batches(report, times).items():
        path = root / f"{name}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        n = 0
        with pq.ParquetWriter(tmp, SCHEMAS[name], compression="zstd") as writer:
            for part in make():
                writer.write_table(part)
                n += part.num_rows
        os.replace(tmp, path)  # a reader never sees half a table
        rows[name] = n
    return rows


# -- each table --------------------------------------------------------------------------------------


def _slices(rows: Sequence, make: Callable[[int, int], pa.Table]) -> Iterator[pa.Table]:
    for lo in range(0, len(rows), ROWS_PER_BATCH):
        yield make(lo, min(len(rows), lo + ROWS_PER_BATCH))


def _structs(rows: Sequence, lo: int, hi: int) -> pa.Table:
    """Rows ``lo..hi - 1`` of a list of Structs, in columns or not."""
    if isinstance(rows, StructColumns):
        return rows.to_arrow(lo, hi)
    return pa.Table.from_pylist([msgspec.structs.asdict(r) for r in rows[lo:hi]])


def _conform(part: pa.Table, name: str, extra: dict[str, pa.Array] | None = None) -> pa.Table:
    """``part`` in ``SCHEMAS[name]``'s columns and types (``extra``: columns it lacks)."""
    schema = SCHEMAS[name]
    n = part.num_rows
    columns = []
    for field in schema:
        if extra is not None and field.name in extra:
            col = extra[field.name]
        elif field.name in part.column_names:
            col = part.column(field.name)
        else:
            col = pa.nulls(n, field.type)
        columns.append(col.cast(field.type) if col.type != field.type else col)
    return pa.table(columns, schema=schema)


def _violations(report: AuditReport, times: Times | None) -> Iterator[pa.Table]:
    vs = report.violations
    incidents = report.incidents or []
    owner = array("q", [-1]) * len(vs)
    for k, inc in enumerate(incidents):
        for i in inc.violations:
            if owner[i] < 0:
                owner[i] = k
    ids = pa.array([inc.id for inc in incidents], pa.string())
    names: dict[str, str] = {}

    def part(lo: int, hi: int) -> pa.Table:
        own = pa.array(owner[lo:hi], pa.int64())
        incident = pc.take(ids, pc.if_else(pc.less(own, 0), pa.scalar(None, pa.int64()), own))
        rows = _structs(vs, lo, hi)
        entities = rows.column("entity")
        for e in pc.unique(entities).to_pylist():
            if e not in names:
                names[e] = entity_name(e, report.topics, report.dir_paths)
        unique = pa.array(list(names), pa.string())
        name = pc.take(pa.array(list(names.values()), pa.string()), pc.index_in(entities, value_set=unique))
        extra = {"incident": incident, "name": name}
        if times is not None:
            first, last = rows.column("first_offset"), rows.column("last_offset")
            got = times(set(first.to_pylist()) | set(pc.drop_null(last).to_pylist()))
            extra["first_ms"] = pa.array([got.get(o) for o in first.to_pylist()], _MS)
            extra["last_ms"] = pa.array([None if o is None else got.get(o) for o in last.to_pylist()], _MS)
        return _conform(rows, "violations", extra)

    return _slices(vs, part)


def _incidents(incidents: list[Incident]) -> Iterator[pa.Table]:
    def part(lo: int, hi: int) -> pa.Table:
        rows = []
        for inc in incidents[lo:hi]:
            row = {f: getattr(inc, f) for f in SCHEMAS["incidents"].names if f not in ("effects", "violations")}
            row["effects"], row["violations"] = len(inc.effects), len(inc.violations)
            row["invariants"] = sorted(inc.invariants.items())
            row["overlaps"] = list(inc.overlaps)
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=SCHEMAS["incidents"])

    return _slices(incidents, part)


def _effects(incidents: list[Incident], topics: dict[str, str]) -> Iterator[pa.Table]:
    for inc in incidents:
        for lo in range(0, len(inc.effects), ROWS_PER_BATCH):
            part = _structs(inc.effects, lo, min(len(inc.effects), lo + ROWS_PER_BATCH))
            n = part.num_rows
            extra = {"incident": pa.array([inc.id] * n, pa.string()), "name": _names(part, topics)}
            if inc.failed_at_ms is not None and n:
                # An effect ends ``time_to_move_ms`` after the incident's failure.
                extra["ended_ms"] = pc.add(part.column("time_to_move_ms"), inc.failed_at_ms)
            yield _conform(part, "effects", extra)


def _names(part: pa.Table, topics: dict[str, str]) -> pa.Array:
    """``orders/11`` of each row of ``part`` (its ``topic_id``, ``partition`` and maybe ``topic``)."""
    if not part.num_rows:
        return pa.array([], pa.string())
    ids = part.column("topic_id")
    given = part.column("topic") if "topic" in part.column_names else pa.nulls(part.num_rows, pa.string())
    known = (
        pa.array([topics.get(t) for t in ids.to_pylist()], pa.string()) if topics else pa.nulls(len(ids), pa.string())
    )
    topic = pc.coalesce(given, known, ids)
    return pc.binary_join_element_wise(topic, pc.cast(part.column("partition"), pa.string()), "/")


def _outages(report: AuditReport) -> Iterator[pa.Table]:
    a = report.availability
    outages = a.outages if a is not None else []
    names = report.topics

    owners = a.outage_incidents if a is not None else []
    ids = pa.array([inc.id for inc in report.incidents or []], pa.string())

    def part(lo: int, hi: int) -> pa.Table:
        t = _structs(outages, lo, hi)
        if not t.num_rows:
            return _conform(t, "outages")
        topic = pa.array([names.get(x) for x in t.column("topic_id").to_pylist()], pa.string())
        t = t.append_column("topic", topic) if "topic" not in t.column_names else t
        extra = {"topic": topic, "name": _names(t, names)}
        if len(owners) == len(outages):
            own = pa.array(owners[lo:hi], pa.int64())
            extra["incident"] = pc.take(ids, pc.if_else(pc.less(own, 0), pa.scalar(None, pa.int64()), own))
        return _conform(t, "outages", extra)

    return _slices(outages, part)


def _availability(report: AuditReport) -> Iterator[pa.Table]:
    a = report.availability
    rows = a.partitions if a is not None else []

    def part(lo: int, hi: int) -> pa.Table:
        t = _structs(rows, lo, hi)
        return _conform(t, "availability", {"name": _names(t, report.topics)} if t.num_rows else None)

    return _slices(rows, part)
