"""``/metrics``: the service's Prometheus metrics, kept by ``prometheus_client``.

Counters only grow and histograms count every observation into cumulative buckets, for the life
of the process, as Prometheus's ``rate()`` and ``histogram_quantile()`` expect. Each service has
a registry of its own (several apps in one process, as in the tests, do not share counts).

The committer observes commits (``commit``) and answered requests (``answered``); the access-log
middleware observes every HTTP request (``request``) and counts refused appends by reason, one
reason per status, whichever door (the fast path or Litestar's route) answered.
"""

from __future__ import annotations

import re

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = CONTENT_TYPE_LATEST
SECONDS_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
BATCH_BUCKETS = (1, 10, 100, 1_000, 10_000, 100_000)

REASONS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    408: "body_timeout",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "overloaded",
    500: "internal_error",
    503: "commit_failed",
}
"""The reason label of a refused append, by the status that answered it."""

# Routes with a path parameter, as templates: the route label stays a small fixed set.
_TEMPLATES = (
    (re.compile(r"^/v1/views/brokers/[^/]+$"), "/v1/views/brokers/{broker_id}"),
    (re.compile(r"^/v1/producers/.*$", re.DOTALL), "/v1/producers/{producer}"),  # names hold "/" too
    (re.compile(r"^/v1/bookies/[^/]+/state$"), "/v1/bookies/{bookie}/state"),
    (re.compile(r"^/v1/bookies/[^/]+$"), "/v1/bookies/{bookie}"),
)
_ROUTES = frozenset(
    {
        "/v1/records",
        "/v1/views/controller",
        "/v1/audits",
        "/v1/bookies",
        "/v1/ledgers/under-replicated",
        "/v1/auditor",
        "/healthz",
        "/readyz",
        "/metrics",
    }
)


def route_of(path: str) -> str:
    """The route a request path belongs to (``other`` for paths the service does not serve,
    ``/schema`` for the OpenAPI documents)."""
    if path in _ROUTES:
        return path
    if path.startswith("/schema"):
        return "/schema"
    for pattern, template in _TEMPLATES:
        if pattern.match(path):
            return template
    return "other"


class Metrics:
    """One service's metrics and the registry ``/metrics`` renders."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.appended_records = Counter("kraftlake_appended_records", "Records committed.", registry=r)
        self.append_requests = Counter(
            "kraftlake_append_requests", "Append requests accepted into the queue.", registry=r
        )
        self.duplicate_requests = Counter(
            "kraftlake_duplicate_requests", "Retries answered with their original offsets.", registry=r
        )
        self.commits = Counter("kraftlake_commits", "Delta commits that appended records.", registry=r)
        self.rejected = Counter(
            "kraftlake_rejected_requests", "Append requests refused, by reason.", ["reason"], registry=r
        )
        self.commit_records = Histogram(
            "kraftlake_commit_records", "Records per Delta commit.", buckets=BATCH_BUCKETS, registry=r
        )
        self.commit_seconds = Histogram(
            "kraftlake_commit_duration_seconds", "Duration of a Delta commit.", buckets=SECONDS_BUCKETS, registry=r
        )
        self.append_seconds = Histogram(
            "kraftlake_append_latency_seconds",
            "An append request from queued to acknowledged (durable).",
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.request_seconds = Histogram(
            "kraftlake_http_request_duration_seconds",
            "HTTP requests by method, route and status: received to answered.",
            ["method", "route", "status"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.queued_records = Gauge("kraftlake_queued_records", "Records waiting for a commit.", registry=r)

    def commit(self, records: int, seconds: float) -> None:
        """A commit that appended ``records`` records."""
        self.commits.inc()
        self.appended_records.inc(records)
        self.commit_records.observe(records)
        self.commit_seconds.observe(seconds)

    def answered(self, seconds: float, duplicate: bool) -> None:
        """An append request acknowledged ``seconds`` after it was queued."""
        self.append_seconds.observe(seconds)
        if duplicate:
            self.duplicate_requests.inc()

    def request(self, method: str, path: str, status: int, seconds: float) -> None:
        self.request_seconds.labels(method, route_of(path), str(status)).observe(seconds)
        if status >= 400 and method == "POST" and path == "/v1/records":
            self.rejected.labels(REASONS.get(status, str(status))).inc()

    def value(self, name: str, **labels: str) -> float:
        """A sample's current value (0 when it has none yet), e.g. ``kraftlake_commits_total``."""
        return self.registry.get_sample_value(name, labels) or 0.0

    def render(self) -> bytes:
        return generate_latest(self.registry)
