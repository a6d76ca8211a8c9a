"""Spark runs the plan's one SQL text and agrees: the smoke tier.

The plan is proven equal to the per-record engine on DuckDB, for every fixture, bug and property
(``test_plan*.py``). Spark runs the same statements; what it needs proving is that it runs them
all and agrees on their answers. Three small logs do that (``SMOKE``): together they run every
statement of the plan (``test_the_smoke_logs_run_every_statement_of_the_plan``, on DuckDB, in the
fast tier: a statement added to the plan and not run by them fails it), and on Spark each gives
the per-record engine's whole report (violations, counts, state hash, incidents, availability):

- ``elr``: a Kafka 4.1 history (KIP-966 on and off again mid-log, Kafka's ClearElr after each
  turn-off, a controller electing outside the ELR, every fault), through ``kraftlake spark-audit``
  as a user runs it, its exit code and JSON;
- ``jbod``: a JBOD history on metadata.version 3.7 with the operator's operations and a
  controller keeping offline replicas in the ISR, a refused change at the end, with the plan's
  tables kept in a named scratch directory that is empty again afterwards;
- ``foreign``: a table kraftlake would not write (an offset gap, a record without a time: L1 and
  the per-record incidents pass), with the tables kept in Spark's cache and released afterwards.

The standalone cluster and Spark Connect run once each (``test_spark_cluster.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import ClearElr, FeatureLevel, Log, Partition, PartitionChange, RemoveTopic, Topic, iter_lines
from kraftlake.records.arrow import from_table
from kraftlake.replay import report_json
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.replay.books import attach_incidents
from kraftlake.replay.incidents import find_incidents
from kraftlake.replay.plan import audit as plan_audit
from kraftlake.replay.plan import families
from kraftlake.replay.plan.duck import DuckEngine
from kraftlake.statemachine.kraft.features import ELIGIBLE_LEADER_REPLICAS, MV_4_1_IV1
from kraftlake.statemachine.kraft.workload import FAULTS, WorkloadConfig, generate

from helpers.kraft import uid, without_offsets
from helpers.plan_statements import Recording, statement_sites

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kraft" / "audit"
OPERATIONS = ("delete-topic", "create-partitions", "cancel-reassign", "elect-leaders")
GRACE = AuditConfig(grace_records=3)


def _generated(records: int, **config) -> list:
    cfg = WorkloadConfig(brokers=5, dirs_per_broker=2, topics=2, partitions=12, **config)
    return without_offsets([r for batch in generate(cfg, records=records) for r in batch])


def _elr() -> list:
    """Kafka 4.1 (ELR on), turned off at record 400 (ClearElr of every topic) and on at 800."""
    out = _generated(
        1000, seed=12, bug="elect-outside-elr", faults=FAULTS[:6], fence_policy=True, metadata_version=MV_4_1_IV1
    )
    for at, on in ((800, True), (400, False)):
        ts = out[at - 1].ts_ms
        added = [FeatureLevel(name=ELIGIBLE_LEADER_REPLICAS, feature_level=int(on), ts_ms=ts)]
        out[at:at] = added if on else [*added, ClearElr(topic_name="", ts_ms=ts)]
    return out


def _jbod() -> list:
    out = _generated(
        1000, seed=2, bug="keep-offline-replica-in-isr", faults=(*FAULTS[:3], *OPERATIONS), metadata_version=17
    )
    topic = next(r.topic_id for r in out if isinstance(r, PartitionChange))
    # A topic removed and created again under its id: two lives of one topic id, whose final
    # partitions the driver encodes itself for the state hash (the engine's images are one a life).
    first, again = next(r for r in out if isinstance(r, Partition)), uid("again")
    created = [
        Topic(name="again", topic_id=again),
        msgspec.structs.replace(first, topic_id=again, partition_id=0),
    ]
    return [
        *out,
        PartitionChange(topic_id=topic, partition_id=999, isr=(1,)),  # L3: refused
        *created,
        RemoveTopic(topic_id=again),
        *created,
    ]


def _foreign(tmp_path: Path) -> pa.Table:
    """The controlled-shutdown story as a table another writer made: offset 20 missing, the
    record at offset 57 without a time."""
    log = Log.create(tmp_path / "foreign-source")
    log.append(list(iter_lines((FIXTURES / "controlled-shutdown.jsonl").open("rb"))))
    table = log.at().table()
    table = table.filter(pc.not_equal(table["offset"], 20))
    untimed = pc.equal(table["offset"], 57)
    at = table.schema.get_field_index("ts_ms")
    return table.set_column(at, "ts_ms", pc.if_else(untimed, pa.scalar(None, pa.int64()), table["ts_ms"]))


def _log(tmp_path: Path, name: str, records: list) -> Log:
    log = Log.create(tmp_path / name)
    log.append(records)
    return log


def _python(records: list, config: AuditConfig = GRACE) -> dict:
    """The per-record engine's whole report (with incidents, as ``kraftlake audit --engine python``)."""
    audit = Audit(config)
    audit.feed(records)
    return _doc(attach_incidents(audit.report(), find_incidents(records)))


def _doc(report) -> dict:
    return {k: v for k, v in report_json.to_builtins(report).items() if k != "engine"}


def _table_records(table: pa.Table) -> list:
    return list(from_table(table.sort_by("offset")))


def test_the_smoke_logs_run_every_statement_of_the_plan(tmp_path):
    """The three logs the Spark tier runs, on DuckDB, run every engine call in the plan's source
    (``helpers.plan_statements``), and the plan gives the per-record report on each."""
    ran: set = set()
    foreign = _foreign(tmp_path)
    tables = [_log(tmp_path, "elr", _elr()).at().table(), _log(tmp_path, "jbod", _jbod()).at().table(), foreign]
    for table in tables:
        with DuckEngine(threads=1) as engine:
            engine.read(table, table["offset"].to_numpy().max())
            recording = Recording(engine)
            assert "kraft" in families(recording)
            report = plan_audit(recording, GRACE)
        ran |= recording.ran
        assert _doc(report) == _python(_table_records(table))
    sites = statement_sites()
    assert sorted(set(sites) - ran) == [], [sites[s] for s in sorted(set(sites) - ran)]


def test_spark_audit_cli_gives_the_python_report_and_exit_code(spark, tmp_path):
    log = _log(tmp_path, "elr", _elr())
    runner = CliRunner()
    args = ["--format", "json", "--grace-records", "3"]
    local = runner.invoke(app, ["audit", str(log.path), "--engine", "python", *args])
    remote = runner.invoke(app, ["spark-audit", str(log.path), *args])
    assert (local.exit_code, remote.exit_code) == (1, 1), remote.output
    assert remote.exception is None or isinstance(remote.exception, SystemExit), repr(remote.exception)
    python, spark_ = json.loads(local.stdout), json.loads(remote.stdout)
    assert spark_["engine"].startswith("spark: ") and python["engine"] == "python"
    assert {k: v for k, v in spark_.items() if k != "engine"} == {k: v for k, v in python.items() if k != "engine"}
    assert "K14" in {v["invariant"] for v in python["violations"]} and python["incidents"]


def test_the_plan_on_spark_with_its_tables_in_a_scratch_directory(spark, tmp_path):
    from kraftlake.spark import read_log
    from kraftlake.spark.audit import audit

    log = _log(tmp_path, "jbod", _jbod())
    kept = tmp_path / "scratch"
    kept.mkdir()
    report = audit(spark, read_log(spark, log.path), GRACE, scratch=str(kept))
    expected = _python(log.at().records())
    assert _doc(report) == expected
    refused = next(r.offset for r in log.at().records() if isinstance(r, PartitionChange) and r.partition_id == 999)
    assert ("L3", refused) in [(v["invariant"], v["first_offset"]) for v in expected["violations"]]
    assert {"K5", "K3"} & {v["invariant"] for v in expected["violations"]}
    assert list(kept.iterdir()) == []


def test_the_plan_on_spark_with_its_tables_in_sparks_cache(spark, tmp_path, monkeypatch):
    """A cluster without a checkpoint directory keeps the plan's tables in Spark's cache, and
    releases them; a table another writer made (a gap, a record without a time) is read as is."""
    import kraftlake.spark.scratch as scratch
    from kraftlake.spark.engine import SparkEngine

    table = _foreign(tmp_path)
    monkeypatch.setattr(scratch, "_default_directory", lambda spark: None)
    persisted = len(spark.sparkContext._jsc.getPersistentRDDs())
    with SparkEngine(spark) as engine:
        engine.read(spark.createDataFrame(table))
        report = plan_audit(engine, GRACE)
    assert len(spark.sparkContext._jsc.getPersistentRDDs()) == persisted
    expected = _python(_table_records(table))
    assert _doc(report) == expected
    assert "L1" in {v["invariant"] for v in expected["violations"]}
    assert expected["incidents"]


def test_spark_audit_refuses_a_version_and_a_timestamp_together(tmp_path):
    """Refused before a session starts (no JVM): exit 2."""
    log = _log(tmp_path, "log", _generated(50, seed=1))
    result = CliRunner().invoke(app, ["spark-audit", str(log.path), "--version", "0", "--timestamp", "2026-01-01"])
    assert result.exit_code == 2 and "at most one of --version, --timestamp" in result.output
