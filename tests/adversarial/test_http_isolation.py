"""HTTP abuse, one client's heavy reads (issue 33, finding 9): /healthz never waits on work;
audits and reads run on their own bounded pool with a limit per client, 429 past it, while
other clients are still served."""

from __future__ import annotations

import json
import threading

from kraftlake.service.auth import load_tokens
from kraftlake.service.limits import Limits

from helpers.http import config, eventually, served


def _tokens(tmp_path):
    doc = {
        "tokens": [
            {"token": f"t-{name}", "producer": name, "roles": ["append", "read", "admin"]}
            for name in ("heavy", "other")
        ]
    }
    (tmp_path / "tokens.json").write_text(json.dumps(doc))
    return load_tokens(tmp_path / "tokens.json")


def _as(name: str) -> dict:
    return {"Authorization": f"Bearer t-{name}"}


def test_health_answers_while_audits_hold_every_reader_and_a_client_past_its_share_gets_429(tmp_path, monkeypatch):
    import kraftlake.auditing as audit

    real = audit.audit
    entered, release = threading.Event(), threading.Event()

    def held_audit(*args, **kwargs):
        entered.set()
        assert release.wait(120), "the test never released the audit"
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "audit", held_audit)
    limits = Limits(read_workers=1, reads_per_client=1, max_reads=3)
    _, client = served(tmp_path, tokens=_tokens(tmp_path), limits=limits)
    answers: dict[str, int] = {}

    def call(name: str, method: str, url: str, who: str, **kw) -> threading.Thread:
        def run() -> None:
            answers[name] = client.request(method, url, headers=_as(who), **kw).status_code

        t = threading.Thread(target=run)
        t.start()
        return t

    with client:
        r = client.post(
            "/v1/records", json={"producer": "heavy", "seq": 0, "records": [config(0)]}, headers=_as("heavy")
        )
        assert r.status_code == 200
        audit_thread = call("audit", "POST", "/v1/audits", "heavy", json={})
        assert entered.wait(60), "the audit never started"
        try:
            health = call("health", "GET", "/healthz", "other")
            health.join(60)
            assert answers.get("health") == 200, "/healthz waited for the audit"
            assert client.get("/healthz", headers=_as("other")).json()["reads"] == 1
            assert client.get("/readyz", headers=_as("other")).status_code == 200
            assert client.get("/metrics", headers=_as("other")).status_code == 200
            again = client.post("/v1/audits", json={}, headers=_as("heavy"))  # past heavy's one read
            assert again.status_code == 429 and again.headers["retry-after"] == "1"
            assert "--reads-per-client" in again.json()["error"]
            page = client.get("/v1/records", headers=_as("heavy"))
            assert page.status_code == 429
            # Another client is admitted (it waits for the pool's one thread, not refused).
            other = call("other", "GET", "/v1/views/controller", "other")
            eventually(lambda: client.get("/healthz", headers=_as("other")).json()["reads"] == 2, "other queued")
            # An append is not a read: it goes on while the pool is held.
            r = client.post(
                "/v1/records", json={"producer": "other", "seq": 0, "records": [config(1)]}, headers=_as("other")
            )
            assert r.status_code == 200
        finally:
            release.set()
        audit_thread.join(60)
        other.join(60)
        assert answers == {"audit": 200, "health": 200, "other": 200}
        assert client.get("/healthz", headers=_as("other")).json()["reads"] == 0  # every slot given back
        assert client.post("/v1/audits", json={}, headers=_as("heavy")).status_code == 200


def test_the_service_wide_read_limit(tmp_path, monkeypatch):
    import kraftlake.auditing as audit

    real = audit.audit
    entered, release = threading.Semaphore(0), threading.Event()

    def held_audit(*args, **kwargs):
        entered.release()
        assert release.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "audit", held_audit)
    _, client = served(tmp_path, limits=Limits(read_workers=2, reads_per_client=5, max_reads=2))
    codes: list[int] = []
    with client:
        threads = [
            threading.Thread(target=lambda: codes.append(client.post("/v1/audits", json={}).status_code))
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for _ in threads:
            assert entered.acquire(timeout=60)
        try:
            r = client.get("/v1/views/controller")
            assert r.status_code == 429 and "--max-reads" in r.json()["error"]
        finally:
            release.set()
        for t in threads:
            t.join(60)
        assert codes == [200, 200]
        assert client.get("/v1/views/controller").status_code == 200
