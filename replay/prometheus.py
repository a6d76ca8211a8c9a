"""What the audit says, as Prometheus metrics: the report of an audit (``render``: ``kraftlake
audit --format prometheus``, for a node exporter's textfile collector or a push gateway) and the
following audit's state now (``live_families``: ``serve --audit``'s ``/metrics``).

Prometheus' conventions, which ``promtool check metrics`` holds them to (tests/test_prometheus.py):

- base units: seconds, and record times in seconds since the epoch;
- counters end in ``_total`` and only grow: records audited, violations found, incidents,
  partition-seconds in a bad state (over a log that only grows, each of the report's totals only
  grows; the following audit's count from its start);
- times to move and leaderless waits are histograms (cumulative buckets at
  ``replay.incidents.TIME_BUCKETS_MS``, ``_sum``, ``_count``), which ``histogram_quantile``
  aggregates, not quantiles of one audit typed as gauges;
- bounded cardinality: labels are invariants, severities, kinds, states and roles; a series per
  partition only for one in a bad state, the first ``SHOWN`` of each kind, and an ``…_omitted``
  gauge counting those left out; a series per broker only for one with an offline directory.

The alerting rules over the live series are ``examples/prometheus/kraftlake.rules.yml``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kraftlake.statemachine.invariants import BY_ID

from .books import AuditReport
from .incidents import TIME_BUCKETS_MS

SHOWN = 10
"""Partitions given a series of their own, per family (the longest unavailable, or in a bad state
longest); the rest are counted in an ``…_omitted`` gauge."""

STATE_WORDS = {
    "no_leader": "no leader",
    "under_min_isr": "an ISR smaller than min.insync.replicas",
    "leader_offline": "its leader on an offline directory (or a fenced or unregistered broker)",
    "isr_offline": "an ISR member on an offline directory (or a fenced or unregistered broker)",
}
"""A partition's bad states (``replay.incidents``), in words for the metrics' help."""


def _seconds(ms: int | None) -> float:
    return float("nan") if ms is None else ms / 1000


def _histogram(name: str, doc: str, labels: Sequence[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, labels=list(labels))


def _add_histogram(
    family: HistogramMetricFamily, labels: Sequence[str], cumulative: Sequence[int], count: int, total_ms: int
) -> None:
    """``cumulative``: how many were at most each bound of ``TIME_BUCKETS_MS`` (none: an empty
    histogram, a report made before buckets were kept)."""
    counts = list(cumulative) or [0] * len(TIME_BUCKETS_MS)
    buckets = [(repr(b / 1000), float(n)) for b, n in zip(TIME_BUCKETS_MS, counts, strict=True)]
    family.add_metric(list(labels), [*buckets, ("+Inf", float(count))], total_ms / 1000)


def exposition(families: Sequence[Metric]) -> bytes:
    """``families`` in the text exposition format (version 0.0.4)."""

    class _Families(Collector):
        def collect(self) -> Iterator[Metric]:
            return iter(families)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families())
    return generate_latest(registry)


# -- a report ------------------------------------------------------------------------------------


def render(report: AuditReport) -> str:
    """``report`` (bounded or whole) as metrics, in the text exposition format."""
    return exposition(report_families(report)).decode()


def report_families(report: AuditReport) -> list[Metric]:
    out: list[Metric] = [
        GaugeMetricFamily(
            "kraftlake_audit_pass",
            "1 when the audit passed (no violation at or above --fail-on), 0 when it failed.",
            value=int(report.verdict == "pass"),
        ),
        CounterMetricFamily("kraftlake_audit_records", "Records audited.", value=report.records),
        GaugeMetricFamily(
            "kraftlake_audit_last_offset",
            "The last offset audited (-1: none).",
            value=-1 if report.last_offset is None else report.last_offset,
        ),
    ]
    violations = CounterMetricFamily(
        "kraftlake_audit_violations",
        "Violations the audit found, per invariant of the families the log has.",
        labels=["invariant", "severity"],
    )
    checks = CounterMetricFamily(
        "kraftlake_audit_checks",
        "What each invariant checked (states, records or requests: the catalogue's CHECKED).",
        labels=["invariant"],
    )
    for inv in report.invariants:
        if inv.checked or inv.violations:
            violations.add_metric([inv.id, inv.severity], inv.violations)
            checks.add_metric([inv.id], inv.checked)
    out += [violations, checks]
    a = report.availability
    if a is not None:
        if a.to_ms is not None:
            out.append(
                GaugeMetricFamily(
                    "kraftlake_audit_last_record_timestamp_seconds",
                    "Record time (ts_ms) of the last record audited, seconds since the epoch.",
                    value=_seconds(a.to_ms),
                )
            )
        states = CounterMetricFamily(
            "kraftlake_partition_state_seconds",
            "Partition-seconds of record time in each bad state, summed over partitions; unavailable:"
            " no leader or the leader on an offline directory.",
            labels=["state"],
        )
        for state in ("unavailable", *STATE_WORDS):
            states.add_metric([state], _seconds(getattr(a, state + "_ms")))
        caused = CounterMetricFamily(
            "kraftlake_caused_unavailable_partition_seconds",
            "Partition-seconds unavailable by what caused them: a kind of incident, or none; they add"
            ' up to kraftlake_partition_state_seconds_total{state="unavailable"}.',
            labels=["cause"],
        )
        for kind, ms in a.by_kind.items():
            caused.add_metric([kind], _seconds(ms))
        caused.add_metric(["none"], _seconds(a.outside_incidents_ms))
        unavailable = [p for p in a.partitions if p.unavailable_ms]  # of a bounded report, the worst
        each = CounterMetricFamily(
            "kraftlake_partition_unavailable_seconds",
            f"Seconds of record time a partition had no leader or its leader on an offline directory:"
            f" the {SHOWN} longest.",
            labels=["topic", "partition"],
        )
        topics = report.topics
        shown = sorted(unavailable, key=lambda p: (-p.unavailable_ms, p.topic_id, p.partition))[:SHOWN]
        for p in shown:
            each.add_metric(
                [p.topic or topics.get(p.topic_id, p.topic_id), str(p.partition)], _seconds(p.unavailable_ms)
            )
        out += [
            states,
            caused,
            GaugeMetricFamily(
                "kraftlake_unavailable_partitions",
                "Partitions that were unavailable at some time.",
                value=a.unavailable_partitions,
            ),
            each,
            GaugeMetricFamily(
                "kraftlake_partition_unavailable_omitted",
                "Partitions unavailable at some time without a series of their own in"
                " kraftlake_partition_unavailable_seconds_total.",
                value=a.unavailable_partitions - len(shown),
            ),
        ]
    h = report.handling
    if h is not None:
        incidents = CounterMetricFamily("kraftlake_incidents", "Incidents, per kind.", labels=["kind"])
        for kind, n in h.by_kind.items():
            incidents.add_metric([kind], n)
        moves = _histogram(
            "kraftlake_time_to_move_seconds",
            "Record time from an incident's start to the record that moved a leadership off it to a"
            " live leader (role leadership) or took the replica out of the ISR (role isr).",
            ["role"],
        )
        for role, stats in (("leadership", h.leadership), ("isr", h.isr)):
            _add_histogram(moves, [role], stats.buckets, stats.timed, stats.total_ms)
        gone = h.leaderless
        waits = _histogram(
            "kraftlake_leaderless_wait_seconds",
            "Record time a partition an incident left with no leader waited for one (to the end of"
            " the audit while it still waits).",
            [],
        )
        _add_histogram(waits, [], gone.buckets, gone.timed, gone.total_ms)
        unmoved = GaugeMetricFamily(
            "kraftlake_unmoved_effects",
            "Leaderships and ISR memberships still on a failed directory or broker at the end of the audit.",
            labels=["role"],
        )
        unmoved.add_metric(["leadership"], h.leadership.open)
        unmoved.add_metric(["isr"], h.isr.open)
        out += [
            incidents,
            moves,
            CounterMetricFamily(
                "kraftlake_leaderless_leaderships",
                "Leaderships an incident ended with no leader (Kafka's election found no live replica in the ISR).",
                value=gone.partitions,
            ),
            waits,
            unmoved,
        ]
    return out


# -- the following audit, now -----------------------------------------------------------------------


def live_families(now, *, running: bool) -> list[Metric]:
    """The following audit's state (``replay.live_audit.Now``; None before its first batch) as
    metrics: what an SRE alerts on now. ``running``: the audit goes on (False: it stopped on
    an error the service logged)."""
    out: list[Metric] = [
        GaugeMetricFamily(
            "kraftlake_audit_up", "1 while the following audit runs, 0 once it stopped on an error.", value=int(running)
        )
    ]
    if now is None:
        return out
    out += [
        GaugeMetricFamily(
            "kraftlake_audit_last_offset", "The last offset the following audit checked.", value=now.last_offset
        ),
        CounterMetricFamily(
            "kraftlake_audit_records", "Records the following audit checked since it began.", value=now.records
        ),
    ]
    if now.last_ms is not None:
        out.append(
            GaugeMetricFamily(
                "kraftlake_audit_last_record_timestamp_seconds",
                "Record time (ts_ms) of the last record audited, seconds since the epoch: the cluster's"
                " controller writes a record at least every metadata.max.idle.interval.ms (500 ms).",
                value=now.last_ms / 1000,
            )
        )
    out.append(GaugeMetricFamily("kraftlake_partitions", "Partitions in the cluster.", value=now.partitions))
    states = GaugeMetricFamily(
        "kraftlake_unhealthy_partitions",
        "Partitions in a bad state now: no_leader, under_min_isr, leader_offline (the leader on an"
        " offline directory or a fenced broker), isr_offline (an ISR member on one).",
        labels=["state"],
    )
    since = GaugeMetricFamily(
        "kraftlake_unhealthy_partition_since_timestamp_seconds",
        f"A partition in a bad state now: the record time it entered it, seconds since the epoch (NaN:"
        f" untimed records); the {SHOWN} longest in each state.",
        labels=["state", "topic", "partition"],
    )
    omitted = GaugeMetricFamily(
        "kraftlake_unhealthy_partition_omitted",
        "Partitions in a bad state now without a series in kraftlake_unhealthy_partition_since_timestamp_seconds.",
        labels=["state"],
    )
    for state in STATE_WORDS:
        n = now.states.get(state, 0)
        states.add_metric([state], n)
        shown = now.bad.get(state, [])
        for p in shown:
            since.add_metric([state, p.topic, str(p.partition)], _seconds(p.since_ms))
        omitted.add_metric([state], n - len(shown))
    out += [states, since, omitted]
    dirs = GaugeMetricFamily(
        "kraftlake_offline_dirs",
        "Directories a broker said failed and has not loaded online since, per broker that has one.",
        labels=["broker"],
    )
    per_broker: dict[int, int] = {}
    for d in now.offline_dirs:
        per_broker[d.broker] = per_broker.get(d.broker, 0) + 1
    for broker, n in sorted(per_broker.items()):
        dirs.add_metric([str(broker)], n)
    out.append(dirs)
    out.append(
        _by_kind("kraftlake_open_incidents", "Incidents open now, per kind.", now.open_incidents, GaugeMetricFamily)
    )
    out.append(
        _by_kind(
            "kraftlake_incidents",
            "Incidents opened since the following audit began.",
            now.incidents,
            CounterMetricFamily,
        )
    )
    opened = CounterMetricFamily(
        "kraftlake_audit_violations",
        "Violations the following audit found (opened) since it began, per invariant.",
        labels=["invariant", "severity"],
    )
    for inv, n in now.violations.items():
        opened.add_metric([inv, BY_ID[inv].severity], n)
    open_now = GaugeMetricFamily(
        "kraftlake_audit_open_violations",
        "Violations open now (the following audit), per invariant.",
        labels=["invariant", "severity"],
    )
    for inv in now.violations:
        open_now.add_metric([inv, BY_ID[inv].severity], now.open_violations.get(inv, 0))
    out += [
        opened,
        open_now,
        CounterMetricFamily(
            "kraftlake_audit_closed_violations",
            "Violations the following audit saw close since it began.",
            value=now.closed_violations,
        ),
    ]
    moves = _histogram(
        "kraftlake_time_to_move_seconds",
        "Record time from an incident's start to the record that moved a leadership off it to a live"
        " leader (role leadership) or took the replica out of the ISR (role isr).",
        ["role"],
    )
    for role, hist in now.time_to_move.items():
        _add_histogram(moves, [role], hist.buckets, hist.count, hist.total_ms)
    out += [
        moves,
        CounterMetricFamily(
            "kraftlake_leaderless_leaderships",
            "Leaderships an incident ended with no leader (Kafka's election found no live replica in the ISR).",
            value=now.leaderless,
        ),
    ]
    return out


def _by_kind(name: str, doc: str, counts: Mapping[str, int], kind: type) -> Metric:
    family = kind(name, doc, labels=["kind"])
    for k, n in counts.items():
        family.add_metric([k], n)
    return family
