"""``kraftlake serve --audit``: the following audit (``replay.live_audit``) on a thread of the
service's own, over the log as it lands (``records.store.follow.Follower``): the violations open now
and what holds now (``Now``: partitions without a leader, on offline directories, under min ISR;
offline directories; open incidents; the last record's time) at ``GET /v1/audits/live``, and as
metrics on ``/metrics`` (``replay.prometheus.live_families``); each violation's and incident's
opening and closing logged (``audit.violation_open`` / ``audit.incident_open`` …).

The thread publishes an immutable ``LiveState`` after each batch (one attribute assignment): the
event loop and the metrics' collector read it without a lock and never wait for the audit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import msgspec
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from kraftlake.logging import get_logger
from kraftlake.records.store.follow import Follower
from kraftlake.records.store.location import Location
from kraftlake.replay.books import AuditConfig, Violation
from kraftlake.replay.live_audit import IncidentEvent, LiveAudit, Now
from kraftlake.replay.prometheus import live_families

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
    now: Now | None = None
    """What holds after the last record audited (None before the first batch)."""


class LiveAuditor(Collector):
    """The following audit of the log at ``location`` from offset 0, until ``close``; its metrics
    collected into ``registry`` at each scrape from the last state published."""

    def __init__(
        self, location: Location, config: AuditConfig, registry: CollectorRegistry, *, poll_s: float = 0.02
    ) -> None:
        self.location = location
        self.config = config
        self.poll_s = poll_s
        self.state = LiveState(running=False, last_offset=-1, open=[], closed=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraftlake-live-audit", daemon=True)
        self._started = False
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        """The metrics of the last state published (``replay.prometheus.live_families``)."""
        state = self.state
        # Up until it stopped on an error (before its first batch too: it is starting).
        return iter(live_families(state.now, running=state.error is None))

    def start(self) -> None:
        self._started = True
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._started:
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
                self.state = LiveState(
                    running=True,
                    last_offset=live.last_offset,
                    open=live.open_violations,
                    closed=len(live.closed),
                    now=live.now(),
                )
        except Exception as exc:  # the service goes on; /v1/audits/live and kraftlake_audit_up say why
            log.exception("audit.live_failed", error=str(exc))
            self.state = msgspec.structs.replace(self.state, running=False, error=str(exc))
            return
        self.state = msgspec.structs.replace(self.state, running=False)
