"""The HTTP service (Litestar, msgspec-native, under uvicorn): services append records, readers get
records, views and audits.

- ``POST /v1/records`` (``service.append``: the hot path, in front of Litestar):
  ``{"producer", "seq", "records": [...]}`` as JSON or msgpack (``Content-Type: application/msgpack``). The whole batch is checked first: one bad record and
  the answer is 400 naming its index, type and field, and nothing is appended. Good batches go to
  the group committer and are acknowledged with their offsets once committed; a retry of an
  acknowledged (producer, seq) gets the original offsets. Queue full: 429 with ``Retry-After``.
- ``GET /v1/records?from=&to=&type=`` (a JSON array, or JSON Lines with ``Accept:
  application/x-ndjson``; sent as it is read; with ``wait_ms=M`` a long poll: answered at once
  when there are records from ``from``, else when one lands or after M ms, empty then),
  ``GET /v1/records/stream?from=`` (Server-Sent Events: the records from ``from``, then each as it
  lands; ``Last-Event-ID`` resumes; ``service.subscriptions``), ``GET /v1/views/controller?offset=|version=|timestamp=``,
  ``GET /v1/views/brokers/{id}?...``, ``POST /v1/audits``: on the read pool (``service.reads``),
  429 past a client's share of it. A parameter out of range or of the wrong form is 400 naming it.
- ``GET /v1/producers/{producer}`` (its last committed seq, where a restarted client resumes; any
  name, ``/`` and all): part of appending, not a read (``service.producers``).
- ``GET /healthz`` (alive, and the writer's state: never waits on reads or commits),
  ``GET /readyz`` (503 while the writer is not ready to commit), ``GET /metrics`` (Prometheus
  text), and the OpenAPI schema at ``/schema/openapi.json``.
- Every 500 is logged with its cause (``service.internal_error``, with the traceback).
- BookKeeper's admin API (``service.bookkeeper``): ``/v1/bookies``, ``/v1/bookies/{id}``,
  ``PUT /v1/bookies/{id}/state``, ``/v1/ledgers/under-replicated``, ``/v1/auditor``.
- With ``audit`` (``serve --audit``): the following audit on a thread of its own
  (``service.live_audit``), its open violations at ``GET /v1/audits/live`` and on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from litestar import Litestar, Request, Response, get, post
from litestar.exceptions import HTTPException, SerializationException
from litestar.openapi import OpenAPIConfig
from litestar.params import FromPath, JSONBody, Parameter, QueryParameter
from litestar.response import Stream
from litestar.utils.scope.state import ScopeState

from kraftlake.logging import get_logger
from kraftlake.records import Log, Record, TimeTravelError
from kraftlake.records.catalog import BY_NAME
from kraftlake.records.codec import encode_line, encode_lines, invalid_utf8
from kraftlake.replay import report_json
from kraftlake.replay.grace import GRACE_MS

from .append import Answer, Appending, body_timeout, fast_path, internal_error, too_large
from .auth import auth_middleware
from .bookkeeper import routes as bookkeeper_routes
from .commit_process import READY, CommitProcess
from .committer import CommitConfig, GroupCommitter
from .limits import READ_CHUNK, BodyTimeout, Limits, body_deadline
from .metrics import CONTENT_TYPE, Metrics
from .producers import Lookups, answer_for, resume_path
from .reads import Busy, ReadPool, client_of
from .subscriptions import Tail, stream_records

if TYPE_CHECKING:
    from kraftlake.replay.books import AuditConfig

log = get_logger(__name__)

MAX_OFFSET = 2**63 - 1
Offset = Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)]
LINES_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines")
"""``Accept`` values answered with JSON Lines (one record a line) instead of one JSON array."""


ViewOffset = Annotated[int | None, QueryParameter(ge=-1, le=MAX_OFFSET, description="after this record")]
ViewVersion = Annotated[int | None, QueryParameter(ge=0, le=MAX_OFFSET, description="at this Delta version")]
ViewTime = Annotated[str | None, QueryParameter(description="at this ISO 8601 time")]

BrokerIdPath = Annotated[int, Parameter(ge=0, le=2**31 - 1, description="a broker id (Kafka's int32)")]
FromOffset = Annotated[
    int | None, QueryParameter(name="from", ge=0, le=MAX_OFFSET, description="first offset (default 0)")
]
ToOffset = Annotated[
    int | None,
    QueryParameter(
        ge=0, le=MAX_OFFSET, description="last offset (default: the end; at most --max-read-records records)"
    ),
]
Types = Annotated[str | None, QueryParameter(name="type", description="comma-separated record types")]
WaitMs = Annotated[
    int | None,
    QueryParameter(
        ge=0,
        le=MAX_OFFSET,
        description="wait up to this many ms for a record at `from` (long poll; --max-poll-wait-ms)",
    ),
]


class AuditRequest(msgspec.Struct, forbid_unknown_fields=True):
    from_offset: Offset | None = None
    to_offset: Offset | None = None
    grace_records: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)] | None = None
    grace_ms: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)] = GRACE_MS
    fail_on: str = "error"
    engine: Literal["auto", "duckdb", "python"] = "auto"


class BadParameter(Exception):
    """A request parameter (query or body) the service refuses: 400 naming it."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


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


_PARAMETER_NAMES = {"from_": "from", "type_": "type"}
"""Query parameters whose Python names differ (Litestar's details give the Python name)."""


def _http_error(request: Request, exc: HTTPException) -> Response:
    """Litestar's own refusals (404, 405, a query parameter of the wrong type…) in the service's
    one error shape: ``{"error": message}``, naming the parameter when Litestar's details do."""
    if isinstance(exc.__cause__, SerializationException):  # the JSON body did not decode
        return _undecodable(request, exc)
    payload: dict[str, Any] = {"error": exc.detail}
    extra = getattr(exc, "extra", None)
    if extra:
        first = extra[0] if isinstance(extra, list) and extra and isinstance(extra[0], dict) else None
        if first is not None and first.get("key"):
            name = _PARAMETER_NAMES.get(first["key"], first["key"])
            payload = {"error": f"{name}: {first.get('message', exc.detail)}", "parameter": name}
        payload["details"] = extra
    return Response(payload, status_code=exc.status_code, headers=exc.headers, media_type="application/json")


def _bad_parameter(_request: Request, exc: BadParameter) -> Response:
    return Response({"error": str(exc), "parameter": exc.parameter}, status_code=400, media_type="application/json")


def _undecodable(request: Request, exc: Exception) -> Response:
    """A JSON body Litestar could not decode for a route (an audit, a bookie's state): a string
    that is not UTF-8 (found in the bytes Litestar read: which exception msgspec raises for it
    differs between builds), nesting deeper than the decoder goes, or not JSON at all."""
    body = ScopeState.from_scope(request.scope).body
    pos = invalid_utf8(body) if isinstance(body, bytes) else None
    if pos is not None:
        why = f"a string is not valid UTF-8 at byte {pos}"
    elif isinstance(exc, RecursionError) or isinstance(exc.__cause__, RecursionError):
        why = "nested too deeply to decode"
    else:
        why = f"not JSON: {exc.detail if isinstance(exc, HTTPException) else exc}"
    return Response({"error": f"body: {why}", "parameter": "body"}, status_code=400, media_type="application/json")


def _busy(_request: Request, exc: Busy) -> Response:
    return Response(
        {"error": str(exc)},
        status_code=429,
        headers={"retry-after": str(exc.retry_after_s)},
        media_type="application/json",
    )


def _timed_out(_request: Request, exc: BodyTimeout) -> Response:
    return _respond(body_timeout(exc))


def _unexpected(_request: Request, exc: Exception) -> Response:
    return _respond(internal_error(exc))


def _timestamp(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise BadParameter("timestamp", f"{value!r} is not an ISO 8601 date and time") from None
    return value


def _types(value: str | None) -> list[str] | None:
    if not value:
        return None
    types = [t for t in value.split(",") if t]
    unknown = [t for t in types if t not in BY_NAME]
    if unknown:
        raise BadParameter("type", f"unknown record type {unknown[0]!r}")
    return types


def _chunks(parts: Iterator[list[Record]], lines: bool) -> Iterator[bytes]:
    """Records as JSON Lines or one JSON array, a chunk per part: the first chunk is made with the
    first part (so that reading errors come before the answer starts), the last closes it."""
    prefix, sep = (b"", b"") if lines else (b"[", b"")
    for part in parts:
        if not part:
            continue
        if lines:
            yield prefix + encode_lines(part)
        else:
            yield prefix + sep + b",".join(encode_line(r) for r in part)
            sep = b","
        prefix = b""
    yield prefix + (b"" if lines else b"]")


def _parts(records: list[Record]) -> Iterator[list[Record]]:
    for i in range(0, len(records), READ_CHUNK):
        yield records[i : i + READ_CHUNK]


def create_app(
    path: str | Path,
    config: CommitConfig | None = None,
    tokens: list | None = None,
    *,
    fast: bool = True,
    commit_process: bool = True,
    limits: Limits | None = None,
    storage_options: dict[str, str] | None = None,
    audit: AuditConfig | None = None,
) -> Litestar:
    """The service over the log at ``path`` (which must exist). ``tokens`` (``auth.load_tokens``):
    every request needs a bearer token with the right role; None: no authentication (bind the
    service to loopback). ``fast=False``: appends through Litestar's route too (the same
    answers, slower; the tests hold the two doors to each other). ``commit_process=False``:
    commits in this process instead of a child (``service.commit_process``), where they compete
    with the event loop for the GIL. ``limits``: what one request may cost (``service.limits``).
    ``storage_options``: delta-rs's, for a log on an object store. ``audit``: run the following
    audit (``service.live_audit``) with this configuration."""
    config = config or CommitConfig()
    limits = limits or Limits()
    opened = Log.open(path, storage_options=storage_options)  # a URI's storage options travel with it
    target = (
        CommitProcess(opened.path, config.compact_after_files, opened.storage_options)
        if commit_process
        else Log.open(opened.location)
    )
    metrics = Metrics()
    committer = GroupCommitter(target, config, metrics)
    pool = ReadPool(opened.location, limits)
    tail = Tail(opened.location, limits)
    auditor = None
    if audit is not None:
        from .live_audit import LiveAuditor

        auditor = LiveAuditor(opened.location, audit, metrics.registry)
    appending = Appending(committer, limits)
    lookups = Lookups(opened.location, limits)

    @post("/v1/records", status_code=200, summary="Append one batch (exactly once per producer and seq)")
    async def append(request: Request) -> Response:
        try:
            body = await request.body()
        except HTTPException as exc:
            if exc.status_code != 413:
                raise
            return _respond(too_large(limits))  # the fast path's words, not Litestar's
        answer = await appending.answer(
            body, request.headers.get("content-type", ""), request.scope.get("state", {}).get("identity")
        )
        return _respond(answer)

    @get("/v1/records", summary="Records in [from, to], optionally of some types (JSON, or JSON Lines); long poll")
    async def read(
        request: Request,
        from_: FromOffset = None,
        to: ToOffset = None,
        type_: Types = None,
        wait_ms: WaitMs = None,
    ) -> Stream:
        types = _types(type_)
        lines = any(t in request.headers.get("accept", "") for t in LINES_TYPES)
        if wait_ms:
            if wait_ms > limits.max_poll_wait_ms:
                raise BadParameter("wait_ms", f"{wait_ms} is above --max-poll-wait-ms {limits.max_poll_wait_ms}")
            # Records there: answered at once; else wait (no thread held) until one lands or the time is up.
            if await tail.refresh() < (from_ or 0):
                with tail.waiter():
                    await tail.wait_for(from_ or 0, wait_ms / 1000)

        def start() -> Iterator[bytes]:
            snap = pool.reader().at()
            lo = 0 if from_ is None else from_
            hi = snap.last_offset if to is None else min(to, snap.last_offset)
            hi = min(hi, lo + limits.max_read_records - 1)
            if types is not None:  # the type filter is applied as the files are read
                parts = _parts(snap.records(lo, hi, types)) if hi >= lo else iter(())
            else:
                parts = (p for records in snap.iter_records(lo, hi) for p in _parts(records))
            return _chunks(parts, lines)

        chunks = await pool.stream(client_of(request.scope), start)
        return Stream(chunks, media_type="application/x-ndjson" if lines else "application/json")

    @get("/v1/records/stream", summary="Records from `from` on, then each as it lands (Server-Sent Events)")
    async def stream(request: Request, from_: FromOffset = None) -> Stream:
        start = from_ or 0
        last_id = request.headers.get("last-event-id")
        if last_id:
            if not last_id.isdigit() or int(last_id) >= MAX_OFFSET:
                raise BadParameter("Last-Event-ID", f"{last_id!r} is not an offset")
            start = int(last_id) + 1  # a reconnecting client goes on after the last record it got
        client = client_of(request.scope)
        pool.admit(client)  # held to the read limits now, never after the answer started (429 then)
        waiting = tail.waiter()  # refused (429) before the answer starts
        body = stream_records(pool, tail, opened.location, client, start, waiting)
        return Stream(body, media_type="text/event-stream", headers={"cache-control": "no-cache"})

    @get("/v1/audits/live", summary="The following audit (serve --audit): the violations open now")
    async def live_audit() -> Response:
        if auditor is None:
            raise HTTPException(status_code=404, detail="the service runs no following audit (serve --audit)")
        return Response(msgspec.json.encode(auditor.state), media_type="application/json")

    def _state_at(offset, version, timestamp):
        from kraftlake.replay.state import state_at

        if sum(x is not None for x in (offset, version, timestamp)) > 1:
            raise HTTPException(status_code=400, detail="give at most one of offset, version, timestamp")
        try:
            return state_at(pool.reader(), offset=offset, version=version, timestamp=timestamp).published()
        except TimeTravelError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None

    @get("/v1/views/controller", summary="The controller's view (canonical image) at a point in time")
    async def controller_view(
        request: Request, offset: ViewOffset = None, version: ViewVersion = None, timestamp: ViewTime = None
    ) -> Response:
        when = _timestamp(timestamp)
        view = await pool.run(client_of(request.scope), _state_at, offset, version, when)
        return Response(msgspec.json.encode(view.image()), media_type="application/json")

    @get("/v1/views/brokers/{broker_id:int}", summary="One broker's view at a point in time")
    async def broker_view_(
        request: Request,
        broker_id: BrokerIdPath,
        offset: ViewOffset = None,
        version: ViewVersion = None,
        timestamp: ViewTime = None,
    ) -> Response:
        from kraftlake.statemachine.kraft.broker_view import broker_view

        when = _timestamp(timestamp)
        view = await pool.run(client_of(request.scope), _state_at, offset, version, when)
        return Response(msgspec.json.encode(broker_view(view, broker_id)), media_type="application/json")

    @post(
        "/v1/audits",
        status_code=200,
        summary="Run the local audit over a range; the report's summary as JSON (bounded lists, ``omitted`` counts)",
    )
    async def audits(request: Request, data: JSONBody[AuditRequest]) -> Response:
        from kraftlake.auditing import AuditCapacityError, AuditUsageError, audit
        from kraftlake.replay.summary import bounded

        if data.from_offset is not None and data.to_offset is not None and data.to_offset < data.from_offset:
            raise BadParameter("to_offset", f"{data.to_offset} is below from_offset {data.from_offset}")

        def work() -> bytes:
            reader = pool.reader()
            try:
                report = audit(
                    reader,
                    engine=data.engine,
                    from_offset=data.from_offset or None,
                    to_offset=data.to_offset,
                    grace_ms=data.grace_ms,
                    grace_records=data.grace_records,
                    fail_on=data.fail_on,
                )
            except AuditUsageError as exc:
                raise BadParameter(exc.parameter or "body", str(exc)) from None
            except AuditCapacityError as exc:
                raise HTTPException(status_code=503, detail=str(exc)) from None
            # The summary (its size does not grow with the log), rows timed from the log.
            return report_json.encode(bounded(report, times=reader.at().record_times))

        return Response(await pool.run(client_of(request.scope), work), media_type="application/json")

    @get("/v1/producers/{producer:str}", summary="A producer's last committed seq (null: none yet)")
    async def producer_seq(request: Request, producer: FromPath[str]) -> Response:
        # Served in front of Litestar (``service.producers``), which routes every name; this
        # route documents it, and answers the same where the Litestar app is mounted alone.
        return _respond(await answer_for(lookups, request.scope))

    @get("/healthz", summary="Alive; the writer's state, the last offset it knows, the work waiting")
    async def healthz() -> dict:
        writer = committer.health()
        return {
            "status": "ok" if writer["state"] == READY else "degraded",
            "writer": writer,
            "last_offset": committer.last_offset,
            "queued_records": committer.queued_records,
            "reads": pool.active,
            "waiting": tail.waiting,
        }

    @get("/readyz", summary="Ready to commit appends (503 while the writer starts or restarts)")
    async def readyz() -> Response:
        writer = committer.health()
        if writer["state"] != READY:
            why = f": {writer['error']}" if writer.get("error") else ""
            return Response(
                {"error": f"the writer is {writer['state']}{why}", "writer": writer},
                status_code=503,
                headers={"retry-after": "1"},
                media_type="application/json",
            )
        return Response({"status": "ready", "writer": writer}, media_type="application/json")

    @get("/metrics", summary="Prometheus metrics", media_type=CONTENT_TYPE)
    async def metrics_() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def startup() -> None:
        if auditor is not None:
            auditor.start()

    async def shutdown() -> None:
        if auditor is not None:
            await asyncio.to_thread(auditor.close)
        await asyncio.to_thread(committer.close)  # not on the read pool: reads may hold it
        pool.close()
        lookups.close()

    middleware = [access_log(metrics)] + ([auth_middleware(tokens)] if tokens is not None else [])
    middleware.append(body_deadline(limits.body_timeout_s))
    app = Litestar(
        route_handlers=[
            append,
            read,
            stream,
            controller_view,
            broker_view_,
            audits,
            live_audit,
            producer_seq,
            healthz,
            readyz,
            metrics_,
            *bookkeeper_routes(path, committer),
        ],
        on_startup=[startup],
        on_shutdown=[shutdown],
        middleware=middleware,
        exception_handlers={
            HTTPException: _http_error,
            BadParameter: _bad_parameter,
            Busy: _busy,
            BodyTimeout: _timed_out,
            UnicodeDecodeError: _undecodable,
            RecursionError: _undecodable,
            Exception: _unexpected,
        },
        openapi_config=OpenAPIConfig(title="kraftlake", version="1"),
        request_max_body_size=limits.max_body_bytes,
        debug=False,
    )
    app.asgi_handler = resume_path(app.asgi_handler, lookups, middleware)
    if fast:
        # Appends skip Litestar's router and request/response objects (the way its CORS and
        # OpenTelemetry layers wrap the same handler); everything else goes on to it.
        app.asgi_handler = fast_path(app.asgi_handler, appending, middleware)
    return app
