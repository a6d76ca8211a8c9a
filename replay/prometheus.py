"""The audit report in Prometheus' text exposition format (version 0.0.4): availability per
partition and summed, incidents by kind, how fast leadership and ISR moved, violations per
invariant and the verdict, for a node exporter's textfile collector or a push gateway.

Times are seconds (Prometheus' base unit); labels carry topic names beside ids."""

from __future__ import annotations

from .books import AuditReport

_PARTITION = (
    ("no_leader_ms", "kraftlake_partition_no_leader_seconds", "Time the partition had no leader."),
    (
        "under_min_isr_ms",
        "kraftlake_partition_under_min_isr_seconds",
        "Time the partition's ISR was smaller than min.insync.replicas.",
    ),
    (
        "leader_offline_ms",
        "kraftlake_partition_leader_offline_seconds",
        "Time the partition's leader was on an offline directory (or a fenced broker).",
    ),
    (
        "isr_offline_ms",
        "kraftlake_partition_isr_offline_seconds",
        "Time an ISR member of the partition was on an offline directory (or a fenced broker).",
    ),
    (
        "unavailable_ms",
        "kraftlake_partition_unavailable_seconds",
        "Time the partition had no leader or its leader on an offline directory.",
    ),
)


def _label(value: object) -> str:
    text = str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return f'"{text}"'


def _seconds(ms: int | None) -> str:
    return "NaN" if ms is None else repr(ms / 1000)


def render(report: AuditReport) -> str:
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")

    family("kraftlake_audit_pass", "gauge", "1 when the audit passed, 0 when it failed.")
    lines.append(f"kraftlake_audit_pass {int(report.verdict == 'pass')}")
    family("kraftlake_audit_records", "gauge", "Records audited.")
    lines.append(f"kraftlake_audit_records {report.records}")
    family("kraftlake_audit_violations", "gauge", "Violations found, per invariant (only invariants checked).")
    for inv in report.invariants:
        if inv.checked or inv.violations:
            lines.append(
                f"kraftlake_audit_violations{{invariant={_label(inv.id)},severity={_label(inv.severity)}}} {inv.violations}"
            )
    a = report.availability
    if a is not None:
        topics = report.topics
        for field, name, help_text in _PARTITION:
            family(name, "gauge", help_text)
            for p in a.partitions:
                value = getattr(p, field)
                if value:
                    topic = p.topic or topics.get(p.topic_id, "")
                    lines.append(
                        f"{name}{{topic={_label(topic)},topic_id={_label(p.topic_id)},partition={_label(p.partition)}}}"
                        f" {_seconds(value)}"
                    )
        family("kraftlake_unavailable_seconds", "gauge", "Partition-seconds unavailable, summed over partitions.")
        for field in ("no_leader_ms", "under_min_isr_ms", "leader_offline_ms", "isr_offline_ms", "unavailable_ms"):
            state = field.removesuffix("_ms")
            lines.append(f"kraftlake_unavailable_seconds{{state={_label(state)}}} {_seconds(getattr(a, field))}")
    if report.handling is not None:
        h = report.handling
        family("kraftlake_incidents", "gauge", "Incidents seen, per kind.")
        for kind, n in h.by_kind.items():
            lines.append(f"kraftlake_incidents{{kind={_label(kind)}}} {n}")
        family(
            "kraftlake_time_to_move_seconds",
            "gauge",
            "Time from an incident's start to the record that moved leadership / the ISR off it.",
        )
        for role, stats in (("leadership", h.leadership), ("isr", h.isr)):
            for q, ms in (("0.5", stats.p50_ms), ("0.99", stats.p99_ms), ("1", stats.max_ms)):
                lines.append(
                    f"kraftlake_time_to_move_seconds{{role={_label(role)},quantile={_label(q)}}} {_seconds(ms)}"
                )
        family(
            "kraftlake_unmoved_effects", "gauge", "Leaderships / ISR memberships still on a failed directory or broker."
        )
        lines.append(f"kraftlake_unmoved_effects{{role={_label('leadership')}}} {h.leadership.open}")
        lines.append(f"kraftlake_unmoved_effects{{role={_label('isr')}}} {h.isr.open}")
    return "\n".join(lines) + "\n"
