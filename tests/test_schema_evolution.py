"""Tables written by an older kraftlake (fewer record types, fewer fields) stay readable, and
appending to them adds the new columns without touching old rows."""

from __future__ import annotations

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from kraftlake.records import (
    RECORD_TYPES,
    Log,
    LogDirFailed,
    RegisterBroker,
    Topic,
)
from kraftlake.records.arrow import RECORD_COLUMN, log_schema, to_table
from kraftlake.records.store.log import OFFSET_TXN, TABLE_PROPERTIES
from kraftlake.records.store.log_checks import SCHEMA_TXN, schema_digest

TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
INC = "yHzNFVl5RoS2TvJfCqg0lw"


def _older_schema() -> pa.Schema:
    """Today's schema minus the LogDirFailed column, RegisterBroker.fenced/log_dirs and the
    ``record`` column."""
    schema = log_schema([t for t in RECORD_TYPES if t is not LogDirFailed])
    schema = schema.remove(schema.get_field_index(RECORD_COLUMN))
    i = schema.get_field_index("register_broker")
    rb = schema.field(i).type
    kept = pa.struct([f for f in rb if f.name not in ("fenced", "log_dirs")])
    return schema.set(i, pa.field("register_broker", kept))


def test_older_table_reads_and_evolves(tmp_path):
    path = str(tmp_path / "old")
    old = _older_schema()
    # Named as Log.create has named every log since its first version (records.log_checks).
    DeltaTable.create(path, schema=old, name="kraftlake", configuration=TABLE_PROPERTIES)
    rows = to_table(
        [RegisterBroker(broker_id=1, incarnation_id=INC, broker_epoch=7), Topic(name="t", topic_id=TOPIC)],
        first_offset=0,
        ts_ms=1,
        schema=old,
    )
    write_deltalake(
        path, rows, mode="append", commit_properties=CommitProperties(app_transactions=[Transaction(OFFSET_TXN, 1)])
    )

    log = Log.open(path)
    before = log.read()
    # Replay reads such a table too (no record column: the struct columns are decoded).
    assert [r for batch in log.at().iter_records() for r in batch] == before
    # a field the old table lacks comes back as its Kafka default, not as null
    assert before[0].fenced is True and before[0].log_dirs == ()
    assert before[1] == Topic(name="t", topic_id=TOPIC, offset=1, ts_ms=1)

    res = log.append(
        [
            LogDirFailed(broker_id=1, directory=INC),
            RegisterBroker(broker_id=2, incarnation_id=INC, broker_epoch=9, fenced=False, log_dirs=(TOPIC,)),
        ]
    )
    assert (res.first_offset, res.last_offset) == (2, 3)
    after = Log.open(path).read()
    assert after[:2] == before
    # Old rows (null record column) and new ones (with it), one replay.
    assert [r for batch in Log.open(path).at().iter_records() for r in batch] == after
    assert after[2].directory == INC
    assert after[3].fenced is False and after[3].log_dirs == (TOPIC,)
    names = pa.schema(DeltaTable(path).schema().to_arrow()).names
    assert "log_dir_failed" in names
    # The evolved schema's digest landed with it (records.log_checks.SCHEMA_TXN), as delta-rs
    # merged the struct column and added the new ones: readers check it.
    dt = DeltaTable(path)
    assert dt.transaction_version(SCHEMA_TXN) == schema_digest(dt.schema())
