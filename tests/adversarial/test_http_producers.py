"""HTTP abuse, where an appender resumes (issue 54, items 6 and 7): ``GET /v1/producers/{p}``
takes every producer name the log takes, exactly as the client wrote it, and it is part of
appending, not a read: neither a client's own reads nor a pool full of other clients' delays
or refuses it, and a token that may append as ``p`` may ask where ``p`` resumes."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kraftlake import Appender
from kraftlake.records import Log, NoOp
from kraftlake.service.app import create_app
from kraftlake.service.auth import load_tokens
from kraftlake.service.limits import Limits

from helpers.http import config, listening, served
from helpers.tiers import examples

NAMES = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
"""Producer names the log takes: any text but lone surrogates (which no UTF-8 holds)."""


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One service on loopback over one log for the module's examples: (url, log)."""
    path = tmp_path_factory.mktemp("producers") / "log"
    Log.create(path)
    with listening(create_app(path, commit_process=False)) as url:
        yield url, Log.open(path)


@settings(max_examples=examples(15))
@given(NAMES, st.integers(0, 3))
@example("x/y", 0)
@example("é/ü", 1)
@example("..", 0)
@example("/", 0)
@example("a//b/", 0)
@example("%2F?#", 0)
def test_an_appender_resumes_any_producer_over_http(service, producer, seq):
    url, log = service
    log.refresh()
    stored = log.producer_seq(producer)
    seq = seq if stored is None else stored + 1 + seq
    log.append([NoOp()], producer=producer, seq=seq)
    remote = Appender(url, producer=producer, retry_for_s=0)
    remote.close()
    assert remote.next_seq == Appender(log, producer=producer).next_seq == seq + 1


def _tokens(tmp_path):
    doc = {
        "tokens": [
            {"token": "t-heavy", "producer": "heavy", "roles": ["append", "read", "admin"]},
            {"token": "t-writer", "producer": "w/1", "roles": ["append"]},
        ]
    }
    (tmp_path / "tokens.json").write_text(json.dumps(doc))
    return load_tokens(tmp_path / "tokens.json")


def test_finding_where_to_resume_waits_for_no_read_and_counts_as_none(tmp_path, monkeypatch):
    """Every read place taken, by a client that also appends: its lookups are answered at once."""
    import kraftlake.auditing as audit

    real = audit.audit
    entered, release = threading.Event(), threading.Event()

    def held_audit(*args, **kwargs):
        entered.set()
        assert release.wait(120), "the test never released the audit"
        return real(*args, **kwargs)

    monkeypatch.setattr(audit, "audit", held_audit)
    limits = Limits(read_workers=1, reads_per_client=1, max_reads=1)
    heavy = {"Authorization": "Bearer t-heavy"}
    _, client = served(tmp_path, tokens=_tokens(tmp_path), limits=limits, commit_process=False)
    with client:
        r = client.post("/v1/records", json={"producer": "heavy", "seq": 4, "records": [config(0)]}, headers=heavy)
        assert r.status_code == 200
        audit_thread = threading.Thread(target=lambda: client.post("/v1/audits", json={}, headers=heavy))
        audit_thread.start()
        assert entered.wait(60), "the audit never started"
        try:
            assert client.get("/v1/views/controller", headers=heavy).status_code == 429  # a read: refused
            for _ in range(3):  # past the client's one read and the service's one
                r = client.get("/v1/producers/heavy", headers=heavy)
                assert (r.status_code, r.json()) == (200, {"producer": "heavy", "seq": 4})
            assert client.get("/healthz", headers=heavy).json()["reads"] == 1
        finally:
            release.set()
            audit_thread.join(60)


def test_an_append_only_token_resumes_its_own_producer(tmp_path):
    path = tmp_path / "log"
    Log.create(path)
    Log.open(path).append([NoOp()], producer="w/1", seq=7)
    with listening(create_app(path, tokens=_tokens(tmp_path), commit_process=False)) as url:
        appender = Appender(url, producer="w/1", token="t-writer", retry_for_s=0)
        assert appender.next_seq == 8
        assert appender.append([NoOp()]).first_offset == 1
        appender.close()
        with pytest.raises(Exception, match="403"):
            Appender(url, producer="heavy", token="t-writer", retry_for_s=0)  # another producer's: a read


def test_every_producer_name_is_one_route_in_the_metrics():
    from kraftlake.service.metrics import route_of

    for name in ("p", "x/y", "a//b/", "é/ü"):
        assert route_of(f"/v1/producers/{name}") == "/v1/producers/{producer}"
