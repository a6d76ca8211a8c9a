"""The reports as pictures: the HTML report rendered by a headless Chromium (pixels, and its
document after its script ran), the text report at 80 and 200 columns, and the notebook's
figures, made as ``make examples`` makes them (``helpers.pictures``). What a reader sees: a lane
per partition hit with the outage it caused shaded, the failure, report and removal markers in
their order; red only where something is wrong; incidents found by broker, directory, topic
and time among thousands; times and names beside offsets and ids."""

from __future__ import annotations

import re

import msgspec
import numpy as np
import pytest

from kraftlake.replay.html import COLOURS, INDEX, WRONG, render
from kraftlake.replay.incidents import Effect, Incident
from kraftlake.replay.summary import bounded

from helpers.browser import bands, dom, mask, png_pixels, screenshot
from helpers.pictures import (
    WIDTHS,
    audited,
    figures,
    fixture_records,
    html_page,
    shoot_svgs,
    shutdown_at_end_records,
    simulated_records,
    summary,
    text_report,
)

# Every test here starts Chromium to take its pictures: make test's, not test-fast's.
pytestmark = pytest.mark.slow


def marker_column(pixels: np.ndarray, colour: str, min_run: int = 25) -> int | None:
    """The x of the longest vertical run of ``colour`` (a marker line), if it is long enough."""
    counts = mask(pixels, colour).sum(axis=0)
    x = int(counts.argmax())
    return x if counts[x] >= min_run else None


@pytest.fixture(scope="module")
def buggy():
    return simulated_records(records=2500)


def test_the_html_report_draws_the_incident_timeline(tmp_path):
    page = html_page(fixture_records(), tmp_path / "report.html", "fixture")
    px = screenshot(page, tmp_path / "report.png", height=1600)
    # Two partitions were led from the dead disk: two lanes with the outage it caused shaded
    # (the legend's swatch is narrower than any lane's shading).
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
    # A passing audit: nothing on the page is drawn in the colour of what is wrong.
    assert mask(px, WRONG).sum() == 0
    text = page.read_text()
    # Record times beside offsets, names beside ids: the effects' partitions are a/0 and b/0.
    assert "2023-11-14T22:13:30.000Z</span> · offset 23" in text and ">a/0<" in text and ">b/0<" in text
    # The card says how long after the failure each step came (reported 0.5 s after it).
    assert "2023-11-14T22:13:30.500Z</span> · offset 24 <span class=muted>(+0.5 s)</span>" in text


def test_red_is_for_what_is_wrong_and_a_normal_shutdown_is_calm(tmp_path, buggy):
    """A passing cluster whose log ends in a controlled shutdown (an incident still open, its
    leaderships not moved yet) has no red; a controller that ignores offline directories has
    red cards, red badges and a red verdict."""
    calm = html_page(shutdown_at_end_records(), tmp_path / "calm.html", "calm")
    assert "open at the end of the log" in calm.read_text() and "still open" not in calm.read_text()
    wrong = html_page(buggy, tmp_path / "wrong.html", "wrong")
    # Side by side, each 1300 pixels wide, in one shot (a browser's start is most of its cost).
    both = tmp_path / "both.html"
    frames = "".join(f"<iframe src='{p.resolve().as_uri()}' width=1300 height=1400></iframe>" for p in (calm, wrong))
    both.write_text(f"<html><body style='margin:0;white-space:nowrap;font-size:0'>{frames}</body></html>")
    px = screenshot(both, tmp_path / "both.png", width=2600, height=1400)
    assert mask(px[:, :1300], WRONG).sum() == 0
    # The red left borders of the cards with violations.
    border = mask(px[:, 1300:1360], WRONG)
    assert border.sum(axis=0).max() > 200


def test_the_filter_finds_incidents_by_broker_directory_topic_and_time(tmp_path, buggy):
    """The page's filter shows only the cards and index rows of the incidents asked for (all of
    broker, directory id or path, topic and a time range); it reads its values from the address
    (``#f:broker=…``), so a link finds them."""
    from kraftlake.records.times import format_ms
    from kraftlake.replay.html import anchor

    report = summary(buggy, index=INDEX)
    page = tmp_path / "report.html"
    page.write_text(render(report, title="filter"))
    briefs = report.incident_index
    target = next(b for b in briefs if b.path and b.ended_at is not None)

    def visible(fragment: str) -> tuple[set[str], set[str]]:
        doc = dom(page, fragment)
        rows = re.findall(r'<tr class="inc" id="row-([^"]+)"([^>]*)>', doc)
        cards = re.findall(r'<div class="card [a-z]+ inc" id="inc-([^"]+)"([^>]*)>', doc)
        return (
            {rid for rid, attrs in rows if " hidden" not in attrs},
            {cid for cid, attrs in cards if " hidden" not in attrs},
        )

    t0 = target.failed_at_ms
    topic = target.topics[0]
    rows, cards = visible(
        f"f:broker={target.broker}&dir={target.directory[:6]}&topic={topic}&from={format_ms(t0)}&to={format_ms(t0 + 1)}"
    )
    want = {
        anchor(b.id)
        for b in briefs
        if b.broker == target.broker
        and target.directory[:6].lower() in ((b.directory or "").lower() + " " + (b.path or "").lower())
        and any(topic in t for t in b.topics)
        and b.failed_at_ms <= t0 + 1
        and (b.ended_at is None or b.ended_at_ms >= t0)
    }
    assert rows == want and anchor(target.id) in rows
    assert cards == want & {anchor(i.id) for i in report.incidents}
    by_path, _ = visible(f"f:dir={target.path}")
    assert by_path == {anchor(b.id) for b in briefs if b.path and target.path in b.path} and by_path


def test_every_overview_mark_and_violation_links_to_its_incident(tmp_path, buggy):
    page = html_page(buggy, tmp_path / "report.html", "links").read_text()
    ids = set(re.findall(r" id='([^']+)'", page)) | set(re.findall(r" id=([A-Za-z0-9_-]+)[ >]", page))
    overview = page[page.index("class=overview") : page.index("</svg>", page.index("class=overview"))]
    marks = re.findall(r"<a href='#([^']+)'><rect", overview)
    assert marks and all(m in ids for m in marks)
    # Each violation tied to an incident names it with a link that lands.
    links = re.findall(r"<td><a href='#((?:inc|row)-[^']+)'>", page)
    assert links and all(x in ids for x in links)


def test_a_report_of_tens_of_thousands_of_incidents_stays_under_10_mb_worst_first(tmp_path):
    """36 000 incidents (the simulator's default history at 10^6 records has about as many):
    the page holds the worst as cards and an index of thousands, says where the rest are, and
    stays under 10 MB."""
    report = audited(fixture_records())
    one = report.incidents[0]
    many = []
    for k in range(36_000):
        effects = [msgspec.structs.replace(e, caused_by=k * 10) for e in one.effects]
        many.append(
            msgspec.structs.replace(
                one,
                id=f"dir-failure/{k % 40}/d{k % 7}@{k * 10}",
                broker=k % 40,
                failed_at=k * 10,
                failed_at_ms=one.failed_at_ms + k * 1000,
                ended_at=k * 10 + 5,
                ended_at_ms=one.failed_at_ms + k * 1000 + 600,
                unavailable_ms=(k * 7919) % 100_000,
                effects=effects,
                violations=[],
                invariants={},
                overlaps=[],
            )
        )
    big = msgspec.structs.replace(report, incidents=many)
    page = tmp_path / "big.html"
    page.write_text(render(bounded(big, tables="/data/tables", index=INDEX), title="big"))
    size = page.stat().st_size
    assert size < 10_000_000, size
    text = page.read_text()
    assert "the 50 worst of 36,000" in text and f"the {INDEX:,} worst of 36,000" in text
    assert f"The other {36_000 - INDEX:,}" in text and "/data/tables/incidents.parquet" in text
    # Worst first: the first card is the one that caused the most unavailability.
    worst = max(many, key=lambda i: (i.unavailable_ms, -i.failed_at))
    assert text.index("id='inc-") == text.index(f"id='inc-{worst.id.replace('/', '-').replace('@', '-')}'")


def test_the_incident_cards_show_what_each_caused_and_overlaps(tmp_path, buggy):
    report = summary(buggy)
    shown = [i for i in report.incidents if i.overlaps]
    assert shown
    page = tmp_path / "report.html"
    page.write_text(render(report, title="overlaps"))
    text = page.read_text()
    assert "other incident(s) hit its partitions while it was open" in text
    # Each outage drawn in a card is the card's own (orange) or another's (hatched grey).
    for inc in report.incidents:
        own = [o for o in report.availability.outages if o.incident == inc.id]
        assert sum((o.to_ms or report.availability.to_ms) - o.from_ms for o in own) <= inc.unavailable_ms
    assert "caused by this incident" in text and "url(#hatch)" in text


def test_the_text_report_is_laid_out_for_the_terminals_width(tmp_path, buggy):
    """At 80 columns each incident and violation is a block of lines, at 200 a table: no line
    is wider than the terminal, and no time or path is cut; both drawn as a terminal shows them
    (one browser shot of their tops), the FAIL in red."""
    from kraftlake.records.times import format_ms

    report = summary(buggy)
    worst = sorted(report.incidents, key=lambda i: (-sum(i.invariants.values()), -i.unavailable_ms, i.failed_at))[0]
    first = report.violations[0]
    svgs = []
    for width in WIDTHS:
        text, svg = text_report(buggy, width, report)
        assert max(len(line) for line in text.splitlines()) <= width
        assert format_ms(worst.failed_at_ms) in text and worst.path in text
        assert format_ms(first.first_ms) in text and first.name in text
        assert "The verdict judges the controller; availability judges the cluster" in " ".join(text.split())
        svgs.append(tmp_path / f"report-{width}.svg")
        svgs[-1].write_text(svg)
    spans = shoot_svgs(svgs, tmp_path / "reports.png")
    px = png_pixels(tmp_path / "reports.png")
    for width, (left, right) in zip(WIDTHS, spans, strict=True):
        shown = px[:, left:right]
        assert (shown < 200).any(axis=-1).sum() > 1000, width  # drawn: the text on its dark background
        assert mask(shown, "#ff5555", 60).sum() + mask(shown, WRONG, 40).sum() > 0, width


def test_the_notebook_figures_are_readable(tmp_path):
    """The incident's lanes, a partition's leader and ISR by broker, and offline replicas over
    time per broker: saved and read back as pixels, each with its data drawn."""
    import matplotlib.pyplot as plt

    made = figures(simulated_records(bug=None, records=2000), tmp_path)
    for name, png in made.items():
        px = png_pixels(png)
        assert px.shape[0] > 200 and (px < 200).any(), name
    plt.close("all")


def test_the_figures_legends_stay_off_the_data(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import kraftlake

    lake = kraftlake.init(tmp_path / "log")
    lake.append(simulated_records(bug=None, records=2000))
    report = audited(lake.at().records())
    from helpers.pictures import _busiest_partition

    topic, partition = _busiest_partition(report)
    for ax in (lake.plot_partition(topic, partition), lake.plot_offline()):
        fig = ax.figure
        fig.canvas.draw()
        legend = ax.get_legend()
        assert legend is not None
        box, axes = legend.get_window_extent(), ax.get_window_extent()
        assert box.x0 >= axes.x1 - 1, "the legend is beside the data, not over it"
        labels = [t for t in ax.get_yticklabels() + ax.get_xticklabels() if t.get_text()]
        boxes = [t.get_window_extent() for t in labels]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_effects_in_a_card_say_when_they_ended(tmp_path):
    report = summary(fixture_records())
    e0 = report.incidents[0].effects[0]
    assert isinstance(e0, Effect) and e0.ended_ms == report.incidents[0].failed_at_ms + e0.time_to_move_ms
    assert isinstance(report.incidents[0], Incident)
