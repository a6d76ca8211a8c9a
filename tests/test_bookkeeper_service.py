"""BookKeeper's admin endpoints on the service: bookies, one bookie, lifecycle changes appended as
records (illegal ones 409 with the allowed states), under-replicated ledgers, the auditor."""

from __future__ import annotations

from litestar.testing import TestClient

from kraftlake.records import Log
from kraftlake.records.bookkeeper import (
    Availability,
    BookieAvailability,
    BookieDecommissionStarted,
    BookieStateChange,
    LedgerUnderReplicated,
)
from kraftlake.service.app import create_app
from kraftlake.statemachine.bookkeeper.workload import WorkloadConfig, generate


def test_bookie_admin_api(tmp_path):
    log = Log.create(tmp_path / "log")
    log.append([r for b in generate(WorkloadConfig(seed=4), records=600) for r in b])
    with TestClient(app=create_app(log.path)) as c:
        bookies = c.get("/v1/bookies").json()
        assert len(bookies) >= 8 and {"bookie_id", "state", "availability", "free_bytes", "allowed_states"} <= set(
            bookies[0]
        )
        active = [b for b in bookies if b["state"] == "ACTIVE" and b["availability"] != "LOST" and b["ledgers"]]
        target = active[0]["bookie_id"]
        assert c.get(f"/v1/bookies/{target}").json()["allowed_states"] == ["READ_ONLY", "DRAINING"]
        assert c.get("/v1/bookies/nope:1").status_code == 404
        before = Log.open(log.path).last_offset
        r = c.put(f"/v1/bookies/{target}/state", json={"state": "DRAINING"})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["state"] == "DRAINING" and doc["availability"] == "READ_ONLY" and doc["under_replicated_ledgers"] > 0
        appended = Log.open(log.path).at().records(before + 1)
        assert isinstance(appended[0], BookieStateChange) and any(
            isinstance(x, LedgerUnderReplicated) for x in appended
        )
        r = c.put(f"/v1/bookies/{target}/state", json={"state": "DRAINED"})
        assert r.status_code == 409 and r.json()["allowed"] == ["ACTIVE"] and r.json()["state"] == "DRAINING"
        assert c.put(f"/v1/bookies/{target}/state", json={"state": "GONE"}).status_code == 400
        ur = c.get("/v1/ledgers/under-replicated", params={"missing": target}).json()
        assert ur and all(target in x["missing"] for x in ur)
        auditor = c.get("/v1/auditor").json()
        from kraftlake.statemachine.bookkeeper import replay

        want = replay(Log.open(log.path).at().records())
        assert auditor["auditor"] == "auditor-0" and auditor["lost_bookie_recovery_delay_ms"] == want.recovery_delay_ms
        assert [p["bookie_id"] for p in auditor["pending_audits"]] == sorted(want.audit_due)
        assert Log.open(log.path).last_offset == before + len(appended)
        assert "/v1/bookies/{bookie_id}/state" in c.get("/schema/openapi.json").json()["paths"]
        assert "/v1/bookies/{bookie_id}/decommission" in c.get("/schema/openapi.json").json()["paths"]


def test_the_classic_decommission_refuses_a_running_bookie_and_takes_a_stopped_one(tmp_path):
    """BookKeeper's decommissionBookie, distinct from the drain: 409 while writable or read-only."""
    log = Log.create(tmp_path / "log")
    log.append([r for b in generate(WorkloadConfig(seed=4), records=600) for r in b])
    with TestClient(app=create_app(log.path)) as c:
        bookies = c.get("/v1/bookies").json()
        running = next(b["bookie_id"] for b in bookies if b["availability"] != "LOST")
        before = Log.open(log.path).last_offset
        r = c.put(f"/v1/bookies/{running}/decommission", json={})
        assert r.status_code == 409 and r.json()["outcome"] == "ILLEGAL_OP"
        assert Log.open(log.path).last_offset == before
        assert c.put("/v1/bookies/nope:1/decommission", json={}).status_code == 404
        log2 = Log.open(log.path)
        log2.append([BookieAvailability(bookie_id=running, availability=Availability.LOST)])
        r = c.put(f"/v1/bookies/{running}/decommission", json={"delete_cookie": False})
        assert r.status_code == 200, r.text
        appended = Log.open(log.path).at().records(before + 2)
        assert isinstance(appended[0], BookieDecommissionStarted) and appended[0].delete_cookie is False
        assert c.get("/v1/auditor").json()["decommissioning"] == [running]
