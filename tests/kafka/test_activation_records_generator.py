"""Kafka's ``ActivationRecordsGeneratorTest`` (org.apache.kafka.controller), read at apache/kafka
tag 4.2.0-rc1 (6eef6636), case by case against the ``Activate`` decider
(``statemachine.kraft.activation``). Kafka's cases check the log message and the count of records;
kraftlake's decider logs nothing (it is pure), so each case checks the records themselves, which
say what the message does. Kafka's ``isAtomic`` (one batch, no transaction before 3.6-IV1) is a
decision appended whole here; a transaction's records are checked. ``transactionStartOffset``
0 is a view replayed from a BeginTransaction at offset 0 (a controller failed over mid-bootstrap).
All 5 methods of the class are here."""

from __future__ import annotations

from kraftlake.records.kraft import AbortTransaction, BeginTransaction, Config, EndTransaction, FeatureLevel
from kraftlake.statemachine.kraft import commands as c
from kraftlake.statemachine.kraft import reducer
from kraftlake.statemachine.kraft.decider import decide
from kraftlake.statemachine.kraft.view import ControllerView
from tests.helpers.kraft import strip

MINIMUM_VERSION, MV_3_4_IV0, MV_3_6_IV1, MV_4_0_IV1 = 7, 8, 13, 23


def mv(level: int) -> FeatureLevel:
    return FeatureLevel(name="metadata.version", feature_level=level)


def generate(level: int, *extra: FeatureLevel, partial: bool = False, default_min_isr: int = 2) -> list:
    """``recordsForEmptyLog`` with ``BootstrapMetadata.fromVersion(level)`` plus ``extra``; with
    ``partial``, a bootstrap transaction was begun at offset 0 and never ended."""
    view = ControllerView()
    if partial:
        reducer.replay([BeginTransaction(name="Bootstrap records", offset=0)], view)
    d = decide(view, c.Activate(bootstrap=(mv(level), *extra), default_min_insync_replicas=default_min_isr))
    assert d.reply.error_code == c.NONE, d.reply
    return strip(d.records)


def test_testActivationMessageForEmptyLog():
    assert generate(MINIMUM_VERSION) == [mv(MINIMUM_VERSION)]


def test_testActivationMessageForEmptyLogAtMv3_4():
    assert generate(MV_3_4_IV0) == [mv(MV_3_4_IV0)]


def test_testActivationMessageForEmptyLogAtMv3_6():
    assert generate(MV_3_6_IV1) == [BeginTransaction(name="Bootstrap records"), mv(MV_3_6_IV1), EndTransaction()]


def test_testActivationMessageForEmptyLogAtMv3_6WithTransaction():
    assert generate(MV_3_6_IV1, partial=True) == [
        AbortTransaction(reason="Controller failover"),
        BeginTransaction(name="Bootstrap records"),
        mv(MV_3_6_IV1),
        EndTransaction(),
    ]


def test_testActivationMessageForEmptyLogAtMv4_0WithTransactionAndElr():
    elr = FeatureLevel(name="eligible.leader.replicas.version", feature_level=1)
    records = generate(MV_4_0_IV1, elr, partial=True)
    assert len(records) == 6
    assert Config(resource_type=4, resource_name="", name="min.insync.replicas", value="2") in records
    assert records == [
        AbortTransaction(reason="Controller failover"),
        BeginTransaction(name="Bootstrap records"),
        mv(MV_4_0_IV1),
        elr,
        Config(resource_type=4, resource_name="", name="min.insync.replicas", value="2"),
        EndTransaction(),
    ]


def test_a_log_that_has_a_metadata_version_only_aborts_an_open_transaction():
    """``recordsForNonEmptyLog``: nothing on a log at rest; an Abort for a transaction left open
    (a failover in the middle of one), and no bootstrap records either way."""
    view = reducer.replay([mv(MV_3_6_IV1)])
    assert decide(view, c.Activate(bootstrap=(mv(MV_4_0_IV1),))).records == ()
    reducer.replay([BeginTransaction(name="reassign")], view)
    assert strip(decide(view, c.Activate(bootstrap=(mv(MV_4_0_IV1),))).records) == [
        AbortTransaction(reason="Controller failover")
    ]


def test_a_transaction_below_3_6_stops_the_activation():
    """A transaction at a level without them: Kafka raises (a fault that stops the controller);
    the decider writes nothing and answers UNKNOWN_SERVER_ERROR, naming the offset and level."""
    view = reducer.replay([BeginTransaction(name="Bootstrap records", offset=0)])
    d = decide(view, c.Activate(bootstrap=(mv(MV_3_4_IV0),)))
    assert (d.records, d.reply.error_code) == ((), c.UNKNOWN_SERVER_ERROR)
    assert d.reply.message == (
        "Detected partial bootstrap records transaction at offset 0, but the metadata.version 3.4-IV0"
        " does not support transactions. Cannot continue."
    )
