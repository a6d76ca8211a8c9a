"""The log on an object store: every command and API on ``s3://`` against moto's S3 server (a real
HTTP S3 endpoint in a process of its own, tests/helpers/object_store.py), with credentials from the
environment or from ``--storage-option``/``storage_options``; errors that name the URI and the cause
and change nothing; the commit file put-if-absent; snapshots beside the log; the same audit report
as on local disk. The concurrency, exactly-once and kill -9 tests run on S3 too (``table_uri``)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import msgspec
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from typer.testing import CliRunner

import kraftlake
from kraftlake.cli.app import app
from kraftlake.records import Log, StorageError, iter_lines
from kraftlake.records.errors import UnsupportedLocationError
from kraftlake.records.store.location import S3_COMMIT_VARIABLE, resolve
from kraftlake.replay import report_json

from helpers.object_store import REGION, Bucket, MotoServer, race_conditional_puts

# Every test here talks to a moto S3 server in another process: make test's, not test-fast's.
pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def records():
    return list(iter_lines(FIXTURE.read_text().splitlines()))


@pytest.fixture
def no_aws_env(monkeypatch):
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)


def test_every_command_works_on_s3_with_storage_options_alone(moto_server, tmp_path, monkeypatch, no_aws_env):
    from helpers.object_store import Bucket

    bucket = Bucket.new(moto_server)
    uri = bucket.uri("logs/cluster-a")
    opts = [x for k, v in bucket.options.items() for x in ("--storage-option", f"{k}={v}")]
    monkeypatch.chdir(tmp_path)

    res = run("init", uri, *opts)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {"log": uri, "version": 0}
    assert list(tmp_path.iterdir()) == [], "init s3://… must not create a local folder"
    assert run("append", uri, FIXTURE, "--producer", "p", "--seq", "0", *opts).exit_code == 0
    again = run("append", uri, FIXTURE, "--producer", "p", "--seq", "0", *opts)
    assert again.exit_code == 0 and '"duplicate": true' in again.stdout.replace("\n", " ").replace("  ", " ")
    n = len(FIXTURE.read_text().splitlines())

    shown = run("log", uri, "--format", "jsonl", *opts)
    assert shown.exit_code == 0, shown.output
    assert len(shown.stdout.splitlines()) == n
    assert run("history", uri, *opts).exit_code == 0
    assert run("view", uri, "--format", "json", *opts).exit_code == 0
    assert run("snapshot", uri, "--every", "5", *opts).exit_code == 0, "snapshots"
    assert any(k.startswith("logs/cluster-a/_kraftlake_snapshots/_delta_log/") for k in bucket.keys())
    assert run("audit", uri, *opts).exit_code in (0, 1)
    assert run("broker", uri, "--broker", "1", *opts).exit_code in (0, 2)
    assert run("maintain", uri, "--retention-hours", "0", *opts).exit_code == 0
    assert list(tmp_path.iterdir()) == []
    # Without the options (and no AWS_* variables) the store cannot be reached: an error, not a folder.
    res = run("log", uri)
    assert res.exit_code != 0 and uri in res.stderr
    assert Log.open(uri, storage_options=bucket.options).last_offset == n - 1


def test_python_api_on_s3_reads_what_local_disk_reads(s3_bucket, tmp_path):
    uri = s3_bucket.uri("lake")
    local = tmp_path / "lake"
    for where in (uri, local):
        lake = kraftlake.init(where, storage_options=s3_bucket.options if where == uri else None)
        appender = kraftlake.Appender(lake.path, "prod", storage_options=s3_bucket.options if where == uri else None)
        appender.append(records()[:15])
        appender.append(records()[15:])
    remote, here = kraftlake.open(uri), kraftlake.open(local)
    assert remote.log.read() == here.log.read()
    for offset in (3, 11, None):
        assert kraftlake.state_at(uri, offset=offset).image() == kraftlake.state_at(local, offset=offset).image()
    assert remote.log.at(version=1).records() == here.log.at(version=1).records()
    # What delta-rs reads is what kraftlake wrote.
    theirs = DeltaTable(uri, storage_options=s3_bucket.options).to_pyarrow_table().sort_by("offset")
    assert theirs.column("offset").to_pylist() == list(range(len(records())))
    # The snapshot as a pyarrow dataset (what a columnar engine scans), through pyarrow.fs.
    dataset = remote.log.at().dataset(columns=["offset", "type"])
    assert sorted(dataset.to_table().column("offset").to_pylist()) == list(range(len(records())))
    assert all(f.startswith(f"s3://{s3_bucket.name}/lake/") for f in remote.log.at().files())


def test_python_audit_report_on_s3_equals_the_one_on_local_disk(s3_bucket, tmp_path):
    from kraftlake.replay.audit import audit_log

    uri = s3_bucket.uri("audited")
    for where in (uri, tmp_path / "audited"):
        log = Log.create(where)
        log.append(records(), producer="p", seq=0)
    remote, local = audit_log(Log.open(uri).at()), audit_log(Log.open(tmp_path / "audited").at())
    assert remote.records == len(records()) and remote.invariants
    assert report_json.to_builtins(remote) == report_json.to_builtins(local)


@pytest.mark.parametrize("name", ["correct", "ignore-offline-dirs", "keep-offline-replica-in-isr"])
def test_duckdb_plan_on_s3_gives_the_python_engines_report(s3_bucket, name):
    """The default engine reads the object store's files (copied as they are checked)."""
    from kraftlake.replay.audit import audit_log
    from kraftlake.replay.plan import audit_snapshot

    uri = s3_bucket.uri(f"plan-{name}")
    fixture = FIXTURE.parent / "audit" / f"{name}.jsonl"
    Log.create(uri).append(list(iter_lines(fixture.read_text().splitlines())))
    snap = Log.open(uri).at()
    python, plan = audit_log(snap), audit_snapshot(snap)
    assert python.records == plan.records > 0
    assert [msgspec.to_builtins(v) for v in plan.violations] == [msgspec.to_builtins(v) for v in python.violations]
    assert (plan.verdict, plan.state_hash) == (python.verdict, python.state_hash)
    assert [(i.id, i.violations) for i in plan.invariants] == [(i.id, i.violations) for i in python.invariants]


@pytest.fixture(params=["put", "delta-rs"])
def s3_commit(request, monkeypatch):
    """Each of an S3 log's two commit paths (``Location.commits_by_put``)."""
    monkeypatch.setenv(S3_COMMIT_VARIABLE, request.param)
    return request.param


def test_delta_rs_writers_and_kraftlake_fence_each_other_on_s3(s3_bucket, s3_commit):
    """A commit lands on exactly the version it read: a version taken by another writer (here
    delta-rs's own ``write_deltalake``, behind the Log's back) is refused and followed."""
    uri = s3_bucket.uri("fenced")
    assert resolve(uri).commits_by_put == (s3_commit == "put")
    log = Log.create(uri)
    log.append(records()[:5])
    stale_version = log.version
    write_deltalake(uri, log.at().table().slice(0, 0), mode="append")  # an empty commit by another writer
    result = log.append(records()[5:8])
    assert result.version == stale_version + 2
    assert [r.offset for r in Log.open(uri).read()] == list(range(8))


RACE_WINDOW_S = 0.2
"""How long the racing servers below wait between a conditional put's check and its store: long
enough that writers released together all reach the check before the first store."""


def test_the_tests_s3_answers_exactly_one_of_racing_conditional_puts():
    """AWS S3: "if multiple conditional writes occur for the same object name, the first write
    operation to finish succeeds"; delta-rs's commit (so the fencing on a store) rests on it. The
    tests' server does the same (helpers/moto_server.py), even with every racer inside the
    window between check and store."""
    server = MotoServer(conditional_put_delay=RACE_WINDOW_S)
    try:
        assert race_conditional_puts(server, writers=4, rounds=3) == [1, 1, 1]
    finally:
        server.stop()


def test_moto_alone_lets_racing_conditional_puts_all_win():
    """Why helpers/moto_server.py serialises conditional puts: moto checks ``If-None-Match`` and
    stores the object in two steps, so writers racing into the window between them are all
    answered 200 and the last store wins (what made two racing appends both report the same
    version as theirs). When this fails, moto has made its conditional put atomic and the
    launcher's lock can go."""
    server = MotoServer(atomic=False, conditional_put_delay=RACE_WINDOW_S)
    try:
        assert all(n > 1 for n in race_conditional_puts(server, writers=4, rounds=3))
    finally:
        server.stop()


def test_snapshots_live_beside_the_log_and_serve_replay(s3_bucket):
    from kraftlake.replay.snapshots import SnapshotStore
    from kraftlake.replay.state import state_at, take_snapshots

    uri = s3_bucket.uri("snap")
    log = Log.create(uri)
    log.append(records())
    store = SnapshotStore(log.path, log.storage_options)
    take_snapshots(log, every=7)
    assert store.list(), "snapshots were written"
    assert {k.split("/")[1] for k in s3_bucket.keys("snap/")} >= {"_delta_log", "_kraftlake_snapshots"}
    with_snap = state_at(log, offset=20)
    assert with_snap.image() == state_at(log, offset=20, use_snapshots=False).image()
    log.maintain(retention_hours=0)
    assert store.list(), "the log's vacuum leaves the snapshots alone"
    store.delete()
    assert not s3_bucket.keys("snap/_kraftlake_snapshots/")


# -- errors: the URI and the cause, and nothing changed ---------------------------------------


def _nothing_created(server: MotoServer, buckets_before: list[str], tmp_path: Path) -> None:
    assert sorted(b["Name"] for b in server.client().list_buckets()["Buckets"]) == buckets_before
    assert list(tmp_path.iterdir()) == []


def _buckets(server: MotoServer) -> list[str]:
    return sorted(b["Name"] for b in server.client().list_buckets()["Buckets"])


def test_no_bucket(moto_server, s3_bucket, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = _buckets(moto_server)
    uri = "s3://no-such-bucket-here/log"
    with pytest.raises(StorageError, match=f"^{uri}: the bucket does not exist"):
        Log.create(uri)
    res = run("init", uri)
    assert res.exit_code == 1 and f"{uri}: the bucket does not exist" in res.stderr
    _nothing_created(moto_server, before, tmp_path)


def test_an_append_after_the_bucket_is_gone(moto_server, s3_bucket):
    """The bucket deleted under an open log: the append's put says so, naming the URI."""
    uri = s3_bucket.uri("gone")
    log = Log.create(uri)
    log.append(records()[:2])
    client = moto_server.client()
    for key in s3_bucket.keys():
        client.delete_object(Bucket=s3_bucket.name, Key=key)
    client.delete_bucket(Bucket=s3_bucket.name)
    with pytest.raises(StorageError, match=f"{uri}: the bucket does not exist"):
        log.append(records()[2:4])


def test_endpoint_unreachable(s3_bucket, tmp_path, monkeypatch):
    from helpers.object_store import free_port

    monkeypatch.chdir(tmp_path)
    uri = s3_bucket.uri("log")
    dead = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
    for op in (Log.create, Log.open):
        with pytest.raises(StorageError, match=f"^{uri}: the endpoint is unreachable"):
            op(uri, storage_options=dead)
    assert s3_bucket.keys() == [] and list(tmp_path.iterdir()) == []


def test_no_credentials(s3_bucket, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    # Nor any other source: no instance metadata service, no profile.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    uri = s3_bucket.uri("log")
    with pytest.raises(StorageError, match=f"^{uri}: no credentials"):
        Log.create(uri)
    assert s3_bucket.keys() == [] and list(tmp_path.iterdir()) == []


def test_access_denied_and_rejected_credentials(tmp_path, monkeypatch, no_aws_env):
    """moto checks IAM once its first unauthenticated requests are used up: a user without a
    policy is denied, an unknown key is rejected."""
    server = MotoServer(env={"INITIAL_NO_AUTH_ACTION_COUNT": "3"})
    try:
        server.client().create_bucket(Bucket="locked-bucket")
        iam = server.client(service="iam")
        iam.create_user(UserName="nobody")
        key = iam.create_access_key(UserName="nobody")["AccessKey"]
        base = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}
        uri = "s3://locked-bucket/log"
        nobody = base | {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
        unknown = base | {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWNUNKNOWN", "AWS_SECRET_ACCESS_KEY": "x"}
        for options, cause in ((nobody, "access denied"), (unknown, "the credentials were rejected")):
            for op in (Log.create, Log.open):
                with pytest.raises(StorageError, match=f"^{uri}: {cause}"):
                    op(uri, storage_options=options)
        monkeypatch.chdir(tmp_path)
        res = run("init", uri, *[x for k, v in nobody.items() for x in ("--storage-option", f"{k}={v}")])
        assert res.exit_code == 1 and f"{uri}: access denied" in res.stderr
        assert list(tmp_path.iterdir()) == []
    finally:
        server.stop()


def test_a_malformed_storage_option_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run("init", "s3://b-b-b/x", "--storage-option", "AWS_REGION")
    assert res.exit_code == 2 and "expected KEY=VALUE" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_data_files_are_one_put_and_a_refused_commit_leaves_no_file(s3_bucket):
    uri = s3_bucket.uri("orphans")
    log = Log.create(uri)
    other = Log.open(uri)
    log.append(records()[:3])
    other.append(records()[3:6])  # stale: loses version 1, follows, lands at version 2
    parquet = [k for k in s3_bucket.keys("orphans/") if k.endswith(".parquet")]
    assert len(parquet) == len(Log.open(uri).at().files()) == 2
    assert pa.concat_tables([Log.open(uri).at().table()]).num_rows == 6


def test_the_table_moves_while_a_batch_is_checked_and_nothing_runs_on_after(s3_bucket, monkeypatch):
    """delta-rs's commit leaves the Log's DeltaTable on the version before it: the next append
    moves it on a thread while the batch is checked. A duplicate, a refused batch and a lost
    race all return with that move finished, and the appends land fenced and gapless."""
    from kraftlake.records import PartitionChange, RecordError

    monkeypatch.setenv(S3_COMMIT_VARIABLE, "delta-rs")

    uri = s3_bucket.uri("moving")
    log, other = Log.create(uri), Log.open(uri)
    log.append(records()[:2], producer="p", seq=0)
    assert log._dt.version() == log.version - 1  # left behind by delta-rs's commit
    assert log.append(records()[:2], producer="p", seq=0).duplicate  # answered before any commit
    assert log._loading is None and log._dt.version() == log.version
    log.append(records()[2:3])
    with pytest.raises(RecordError):
        log.append([PartitionChange(topic_id="MvDrH8r1Q_2n6tPo0bqGnQ", partition_id=0, isr=(1, -3))])  # a range
    assert log._loading is None
    other.append(records()[3:5])  # takes the version log would commit next
    result = log.append(records()[5:8])  # refused, follows, lands after it
    assert log._loading is None
    assert result.version == 4 and (result.first_offset, result.last_offset) == (5, 7)
    assert [r.offset for r in Log.open(uri).read()] == list(range(8))


def test_compaction_and_checkpoints_beside_appends_on_s3(s3_bucket):
    """``Log.compact`` (the service's upkeep) commits through delta-rs on a store: fewer files,
    the same rows and offsets; checkpoints are written where the interval calls for them."""
    from kraftlake.records.store.delta_commit import checkpoint

    uri = s3_bucket.uri("compacted")
    log = Log.create(uri)
    recs = records()
    for i in range(0, len(recs), 3):
        log.append(recs[i : i + 3])
    before = Log.open(uri).read()
    files_before = len(log.at().files())
    version = log.compact(2)
    assert version == log.version and version is not None
    after = Log.open(uri)
    assert len(after.at().files()) < files_before
    assert after.read() == before
    log.append(recs[:2])  # appends go on after the compaction
    assert [r.offset for r in Log.open(uri).read()] == list(range(len(recs) + 2))
    checkpoint(log.location, log.version)
    assert any(k.endswith(".checkpoint.parquet") for k in s3_bucket.keys("compacted/_delta_log/"))


def _requests(log_file: Path, since: int) -> list[str]:
    """moto's access-log lines after the first ``since``: each request's method and path."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in log_file.read_text().splitlines() if '"' in line]
    return [line.split('"')[1].rsplit(" ", 1)[0] for line in lines[since:]]


def test_an_append_on_s3_is_two_puts_and_a_lost_race_reads_what_it_lost_to(tmp_path, monkeypatch, no_aws_env):
    """kraftlake makes an S3 log's commit files itself: an append is the data file's PUT, beside
    it the HEAD of the commit it builds on (still there, and the one it saw: ``lineage``), and
    the commit file's conditional PUT, nothing else (delta-rs's commit makes nine requests:
    bench/RESULTS.md). A writer that loses the version reads the commit it lost to (not its
    own bytes), deletes its data file, follows the commits to the end, writes its batch again at
    the next offsets and commits on top."""
    requests = tmp_path / "requests.log"
    server = MotoServer(request_log=str(requests))
    try:
        bucket = Bucket.new(server)
        for key, value in bucket.env.items():
            monkeypatch.setenv(key, value)
        uri = bucket.uri("two")
        log, other = Log.create(uri), Log.open(uri)
        log.append(records()[:3], producer="p", seq=0)
        assert other.last_offset == -1  # delta-rs reads the app transactions when first asked
        seen = len(_requests(requests, 0))
        log.append(records()[3:6], producer="p", seq=1)
        made = [m.replace(f"/{bucket.name}", "") for m in _requests(requests, seen)]
        commit = "/two/_delta_log/0000000000000000000{}.json".format
        # The data file's PUT and the HEAD of version 1 go together, in either order.
        assert sorted(m.split()[0] for m in made[:2]) == ["HEAD", "PUT"] and len(made) == 3, made
        assert f"HEAD {commit(1)}" in made[:2] and made[2].endswith(f"PUT {commit(2)}")
        seen += len(made)
        other.append(records()[6:8])  # stale: version 1 is taken
        made = [m.replace(f"/{bucket.name}", "") for m in _requests(requests, seen)]
        assert len(made) == 11, made
        assert f"HEAD {commit(0)}" in made[:2] and f"HEAD {commit(2)}" in made[8:10], made
        assert [m.split()[0] for m in made if not m.startswith("HEAD")] == [
            *("PUT", "PUT", "GET", "POST", "GET", "GET", "GET", "PUT", "PUT")
        ], made
        assert made[2:5] == [f"PUT {commit(1)}", f"GET {commit(1)}", "POST ?delete"]  # refused; not ours; file gone
        assert made[5:8] == [f"GET {commit(v)}" for v in (1, 2, 3)]  # followed to the end
        assert made[10] == f"PUT {commit(3)}"
        assert [r.offset for r in Log.open(uri).read()] == list(range(8))
        assert DeltaTable(uri).version() == 3 and Log.open(uri).producer_seq("p") == 1
    finally:
        server.stop()


def test_a_conditional_put_whose_answer_was_lost_is_its_own(s3_bucket):
    """object_store retries a put whose answer did not arrive; the retry then finds the object
    the first try stored. ``put_new`` counts bytes equal to its own as its own (a commit that
    landed), other bytes as another writer's."""
    where = resolve(s3_bucket.uri("lost"))
    assert where.put_new("_delta_log/00000000000000000001.json", b"mine")
    assert where.put_new("_delta_log/00000000000000000001.json", b"mine")  # the retry's answer
    assert not where.put_new("_delta_log/00000000000000000001.json", b"theirs")
    assert where.read("_delta_log/00000000000000000001.json") == b"mine"


def test_which_commit_path_a_location_takes(tmp_path, monkeypatch, no_aws_env):
    """Conditional puts on local disk and S3; delta-rs's commit where asked for, where a locking
    provider or unsafe renames stand in for a conditional put, and on the other stores."""
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))  # this machine's ~/.aws aside
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert resolve(str(tmp_path)).commits_by_put
    assert resolve("s3://b/log").commits_by_put
    assert not resolve("s3://b/log", {"AWS_S3_LOCKING_PROVIDER": "dynamodb"}).commits_by_put
    assert not resolve("s3://b/log", {"aws_s3_allow_unsafe_rename": "true"}).commits_by_put
    assert not resolve("gs://b/log").commits_by_put
    monkeypatch.setenv("AWS_S3_LOCKING_PROVIDER", "dynamodb")
    assert not resolve("s3://b/log").commits_by_put
    monkeypatch.delenv("AWS_S3_LOCKING_PROVIDER")
    monkeypatch.setenv(S3_COMMIT_VARIABLE, "delta-rs")
    assert not resolve("s3://b/log").commits_by_put and resolve(str(tmp_path)).commits_by_put
    monkeypatch.delenv(S3_COMMIT_VARIABLE)
    # Credentials from a shared profile, which obstore does not read: pyarrow's client and
    # delta-rs's commit, which do. Keys given, a web identity, or no profile at all: obstore.
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    assert not resolve("s3://b/log").commits_by_put and not resolve("s3://b/log")._on_s3
    assert resolve("s3://b/log", {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}).commits_by_put
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    assert resolve("s3://b/log").commits_by_put
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    assert resolve("s3://b/log").commits_by_put
    monkeypatch.setenv("AWS_PROFILE", "ops")
    assert not resolve("s3://b/log").commits_by_put
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.setenv(S3_COMMIT_VARIABLE, "rename")
    with pytest.raises(UnsupportedLocationError, match="KRAFTLAKE_S3_COMMIT"):
        _ = resolve("s3://b/log").commits_by_put
