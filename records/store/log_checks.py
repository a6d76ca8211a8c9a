"""What makes a Delta table a kraftlake log, checked wherever one is opened, by readers and
writers alike (issue 54, item 3: ``append`` wrote into tables that ``log`` and ``view`` refused).

- ``check_table``: the table is named ``kraftlake`` and has the envelope's columns (a foreign
  Delta table, with an ``offset`` column or without one, is not a log), its schema is the one
  kraftlake wrote (``SCHEMA_TXN``: tables made before it have none), and its files hold
  exactly the offsets its commits say, by the ``add`` actions' statistics (no data is read): the
  app transaction ``kraftlake.offset`` says the log ends at L, so its files hold L + 1 records,
  offsets 0 to L. A commit emptied in the middle of the history loses its file's offsets; a row
  appended by another writer (plain ``deltalake``) holds an offset twice; a damaged
  ``kraftlake.offset`` cuts the log short; an emptied newest commit would end it a batch early.
  ~2 ms at 1 500 files, and one read of the newest commit file.
- ``follows``: the same of the commits a writer reads from their files to follow other writers
  (``delta_commit.commits_after``), so that a writer checks each new commit once and never
  re-reads the history.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.schema import Field as DeltaField
from deltalake.schema import Schema as DeltaSchema
from deltalake.schema import StructType

from ..errors import CorruptStoreError, LogNotFoundError
from .location import Location

LOG_NAME = "kraftlake"
"""The name ``Log.create`` has given every log's table (``metaData.name``)."""
ENVELOPE_TYPES = {"offset": "long", "ts_ms": "long", "type": "string", "version": "integer", "key": "string"}
"""The envelope columns every log has had since its first version, with their Delta types."""
OFFSET_TXN = "kraftlake.offset"
SCHEMA_TXN = "kraftlake.schema"
"""App transaction whose version is the digest of the table's schema (``schema_digest``), set in
the commit that makes or changes the schema: a flipped bit in a commit's ``schemaString``
renames a column or field, which every reader would read as another, null column."""


def schema_digest(schema: DeltaSchema) -> int:
    """The CRC-32 of ``schema``'s Delta JSON in a canonical form (keys sorted, no spaces): the
    same whichever delta-rs serialises it; field order, names, types and nullability count."""
    return _digest(schema.to_json())


@lru_cache(maxsize=8)
def _digest(schema_json: str) -> int:
    # Cached: every snapshot a reader opens checks it, and the schema seldom changes (the
    # canonical form of a 28 KB schema costs ~0.7 ms).
    canonical = json.dumps(json.loads(schema_json), sort_keys=True, separators=(",", ":"))
    return zlib.crc32(canonical.encode()) & 0xFFFFFFFF


def evolved(schema: DeltaSchema, added: Sequence[DeltaField]) -> DeltaSchema:
    """``schema`` after ``alter.add_columns(added)``, as delta-rs makes it: a new column goes
    last; a struct column already there keeps its fields and gains the new ones after them."""
    fields = list(schema.fields)
    at = {f.name: i for i, f in enumerate(fields)}
    for f in added:
        if f.name in at:
            fields[at[f.name]] = _merged(fields[at[f.name]], f)
        else:
            at[f.name] = len(fields)
            fields.append(f)
    return DeltaSchema(fields)


def _merged(have: DeltaField, new: DeltaField) -> DeltaField:
    if not (isinstance(have.type, StructType) and isinstance(new.type, StructType)):
        return have
    inner = list(have.type.fields)
    at = {f.name: i for i, f in enumerate(inner)}
    for f in new.type.fields:
        if f.name in at:
            inner[at[f.name]] = _merged(inner[at[f.name]], f)
        else:
            at[f.name] = len(inner)
            inner.append(f)
    return DeltaField(have.name, StructType(inner), nullable=have.nullable, metadata=have.metadata)


def check_table(dt: DeltaTable, where: Location) -> None:
    """``LogNotFoundError`` when ``dt`` is not a kraftlake log; ``CorruptStoreError`` when its
    files do not hold exactly the offsets 0 to its last one."""
    check_kind(dt, where)
    stored = dt.transaction_version(OFFSET_TXN)
    check_files(pa.table(dt.get_add_actions(flatten=False)), -1 if stored is None else stored, dt.version(), where)


def check_kind(dt: DeltaTable, where: Location) -> None:
    """``LogNotFoundError`` naming what makes ``dt`` something else than a kraftlake log."""
    name = dt.metadata().name
    if name != LOG_NAME:
        named = "has no name" if name is None else f"is named {name!r}"  # type: ignore[redundant-expr]  # deltalake's stub: str
        raise LogNotFoundError(
            f"{where.uri} holds a Delta table that is not a kraftlake log: it {named}, a log is"
            f" named {LOG_NAME!r} (a log is made by `kraftlake init`)"
        )
    schema = dt.schema()
    fields = {f.name: f.type for f in schema.fields}
    for column, want in ENVELOPE_TYPES.items():
        have = fields.get(column)
        if have is None or getattr(have, "type", None) != want:
            what = "has no column" if have is None else f"has a column of type {have}"
            raise LogNotFoundError(
                f"{where.uri} holds a Delta table that is not a kraftlake log: it {what} {column!r} ({want} in a log)"
            )
    stored = dt.transaction_version(SCHEMA_TXN)
    if stored is not None and stored != schema_digest(schema):
        raise CorruptStoreError(
            f"the schema of {where.uri} at version {dt.version()} is not the one kraftlake wrote (its"
            f" digest is {schema_digest(schema):08x}, the log's {SCHEMA_TXN} says {stored:08x}): a commit"
            f" file in {where.uri}/_delta_log that sets the schema (metaData) is damaged",
            file=f"{where.uri}/_delta_log",
        )


def check_files(actions: pa.Table, last: int, version: int, where: Location) -> None:
    """The ``add`` actions of version ``version`` (``get_add_actions(flatten=False)``) hold
    offsets 0 to ``last`` once each, as far as their statistics say (a file without them is
    left to the read, which checks every offset). The commit file of ``version`` itself must
    hold actions: delta-rs reads an emptied one as a commit that did nothing, and the log would
    end a batch early (one small read)."""
    body = where.read(f"_delta_log/{version:020d}.json")
    if body is not None and not body.strip():
        file = f"{where.local or where.uri}/_delta_log/{version:020d}.json"
        raise CorruptStoreError(f"{file} is not a Delta commit: it holds no actions", file=file)
    records = actions.column("num_records")
    if records.null_count:
        return
    total = pc.sum(records).as_py() or 0
    if total != last + 1:
        _mismatch(total, last, version, where)
    if total and "max" in actions.column_names and "min" in actions.column_names:
        lows, highs = _offsets(actions, "min"), _offsets(actions, "max")
        if lows is not None and highs is not None and (pc.min(lows).as_py(), pc.max(highs).as_py()) != (0, last):
            _mismatch(total, last, version, where, span=(pc.min(lows).as_py(), pc.max(highs).as_py()))


def _offsets(actions: pa.Table, side: str) -> pa.ChunkedArray | None:
    column = actions.column(side)
    if "offset" not in [f.name for f in column.type]:
        return None
    values = pc.struct_field(column, "offset")
    return None if values.null_count else values


def _mismatch(total: int, last: int, version: int, where: Location, span: tuple[int, int] | None = None) -> None:
    held = f"its files hold {total} records" + (f", offsets {span[0]} to {span[1]}" if span else "")
    if last < 0:
        said = "no commit says where the log ends (kraftlake.offset)"
    else:
        said = f"its commits say offsets 0 to {last}"
    what = "some offsets are held twice" if total > last + 1 else "offsets are missing"
    found = damaged_commit(where)  # delta-rs reads an emptied commit as one that did nothing
    if found is not None:
        raise CorruptStoreError(f"{found} ({what} in version {version}: {held}, {said})", file=found.file)
    raise CorruptStoreError(
        f"{what} in version {version}: {held}, {said}: a commit file in {where.uri}/_delta_log is"
        " damaged or emptied, or another writer than kraftlake added rows",
        file=f"{where.uri}/_delta_log",
    )


def damaged_log(where: Location, exc: BaseException) -> CorruptStoreError:
    """What is wrong with a ``_delta_log`` that delta-rs cannot read, in the same words on every
    store (``damaged_commit``); else delta-rs's own first line."""
    found = damaged_commit(where)
    if found is not None:
        return found
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    log_dir = f"{where.local or where.uri}/_delta_log"
    return CorruptStoreError(f"{log_dir} cannot be read: {first}", file=log_dir)


REQUIRED = {
    "txn": ("appId", "version"),
    "add": ("path", "size", "modificationTime", "dataChange"),
    "remove": ("path",),
    "metaData": ("id", "schemaString", "format"),
    "protocol": ("minReaderVersion", "minWriterVersion"),
}
"""The fields an action must have (the Delta protocol's "Actions"), those delta-rs reads lazily
(a ``txn`` without its ``version`` fails only when a reader asks for an app transaction)."""


def damaged_commit(where: Location) -> CorruptStoreError | None:
    """The first commit file delta-rs reads (from the newest checkpoint on) that is missing (a
    gap in the versions), empty or not JSON, named the same way on every store; None when all
    are whole. One listing and a read of each such file: for error messages only."""
    import msgspec

    log_dir = f"{where.local or where.uri}/_delta_log"
    names = where.listing("_delta_log")
    checkpoints = [int(f[:20]) for f in names if f.endswith(".checkpoint.parquet") and f[:20].isdigit()]
    since = max(checkpoints, default=0)
    versions = sorted(v for v in (int(f[:20]) for f in names if f.endswith(".json") and f[:20].isdigit()) if v >= since)
    for a, b in zip(versions, versions[1:]):
        if b != a + 1:
            missing = f"{log_dir}/{a + 1:020d}.json"
            return CorruptStoreError(f"{missing} is missing: the commits go from version {a} to {b}", file=missing)
    for v in versions:
        file = f"{log_dir}/{v:020d}.json"
        body = where.read(f"_delta_log/{v:020d}.json") or b""
        lines = [line for line in body.splitlines() if line.strip()]
        try:
            actions = [msgspec.json.decode(line) for line in lines]
        except msgspec.DecodeError as bad:
            return CorruptStoreError(f"{file} is not a Delta commit: {bad}", file=file)
        if not actions or not all(isinstance(a, dict) for a in actions):
            return CorruptStoreError(f"{file} is not a Delta commit: it holds no actions", file=file)
        for action in actions:
            for kind, body in action.items():
                absent = [k for k in REQUIRED.get(kind, ()) if not isinstance(body, dict) or k not in body]
                if absent:
                    return CorruptStoreError(
                        f"{file} is not a Delta commit: one of its {kind} actions has no {absent[0]!r}", file=file
                    )
    return None


def follows(adds: Sequence[Mapping[str, object]], txns: Mapping[str, int], last: int) -> int | None:
    """The last offset after one commit, read from its file, that follows a log ending at
    ``last``: its ``add`` actions with a data change (``adds``, as in the file) and its app
    transactions. None when it is not what kraftlake's appends write (rows without a new
    ``kraftlake.offset``, or statistics that do not continue at ``last + 1``): the caller then
    reads the table whole (``check_table``) to say what is wrong."""
    import msgspec

    new_last = txns.get(OFFSET_TXN, last)
    expect = last + 1
    spans = []
    for add in adds:
        try:
            stats = msgspec.json.decode(add.get("stats") or "{}")  # type: ignore[call-overload]  # else TypeError below
            n = stats["numRecords"]
            if n:
                spans.append((int(stats["minValues"]["offset"]), int(stats["maxValues"]["offset"]), int(n)))
        except (msgspec.DecodeError, KeyError, TypeError, ValueError):
            return None
    for lo, hi, n in sorted(spans):
        if lo != expect or hi - lo + 1 != n:
            return None
        expect = hi + 1
    return new_last if expect == new_last + 1 else None
