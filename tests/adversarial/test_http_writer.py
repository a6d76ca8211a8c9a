"""HTTP abuse, the writer killed (issue 33, finding 8): when the commit process dies the service
starts another, which takes its version and producers' seqs from the log; appends meanwhile are
answered 503 with Retry-After (never 500), and /healthz and /readyz say what the writer is doing."""

from __future__ import annotations

import os
import signal

from kraftlake.records import Log

from helpers.http import config, eventually, served


def _writer(client) -> dict:
    return client.get("/healthz").json()["writer"]


def test_a_killed_commit_process_is_restarted_from_the_log(tmp_path):
    path, client = served(tmp_path)
    with client:
        assert eventually(lambda: client.get("/readyz").status_code == 200, "ready")
        assert client.post("/v1/records", json={"producer": "p", "seq": 0, "records": [config(0)]}).status_code == 200
        first = _writer(client)
        assert first["state"] == "ready" and first["restarts"] == 0
        os.kill(first["pid"], signal.SIGKILL)

        statuses = []

        def append_seq_1() -> bool:
            r = client.post("/v1/records", json={"producer": "p", "seq": 1, "records": [config(1)]})
            statuses.append(r.status_code)
            if r.status_code == 503:
                assert r.headers["retry-after"] == "1" and "WriterUnavailable" in r.json()["error"]
            return r.status_code == 200

        eventually(append_seq_1, "an append after the kill landed", attempts=300, pause_s=0.2)
        assert set(statuses) <= {200, 503}, statuses
        again = client.post("/v1/records", json={"producer": "p", "seq": 0, "records": [config(0)]}).json()
        assert again["duplicate"] is True and again["first_offset"] == 0  # the new writer knows p's seqs
        writer = _writer(client)
        assert writer["state"] == "ready" and writer["restarts"] == 1
        assert writer["pid"] != first["pid"] and writer["last_exit_code"] == -signal.SIGKILL
        health = client.get("/healthz").json()
        assert health["status"] == "ok" and health["last_offset"] == 1
        assert client.get("/readyz").status_code == 200
    assert [r.value for r in Log.open(path).read()] == ["0", "1"]


def test_health_says_degraded_and_not_ready_while_the_writer_is_down(tmp_path, monkeypatch):
    # A writer that cannot start (its process dies at once): the service stays up and says so.
    monkeypatch.setattr("kraftlake.service.commit_process._serve", _die)
    path, client = served(tmp_path)
    with client:
        health = eventually(lambda: (h := client.get("/healthz").json())["writer"]["restarts"] >= 1 and h, "a restart")
        assert health["status"] == "degraded" and health["writer"]["state"] in ("starting", "restarting")
        r = client.get("/readyz")
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"].startswith("the writer is ")
    assert Log.open(path).last_offset == -1


def _die(*_args) -> None:
    os._exit(3)


def test_a_service_whose_logs_history_is_gone_refuses_and_says_why(table_uri, request):
    """``serve W``, two batches, every file of W deleted (on S3 the bucket made again), two more:
    503 naming the missing commit, /healthz degraded and /readyz 503 saying why, nothing written
    (issue 54, item 4)."""
    from litestar.testing import TestClient

    from kraftlake.service.app import create_app

    from helpers.stores import files, wipe

    Log.create(table_uri)
    with TestClient(app=create_app(table_uri)) as client:
        for seq in (0, 1):
            r = client.post("/v1/records", json={"producer": "p", "seq": seq, "records": [config(seq)]})
            assert r.status_code == 200, r.text
        wipe(table_uri, request)
        for seq in (2, 3):
            r = client.post("/v1/records", json={"producer": "p", "seq": seq, "records": [config(seq)]})
            assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
            assert "00000000000000000002.json, the version this writer builds on, is missing" in r.json()["error"]
        health = client.get("/healthz").json()
        assert health["status"] == "degraded" and health["writer"]["state"] == "refusing", health
        assert "is missing: the log's history is gone" in health["writer"]["error"]
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "the log's history is gone" in ready.json()["error"]
    assert files(table_uri, request) == []
