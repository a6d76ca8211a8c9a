"""The reports as pictures: the HTML report rendered by a headless Chromium and the incident
plot saved by matplotlib, inspected as pixels. What a reader sees: a lane per partition hit with
its outage shaded, the failure, report and removal markers in their order, leadership and ISR
moves marked, long lists paged rather than cut."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np

from kraftlake.records import iter_lines
from kraftlake.replay.audit import Audit
from kraftlake.replay.html import COLOURS, render
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

from helpers.browser import bands, mask, png_pixels, screenshot

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"


def fixture_report():
    records = [msgspec.structs.replace(r, offset=i) for i, r in enumerate(iter_lines(FIXTURE.open("rb")))]
    a = Audit()
    a.feed(records)
    return a.report()


def marker_column(pixels: np.ndarray, colour: str, min_run: int = 25) -> int | None:
    """The x of the longest vertical run of ``colour`` (a marker line), if it is long enough."""
    counts = mask(pixels, colour).sum(axis=0)
    x = int(counts.argmax())
    return x if counts[x] >= min_run else None


def test_the_html_report_draws_the_incident_timeline(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render(fixture_report(), title="fixture"))
    px = screenshot(page, tmp_path / "report.png", height=1400)
    # Two partitions were led from the dead disk: two lanes with an outage shaded (the legend's
    # swatch is narrower than any lane's shading).
    outage = mask(px, COLOURS["outage"])
    wide_rows = outage.sum(axis=1) > 40
    assert len(bands(wide_rows)) == 2
    # The failure's marker comes before the removal's (600 ms later), both long vertical lines.
    failed, removed = marker_column(px, COLOURS["failed"]), marker_column(px, COLOURS["removed"])
    assert failed is not None and removed is not None and failed < removed
    # Leadership moved (a dot) and the ISR let go (a square) in both lanes, besides the legend.
    for colour in (COLOURS["leader"], COLOURS["isr"]):
        rows = bands(mask(px, colour).any(axis=1))
        assert len(rows) >= 3, colour  # the legend's swatch and the two lanes
    # The verdict is drawn in the pass colour, and no card is marked as trouble.
    assert mask(px, "#1a7f37").sum() > 0


def test_the_html_report_pages_its_incidents(tmp_path):
    cfg = WorkloadConfig(
        brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=3, bug="keep-offline-replica-in-isr"
    )
    a = Audit()
    a.feed([r for batch in generate(cfg, records=1500) for r in batch])
    report = a.report()
    troubled = [i for i in report.incidents if i.violations]
    assert len(troubled) > 5
    page = tmp_path / "report.html"
    page.write_text(render(report, title="paged", page_size=5))
    px = screenshot(page, tmp_path / "report.png", height=5000)
    # Cards with trouble have a thick red left border: the first page shows five of them, no more.
    border = mask(px[:, :60], COLOURS["failed"])
    columns = border.sum(axis=0)
    x = int(columns.argmax())
    cards = [b for b in bands(border[:, x], min_gap=3) if b[1] - b[0] > 100]
    assert len(cards) == 5
    assert f"{len(report.incidents):,} in {-(-len(report.incidents) // 5)} pages of 5" in page.read_text()


def test_the_incident_plot_has_lanes_markers_and_labels(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from kraftlake.lake import Incident

    report = fixture_report()
    incident = Incident(report, report.incidents[0])
    ax = incident.plot()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a-0", "b-0"]
    assert "record time, UTC" in ax.get_xlabel() and ax.get_ylabel() == "partition"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "unavailable",
        "leadership moved",
        "left the ISR",
        "failed",
        "reported",
        "removed from registration",
        "ended",
    ]
    png = tmp_path / "incident.png"
    ax.figure.savefig(png, dpi=80)
    px = png_pixels(png)
    # Two shaded lanes, and the failure line left of the end line.
    assert len(bands(mask(px, "#ff8182", 10).sum(axis=1) > 40)) == 2
    failed, ended = marker_column(px, "#cf222e", 40), marker_column(px, "#57606a", 40)
    assert failed is not None and ended is not None and failed < ended
