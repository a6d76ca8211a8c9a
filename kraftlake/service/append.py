"""``POST /v1/records``, the service's hot path: one batch in, its offsets out once committed.

``Appending.answer`` is the whole endpoint (body in; status, JSON payload and headers out): the
request decoded (JSON, or msgpack with ``Content-Type: application/msgpack``, or an Arrow IPC
stream of rows shaped like the log's with ``Content-Type: application/vnd.apache.arrow.stream``,
its producer and seq in the stream schema's metadata ``kraftlake.producer``/``kraftlake.seq``;
any other media type 415), every record checked (400 naming index, type and field; nothing appended; a
key twice in a record or in the request is refused in the CLI's words, ``service.duplicates``), the
token's producer enforced (403), the body and each record held to their size limits
(``service.limits``: 413), the batch queued for the group committer (429 with
``Retry-After`` when the queue is full), and the answer given once the commit landed (503 with
``Retry-After`` when the commit failed and a retry may land, 500 naming the failure otherwise).
Every refusal is ``{"error": message, ...}`` with the same message for the same cause, whichever
door answered, and the rest of the service answers its errors in that shape too (``app.py``).

Two doors lead to it. Litestar's route (``app.py``) documents it in the OpenAPI schema and serves
it wherever the Litestar app is mounted on its own. ``fast_path`` serves it straight from the
ASGI scope, in front of Litestar, under the same access-log and token middleware: Litestar's
request and response machinery costs about 150 microseconds a request, as much as everything
else an append costs the event loop, and single-record appends from hundreds of clients are
bounded by exactly that (bench/service.py).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pyarrow as pa

from kraftlake.logging import get_logger
from kraftlake.records import CorruptStoreError, LogError, ProducerSeq, RecordError
from kraftlake.records.arrow_input import from_arrow
from kraftlake.records.codec import invalid_utf8
from kraftlake.records.columnar import from_builtins_batch, from_msgpack_items

from .committer import Closed, GroupCommitter, Overloaded
from .duplicates import json_duplicate, msgpack_duplicate_in
from .limits import BodyTimeout, Limits

log = get_logger(__name__)

PATH = "/v1/records"
JSON_TYPES = ("", "application/json")
"""Media types read as JSON (a request with no Content-Type too), beside any ``+json`` type."""
MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")
_JSON_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)")
"""A seq written in text (an Arrow stream's metadata) as a JSON body writes it: not as Python's
``int()`` reads it, which takes spaces, ``_``, ``+`` and other scripts' digits."""
ARROW_TYPES = ("application/vnd.apache.arrow.stream",)
"""An Arrow IPC stream of rows (``records.arrow_input``): the body limit holds it, and its rows
are not held one by one to ``max_record_bytes`` (no row is a separate piece of the body)."""


class AppendRequest(msgspec.Struct, forbid_unknown_fields=True):
    records: list[msgspec.Raw]
    """Each record as sent, measured against ``Limits.max_record_bytes`` before it is decoded."""
    producer: str | None | msgspec.UnsetType = msgspec.UNSET
    """Unset (not sent) apart from null, to count the keys the request holds (``duplicates``)."""
    seq: int | None | msgspec.UnsetType = msgspec.UNSET


class _SmallAppendRequest(msgspec.Struct, forbid_unknown_fields=True):
    """An ``AppendRequest`` whose body is within ``max_record_bytes``, so none of its records can
    be over it: decoded in one pass (a third faster for 100-record batches than record by record)."""

    records: list[Any]
    producer: str | None | msgspec.UnsetType = msgspec.UNSET
    seq: int | None | msgspec.UnsetType = msgspec.UNSET


@dataclass(frozen=True)
class Answer:
    status: int
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _problem(status: int, message: str, **extra: Any) -> Answer:
    return Answer(status, {"error": message, **extra})


def too_large(limits: Limits) -> Answer:
    return _problem(
        413, f"the body is larger than {limits.max_body_bytes} bytes (--max-body-bytes): send smaller batches"
    )


def body_timeout(exc: BodyTimeout) -> Answer:
    return _problem(408, str(exc))


def undecodable(exc: Exception, body: bytes, *, json: bool, **where: Any) -> Answer:
    """400 for a body (or one record in it, ``where``) that does not decode: not JSON or msgpack,
    a string that is not UTF-8 (naming the byte of a JSON body), nesting too deep for the decoder.

    Invalid UTF-8 is found in the bytes, not by the exception's type: msgspec raises
    ``UnicodeDecodeError`` on some builds and ``DecodeError`` on others."""
    field_ = where.pop("field", "body")
    if json:  # JSON text is UTF-8 as a whole: any invalid byte is the fault
        pos = invalid_utf8(body)
        if pos is not None:
            return _problem(400, f"a string is not valid UTF-8 at byte {pos}", field=field_, **where)
    elif isinstance(exc, UnicodeDecodeError) or "utf-8" in str(exc).lower():
        # msgpack carries binary beside its strings: only the decoder knows which bytes were text.
        return _problem(400, "a string is not valid UTF-8", field=field_, **where)
    if isinstance(exc, RecursionError):
        return _problem(400, "nested too deeply to decode", field=field_, **where)
    return _problem(400, f"the body is not an append request: {exc}", **where)


def _record_error(exc: RecordError) -> Answer:
    """400 naming a batch's bad record: its index (its line is its index + 1), type and field."""
    return _problem(400, str(exc), index=exc.line - 1, type=exc.record_type, field=exc.field)  # type: ignore[operator]  # a RecordError of a batch always has its line


def _duplicate(exc: RecordError) -> Answer:
    """400 for a key twice in a record (named as any bad record is) or in the request itself."""
    return _record_error(exc) if exc.line is not None else _problem(400, exc.message, field=exc.field)


def media_type(content_type: str) -> str:
    """``application/json`` of ``Application/JSON; charset=utf-8``."""
    return content_type.split(";", 1)[0].strip().lower()


def commit_failed(exc: BaseException) -> Answer:
    """The answer to a batch whose commit failed: 503 when the store refused or failed it (a retry
    with the same producer and seq lands exactly once), 500 when something unexpected did."""
    if isinstance(exc, CorruptStoreError):  # refused, nothing written: the log must be repaired first
        message = f"the writer refuses to commit: {exc}; retry with the same producer and seq once the log is restored"
        return Answer(503, {"error": message}, {"retry-after": "1"})
    if isinstance(exc, (LogError, OSError, Closed)):
        message = f"the commit failed ({type(exc).__name__}: {exc}); retry with the same producer and seq"
        return Answer(503, {"error": message}, {"retry-after": "1"})
    return internal_error(exc)


def internal_error(exc: BaseException) -> Answer:
    log.error("service.internal_error", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
    return _problem(500, f"internal error: {type(exc).__name__}: {exc}")


class Appending:
    """The append endpoint over one group committer."""

    def __init__(self, committer: GroupCommitter, limits: Limits | None = None) -> None:
        self.committer = committer
        self.limits = limits or Limits()

    async def answer(self, body: bytes, content_type: str, identity: Any = None) -> Answer:
        limits = self.limits
        if len(body) > limits.max_body_bytes:
            return too_large(limits)
        kind = media_type(content_type)
        if kind in ARROW_TYPES:
            return await self._answer_arrow(body, identity)
        if kind in MSGPACK_TYPES:
            decode = msgspec.msgpack.decode
        elif kind in JSON_TYPES or kind.endswith("+json"):
            decode = msgspec.json.decode
        else:
            return _problem(
                415,
                f"Content-Type {kind} is not accepted: send application/json, application/msgpack"
                " or application/vnd.apache.arrow.stream",
            )
        measured = len(body) > limits.max_record_bytes
        try:
            req = decode(body, type=AppendRequest if measured else _SmallAppendRequest)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
            if measured:
                return undecodable(exc, body, json=decode is msgspec.json.decode)
            try:  # record by record, to name the one that does not decode
                req, measured = decode(body, type=AppendRequest), True
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
                return undecodable(exc, body, json=decode is msgspec.json.decode)
        # The request's own keys it holds (``duplicates``: how many a body with none twice shows).
        own = {"records": None}
        if req.producer is not msgspec.UNSET:
            own["producer"] = req.producer
        if req.seq is not msgspec.UNSET:
            own["seq"] = req.seq
        producer, seq = own.get("producer"), own.get("seq")
        try:
            ProducerSeq.of(producer, seq)
        except RecordError as exc:
            return _problem(400, exc.message, field=exc.field)
        if not req.records:
            return _problem(400, "a batch holds at least one record", field="records")
        if identity is not None and producer != identity.producer:
            return _problem(403, f"this token appends as producer {identity.producer!r} only", field="producer")
        raws = req.records
        msgpack = kind in MSGPACK_TYPES
        if measured and msgpack and all(len(raw) <= limits.max_record_bytes for raw in raws):
            # Typed in one decode, no object per record (``columnar.from_msgpack_items``); a
            # batch it cannot vouch for takes the path below, which names the bad record.
            fast = from_msgpack_items(raws)
            if fast is not None:
                # Records that are their typed encoding hold no key twice.
                vouched = fast.columns is not None and fast.columns.lengths is not None
                dup = msgpack_duplicate_in(body, len(own), None, records_checked=vouched)
                if dup is not None:
                    return _duplicate(dup)
                return await self._commit(fast, producer, seq)
        if measured:  # records arrived as raw bytes: measure each, then decode it
            raws = []
            for i, raw in enumerate(req.records):
                if len(raw) > limits.max_record_bytes:
                    return _problem(
                        413,
                        f"record {i} is {len(raw)} bytes, more than {limits.max_record_bytes} (--max-record-bytes)",
                        index=i,
                    )
                try:
                    raws.append(decode(raw))
                except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
                    return undecodable(exc, bytes(raw), json=decode is msgspec.json.decode, index=i, field="records")
        dup = msgpack_duplicate_in(body, len(own), raws) if msgpack else json_duplicate(body, own, raws)
        if dup is not None:
            return _duplicate(dup)
        try:
            records = from_builtins_batch(raws)  # checked column by column (records.columnar)
        except RecordError as exc:  # the first bad record; its line is its index + 1
            return _record_error(exc)
        return await self._commit(records, producer, seq)

    async def _answer_arrow(self, body: bytes, identity: Any) -> Answer:
        """An Arrow IPC stream's rows, checked (``records.arrow_input``) and committed."""
        try:
            table = pa.ipc.open_stream(body).read_all()
        except (pa.ArrowException, OSError, ValueError) as exc:
            return _problem(400, f"the body is not an Arrow IPC stream: {exc}")
        meta = table.schema.metadata or {}
        producer = meta[b"kraftlake.producer"].decode("utf-8", "replace") if b"kraftlake.producer" in meta else None
        seq: int | None = None
        if b"kraftlake.seq" in meta:
            if not _JSON_INTEGER.fullmatch(meta[b"kraftlake.seq"]):
                return _problem(400, "kraftlake.seq in the stream's metadata is not an integer", field="seq")
            seq = int(meta[b"kraftlake.seq"])
        try:
            ProducerSeq.of(producer, seq)
        except RecordError as exc:
            return _problem(400, exc.message, field=exc.field)
        if table.num_rows == 0:
            return _problem(400, "a batch holds at least one record", field="records")
        if identity is not None and producer != identity.producer:
            return _problem(403, f"this token appends as producer {identity.producer!r} only", field="producer")
        try:
            records = from_arrow(table)
        except RecordError as exc:  # the first bad row (1-based), or the table itself
            index = None if exc.line is None else exc.line - 1
            return _problem(400, str(exc), index=index, type=exc.record_type, field=exc.field)
        return await self._commit(records, producer, seq)

    async def _commit(self, records: Any, producer: str | None, seq: int | None) -> Answer:
        try:
            result = await self.committer.append(records, producer, seq)
        except Overloaded as exc:
            return Answer(429, {"error": str(exc)}, {"retry-after": f"{max(1, round(exc.retry_after_s))}"})
        except RecordError as exc:
            return _problem(409, str(exc))
        except Exception as exc:  # the commit failed: the client learns why, in JSON
            return commit_failed(exc)
        return Answer(200, result.to_dict())


ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]
_JSON = msgspec.json.Encoder()


async def _read_body(receive: Any, max_bytes: int) -> bytes | None:
    """The request body, or None once it passes ``max_bytes`` (the rest is not read)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def fast_path(app: ASGIApp, appending: Appending, middleware: list[Callable[[ASGIApp], ASGIApp]]) -> ASGIApp:
    """``app`` (the Litestar app) with ``POST /v1/records`` answered before it, through
    ``middleware`` (outermost first, as Litestar applies its list)."""

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        limits = appending.limits
        content_type, declared = "", b""
        for name, value in scope["headers"]:
            name = name.lower()
            if name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"content-length":
                declared = value
        try:
            # A body declared too large is refused from its header, before any of it is read
            # (else the answer waits for a body the client may take minutes to send, or never).
            if (declared.isdigit() and int(declared) > limits.max_body_bytes) or (
                body := await _read_body(receive, limits.max_body_bytes)
            ) is None:
                # The rest of the body is never read: the connection cannot carry another request.
                answer = too_large(limits)
                answer.headers["connection"] = "close"
            else:
                identity = scope.get("state", {}).get("identity")
                answer = await appending.answer(body, content_type, identity)
        except BodyTimeout as exc:
            answer = body_timeout(exc)
        except Exception as exc:  # as Litestar's door answers it (app.py): JSON, never a bare 500
            answer = internal_error(exc)
        payload = _JSON.encode(answer.payload)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in answer.headers.items()]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    wrapped: ASGIApp = endpoint
    for layer in reversed(middleware):
        wrapped = layer(wrapped)

    async def front(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == PATH and scope["method"] == "POST":
            await wrapped(scope, receive, send)
        else:
            await app(scope, receive, send)

    return front
