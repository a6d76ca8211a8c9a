"""The CLI on a terminal of 80 and of 200 columns: the progress line keeps its spinner, count and
timer, ``log --format table`` keeps every offset and field, ``view --format table`` marks the
replicas on offline directories (also those the controller still lists), and ``shell``'s ``diff``
goes forward in time."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kraftlake.cli import app
from kraftlake.records import Log, iter_lines

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kraft"
runner = CliRunner()


def console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), force_terminal=True, record=True, color_system=None)


@pytest.fixture(scope="module")
def ignored(tmp_path_factory):
    """A controller that ignores the offline directories its brokers report."""
    log = Log.create(tmp_path_factory.mktemp("ignored") / "log")
    log.append(list(iter_lines((FIXTURES / "audit" / "ignore-offline-dirs.jsonl").open("rb"))))
    return log


@pytest.mark.parametrize("width", [80, 200])
def test_the_progress_lines_keep_their_spinner_count_and_timer(width):
    """A long step's name gives way (an ellipsis), never the spinner, the step's number or the
    timer; a record bar keeps its count and times."""
    from kraftlake.cli.progress import record_bar, step_bar

    c = console(width)
    steps = step_bar(c)
    steps.add_task("K4/K5, K7: leaders and ISR on online brokers and directories, directory removals", total=None, n=6)
    c.print(steps.make_tasks_table(steps.tasks))
    records = record_bar(c)
    task = records.add_task("replaying S3Stream records before --from", total=100_000_000)
    records.advance(task, 12_345_678)
    c.print(records.make_tasks_table(records.tasks))
    step, bar = c.export_text().splitlines()
    assert len(step) <= width and len(bar) <= width
    assert step.startswith("⠋ step 6: K4/K5") and step.rstrip().endswith("0:00:00")
    assert ("…" in step) == (width == 80)
    assert "12345678/100000000 records 0:00:00" in bar


@pytest.mark.parametrize("width", [80, 200])
def test_log_table_is_laid_out_for_the_width(ignored, width):
    """Every offset and every field shown, whatever the width; record times in ISO 8601 and
    partitions by name beside their keys."""
    from kraftlake.cli.log import print_table

    snap = ignored.at()
    records = snap.records(40, 60)
    topics = {r.topic_id: r.name for r in snap.records(types=["Topic"])}
    c = console(width)
    print_table(records, c, topics)
    text = c.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    flat = "".join(text.split())  # fields folded over lines join back
    for r in records:
        assert f"│{r.offset}│" in flat.replace(" ", "")
    assert "2023-11-14T22:13:2" in text and "topic-0/" in text and "leader=" in flat
    assert "LogDirFailed" in text and "directory=" in flat


def test_view_table_marks_replicas_on_offline_directories_the_controller_still_lists(ignored):
    """The controller ignored broker 3's failed directories: its registration still lists them,
    yet the table marks broker 3 in the ISR, and its replicas, as on an offline directory."""
    res = runner.invoke(app, ["view", str(ignored.path), "--format", "table"])
    assert res.exit_code == 0, res.output
    rows = [line for line in res.stdout.splitlines() if line.startswith("│ topic-")]
    marked = [line for line in rows if "3!" in line.split("│")[4]]  # the isr column
    assert len(marked) == 3 and all(":cY2hQni4qCZ6hCkOaTRFvA!" in r or ":s0ogX_eWupAEZMy9Ggg2Tg!" in r for r in marked)
    assert "3 partition(s) led from or with an ISR member there" in res.stdout
    broker = runner.invoke(app, ["view", str(ignored.path), "--format", "table", "--broker", "3"])
    assert "the broker said its directory failed; the controller still lists it" in broker.stdout
    # Before the failures, nothing is marked.
    early = runner.invoke(app, ["view", str(ignored.path), "--format", "table", "--offset", "50"])
    table = early.stdout.split("partitions")[1].split("! on an offline directory")[0]
    assert "!" not in table and "partition(s) led from" not in early.stdout


def test_shell_diff_goes_forward_in_time(tmp_path):
    log = Log.create(tmp_path / "log")
    log.append(list(iter_lines((FIXTURES / "jbod-dir-failure.jsonl").open("rb"))))
    for start, other in (("24", "27"), ("27", "24")):
        res = runner.invoke(app, ["shell", str(log.path), "--offset", start, "-c", f"diff {other}"])
        assert res.exit_code == 0, res.output
        lines = res.stdout.splitlines()
        assert lines[0] == "from offset 24 to offset 27:"
        assert "/image/topics/byName/a/0/leader: 101 -> 102" in lines
