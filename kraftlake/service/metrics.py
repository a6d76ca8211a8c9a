"""``/metrics`` in Prometheus's text format: appended records, commits, batch sizes, latency
histogram, commit durations (a summary with quantiles), rejections. Hand-written (a few dozen
lines) rather than a client library: the service keeps its own counters (``committer.Stats``)
and only needs to print them."""

from __future__ import annotations

from .committer import Stats

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
BATCH_BUCKETS = (1, 10, 100, 1000, 10_000, 100_000)


def _histogram(name: str, help_: str, values: list, buckets: tuple) -> list[str]:
    out = [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
    for b in buckets:
        out.append(f'{name}_bucket{{le="{b}"}} {sum(1 for v in values if v <= b)}')
    out.append(f'{name}_bucket{{le="+Inf"}} {len(values)}')
    out.append(f"{name}_sum {sum(values):.3f}")
    out.append(f"{name}_count {len(values)}")
    return out


def _summary(name: str, help_: str, values: list, quantiles: tuple = (0.5, 0.9, 0.99)) -> list[str]:
    out = [f"# HELP {name} {help_}", f"# TYPE {name} summary"]
    ordered = sorted(values)
    for q in quantiles:
        v = ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")
        out.append(f'{name}{{quantile="{q}"}} {v:.3f}')
    out.append(f"{name}_sum {sum(values):.3f}")
    out.append(f"{name}_count {len(values)}")
    return out


def render_metrics(stats: Stats, queued: int) -> str:
    lines = []
    for name, kind, help_, value in (
        ("kraftlake_appended_records_total", "counter", "Records committed.", stats.records),
        ("kraftlake_append_requests_total", "counter", "Append requests accepted into the queue.", stats.requests),
        ("kraftlake_duplicate_requests_total", "counter", "Retries answered with their original offsets.", stats.duplicates),
        ("kraftlake_commits_total", "counter", "Delta commits.", stats.commits),
        ("kraftlake_rejected_requests_total", "counter", "Requests refused with 429 (queue full).", stats.rejected),
        ("kraftlake_failed_requests_total", "counter", "Requests whose commit failed.", stats.failed),
        ("kraftlake_queued_records", "gauge", "Records waiting for a commit.", queued),
    ):
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name} {value}"]
    lines += _histogram("kraftlake_commit_records", "Records per commit (last 10000 commits).", stats.batch_sizes, BATCH_BUCKETS)
    lines += _histogram("kraftlake_append_latency_ms", "Enqueue to acknowledgement (last 10000 requests).",
                        stats.latencies_ms, LATENCY_BUCKETS_MS)  # fmt: skip
    lines += _summary("kraftlake_commit_ms", "Duration of a Delta commit (last 10000 commits).", stats.commit_ms)
    return "\n".join(lines) + "\n"
