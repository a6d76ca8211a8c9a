"""The CLI as a user runs it: exit codes, JSON output, JSON Lines that re-append elsewhere, and bad
input that names line, type and field while leaving the table exactly as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, UnsupportedLocationError, decode_line

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
TOPIC = "MvDrH8r1Q_2n6tPo0bqGnQ"
DIR = "yHzNFVl5RoS2TvJfCqg0lw"
GOOD = '{"type":"Topic","name":"t","topic_id":"%s"}' % TOPIC

runner = CliRunner()


def run(*args: str, input: str | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input)


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "log"
    assert run("init", path).exit_code == 0
    return path


def test_init_append_log_history(log, tmp_path):
    res = run("append", log, FIXTURE)
    assert res.exit_code == 0, res.output
    n = len(FIXTURE.read_text().splitlines())
    assert json.loads(res.stdout) == {"first_offset": 0, "last_offset": n - 1, "version": 1, "duplicate": False}

    res = run("log", log)
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert len(lines) == n
    assert [decode_line(line).offset for line in lines] == list(range(n))

    res = run("history", log, "--json")
    commits = [json.loads(line) for line in res.stdout.splitlines()]
    assert [c["operation"] for c in commits] == ["append", "init"]
    assert (commits[0]["first_offset"], commits[0]["last_offset"], commits[0]["records"]) == (0, n - 1, n)
    assert "append" in run("history", log).stdout


def test_log_output_appends_to_another_log_as_is(log, tmp_path):
    run("append", log, FIXTURE)
    run("append", log, "-", input=GOOD + "\n")
    exported = run("log", log, "--from", "20").stdout
    other = tmp_path / "other"
    run("init", other)
    run("append", other, "-", input=GOOD + "\n")
    res = run("append", other, "-", input=exported)
    assert res.exit_code == 0, res.output
    copied = Log.open(other).read()
    originals = Log.open(log).read(from_offset=20)
    assert [r.offset for r in copied[1:]] == list(range(1, 1 + len(originals)))
    assert [r.source_offset for r in copied[1:]] == [r.offset for r in originals]
    assert [(type(r), r.ts_ms) for r in copied[1:]] == [(type(r), r.ts_ms) for r in originals]


def test_filters_and_table_format(log):
    run("append", log, FIXTURE)
    res = run("log", log, "--type", "LogDirFailed", "--type", "HeartbeatOfflineDirs")
    types = [json.loads(line)["type"] for line in res.stdout.splitlines()]
    assert types == ["LogDirFailed", "HeartbeatOfflineDirs"]
    res = run("log", log, "--from", "3", "--to", "4")
    assert [json.loads(line)["offset"] for line in res.stdout.splitlines()] == [3, 4]
    res = run("log", log, "--format", "table", "--to", "8")
    assert res.exit_code == 0
    assert "RegisterBroker" in res.stdout and "partition/" in res.stdout


def test_log_as_of_version(log):
    run("append", log, "-", input=GOOD + "\n")
    run("append", log, FIXTURE)
    assert len(run("log", log, "--version", "1").stdout.splitlines()) == 1
    assert len(run("log", log, "--version", "0").stdout.splitlines()) == 0
    res = run("log", log, "--version", "9")
    assert res.exit_code == 2 and "versions 0..2" in res.stderr


def test_exactly_once_from_the_cli(log):
    first = json.loads(run("append", log, "--producer", "svc", "--seq", "0", input=GOOD).stdout)
    again = json.loads(run("append", log, "--producer", "svc", "--seq", "0", input=GOOD).stdout)
    assert again == {**first, "duplicate": True}
    assert len(Log.open(log).read()) == 1
    res = run("append", log, "--producer", "svc", input=GOOD)
    assert res.exit_code == 2 and "go together" in res.stderr


def test_maintain_keeps_records(log):
    for _ in range(5):
        run("append", log, "-", input=GOOD + "\n")
    before = Log.open(log).read()
    res = run("maintain", log)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["files_before"] == 5 and report["files_after"] == 1
    assert Log.open(log).read() == before


def test_init_twice_and_missing_log(tmp_path, log):
    res = run("init", log)
    assert res.exit_code == 2 and "already holds a Delta table" in res.stderr
    res = run("log", tmp_path / "nope")
    assert res.exit_code == 2 and "no kraftlake log" in res.stderr


def test_every_command_has_help():
    for cmd in ("init", "append", "log", "history", "maintain"):
        res = run(cmd, "--help")
        assert res.exit_code == 0 and "Usage" in res.stdout
    assert "append" in run("--help").stdout


T = TOPIC
BAD_LINES = {
    "unknown type": ('{"type":"PartitionMove","topic_id":"%s"}' % T, "PartitionMove", None, "unknown record type"),
    "unknown field": (
        '{"type":"Topic","name":"t","topic_id":"%s","owner":"me"}' % T,
        "Topic",
        "owner",
        "unknown field",
    ),
    "missing field": ('{"type":"Topic","name":"t"}', "Topic", "topic_id", "required field is missing"),
    "wrong type": (
        '{"type":"PartitionChange","partition_id":0,"topic_id":"%s","leader":"2"}' % T,
        "PartitionChange",
        "leader",
        "Expected `int`, got `str`",
    ),
    "reserved id": (
        '{"type":"Topic","name":"t","topic_id":"AAAAAAAAAAAAAAAAAAAAAQ"}',
        "Topic",
        "topic_id",
        "reserved id",
    ),
    "assignment length": (
        '{"type":"PartitionChange","partition_id":0,"topic_id":"%s","replicas":[1,2],'
        '"assignment":[{"broker":1,"directory":"%s"}]}' % (T, DIR),
        "PartitionChange",
        "assignment",
        "has 1 entries but `replicas` has 2",
    ),
    "negative broker": (
        '{"type":"UnregisterBroker","broker_id":-1,"broker_epoch":3}',
        "UnregisterBroker",
        "broker_id",
        ">= 0",
    ),
    "negative replica": (
        '{"type":"PartitionChange","partition_id":0,"topic_id":"%s","isr":[1,-4]}' % T,
        "PartitionChange",
        "isr[1]",
        ">= 0",
    ),
    "malformed uuid": (
        '{"type":"Topic","name":"t","topic_id":"not-a-uuid"}',
        "Topic",
        "topic_id",
        "is not a Kafka uuid",
    ),
    "uuid with a bad character": (
        '{"type":"Topic","name":"t","topic_id":"YW6soxYeId5Lgf56lnEg3!"}',
        "Topic",
        "topic_id",
        "is not a Kafka uuid",
    ),
    "nested uuid": (
        '{"type":"PartitionChange","partition_id":0,"topic_id":"%s","replicas":[1],"assignment":[{"broker":1,"directory":"YW6soxYeId5Lgf56lnEg3!"}]}'
        % T,
        "PartitionChange",
        "assignment[0].directory",
        "is not a Kafka uuid",
    ),
    "not JSON": ('{"type": "Topic", name: t}', None, None, "not JSON"),
    "not an object": ("[1, 2]", None, None, "expected a JSON object"),
}


@pytest.mark.parametrize("case", BAD_LINES, ids=list(BAD_LINES))
def test_bad_input_names_line_type_field_and_changes_nothing(log, case):
    line, rtype, field, message = BAD_LINES[case]
    run("append", log, "-", input=GOOD + "\n")
    before = Log.open(log)
    version, rows = before.version, before.read()
    res = run("append", log, "-", input=f"{GOOD}\n\n{line}\n{GOOD}\n")
    assert res.exit_code == 2, res.output
    assert "line 3" in res.stderr
    if rtype:
        assert rtype in res.stderr
    if field:
        assert f".{field}:" in res.stderr
    assert message in res.stderr
    after = Log.open(log)
    assert after.version == version
    assert after.read() == rows


def test_empty_input_is_unusable(log):
    res = run("append", log, "-", input="\n")
    assert res.exit_code == 2 and "no records" in res.stderr


# -- conventions a user expects -------------------------------------------------------------------


def test_version_from_the_script_and_from_python_m():
    from importlib.metadata import version

    import kraftlake

    expected = f"kraftlake {kraftlake.__version__}"
    assert kraftlake.__version__ == version("kraftlake")  # the installed metadata reads the same
    res = run("--version")
    assert res.exit_code == 0 and res.stdout.strip() == expected
    done = subprocess.run(
        [sys.executable, "-m", "kraftlake", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, expected)


@pytest.mark.parametrize("uri", ["hdfs://nn/x", "ftp://host/x", "file://otherhost/x"])
def test_a_location_kraftlake_cannot_use_is_refused_and_nothing_is_created(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["init", uri], ["log", uri], ["audit", uri], ["append", uri, str(FIXTURE)]):
        res = run(*command)
        assert res.exit_code == 2, (command, res.output)
        assert uri in res.stderr and "local path" in res.stderr
    assert list(tmp_path.iterdir()) == []  # no ./s3:/bucket/x made on the way
    with pytest.raises(UnsupportedLocationError, match="is not one of them|must name a local path"):
        Log.create(uri)


def test_a_file_uri_is_a_local_path(tmp_path):
    res = run("init", (tmp_path / "my log").as_uri())  # file:///…/my%20log
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["log"] == str(tmp_path / "my log")
    assert run("append", f"file://{tmp_path}/my%20log", FIXTURE).exit_code == 0
    assert Log.open(tmp_path / "my log").last_offset == len(FIXTURE.read_text().splitlines()) - 1


LIBRARY_USE = """
import kraftlake
from kraftlake.logging import get_logger
from kraftlake.records import Topic

lake = kraftlake.init({path!r})
lake.append([Topic(name="t", topic_id={topic!r})], producer="p", seq=0)
lake.append([Topic(name="t", topic_id={topic!r})], producer="p", seq=0)  # a retry: logged, deduplicated
kraftlake.state_at(lake)
get_logger("kraftlake.test").warning("library.warning", n=1)
"""


def test_as_a_library_kraftlake_writes_nothing_to_stdout(tmp_path):
    """Imported and used without configuring structlog (whose default prints to stdout), kraftlake
    leaves stdout to its host program; its warnings go to stderr."""
    code = LIBRARY_USE.format(path=str(tmp_path / "log"), topic=TOPIC)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "library.warning" in done.stderr and "log.created" not in done.stderr  # info stays quiet
    assert Log.open(tmp_path / "log").last_offset == 0
