"""BookKeeper's admin endpoints on the service, as the issue names them (BookKeeper's own HTTP API,
``HttpRouter``, has ``list_bookies``, ``list_under_replicated_ledger`` and ``who_is_auditor``, and
no drain):
``GET /v1/bookies``, ``GET /v1/bookies/{id}``, ``PUT /v1/bookies/{id}/state`` (BP-4's drain of a
live bookie and its lifecycle, kraftlake's own: ``{"state": "DRAINING"}``; an illegal transition
is 409 with the allowed ones; the change is appended as the records the lifecycle decider writes),
``PUT /v1/bookies/{id}/decommission`` (BookKeeper's classic decommission of a stopped bookie, as
its ``/api/v1/autorecovery/decommission``: ``{"delete_cookie": true}``; a bookie still writable or
read-only is 409, BookKeeper's ``IllegalOpException``), ``GET /v1/ledgers/under-replicated``,
``GET /v1/auditor``.

The BookKeeper view is kept up to date incrementally: each request replays only the records
appended since the last one."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgspec
from litestar import Response, get, put
from litestar.params import FromPath, FromQuery, JSONBody

from kraftlake.records import Log
from kraftlake.records.bookkeeper import BookieState
from kraftlake.statemachine.bookkeeper import BookiesView, replay
from kraftlake.statemachine.bookkeeper import commands as c
from kraftlake.statemachine.bookkeeper.decider import decide
from kraftlake.statemachine.bookkeeper.lifecycle import TRANSITIONS


class StateRequest(msgspec.Struct, forbid_unknown_fields=True):
    state: str


class DecommissionRequest(msgspec.Struct, forbid_unknown_fields=True):
    delete_cookie: bool = True


class LiveBookies:
    """The BookKeeper view at the log's end, caught up on demand."""

    def __init__(self, path) -> None:
        self.log = Log.open(path)
        self.view = BookiesView()
        self.lock = threading.Lock()

    def current(self) -> BookiesView:
        with self.lock:
            self.log.refresh()
            snap = self.log.at()
            if snap.last_offset > self.view.offset:
                for records in snap.iter_records(self.view.offset + 1, snap.last_offset):
                    replay(records, self.view)
            return self.view


def _bookie_doc(view: BookiesView, b) -> dict[str, Any]:
    return {
        "bookie_id": b.bookie_id,
        "rack": b.rack,
        "state": b.state,
        "state_reason": b.state_reason,
        "availability": b.availability,
        "free_bytes": b.free_bytes,
        "total_bytes": b.total_bytes,
        "ledgers": len(view.refs.get(b.bookie_id, ())),
        "under_replicated_ledgers": sum(1 for m in view.under_replicated.values() if b.bookie_id in m.missing),
        "allowed_states": [s.value for s in TRANSITIONS[BookieState(b.state)]],
    }


def routes(path, committer) -> list:
    live = LiveBookies(path)
    change_lock = asyncio.Lock()

    @get("/v1/bookies", summary="BookKeeper bookies: lifecycle state, availability, free disk, ledgers")
    async def bookies() -> list:
        view = await asyncio.to_thread(live.current)
        return [_bookie_doc(view, b) for _, b in sorted(view.bookies.items())]

    @get("/v1/bookies/{bookie_id:str}", summary="One bookie, with the transitions it allows")
    async def bookie(bookie_id: FromPath[str]) -> Response:
        view = await asyncio.to_thread(live.current)
        b = view.bookies.get(bookie_id)
        if b is None:
            return Response({"error": f"no bookie {bookie_id}"}, status_code=404)
        return Response(_bookie_doc(view, b))

    @put("/v1/bookies/{bookie_id:str}/state", summary="Move a bookie through its lifecycle (appended as records)")
    async def set_state(bookie_id: FromPath[str], data: JSONBody[StateRequest]) -> Response:
        try:
            target = BookieState(data.state)
        except ValueError:
            return Response(
                {"error": f"unknown state {data.state!r}", "field": "state", "states": [s.value for s in BookieState]},
                status_code=400,
            )
        async with change_lock:  # operators' changes are decided one at a time, on the latest view
            view = await asyncio.to_thread(live.current)
            d = decide(view, c.ChangeBookieState(bookie_id=bookie_id, state=target))
            if d.error_code == c.NO_SUCH_BOOKIE:
                return Response({"error": d.reply.message}, status_code=404)
            if d.error_code != c.OK:
                return Response(
                    {
                        "error": d.reply.message,
                        "state": view.bookies[bookie_id].state,
                        "allowed": list(d.reply.allowed),
                    },
                    status_code=409,
                )
            result = await committer.append(list(d.records))
            view = await asyncio.to_thread(live.current)
        return Response({**_bookie_doc(view, view.bookies[bookie_id]), "appended": result.to_dict()})

    @put(
        "/v1/bookies/{bookie_id:str}/decommission",
        summary="BookKeeper's classic decommission of a stopped bookie (not BP-4's drain of a live one)",
    )
    async def decommission(bookie_id: FromPath[str], data: JSONBody[DecommissionRequest]) -> Response:
        async with change_lock:
            view = await asyncio.to_thread(live.current)
            d = decide(view, c.DecommissionBookie(bookie_id=bookie_id, delete_cookie=data.delete_cookie))
            if d.error_code == c.NO_SUCH_BOOKIE:
                return Response({"error": d.reply.message}, status_code=404)
            if d.error_code != c.OK:
                return Response({"error": d.reply.message, "outcome": d.error_code}, status_code=409)
            result = await committer.append(list(d.records))
            view = await asyncio.to_thread(live.current)
        doc = _bookie_doc(view, view.bookies[bookie_id])
        return Response({**doc, "decommissioning": True, "appended": result.to_dict()})

    @get("/v1/ledgers/under-replicated", summary="Under-replicated ledgers: missing bookies, mark time, lock holder")
    async def under_replicated(missing: FromQuery[str | None] = None) -> list:
        view = await asyncio.to_thread(live.current)
        out = []
        for lid, mark in sorted(view.under_replicated.items()):
            if missing is not None and missing not in mark.missing:
                continue
            ledger = view.ledgers.get(lid)
            lost = [] if ledger is None else view.lost_entries(ledger)
            out.append(
                {
                    "ledger_id": lid,
                    "missing": list(mark.missing),
                    "since_ms": mark.since_ms,
                    "worker": view.locks.get(lid),
                    "lost_entries": [list(r) for r in lost],
                }
            )
        return out

    @get("/v1/auditor", summary="The auditor, its recovery delay and the audits it owes")
    async def auditor() -> dict:
        view = await asyncio.to_thread(live.current)
        return {
            "auditor": view.auditor,
            "lost_bookie_recovery_delay_ms": view.recovery_delay_ms,
            "pending_audits": [{"bookie_id": b, "due_ms": due} for b, due in sorted(view.audit_due.items())],
            "lost_bookies": [{"bookie_id": b, "since_ms": t} for b, t in sorted(view.lost_at.items())],
            "ledger_replication_enabled": view.replication_enabled,
            "decommissioning": sorted(view.decommissioning),
        }

    return [bookies, bookie, set_state, decommission, under_replicated, auditor]
