"""The notebook facade (``kraftlake.open``): points in time, history, diffs, timelines, audits and
plots as DataFrames; and ``examples/incident.ipynb`` runs top to bottom with no error."""

from __future__ import annotations

from pathlib import Path

import pytest

import kraftlake
from kraftlake.records import iter_lines

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kraft" / "jbod-dir-failure.jsonl"
NOTEBOOK = Path(__file__).parent.parent / "examples" / "incident.ipynb"


@pytest.fixture
def lake(tmp_path):
    lake = kraftlake.init(tmp_path / "log")
    records = list(iter_lines(FIXTURE.open("rb")))
    lake.append(records[:23])
    lake.append(records[23:])
    return lake


def test_point_in_time_tables_match_the_views(lake):
    at = lake.at(offset=24)
    view = kraftlake.state_at(lake, offset=24)
    assert at.offset == 24 and at.state_hash == view.state_hash()
    assert sorted(at.brokers.broker) == [101, 102]
    parts = at.partitions
    assert len(parts) == 4 and set(parts.topic) == {"a", "b"}
    a0 = parts[(parts.topic == "a") & (parts.partition == 0)].iloc[0]
    assert a0.leader == view.partition(a0.topic_id, 0).leader
    # After the controller acted (offset 27), a-0 is led by 102 and 101's replica is offline.
    end = lake.at()
    a0 = end.partitions[(end.partitions.topic == "a") & (end.partitions.partition == 0)].iloc[0]
    assert a0.leader == 102 and 101 in a0.offline_replicas
    served = end.broker(101)
    assert set(served.columns) >= {"topic", "partition", "role", "directory", "online"} and not served.online.all()
    tables = end.to_arrow()
    assert tables["partitions"].num_rows == 4 and "<table" in end._repr_html_()
    assert len(lake.at(version=1).records()) == 23  # the snapshot's records, as Log.at gives them


def test_history_diff_timeline_audit_and_offline_counts(lake):
    history = lake.history()
    assert list(history.version) == [2, 1, 0] and list(history.records[:2]) == [5, 23]
    diff = lake.diff(24, 27)
    assert {"broker/101"} <= set(diff.entity) and "log_dirs" in set(diff.field)
    tl = lake.timeline("a", 0)
    assert tl.iloc[-1].leader == 102 and list(tl.partition_epoch) == sorted(tl.partition_epoch)
    failed = lake.at().records(types=["LogDirFailed"])[0]
    events = lake.timeline(broker=101, dir=failed.directory)
    assert list(events.record)[-3:] == ["LogDirFailed", "HeartbeatOfflineDirs", "BrokerRegistrationChange"]
    report = lake.audit()
    assert report.verdict == "pass" and report.violations.empty
    strict = lake.audit(to_offset=24, grace_records=0, grace_ms=0)
    assert strict.verdict == "fail" and set(strict.violations.invariant) >= {"K6"}
    offline = lake.offline_replicas()
    assert offline.offline_replicas.iloc[-1] == 2  # a-0's and b-0's replicas on 101's failed dir
    with pytest.raises(KeyError):
        lake.timeline("nope", 0)


def test_plots_draw(lake):
    import matplotlib

    matplotlib.use("Agg")
    ax = lake.plot_partition("a", 0)
    assert ax.get_title() == "a/0: leader and ISR" and any(
        "failed" in t.get_text() for t in ax.get_legend().get_texts()
    )
    # A lane per broker, named; the failure marked on the failed replica's broker's lane.
    assert [t.get_text() for t in ax.get_yticklabels()] == ["broker 101", "broker 102"]
    # Offsets below, record time above: the fixture's partition changes span 22:13:2x UTC.
    top = [c for c in ax.child_axes if c.get_xlabel().startswith("record time (UTC")]
    assert len(top) == 1 and all(t.get_text().startswith("22:13:") for t in top[0].get_xticklabels())
    offline = lake.plot_offline()
    assert offline.get_ylabel() == "offline replicas" and offline.get_xlabel() == "record time (UTC, 2023-11-14)"
    # Divided by broker, and times as a clock, not matplotlib's day-and-hour default.
    assert [t.get_text() for t in offline.get_legend().get_texts()] == ["broker 101"]
    offline.figure.canvas.draw()
    ticks = [t.get_text() for t in offline.get_xticklabels() if t.get_text()]
    assert ticks and all(len(t) == 8 and t[2] == t[5] == ":" for t in ticks)


def test_offsets_are_integers_times_are_aware_and_partitions_two_columns(lake):
    """The notebook's tables as a reader expects: offsets ``int``/``Int64`` (never 2443.0),
    record times ``datetime64[ns, UTC]``, a partition as its ``topic`` and its ``partition``."""
    history = lake.history()
    assert str(history.first_offset.dtype) == "Int64" and str(history.time.dtype) == "datetime64[ns, UTC]"
    result = lake.audit()
    inc = result.incidents[0]
    assert inc.failed_time.tzinfo is not None and inc.failed_time.isoformat() == "2023-11-14T22:13:30+00:00"
    table = result.incidents.table()
    assert str(table.failed_time.dtype) == "datetime64[ns, UTC]" and str(table.ended_at.dtype) == "Int64"
    impact = inc.impact()
    assert list(impact[["topic", "partition"]].itertuples(index=False, name=None)) == [("a", 0), ("b", 0)]
    assert str(impact.partition.dtype) == "Int64" and str(impact.leader_moved_at.dtype) == "Int64"
    assert str(impact.leader_moved_time.dtype) == "datetime64[ns, UTC]"
    assert impact.unavailable_s.tolist() == [0.6, 0.6]
    # The kinds' sums and the time no incident caused add up to the total.
    by_cause = result.unavailability().set_index("cause").unavailable_s
    assert by_cause["dir-failure"] + by_cause["outside any incident"] == by_cause["total"] == 1.2
    effects = result.table("effects")
    assert str(effects.ended_time.dtype) == "datetime64[ns, UTC]" and effects.name.tolist()[0] == "a/0"
    strict = lake.audit(to_offset=24, grace_records=0, grace_ms=0)
    v = strict.table("violations")
    assert str(v.first_time.dtype) == "datetime64[ns, UTC]" and v.first_time.notna().all()


@pytest.mark.slow  # a notebook kernel executes it: 6 s, make test's
def test_the_incident_notebook_tells_one_incident_and_is_rendered(tmp_path):
    """Executed top to bottom with no error and no log lines, its figures drawn, integers shown
    as integers; the committed examples/incident.html (readable without running it) tells the
    same state hash, and the page, rendered headless, shows the incident plot's shaded lanes."""
    import nbclient
    import nbconvert
    import nbformat

    from kraftlake.replay.html import COLOURS

    from helpers.browser import bands, mask, screenshot

    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed without outputs
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "lake.incidents()" in sources and ".impact()" in sources and ".plot()" in sources
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]  # logging is quiet
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot was drawn
    impact = next(c for c in nb.cells if c.cell_type == "code" and "incident.impact()" in c.source)
    text = impact.outputs[0]["data"]["text/plain"]
    import re

    assert "leader_moved_at" in text.splitlines()[0]
    moved_at = re.search(r" leader +(\S+)", text.splitlines()[1]).group(1)
    assert moved_at.isdigit()  # an offset shown as an integer, not 2443.0
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    page = tmp_path / "incident.html"  # a test never writes into the repository: `make examples` does
    page.write_text(body)
    committed = NOTEBOOK.with_suffix(".html").read_text()
    fresh_hash = re.search(r"state hash <code>([0-9a-f]+)", body).group(1)
    assert f"state hash <code>{fresh_hash}" in committed, "examples/incident.html is stale: run `make examples`"
    px = screenshot(page, tmp_path / "incident.png", height=6000)
    shaded = mask(px, COLOURS["outage"], 10)
    assert len(bands(shaded.sum(axis=1) > 40)) >= 3  # the plot's lanes, as a reader sees them


def test_shell_browses_like_kafka_metadata_shell_with_history(lake):
    from typer.testing import CliRunner

    from kraftlake.cli.app import app

    run = CliRunner().invoke
    res = run(
        app,
        [
            "shell",
            lake.path,
            "--offset",
            "24",
            "-c",
            "ls",
            "-c",
            "ls cluster/brokers",
            "-c",
            "cat cluster/brokers/101",
            "-c",
            "cd topics/byName/a",
            "-c",
            "pwd",
            "-c",
            "cat 0",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[:6] == ["provenance/", "features/", "cluster/", "topics/", "configs/", "producerIds/"]
    assert "101/" in lines and "102/" in lines and "/image/topics/byName/a (offset 24)" in lines
    assert '"leader": 101' in res.stdout  # a-0 still led by 101 when its dir failed
    # Moving in time, and what changed: the controller's three records after offset 24.
    res = run(app, ["shell", lake.path, "--offset", "24"], input="at 27\ndiff 24\ncat /nope\nbogus\n")
    assert res.exit_code == 0
    assert "at offset 27" in res.stdout and "/image/topics/byName/a/0/leader: 101 -> 102" in res.stdout
    assert "no such node" in res.stdout and "unknown command" in res.stdout
