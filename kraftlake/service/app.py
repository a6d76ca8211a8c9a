"""The HTTP service (Litestar, msgspec-native, under uvicorn): services append records, readers get
records, views and audits.

- ``POST /v1/records`` (``service.append``: the hot path, in front of Litestar):
  ``{"producer", "seq", "records": [...]}`` as JSON or msgpack (``Content-Type: application/msgpack``). The whole batch is checked first: one bad record and
  the answer is 400 naming its index, type and field, and nothing is appended. Good batches go to
  the group committer and are acknowledged with their offsets once committed; a retry of an
  acknowledged (producer, seq) gets the original offsets. Queue full: 429 with ``Retry-After``.
- ``GET /v1/records?from=&to=&type=``, ``GET /v1/views/controller?offset=|version=|timestamp=``,
  ``GET /v1/views/brokers/{id}?...``, ``POST /v1/audits``, ``GET /v1/producers/{producer}`` (its
  last committed seq, where a restarted client resumes), ``GET /healthz``, ``GET /metrics``
  (Prometheus text), and the OpenAPI schema at ``/schema/openapi.json``.
- BookKeeper's admin API (``service.bookkeeper``): ``/v1/bookies``, ``/v1/bookies/{id}``,
  ``PUT /v1/bookies/{id}/state``, ``/v1/ledgers/under-replicated``, ``/v1/auditor``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec
from litestar import Litestar, Request, Response, get, post
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from kraftlake.logging import get_logger
from kraftlake.records import Log, TimeTravelError
from kraftlake.records.codec import encode_json_array
from kraftlake.records.location import Location

from .append import MAX_BODY, TOO_LARGE, Answer, Appending, fast_path, internal_error
from .auth import auth_middleware
from .bookkeeper import routes as bookkeeper_routes
from .commit_process import CommitProcess
from .committer import CommitConfig, GroupCommitter
from .metrics import CONTENT_TYPE, Metrics

log = get_logger(__name__)

MAX_READ = 100_000
"""Records one GET returns at most (page with from/to)."""


class AuditRequest(msgspec.Struct, forbid_unknown_fields=True):
    from_offset: int | None = None
    to_offset: int | None = None
    grace_records: int = 1000
    grace_ms: int = 5000
    fail_on: str = "error"


@dataclass
class ServiceState:
    path: Location
    committer: GroupCommitter
    reader_lock: threading.Lock
    reader: Log


def access_log(metrics: Metrics) -> Any:
    """Middleware: one structlog event per request (method, path, status, ms; query strings,
    bodies and headers, tokens among them, are never logged), and its observation in ``metrics``."""

    def wrap(app: Any) -> Any:
        async def middleware(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            status = 500

            async def watch(message: Any) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, watch)
            finally:
                took = time.perf_counter() - started
                metrics.request(scope["method"], scope["path"], status, took)
                log.info(
                    "http.request", method=scope["method"], path=scope["path"], status=status, ms=round(took * 1000, 2)
                )

        return middleware

    return wrap


def _respond(answer: Answer) -> Response:
    return Response(answer.payload, status_code=answer.status, headers=answer.headers, media_type="application/json")


def _http_error(_request: Request, exc: HTTPException) -> Response:
    """Litestar's own refusals (404, 405, a query parameter of the wrong type…) in the service's
    one error shape: ``{"error": message}``, with Litestar's details when it has some."""
    payload: dict[str, Any] = {"error": exc.detail}
    if getattr(exc, "extra", None):
        payload["details"] = exc.extra
    return Response(payload, status_code=exc.status_code, headers=exc.headers, media_type="application/json")


def _unexpected(_request: Request, exc: Exception) -> Response:
    return _respond(internal_error(exc))


def create_app(
    path: str | Path,
    config: CommitConfig | None = None,
    tokens: list | None = None,
    *,
    fast: bool = True,
    commit_process: bool = True,
    storage_options: dict[str, str] | None = None,
) -> Litestar:
    """The service over the log at ``path`` (which must exist). ``tokens`` (``auth.load_tokens``):
    every request needs a bearer token with the right role; None: no authentication (bind the
    service to loopback). ``fast=False``: appends through Litestar's route too (the same
    answers, slower; the tests hold the two doors to each other). ``commit_process=False``:
    commits in this process instead of a child (``service.commit_process``), where they compete
    with the event loop for the GIL. ``storage_options``: delta-rs's, for a log on an object
    store."""
    config = config or CommitConfig()
    opened = Log.open(path, storage_options=storage_options)  # a URI's storage options travel with it
    target = (
        CommitProcess(opened.path, config.compact_after_files, opened.storage_options)
        if commit_process
        else Log.open(opened.location)
    )
    metrics = Metrics()
    state = ServiceState(opened.location, GroupCommitter(target, config, metrics), threading.Lock(), opened)
    appending = Appending(state.committer)

    @post("/v1/records", status_code=200, summary="Append one batch (exactly once per producer and seq)")
    async def append(request: Request) -> Response:
        try:
            body = await request.body()
        except HTTPException as exc:
            if exc.status_code != 413:
                raise
            return _respond(TOO_LARGE)  # the fast path's words, not Litestar's
        answer = await appending.answer(
            body, request.headers.get("content-type", ""), request.scope.get("state", {}).get("identity")
        )
        return _respond(answer)

    def _reader() -> Log:
        state.reader.refresh()
        return state.reader

    @get("/v1/records", summary="Records in [from, to], optionally of some types")
    async def read(
        from_: Annotated[int | None, QueryParameter(name="from", description="first offset (default 0)")] = None,
        to: Annotated[
            int | None, QueryParameter(description="last offset (default: the end; at most 100 000 records)")
        ] = None,
        type_: Annotated[str | None, QueryParameter(name="type", description="comma-separated record types")] = None,
    ) -> Response:
        def work() -> bytes:
            with state.reader_lock:
                snap = _reader().at()
                hi = snap.last_offset if to is None else min(to, snap.last_offset)
                lo = 0 if from_ is None else from_
                if hi - lo + 1 > MAX_READ:
                    hi = lo + MAX_READ - 1
                types = [t for t in type_.split(",") if t] if type_ else None
                return encode_json_array(snap.records(lo, hi, types))

        return Response(await asyncio.to_thread(work), media_type="application/json")

    def _state_at(offset, version, timestamp):
        from kraftlake.replay.state import state_at

        if sum(x is not None for x in (offset, version, timestamp)) > 1:
            raise HTTPException(status_code=400, detail="give at most one of offset, version, timestamp")
        with state.reader_lock:
            try:
                return state_at(_reader(), offset=offset, version=version, timestamp=timestamp).published()
            except TimeTravelError as exc:
                raise HTTPException(status_code=404, detail=str(exc)) from None

    @get("/v1/views/controller", summary="The controller's view (canonical image) at a point in time")
    async def controller_view(
        offset: FromQuery[int | None] = None,
        version: FromQuery[int | None] = None,
        timestamp: FromQuery[str | None] = None,
    ) -> Response:
        view = await asyncio.to_thread(_state_at, offset, version, timestamp)
        return Response(msgspec.json.encode(view.image()), media_type="application/json")

    @get("/v1/views/brokers/{broker_id:int}", summary="One broker's view at a point in time")
    async def broker_view_(
        broker_id: FromPath[int],
        offset: FromQuery[int | None] = None,
        version: FromQuery[int | None] = None,
        timestamp: FromQuery[str | None] = None,
    ) -> Response:
        from kraftlake.statemachine.kraft.broker_view import broker_view

        view = await asyncio.to_thread(_state_at, offset, version, timestamp)
        return Response(msgspec.json.encode(broker_view(view, broker_id)), media_type="application/json")

    @post("/v1/audits", status_code=200, summary="Run the local audit over a range; the report as JSON")
    async def audits(data: JSONBody[AuditRequest]) -> Response:
        from kraftlake.replay.audit import AuditConfig, audit_log
        from kraftlake.replay.state import state_at

        def work() -> bytes:
            with state.reader_lock:
                snap = _reader().at()
                start = None
                if data.from_offset:
                    start = state_at(_reader(), offset=data.from_offset - 1)
                cfg = AuditConfig(grace_records=data.grace_records, grace_ms=data.grace_ms, fail_on=data.fail_on)
                report = audit_log(
                    snap, config=cfg, from_offset=data.from_offset, to_offset=data.to_offset, start=start
                )
                return msgspec.json.encode(report)

        return Response(await asyncio.to_thread(work), media_type="application/json")

    @get("/v1/producers/{producer:str}", summary="A producer's last committed seq (null: none yet)")
    async def producer_seq(producer: FromPath[str]) -> dict:
        def work() -> int | None:
            with state.reader_lock:
                return _reader().producer_seq(producer)

        return {"producer": producer, "seq": await asyncio.to_thread(work)}

    @get("/healthz", summary="Alive, the log's last offset, and the records waiting for a commit")
    async def healthz() -> dict:
        def last() -> int:
            with state.reader_lock:
                return _reader().last_offset

        return {
            "status": "ok",
            "last_offset": await asyncio.to_thread(last),
            "queued_records": state.committer.queued_records,
        }

    @get("/metrics", summary="Prometheus metrics", media_type=CONTENT_TYPE)
    async def metrics_() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def shutdown() -> None:
        await asyncio.to_thread(state.committer.close)

    middleware = [access_log(metrics)] + ([auth_middleware(tokens)] if tokens is not None else [])
    app = Litestar(
        route_handlers=[
            append,
            read,
            controller_view,
            broker_view_,
            audits,
            producer_seq,
            healthz,
            metrics_,
            *bookkeeper_routes(state.path, state.committer),
        ],
        on_shutdown=[shutdown],
        middleware=middleware,
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
        openapi_config=OpenAPIConfig(title="kraftlake", version="1"),
        request_max_body_size=MAX_BODY,
        debug=False,
    )
    if fast:
        # Appends skip Litestar's router and request/response objects (the way its CORS and
        # OpenTelemetry layers wrap the same handler); everything else goes on to it.
        app.asgi_handler = fast_path(app.asgi_handler, appending, middleware)
    return app
