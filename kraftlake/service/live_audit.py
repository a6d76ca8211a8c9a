"""``kraftlake serve --audit``: the following audit (``replay.live_audit``) on a thread of the
service's own, over the log as it lands (``records.store.follow.Follower``); the violations open now at
``GET /v1/audits/live`` and as Prometheus gauges on ``/metrics``; each opening and closing logged
(``audit.violation_open`` / ``audit.violation_close``).

The thread publishes an immutable ``LiveState`` after each batch (one attribute assignment): the
event loop reads it without a lock and never waits for the audit.
"""

from __future__ import annotations

import threading
from collections import Counter

import msgspec
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client import Counter as PromCounter

from kraftlake.logging import get_logger
from kraftlake.records.store.follow import Follower
from kraftlake.records.store.location import Location
from kraftlake.replay.books import AuditConfig, Violation
from kraftlake.replay.live_audit import IncidentEvent, LiveAudit

log = get_logger(__name__)


class LiveState(msgspec.Struct, frozen=True, kw_only=True):
    """What ``GET /v1/audits/live`` answers."""

    running: bool
    last_offset: int
    """The last offset audited (-1 before any)."""
    open: list[Violation]
    closed: int
    """Violations closed since the service started."""
    error: str | None = None


class LiveAuditor:
    """The following audit of the log at ``location`` from offset 0, until ``close``."""

    def __init__(
        self, location: Location, config: AuditConfig, registry: CollectorRegistry, *, poll_s: float = 0.02
    ) -> None:
        self.location = location
        self.config = config
        self.poll_s = poll_s
        self.state = LiveState(running=False, last_offset=-1, open=[], closed=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraftlake-live-audit", daemon=True)
        self._open_gauge = Gauge(
            "kraftlake_audit_open_violations",
            "Violations open now (the following audit), by invariant and severity.",
            ["invariant", "severity"],
            registry=registry,
        )
        self._closed = PromCounter(
            "kraftlake_audit_closed_violations", "Violations closed (the following audit).", registry=registry
        )
        self._offset_gauge = Gauge(
            "kraftlake_audit_last_offset", "The last offset the following audit checked.", registry=registry
        )
        self._offset_gauge.set(-1)
        self._labels: set[tuple[str, str]] = set()

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        live = LiveAudit(self.config)
        self.state = msgspec.structs.replace(self.state, running=True)
        try:
            for batch in Follower(self.location, 0, poll=self.poll_s, stop=self._stop):
                for e in live.feed(batch):
                    if isinstance(e, IncidentEvent):
                        inc = e.incident
                        log.info(f"audit.{e.event}", id=inc.id, where=inc.where, at_offset=e.at_offset, at=e.at_time)
                        continue
                    v = e.violation
                    log.info(
                        f"audit.violation_{e.event}",
                        invariant=v.invariant,
                        entity=v.entity,
                        name=e.name,
                        first_offset=v.first_offset,
                        last_offset=v.last_offset,
                        at_offset=e.at_offset,
                        at=e.at_time,
                    )
                    if e.event == "close":
                        self._closed.inc()
                self._publish(live)
        except Exception as exc:  # the service goes on; /v1/audits/live says why the audit stopped
            log.exception("audit.live_failed", error=str(exc))
            self.state = msgspec.structs.replace(self.state, running=False, error=str(exc))
            return
        self.state = msgspec.structs.replace(self.state, running=False)

    def _publish(self, live: LiveAudit) -> None:
        now = live.open_violations
        self.state = LiveState(running=True, last_offset=live.last_offset, open=now, closed=len(live.closed))
        counts = Counter((v.invariant, v.severity) for v in now)
        for labels in self._labels - set(counts):
            self._open_gauge.labels(*labels).set(0)
        for labels, n in counts.items():
            self._open_gauge.labels(*labels).set(n)
        self._labels |= set(counts)
        self._offset_gauge.set(live.last_offset)
