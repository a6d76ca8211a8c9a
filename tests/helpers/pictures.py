"""The reports a reviewer looks at, made the same way by the picture tests and by ``make
examples`` (which keeps them under ``examples/``): the HTML report and its screenshot, the text
report at 80 and 200 columns (text, and a picture of the terminal), the notebook's figures, the
Prometheus metrics of a report and of the following audit, and ``audit --follow``'s lines.

Histories come from the simulator with a fixed seed (a correct controller, one that ignores
offline directories) and from Kafka's KIP-858 story in ``fixtures/``, so that every run draws the
same pictures. ``python tests/helpers/pictures.py DIR`` writes them all to DIR.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
WIDTHS = (80, 200)


def fixture_records() -> list:
    from kraftlake.records import iter_lines

    return [msgspec.structs.replace(r, offset=i) for i, r in enumerate(iter_lines(FIXTURE.open("rb")))]


def simulated_records(*, bug: str | None = "ignore-offline-dirs", records: int = 3000, seed: int = 7, **kw) -> list:
    """A JBOD cluster of 6 brokers with 3 directories each living through the simulator's faults."""
    from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

    cfg = WorkloadConfig(brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=seed, bug=bug, **kw)
    out = [r for batch in generate(cfg, records=records) for r in batch]
    return [msgspec.structs.replace(r, offset=i) for i, r in enumerate(out)]


def shutdown_at_end_records() -> list:
    """A correct cluster whose log ends just after a broker entered controlled shutdown: a
    passing audit with an incident still open and leaderships not moved yet (all normal)."""
    from kraftlake.records.kraft import BrokerRegistrationChange
    from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

    cfg = WorkloadConfig(brokers=4, dirs_per_broker=2, topics=2, partitions=8, seed=3, faults=("controlled-shutdown",))
    recs = [r for batch in generate(cfg, records=600) for r in batch]
    recs = [msgspec.structs.replace(r, offset=i) for i, r in enumerate(recs)]
    last = max(i for i, r in enumerate(recs) if type(r) is BrokerRegistrationChange and r.in_controlled_shutdown == 1)
    return recs[: last + 2]  # the shutdown and the first leadership it moves


def times_of(records):
    """``LogSnapshot.record_times`` for records held in memory."""
    ts = {r.offset: r.ts_ms for r in records}
    return lambda offsets: {o: ts[o] for o in offsets if o in ts}


def audited(records):
    """The per-record audit's full report of ``records``."""
    from kraftlake.replay.audit import Audit

    a = Audit()
    a.feed(records)
    return a.report()


def summary(records, *, index: int = 0):
    """The summary a reader sees (named and timed rows) of ``records``' audit."""
    from kraftlake.replay.summary import bounded

    return bounded(audited(records), times=times_of(records), index=index)


def html_page(records, page: Path, title: str) -> Path:
    from kraftlake.replay.html import INDEX, render

    page.write_text(render(summary(records, index=INDEX), title=title))
    return page


def text_report(records, width: int, report=None) -> tuple[str, str]:
    """The text report of ``records``' audit (``report``: their summary, when made already) on a
    terminal ``width`` columns wide: (its text, the terminal as SVG)."""
    from rich.console import Console

    from kraftlake.cli.report_text import render

    report = report if report is not None else summary(records)
    out = Console(width=width, record=True, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    err = Console(width=width, record=True, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    render(report, out, err)
    for line in err.export_text(clear=False).splitlines():  # what it says on stderr, after
        out.print(line, style="dim", soft_wrap=False)
    text = out.export_text(clear=False)
    return text, out.export_svg(title=f"kraftlake audit ({width} columns)")


def figures(records, directory: Path) -> dict[str, Path]:
    """The notebook's figures of ``records`` (a log made of them): an incident's lanes, a
    partition's leader and ISR, offline replicas over time; PNG files in ``directory``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import kraftlake
    from kraftlake.lake import Incident

    lake = kraftlake.init(directory / "figure-log")
    lake.append(records)
    out = {}
    report = audited(records)
    worst = max(report.incidents, key=lambda i: (i.unavailable_ms, -i.failed_at))
    ax = Incident(report, worst).plot()
    out["incident"] = directory / "incident.png"
    ax.figure.savefig(out["incident"], dpi=80)
    plt.close(ax.figure)
    topic, partition = _busiest_partition(report)
    ax = lake.plot_partition(topic, partition)
    out["partition"] = directory / "partition.png"
    ax.figure.savefig(out["partition"], dpi=80)
    plt.close(ax.figure)
    ax = lake.plot_offline()
    out["offline"] = directory / "offline.png"
    ax.figure.savefig(out["offline"], dpi=80)
    plt.close(ax.figure)
    return out


def _busiest_partition(report) -> tuple[str, int]:
    """The partition hit by the most incidents (its timeline has the most to show)."""
    hits: dict = {}
    for inc in report.incidents:
        for e in inc.effects:
            key = (e.topic or report.topics[e.topic_id], e.partition)
            hits[key] = hits.get(key, 0) + 1
    return max(sorted(hits), key=lambda k: hits[k])


def shoot_svgs(svgs: list[Path], png: Path, height: int = 700) -> list[tuple[int, int]]:
    """The tops (``height`` pixels) of terminals' SVGs (rich's) side by side in one page, shot
    once into ``png`` (a browser's start, and a tall page's pixels, are most of a shot's cost):
    the columns each one spans, left to right."""
    import re

    from helpers.browser import shoot

    widths = [int(float(re.search(r'viewBox="0 0 ([0-9.]+) ', svg.read_text()).group(1)) + 0.5) for svg in svgs]
    page = png.with_suffix(".html")
    imgs = "".join(
        f"<img src='{svg.resolve().as_uri()}' width={w} style='vertical-align:top'>"
        for svg, w in zip(svgs, widths, strict=True)
    )
    page.write_text(f"<html><body style='margin:0;white-space:nowrap;font-size:0'>{imgs}</body></html>")
    shoot(page, png, width=sum(widths), height=height)
    spans, left = [], 0
    for w in widths:
        spans.append((left, left + w))
        left += w
    return spans


def shoot_svg(svg: Path, png: Path) -> Path:
    """A terminal's SVG (rich's) as a PNG at its own size: one pixel per unit of its viewBox."""
    import re

    from helpers.browser import shoot

    w, h = (float(x) for x in re.search(r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"', svg.read_text()).groups())
    return shoot(svg, png, width=int(w + 0.5), height=int(h + 0.5))


def prometheus_and_follow(records, directory: Path) -> list[Path]:
    """What ``--format prometheus`` prints for ``records``, what ``serve --audit``'s /metrics says
    after them (its audit's part), and ``audit --follow``'s lines as they land in batches of 200."""
    from kraftlake.cli.audit_follow import _text
    from kraftlake.replay.live_audit import LiveAudit
    from kraftlake.replay.prometheus import exposition, live_families, render

    (directory / "prometheus").mkdir(exist_ok=True)
    report, live = directory / "prometheus" / "report.prom", directory / "prometheus" / "live.prom"
    report.write_text(render(summary(records)))
    audit, lines = LiveAudit(), []
    for i in range(0, len(records), 200):
        lines += [_text(e).decode() for e in audit.feed(records[i : i + 200])]
    live.write_bytes(exposition(live_families(audit.now(), running=True)))
    follow = directory / "follow.txt"
    follow.write_text("".join(lines))
    return [report, live, follow]


def write_examples(directory: Path) -> list[Path]:
    """Every picture a reviewer looks at, into ``directory`` (``make examples``)."""
    from helpers.browser import shoot

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    buggy = simulated_records()
    page = html_page(buggy, directory / "report.html", "kraftlake audit of a controller that ignores offline dirs")
    written += [page, shoot(page, directory / "report.png", height=3000)]
    calm = html_page(shutdown_at_end_records(), directory / "report-pass.html", "kraftlake audit of a correct cluster")
    written += [calm, shoot(calm, directory / "report-pass.png", height=1600)]
    for width in WIDTHS:
        text, svg = text_report(buggy, width)
        (directory / f"report-{width}.txt").write_text(text)
        (directory / f"report-{width}.svg").write_text(svg)
        written += [directory / f"report-{width}.txt", directory / f"report-{width}.svg"]
        written.append(shoot_svg(directory / f"report-{width}.svg", directory / f"report-{width}.png"))
    written += prometheus_and_follow(buggy, directory)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, png in figures(simulated_records(bug=None, records=3000), Path(tmp)).items():
            target = directory / f"figure-{name}.png"
            target.write_bytes(png.read_bytes())
            written.append(target)
    return written


if __name__ == "__main__":
    # Run as a script, its own folder comes first on sys.path, where helpers/http.py would hide
    # the standard library's http: the tests' folder instead, as pytest has it.
    sys.path[0] = str(ROOT / "tests")
    for path in write_examples(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "examples")):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
