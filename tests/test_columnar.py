"""The columnar append path (records.columnar) against the per-record reference path it replaces:
for generated batches, valid and broken, both give the same records, the same Arrow table, and
the same error naming line, type and field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from msgspec.structs import force_setattr

from kraftlake.records import (
    MIGRATING,
    RECORD_TYPES,
    Partition,
    PartitionChange,
    RecordError,
    ReplicaDirectory,
    arrow,
    arrow_input,
    codec,
    columnar,
    current_version,
    from_builtins,
    iter_lines,
    type_name,
)
from kraftlake.records.catalog import BY_NAME, AnyRecord
from kraftlake.records.codec import json_form, normalize_batch
from kraftlake.records.s3stream import packed_fields
from kraftlake.records.upcast import SHAPES
from kraftlake.testing import batches, records_of

from helpers.tiers import examples

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
DIR_A = "yHzNFVl5RoS2TvJfCqg0lw"

BAD_VALUES = (
    None,
    "x",
    -1,
    -3,
    2**31,
    2**63,
    1.5,
    True,
    [],
    [1, 1],
    {},
    "A" * 22,
)
"""Values a broken record may hold where a valid one held something else."""
BAD_UUIDS = (
    "A" * 22,  # the zero uuid (MIGRATING): reserved
    "AAAAAAAAAAAAAAAAAAAABg",  # reserved too (a low byte below 100)
    "AAAAAAAAAAAAAAAAAAAAZA",  # starts like a reserved id, but is not one
    "AAAAAAAAAAAAAAAAAAAABj",  # 22 characters, but no uuid ends in j
    "!!!!!!!!!!!!!!!!!!!!!A",
)


def _outcome(fn: Any) -> tuple[Any, ...]:
    try:
        return ("ok", list(fn()))
    except RecordError as exc:
        return ("error", str(exc), exc.to_dict())


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value inside a record's builtins (type tag excepted)."""
    out = [path] if path and path != ("type",) else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _leaves(v, (*path, i))
    return out


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for k in path[:-1]:
        value = value[k]
    value[path[-1]] = new


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        value = value[k]
    return value


def _builtins(record: Any) -> dict[str, Any]:
    """A record as a JSON client sends it (lists, not tuples)."""
    return msgspec.json.decode(msgspec.json.encode(json_form(record)))


@st.composite
def broken(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid batch as JSON builtins with one record broken (or, by chance, still valid: a
    changed optional field, an older version): wrong types, out-of-range integers, bad and
    reserved uuids, brokers listed twice, misaligned assignments, unknown and missing fields,
    unknown types and versions."""
    # The record to break is more often of a type whose rules the columnar checks port.
    ported = st.sampled_from(sorted(columnar._CHECKS, key=type_name))
    cls = draw(st.one_of(ported, ported, st.sampled_from(RECORD_TYPES)))
    raws = [_builtins(r) for r in draw(batches(max_size=5))]
    d = _builtins(draw(records_of(cls)))
    raws.insert(draw(st.integers(0, len(raws))), d)
    how = draw(st.sampled_from(("value", "value", "uuid", "repeat", "repeat", "drop", "extra", "version", "type")))
    paths = _leaves(d)
    uuids = [p for p in paths if isinstance(_get(d, p), str) and len(_get(d, p)) == 22]
    if how == "value" and paths:
        _set(d, draw(st.sampled_from(paths)), draw(st.sampled_from(BAD_VALUES)))
    elif how == "uuid" and uuids:
        _set(d, draw(st.sampled_from(uuids)), draw(st.sampled_from(BAD_UUIDS)))
    elif how == "repeat":
        lists = [p for p in paths if isinstance(_get(d, p), list) and _get(d, p)]
        if lists:
            items = _get(d, draw(st.sampled_from(lists)))
            items.append(items[draw(st.integers(0, len(items) - 1))])
    elif how == "drop":
        keys = [k for k in d if k != "type"]
        if keys:
            del d[draw(st.sampled_from(keys))]
    elif how == "extra":
        d["no_such_field"] = 1
    elif how == "version":
        d["version"] = draw(st.sampled_from((cls.MIN_VERSION, current_version(cls) + 1, -1)))
    else:
        d["type"] = draw(st.sampled_from(("NoSuchRecord", "Partition", "PartitionChange")))
    return raws


uuids = st.one_of(
    st.sampled_from((TOPIC, DIR_A)), st.sampled_from((TOPIC, DIR_A, MIGRATING)), st.sampled_from(BAD_UUIDS)
)
small_lists = st.lists(st.integers(0, 4), max_size=4)


@st.composite
def partition_like(draw: st.DrawFn) -> dict[str, Any]:
    """A Partition, PartitionChange, RegisterBroker or BrokerRegistrationChange whose lists may
    repeat a broker or directory, whose assignment may disagree with its replicas and whose
    uuids may be reserved or malformed: the rules ``columnar._CHECKS`` ports, hit often."""
    kind = draw(st.sampled_from(("Partition", "PartitionChange", "RegisterBroker", "BrokerRegistrationChange")))
    if kind in ("RegisterBroker", "BrokerRegistrationChange"):
        d = {"type": kind, "broker_id": 1, "broker_epoch": 0, "log_dirs": draw(st.lists(uuids, max_size=3))}
        if kind == "RegisterBroker":
            d["incarnation_id"] = draw(uuids)
        return d
    d = {"type": kind, "partition_id": 0, "topic_id": draw(uuids), "leader": -1}
    for name in ("replicas", "isr"):
        if kind == "Partition" or draw(st.booleans()):
            d[name] = draw(small_lists)
    if draw(st.booleans()):
        brokers = d.get("replicas", []) if draw(st.booleans()) else draw(small_lists)
        d["assignment"] = [{"broker": b, "directory": draw(uuids)} for b in brokers]
    return d


@settings(max_examples=examples(300))
@given(raws=st.lists(partition_like(), min_size=1, max_size=6))
def test_the_ported_rules_agree_with_the_records_own_checks(raws):
    lines = [msgspec.json.encode(raw) for raw in raws]
    want = _outcome(lambda: iter_lines(lines))
    assert _outcome(lambda: columnar.from_lines(lines)) == want
    if want[0] == "ok":
        assert columnar.from_lines(lines).columns is not None
        _same_tables(columnar.from_lines(lines), want[1])


def _same_tables(got: list, want: list) -> None:
    for kw in ({"first_offset": 0, "ts_ms": 1_700_000_000_000}, {"first_offset": 2**40, "ts_ms": 5}):
        a = arrow.to_table(want, **kw, producer="p", producer_seq=3)
        b = columnar.to_table(got, **kw, producer="p", producer_seq=3)
        assert b.schema == a.schema
        assert b.equals(a)
        assert columnar.to_table(list(got), **kw).equals(arrow.to_table(want, **kw))  # no cached columns


@settings(max_examples=examples(150))
@given(batch=batches(max_size=30))
def test_valid_batches_give_the_reference_records_and_table(batch):
    want = normalize_batch(batch)
    got = columnar.from_python(batch)
    assert got == want
    assert got.columns is not None  # vouched for by the columnar checks, not handed back
    _same_tables(got, want)
    lines = [msgspec.json.encode(json_form(r)) for r in batch]
    assert columnar.from_lines(lines) == list(iter_lines(lines)) == want
    assert columnar.from_lines(lines).columns is not None
    raws = [msgspec.json.decode(line) for line in lines]
    assert columnar.from_builtins_batch(raws) == [from_builtins(raw, line=i + 1) for i, raw in enumerate(raws)]
    assert columnar.from_builtins_batch(raws).columns is not None


@settings(max_examples=examples(400))
@given(raws=broken())
def test_broken_batches_give_the_reference_error(raws):
    lines = [msgspec.json.encode(raw) for raw in raws]
    lines.insert(1, b"   ")  # a blank line: skipped, but counted in line numbers
    want = _outcome(lambda: iter_lines(lines))
    got = _outcome(lambda: columnar.from_lines(lines))
    assert got == want
    want = _outcome(lambda: [from_builtins(raw, line=i + 1) for i, raw in enumerate(raws)])
    assert _outcome(lambda: columnar.from_builtins_batch(raws)) == want
    if want[0] == "ok":
        _same_tables(columnar.from_builtins_batch(raws), want[1])


def _python_batch(raws: list[dict[str, Any]]) -> list:
    """Records as a Python caller holds them: built from valid values, then given the broken
    ones the way a constructor would (constructors do not check types)."""
    out = []
    for raw in raws:
        cls = BY_NAME.get(raw.get("type"))
        try:
            out.append(from_builtins(raw))
            continue
        except RecordError:
            pass
        if cls is None:
            continue
        template = next((from_builtins(r) for r in raws if r.get("type") == raw["type"] and _valid(r)), None)
        if template is None:
            continue
        for k, v in raw.items():
            if k in cls.__struct_fields__:
                force_setattr(template, k, v)
        out.append(template)
    return out


def _valid(raw: dict[str, Any]) -> bool:
    try:
        from_builtins(raw)
    except RecordError:
        return False
    return True


@settings(max_examples=examples(300))
@given(raws=broken())
def test_broken_python_records_give_the_reference_error(raws):
    batch = _python_batch(raws)
    if not batch:
        return
    want = _outcome(lambda: normalize_batch(batch))
    assert _outcome(lambda: columnar.from_python(batch)) == want
    if want[0] == "ok":
        _same_tables(columnar.from_python(batch), want[1])


# -- the rules the columnar checks port, one by one ------------------------------------------------


def _line(**fields: Any) -> bytes:
    return msgspec.json.encode({"type": "PartitionChange", "partition_id": 0, "topic_id": TOPIC, **fields})


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"topic_id": "A" * 22}, "topic_id", "reserved id"),
        ({"topic_id": "AAAAAAAAAAAAAAAAAAAAAB"}, "topic_id", "is not a Kafka uuid"),
        ({"isr": [1, 2, 1]}, "isr", "lists a broker twice"),
        ({"replicas": [3, 3]}, "replicas", "lists a broker twice"),
        (
            {"replicas": [1, 2], "assignment": [{"broker": 1, "directory": DIR_A}]},
            "assignment",
            "has 1 entries but `replicas` has 2",
        ),
        (
            {"replicas": [1, 2], "assignment": [{"broker": 2, "directory": DIR_A}, {"broker": 1, "directory": DIR_A}]},
            "assignment",
            "entry 0 is broker 2 but replicas[0] is 1",
        ),
        ({"assignment": [{"broker": 1, "directory": "B" * 22}]}, "assignment[0].directory", "is not a Kafka uuid"),
        ({"version": 3}, "version", "versions 0..2, got 3"),
    ],
)
def test_each_ported_rule_rejects_with_the_reference_words(fields, field, words):
    lines = [_line(leader=1), _line(**fields)]
    with pytest.raises(RecordError) as exc:
        columnar.from_lines(lines)
    assert (exc.value.line, exc.value.record_type, exc.value.field) == (2, "PartitionChange", field)
    assert words in exc.value.message


def test_reserved_directories_are_fine_in_an_assignment():
    lines = [_line(replicas=[1], assignment=[{"broker": 1, "directory": MIGRATING}])]
    (record,) = columnar.from_lines(lines)
    assert record.assignment == (ReplicaDirectory(broker=1, directory=MIGRATING),)


def test_an_old_version_is_upcast_as_the_reference_does():
    old = Partition(version=0, partition_id=0, topic_id=TOPIC, replicas=(3, 1), isr=(3,), leader=3)
    (record,) = columnar.from_python([old])
    assert record.version == 0 and [a.directory for a in record.assignment] == [MIGRATING, MIGRATING]
    assert columnar.from_python([old]) == normalize_batch([old])


def test_python_record_with_a_bad_type_names_index_and_field():
    good = PartitionChange(partition_id=0, topic_id=TOPIC, leader=1)
    bad = PartitionChange(partition_id=0, topic_id=TOPIC, isr=(1, -3))  # constructors skip ranges
    with pytest.raises(RecordError) as exc:
        columnar.from_python([good, bad])
    assert (exc.value.line, exc.value.record_type, exc.value.field) == (2, "PartitionChange", "isr[1]")


def test_the_checked_batch_carries_its_columns_into_the_table():
    batch = columnar.from_lines([_line(leader=1), b'{"type":"NoOp"}', _line(isr=[1, 2])])
    assert batch.columns is not None
    table = columnar.to_table(batch, first_offset=10, ts_ms=1)
    assert table.column("type").to_pylist() == ["PartitionChange", "NoOp", "PartitionChange"]
    assert table.column("key").to_pylist() == [f"partition/{TOPIC}/0", "cluster", f"partition/{TOPIC}/0"]
    assert table.column("partition_change").to_pylist()[1] is None
    assert table.equals(arrow.to_table(list(batch), first_offset=10, ts_ms=1))


@settings(max_examples=examples(50))
@given(batch=batches(max_size=20), first=st.integers(0, 2**40))
def test_the_record_column_is_each_record_encoded_as_stored(batch, first):
    column = arrow.record_column(batch, first_offset=first, ts_ms=5)
    stored = [
        msgspec.structs.replace(
            r,
            offset=first + i,
            ts_ms=5 if r.ts_ms is None else r.ts_ms,
            source_offset=r.offset if r.source_offset is None else r.source_offset,
        )
        for i, r in enumerate(batch)
    ]
    assert column.type == pa.binary()
    assert column.to_pylist() == [msgspec.msgpack.encode(r) for r in stored]


# -- JSON Lines as kraftlake writes them, and otherwise (columnar._decode_lines) -------------------


@st.composite
def written_lines(draw: st.DrawFn) -> list[bytes]:
    """A batch's JSON lines, each as kraftlake writes it (``encode_line``), or respaced, with
    its keys in another order, a key repeated (at the top or in a nested object), or cut across
    two lines; a blank line here and there."""
    out: list[bytes] = []
    for record in draw(batches(max_size=8)):
        line = codec.encode_line(record)
        how = draw(st.sampled_from(("as written", "as written", "spaced", "reordered", "repeat", "nested", "cut")))
        raw = msgspec.json.decode(line)
        if how == "spaced":
            line = json.dumps(raw).encode()
        elif how == "reordered":
            line = msgspec.json.encode(dict(reversed(raw.items())))
        elif how == "repeat":
            key = draw(st.sampled_from(sorted(raw)))
            line = (
                b'{"'
                + key.encode()
                + b'":'
                + msgspec.json.encode(draw(st.sampled_from((0, None, "NoOp"))))
                + b","
                + line[1:]
            )
        elif how == "nested" and b'{"broker":' in line:
            line = line.replace(b'{"broker":', b'{"broker":0,"broker":', 1)
        elif how == "cut" and out:
            both = out.pop() + b"," + line
            commas = [i for i, c in enumerate(both) if c == ord(",")]
            at = draw(st.sampled_from(commas))  # joined with commas again, the pieces are valid JSON
            out += [both[:at], both[at + 1 :]]
            continue
        if draw(st.integers(0, 9)) == 0:
            out.append(b"  ")
        out.append(line)
    return out


@settings(max_examples=examples(300))
@given(lines=written_lines())
def test_json_lines_in_any_form_give_the_reference_records_or_error(lines):
    want = _outcome(lambda: iter_lines(lines))
    assert _outcome(lambda: columnar.from_lines(lines)) == want
    if want[0] == "ok":
        assert columnar.from_lines(lines).columns is not None
        _same_tables(columnar.from_lines(lines), want[1])


@pytest.mark.parametrize(
    ("second", "field"),
    [
        (
            b'{"type":"NoOp","type":"NoOp","version":0,"offset":null,"ts_ms":null,"source":null,"source_offset":null}',
            "type",
        ),
        (
            _line(replicas=[1], assignment=[{"broker": 1, "directory": DIR_A}]).replace(
                b'{"broker"', b'{"broker":1,"broker"'
            ),
            "broker",
        ),
    ],
)
def test_a_repeated_key_is_refused_among_lines_as_kraftlake_writes_them(second, field):
    first = codec.encode_line(PartitionChange(partition_id=0, topic_id=TOPIC, leader=1))
    with pytest.raises(RecordError) as exc:
        columnar.from_lines([first, second, first])
    assert (exc.value.line, exc.value.field) == (2, field)
    assert "duplicate key" in exc.value.message


def test_a_record_cut_across_lines_or_two_on_one_line_is_refused():
    a, b = (codec.encode_line(PartitionChange(partition_id=i, topic_id=TOPIC, leader=1)) for i in (0, 1))
    both = a + b"," + b
    cut = both.index(b',"leader"', len(a))  # joined with a comma, the two pieces are two records
    for lines in ([both[:cut], both[cut + 1 :]], [a + b"," + b]):
        with pytest.raises(RecordError) as exc:
            columnar.from_lines(lines)
        assert exc.value.line == 1 and "not JSON" in exc.value.message


def test_an_empty_batch_is_an_empty_table():
    assert columnar.from_lines([b"", b"  "]) == []
    assert columnar.to_table([], first_offset=0, ts_ms=1).equals(arrow.to_table([], first_offset=0, ts_ms=1))


# -- Arrow input (records.arrow_input) -------------------------------------------------------------


def _row_reference(table: pa.Table) -> list:
    """The per-record path for Arrow rows: each row's object through ``from_builtins``, its
    error naming the row."""
    out = []
    for i, raw in enumerate(arrow_input.rows(table)):
        try:
            out.append(from_builtins(raw, line=i + 1))
        except RecordError as exc:
            raise RecordError(
                exc.message, line=exc.line, record_type=exc.record_type, field=exc.field, unit="row"
            ) from None
    return out


def _outcome_rows(table: pa.Table, fn: Any) -> tuple[Any, ...]:
    try:
        return _outcome(fn)
    except RecordError as exc:  # rows() itself refused the table
        return ("error", str(exc), exc.to_dict())


@contextmanager
def _arrow_path(columns: bool) -> Iterator[None]:
    """``arrow_input``'s column path (``columns``) or its row path, whatever the batch's size."""
    was = arrow_input.COLUMNS_FROM
    arrow_input.COLUMNS_FROM = 0 if columns else 2**62
    try:
        yield
    finally:
        arrow_input.COLUMNS_FROM = was


@settings(max_examples=examples(150))
@given(
    batch=batches(max_size=30),
    first=st.sampled_from((0, 127, 2**31, 2**40)),
    drop=st.sets(st.sampled_from(("offset", "ts_ms", "version", "source", "source_offset", "key", "record"))),
    columns=st.booleans(),
)
def test_arrow_rows_give_the_reference_records_and_table(batch, first, drop, columns):
    table = arrow.to_table(batch, first_offset=first, ts_ms=5).drop_columns(sorted(drop))
    want = _outcome(lambda: _row_reference(table))
    with _arrow_path(columns):
        assert _outcome(lambda: arrow_input.from_arrow(table)) == want
        # A row without its version is read at the current one, which a record produced at an
        # older version may not fit (a field that version removed); with it, every row is valid.
        assert want[0] == "ok" or "version" in drop
        if want[0] == "ok":
            got = arrow_input.from_arrow(table)
            _same_tables(got, want[1])
            if not drop:  # the log's own rows: the records they hold
                assert got == arrow.from_table(table)
                columnar_types = all(
                    not packed_fields(type(r))
                    and type_name(type(r)) not in SHAPES
                    and r.version == current_version(type(r))
                    for r in batch
                )
                # ...read without a Python object per row (records.msgpack_columns), where it can
                assert isinstance(got.columns, columnar.ArrowColumns) == (columns and columnar_types)
            assert arrow_input.from_arrow(table.combine_chunks().to_batches()[0]) == want[1]  # a RecordBatch too


@st.composite
def broken_tables(draw: st.DrawFn) -> pa.Table:
    """A table of rows made from a broken batch (``broken``): each record's fields in its type's
    struct column, whatever type Arrow infers for the values it can hold."""
    raws = draw(broken())
    names = sorted({n for raw in raws for n in raw if n != "type"} & set(arrow.ENVELOPE_SCHEMA.names))
    columns: dict[str, list[Any]] = {"type": [raw.get("type") for raw in raws]}
    columns |= {n: [raw.get(n) for raw in raws] for n in names}
    for raw in raws:
        cls = BY_NAME.get(raw.get("type"))
        if cls is None or not arrow.payload_type(cls):
            continue
        col = arrow.column_name(cls)
        if col not in columns:
            columns[col] = [None] * len(raws)
    for i, raw in enumerate(raws):
        cls = BY_NAME.get(raw.get("type"))
        if cls is not None and arrow.column_name(cls) in columns:
            columns[arrow.column_name(cls)][i] = {k: v for k, v in raw.items() if k not in arrow.ENVELOPE_SCHEMA.names}
    try:
        return pa.table({k: pa.array(v) for k, v in columns.items()})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return draw(st.nothing())  # values Arrow cannot hold in one column


@settings(max_examples=examples(300))
@given(table=broken_tables(), columns=st.booleans())
def test_broken_arrow_rows_give_the_reference_error(table, columns):
    want = _outcome_rows(table, lambda: _row_reference(table))
    with _arrow_path(columns):
        assert _outcome_rows(table, lambda: arrow_input.from_arrow(table)) == want
        if want[0] == "ok":
            _same_tables(arrow_input.from_arrow(table), want[1])


def _pc_table(**changes: Any) -> pa.Table:
    rows = [{"partition_id": i, "topic_id": TOPIC, "leader": 1, "isr": [1, 2]} for i in range(4)]
    for at, fields in changes.items():
        rows[int(at.removeprefix("row"))] |= fields
    return pa.table({"type": ["PartitionChange"] * 4, "partition_change": pa.array(rows)})


@pytest.mark.parametrize(
    ("table", "where", "field", "words"),
    [
        (_pc_table(row2={"isr": [1, 1]}), 3, "isr", "lists a broker twice"),
        (_pc_table(row1={"topic_id": "A" * 22}), 2, "topic_id", "reserved id"),
        (_pc_table(row3={"leader": -7}), 4, "leader", ">= -2"),
        (pa.table({"type": ["NoOp", "PartitionChange"], "partition_change": pa.array([None, {"x": 1}])}), 2, "x", ""),
        (pa.table({"type": ["NoOp"], "partition_change": pa.array([{"partition_id": 1}])}), 1, "partition_change", ""),
        (pa.table({"type": ["NoOp"], "colour": [1]}), None, "colour", "no record type has a column"),
        (pa.table({"version": [1]}), None, "type", "needs a `type` column"),
        (pa.table({"type": ["NoSuchRecord"]}), 1, None, "unknown record type"),
    ],
)
@pytest.mark.parametrize("columns", [True, False], ids=["column path", "row path"])
def test_bad_arrow_rows_are_refused_naming_row_and_field(table, where, field, words, columns):
    with _arrow_path(columns), pytest.raises(RecordError) as exc:
        arrow_input.from_arrow(table)
    assert (exc.value.line, exc.value.field) == (where, field)
    assert words in exc.value.message
    if where is not None:
        assert str(exc.value).startswith(f"row {where}: ")


def test_a_log_appends_arrow_rows_as_it_appends_their_records(tmp_path):
    from kraftlake.records import Log

    batch = [PartitionChange(partition_id=i, topic_id=TOPIC, leader=1, isr=(1, 2)) for i in range(50)]
    table = arrow.to_table(batch, first_offset=7, ts_ms=1_700_000_000_000)
    by_rows, by_records = Log.create(tmp_path / "a"), Log.create(tmp_path / "b")
    got = by_rows.append(table, producer="p", seq=1)
    assert got == by_records.append(arrow.from_table(table), producer="p", seq=1)
    assert by_rows.read() == by_records.read()
    assert by_rows.read()[0].source_offset == 7  # rows with offsets keep them as source_offset
    assert by_rows.append(table, producer="p", seq=1).duplicate
    bad = _pc_table(row1={"isr": [3, 3]})
    with pytest.raises(RecordError, match="row 2: PartitionChange.isr"):
        by_rows.append(bad)
    assert by_rows.last_offset == 49  # nothing of the refused batch landed


# -- records sent as msgpack items (the service's measured requests) ----------------------------


@settings(max_examples=examples(300))
@given(raws=broken())
def test_msgpack_items_give_the_reference_records_or_leave_it_to_the_reference(raws):
    """``from_msgpack_items`` decodes each record's msgpack typed, in one call: it gives the
    records and table ``from_builtins_batch`` gives for the decoded objects, or None (then the
    caller takes that path, whose error names the record)."""
    try:
        items = [msgspec.msgpack.encode(raw) for raw in raws]
    except OverflowError:  # an integer msgpack cannot hold: the body never decodes
        return
    want = _outcome(lambda: columnar.from_builtins_batch([msgspec.msgpack.decode(i) for i in items]))
    got = columnar.from_msgpack_items([msgspec.Raw(i) for i in items])
    if got is None:
        return
    assert want[0] == "ok", want
    assert list(got) == want[1]
    _same_tables(got, want[1])


def test_a_repeated_key_in_a_msgpack_item_is_taken_as_a_dict_takes_it():
    pairs = [("type", "PartitionChange"), ("partition_id", 1), ("topic_id", TOPIC), ("leader", 1), ("leader", 5)]
    item = bytes([0x80 | len(pairs)]) + b"".join(
        msgspec.msgpack.encode(k) + msgspec.msgpack.encode(v) for k, v in pairs
    )
    got = columnar.from_msgpack_items([item])
    assert got is not None and got == columnar.from_builtins_batch([msgspec.msgpack.decode(item)])
    assert got[0].leader == 5


@settings(max_examples=examples(100))
@given(batch=batches(max_size=20))
def test_valid_msgpack_items_are_decoded_in_one_call(batch):
    raws = [_builtins(r) for r in batch]
    items = [msgspec.Raw(msgspec.msgpack.encode(raw)) for raw in raws]
    got = columnar.from_msgpack_items(items)
    want = columnar.from_builtins_batch(raws)
    if got is None:  # only where the typed decode refuses the JSON form (packed fields, bytes as base64)
        with pytest.raises(msgspec.ValidationError):
            msgspec.msgpack.decode(msgspec.msgpack.encode(raws), type=list[AnyRecord])
        return
    assert list(got) == list(want)
    _same_tables(got, want)


@settings(max_examples=examples(100))
@given(batch=batches(max_size=30), versions=st.lists(st.integers(0, 2), min_size=1, max_size=30))
def test_type_and_version_columns_by_group_equal_the_reference(batch, versions):
    """``type`` and ``version`` are taken from each row's group (one version per group) or, where
    a group holds several versions, joined and put in row order: both as ``arrow.to_table``."""
    changes = [PartitionChange(topic_id=TOPIC, partition_id=i, version=v) for i, v in enumerate(versions)]
    batch = [r for pair in zip(batch, changes) for r in pair] + batch[len(changes) :] + changes[len(batch) :]
    table = columnar.to_table(batch, first_offset=3, ts_ms=5)
    assert table.column("type").to_pylist() == [type_name(type(r)) for r in batch]
    assert table.column("version").to_pylist() == [r.version for r in batch]
    assert table.equals(arrow.to_table(batch, first_offset=3, ts_ms=5))


_UUID_CHECKED = [
    (cls, name) for cls in sorted(columnar._CHECKS, key=type_name) for name, _ in columnar.uuid_fields(cls)
]
"""Every uuid field of a type whose rules are ported: its form is checked by ``_vouch``'s uuid
pass, its reserved ids by the ported rule."""


@settings(max_examples=examples(200))
@given(data=st.data(), at=st.sampled_from(_UUID_CHECKED), bad=st.sampled_from(BAD_UUIDS + ("AAAAAAAAAAAAAAAAAAAAAB",)))
def test_a_bad_uuid_in_a_ported_type_is_refused_as_the_reference_refuses_it(data, at, bad):
    cls, name = at
    record = data.draw(records_of(cls))
    value = getattr(record, name)
    # Nested Structs (the same uuid pass, covered by the assignment rules) and unset fields
    # are not this test's: hypothesis draws again.
    assume(isinstance(value, str) or (isinstance(value, tuple) and value and isinstance(value[0], str)))
    value = (*value[:-1], bad) if isinstance(value, tuple) else bad
    broken = msgspec.structs.replace(record)
    force_setattr(broken, name, value)  # past the record's own checks, as a caller could
    batch = [normalize_batch([record])[0], broken]
    assert _outcome(lambda: columnar.from_python(batch)) == _outcome(lambda: normalize_batch(batch))
    lines = [msgspec.json.encode(json_form(r)) for r in batch]
    assert _outcome(lambda: columnar.from_lines(lines)) == _outcome(lambda: iter_lines(lines))
