"""Time travel: the log as of a Delta version, a timestamp and a record offset is exactly what had
been appended then, before and after compaction; vacuumed versions fail loudly, offsets don't."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import Config, FeatureLevel, Log, TimeTravelError

from helpers.tiers import examples


def _batch(i: int, size: int):
    return [Config(resource_type=2, resource_name=f"b{i}", name=f"r{j}", value=str(i)) for j in range(size)]


@pytest.fixture
def grown(new_log):
    """A log of 6 appends, with what was visible after each: (version, commit time, records)."""
    seen = []
    for i, size in enumerate([3, 1, 4, 1, 5, 9]):
        new_log.append(_batch(i, size))
        seen.append((new_log.version, new_log.read()))
    times = {c.version: c.timestamp_ms for c in new_log.history()}
    return new_log, [(v, times[v], recs) for v, recs in seen]


def test_as_of_version(grown):
    log, seen = grown
    assert log.at(version=0).records() == []
    for version, _, records in seen:
        snap = log.at(version=version)
        assert snap.records() == records
        assert snap.last_offset == records[-1].offset


def test_as_of_timestamp(grown):
    log, seen = grown
    for version, ts_ms, records in seen:
        when = datetime.fromtimestamp(ts_ms / 1000, UTC)
        snap = log.at(timestamp=when)
        assert snap.version == version
        assert snap.records() == records
        assert log.at(timestamp=when.isoformat()).version == version
    with pytest.raises(TimeTravelError):
        log.at(timestamp=datetime(2001, 1, 1, tzinfo=UTC))


def test_as_of_offset(grown):
    log, seen = grown
    everything = seen[-1][2]
    for o in range(-1, len(everything) + 2):
        snap = log.at(offset=o)
        assert snap.records() == everything[: o + 1]
        assert snap.last_offset == min(o, len(everything) - 1)
    assert log.read(3, 7) == everything[3:8]
    assert log.read(from_offset=20) == everything[20:]


def test_after_compaction_versions_and_offsets_agree(grown):
    log, seen = grown
    log.maintain()  # default retention: compacts, keeps every old file
    assert len(log.at().files()) == 1
    for version, _, records in seen:
        assert log.at(version=version).records() == records
        assert log.at(offset=records[-1].offset).records() == records


def test_after_vacuum_old_versions_fail_loudly_but_offsets_work(grown):
    log, seen = grown
    log.maintain(retention_hours=0)
    version, _, records = seen[1]
    with pytest.raises(TimeTravelError, match="vacuumed"):
        log.at(version=version).records()
    assert log.at(offset=records[-1].offset).records() == records


def test_unknown_version(grown):
    log, _ = grown
    with pytest.raises(TimeTravelError, match="versions 0..6"):
        log.at(version=7)
    with pytest.raises(ValueError):
        log.at(version=1, offset=3)


@settings(max_examples=examples(8))
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6), data=st.data())
def test_random_cuts_match_what_was_appended(tmp_path_factory, sizes, data):
    log = Log.create(tmp_path_factory.mktemp("tt") / "log")
    appended = []
    for i, size in enumerate(sizes):
        log.append([FeatureLevel(name=f"f{i}.{j}", feature_level=j) for j in range(size)])
        appended.append(log.version)
    everything = log.read()
    cut = data.draw(st.integers(-1, len(everything)))
    assert log.at(offset=cut).records() == everything[: cut + 1]
    v = data.draw(st.sampled_from(appended))
    assert len(log.at(version=v).records()) == sum(sizes[: appended.index(v) + 1])


def test_read_by_type(grown):
    log, seen = grown
    log.append([FeatureLevel(name="metadata.version", feature_level=21)])
    assert [type(r).__name__ for r in log.read(types=["FeatureLevel"])] == ["FeatureLevel"]
    assert len(log.read(types=["Config"])) == len(seen[-1][2])
