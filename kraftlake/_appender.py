"""``Appender``: one producer's exactly-once batches, numbered for the caller, to a local log or
to the HTTP service (``kraftlake serve``), with the same interface."""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.parse
from collections.abc import Sequence

import msgspec
import pyarrow as pa

from kraftlake.records import AppendResult, KraftlakeError, Log, Record, RecordError
from kraftlake.records.arrow_input import from_arrow


class ServiceError(KraftlakeError):
    """The service refused a batch (``status``) or could not be reached in time."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Appender:
    """Appends batches for one producer; each batch gets the next sequence number.

    ``target`` is a log (a ``Log`` or its path) or a service URL (``http://host:port``). The
    sequence resumes from what the log stored for this producer, so a restarted service
    continues where it left off. To retry a batch whose acknowledgement was lost, call
    ``append(records, seq=n)`` with the same ``n``: it lands once and returns the same offsets.
    Against a service, timeouts, refused connections, 429 and 5xx are retried (for up to
    ``retry_for_s``) with the same ``seq``, so a retry never duplicates; ``token`` is the bearer
    token of a service started with ``--tokens``. ``storage_options`` (delta-rs's) go with a
    log given by URI (``s3://bucket/prefix``).
    """

    def __init__(
        self,
        target: Log | str | os.PathLike[str],
        producer: str,
        *,
        timeout_s: float = 30.0,
        retry_for_s: float = 120.0,
        token: str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.producer = producer
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self.url: str | None = None
        self.log: Log | None = None
        self.timeout_s, self.retry_for_s = timeout_s, retry_for_s
        self._conn: http.client.HTTPConnection | None = None
        if isinstance(target, str) and target.startswith(("http://", "https://")):
            self.url = target.rstrip("/")
            # Every character but letters, digits and ``_-~`` escaped: ``/`` stays in the name,
            # and ``.``/``..`` are not path segments that a proxy would resolve.
            name = urllib.parse.quote(producer, safe="").replace(".", "%2E")
            stored = self._call("GET", f"/v1/producers/{name}")["seq"]
        else:
            inner = getattr(target, "log", target)  # a Lake (kraftlake.open) holds its Log
            self.log = inner if isinstance(inner, Log) else Log.open(target, storage_options=storage_options)
            stored = self.log.producer_seq(producer)
        self.next_seq = 0 if stored is None else stored + 1

    def append(self, records: Sequence[Record] | pa.Table | pa.RecordBatch, *, seq: int | None = None) -> AppendResult:
        """Append one batch: records, or a pyarrow ``Table``/``RecordBatch`` of rows shaped like
        the log's (``records.arrow_input``; to a service it is checked here and sent as JSON)."""
        use = self.next_seq if seq is None else seq
        if self.log is not None:
            result = self.log.append(records, producer=self.producer, seq=use)
        else:
            if isinstance(records, (pa.Table, pa.RecordBatch)):
                records = from_arrow(records)
            body = msgspec.json.encode({"producer": self.producer, "seq": use, "records": list(records)})
            doc = self._call("POST", "/v1/records", body)
            result = AppendResult(doc["first_offset"], doc["last_offset"], doc["version"], doc["duplicate"])
        self.next_seq = max(self.next_seq, use + 1)
        return result

    def _connection(self) -> http.client.HTTPConnection:
        """One kept-alive connection per appender (a new TCP connection per batch would cost
        more than the batch)."""
        if self._conn is None:
            u = urllib.parse.urlsplit(self.url)
            cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(u.hostname, u.port, timeout=self.timeout_s)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _call(self, method: str, path: str, body: bytes | None = None) -> dict:
        deadline = time.monotonic() + self.retry_for_s
        pause = 0.05
        while True:
            wait = pause
            try:
                conn = self._connection()
                conn.request(method, path, body=body, headers=self._headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.status == 200:
                    return json.loads(data)
                detail = data.decode("utf-8", "replace")
                if resp.status == 400:
                    raise RecordError(json.loads(detail).get("error", detail))
                if resp.status != 429 and resp.status < 500:
                    raise ServiceError(f"{method} {path}: {resp.status} {detail}", resp.status)
                wait = float(resp.getheader("Retry-After") or pause)
                last = f"{resp.status} {detail}"
            except (http.client.HTTPException, TimeoutError, ConnectionError, OSError) as exc:
                # The connection is in an unknown state (a timeout mid-response): start afresh.
                self.close()
                last = str(exc) or type(exc).__name__
            if time.monotonic() + wait > deadline:
                raise ServiceError(f"{method} {path}: gave up after {self.retry_for_s:.0f} s: {last}")
            time.sleep(wait)
            pause = min(2.0, pause * 2)
