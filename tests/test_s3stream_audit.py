"""The S3Stream audit (S1-S12): every injectable controller bug is caught by its invariant, correct
histories pass, each invariant fires on the wrong state it names, the fixtures give their
expected verdicts, and the CLI simulates, audits and shows S3Stream histories."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kraftlake.cli.app import app
from kraftlake.records import iter_lines
from kraftlake.records.kraft import FeatureLevel
from kraftlake.records.observations import ObjectWritten
from kraftlake.records.s3stream import (
    AssignedS3ObjectId,
    AssignedStreamId,
    NodeWALMetadata,
    NodeWALUncommittedOffsets,
    ObjectState,
    Range,
    RemoveS3Stream,
    S3Object,
    S3Stream,
    S3StreamEndOffsets,
    S3StreamObject,
    S3StreamSetObject,
    StreamEndOffset,
    StreamRange,
    StreamRanges,
    UncommittedOffset,
)
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.statemachine.invariants import say
from kraftlake.statemachine.s3stream import invariants as sinv
from kraftlake.statemachine.s3stream.bugs import BUGS, CAUGHT_BY
from kraftlake.statemachine.s3stream.view import Stream, StreamsView
from kraftlake.statemachine.s3stream.workload import WorkloadConfig, generate

from helpers.tiers import examples

FIXTURES = Path(__file__).parent.parent / "fixtures" / "s3stream" / "audit"
runner = CliRunner()


def _audit(records, config: AuditConfig | None = None):
    a = Audit(config)
    a.feed(records)
    return a.report()


@pytest.mark.parametrize("bug", sorted(BUGS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_bug_is_caught_by_its_invariant(bug, seed):
    kw = {"seed": seed, "bug": bug}
    if bug == "leak-prepared-object":
        kw["ttl_ms"] = 5_000
    report = _audit(r for batch in generate(WorkloadConfig(**kw), records=4000) for r in batch)
    found = collections.Counter(v.invariant for v in report.violations)
    assert report.verdict == "fail"
    assert found[CAUGHT_BY[bug]] > 0, found


@settings(max_examples=examples(10), deadline=None)
@given(
    seed=st.integers(0, 2**32), nodes=st.integers(2, 5), streams=st.integers(1, 12), version=st.sampled_from([1, 3, 7])
)
def test_correct_histories_pass(seed, nodes, streams, version):
    # Every automq.version the deciders speak: V0 (inline ranges, legacy object times), V2, V6.
    cfg = WorkloadConfig(seed=seed, nodes=nodes, streams=streams, automq_version=version, ttl_ms=5_000)
    records = [r for batch in generate(cfg, records=1500) for r in batch]
    report = _audit(records)
    assert report.violations == [], report.violations[:3]
    checked = {i.id: i.checked for i in report.invariants}
    assert all(checked[i] > 0 for i in ("S1", "S2", "S3", "S5", "S6", "S7", "S8", "S10")), checked


def test_simulator_is_deterministic():
    a = [msgspec.json.encode(r) for b in generate(WorkloadConfig(seed=5), records=2000) for r in b]
    b = [msgspec.json.encode(r) for b in generate(WorkloadConfig(seed=5), records=2000) for r in b]
    assert a == b
    assert a != [msgspec.json.encode(r) for b in generate(WorkloadConfig(seed=6), records=2000) for r in b]


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**32), cut=st.integers(1, 1500))
def test_view_image_round_trips_at_any_point(seed, cut):
    """A view rebuilt from its image (what a snapshot stores) hashes equal and replays the rest of
    the history to the same state as a full replay."""
    from kraftlake.statemachine.s3stream import replay

    records = [r for b in generate(WorkloadConfig(seed=seed, streams=6), records=1500) for r in b]
    head = replay(records[:cut])
    again = StreamsView.from_image(msgspec.json.decode(msgspec.json.encode(head.image()), type=type(head.image())))
    assert again.state_hash() == head.state_hash()
    assert replay(records[cut:], again).state_hash() == replay(records).state_hash()


# -- each invariant on the wrong state it names ----------------------------------------------------

NODE0 = NodeWALMetadata(node_id=0, node_epoch=0)
V6 = FeatureLevel(name="automq.version", feature_level=7)


def _found(records, **config) -> set[str]:
    records = [*records, V6, V6]  # later records: a wrong state outlives the grace of 0 records
    with_offsets = [msgspec.structs.replace(r, offset=i, ts_ms=1_000 + i) for i, r in enumerate(records)]
    return {v.invariant for v in _audit(with_offsets, AuditConfig(grace_records=0, **config)).violations}


def _opened(sid=0, *, epoch=0, node=0, start=0):
    return [
        AssignedStreamId(assigned_stream_id=sid),
        S3Stream(stream_id=sid, epoch=epoch, range_index=0, start_offset=start, stream_state=1),
        Range(stream_id=sid, epoch=epoch, range_index=0, start_offset=start, end_offset=start, node_id=node),
    ]


def _committed(oid):
    return [
        AssignedS3ObjectId(assigned_s3_object_id=oid),
        S3Object(object_id=oid, object_size=1, object_state=ObjectState.COMMITTED, timestamp=1),
    ]


def test_a_clean_history_has_no_violation():
    recs = [
        V6,
        NODE0,
        *_opened(),
        *_committed(0),
        ObjectWritten(node_id=0, object_id=0, ranges=(StreamRange(stream_id=0, start_offset=0, end_offset=10),)),
        S3StreamSetObject(node_id=0, object_id=0, order_id=0),
        S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=0, end_offset=10),)),
    ]
    assert _found(recs) == set()


@pytest.mark.parametrize(
    ("case", "invariant"),
    [
        ("ranges-out-of-order", "S1"),
        ("current-not-last", "S2"),
        ("start-above-end", "S3"),
        ("end-moves-back", "S4"),
        ("overlap", "S5"),
        ("gap", "S6"),
        ("destroyed-reference", "S7"),
        ("unassigned-id", "S8"),
        ("duty-without-range", "S9"),
        ("opened-at-epoch-minus-1", "S10"),
        ("prepared-forever", "S11"),
        ("commit-by-non-owner", "S12"),
        ("commit-by-non-owner-after-reuse", "S12"),
    ],
)
def test_each_invariant_fires_on_its_wrong_state(case, invariant):
    base = [V6, NODE0, NodeWALMetadata(node_id=1, node_epoch=0), *_opened(), *_committed(0), *_committed(1)]

    def sso(oid, a, b, node=0):
        return [
            ObjectWritten(
                node_id=node, object_id=oid, ranges=(StreamRange(stream_id=0, start_offset=a, end_offset=b),)
            ),
            S3StreamSetObject(node_id=node, object_id=oid, order_id=oid),
        ]

    def end(e):
        return S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=0, end_offset=e),))

    extra = {
        "ranges-out-of-order": [
            Range(stream_id=0, epoch=1, range_index=1, start_offset=0, end_offset=0, node_id=0),
            Range(stream_id=0, epoch=0, range_index=0, start_offset=5, end_offset=5, node_id=0),
            S3Stream(stream_id=0, epoch=1, range_index=1, start_offset=0, stream_state=1),
        ],
        "current-not-last": [Range(stream_id=0, epoch=1, range_index=1, start_offset=0, end_offset=0, node_id=1)],
        "start-above-end": [
            S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1),
            *sso(0, 0, 10),
            end(10),
            Range(stream_id=0, epoch=1, range_index=1, start_offset=10, end_offset=10, node_id=0),
            S3Stream(stream_id=0, epoch=1, range_index=1, start_offset=0, stream_state=1),
            Range(stream_id=0, epoch=0, range_index=0, start_offset=0, end_offset=3, node_id=0),
            S3Stream(stream_id=0, epoch=1, range_index=1, start_offset=5, stream_state=1),
        ],
        "end-moves-back": [*sso(0, 0, 10), end(10), end(4)],
        "overlap": [*sso(0, 0, 10), end(10), *sso(1, 5, 10)],
        "gap": [*sso(0, 2, 10), end(10)],
        "destroyed-reference": [
            *sso(0, 0, 10),
            end(10),
            S3Object(object_id=0, object_size=1, object_state=ObjectState.MARK_DESTROYED, timestamp=1),
        ],
        "unassigned-id": [S3StreamObject(stream_id=0, start_offset=0, end_offset=0, object_id=99)],
        "duty-without-range": [
            NodeWALUncommittedOffsets(
                node_id=1, entries=(UncommittedOffset(stream_id=0, start_offset=0, end_offset=10),)
            ),
            end(10),
        ],
        "opened-at-epoch-minus-1": [
            AssignedStreamId(assigned_stream_id=1),
            S3Stream(stream_id=1, epoch=-1, range_index=-1, start_offset=0, stream_state=1),
        ],
        "prepared-forever": [
            AssignedS3ObjectId(assigned_s3_object_id=2),
            S3Object(object_id=2, object_state=ObjectState.PREPARED, timestamp=1_010),
        ]
        + [S3Stream(stream_id=0, epoch=0, range_index=0, start_offset=0, stream_state=1)] * 30,
        "commit-by-non-owner": [*sso(0, 0, 10, node=1)],
        # the end a compaction saw (10) is not the end of the stream made again under its id (0)
        "commit-by-non-owner-after-reuse": [
            *sso(0, 0, 10),
            end(10),
            *sso(1, 0, 10),
            RemoveS3Stream(stream_id=0),
            *_opened()[1:],
            *sso(2, 0, 5, node=1),
        ],
    }[case]
    assert invariant in _found(base + extra, prepared_check_ms=5)


@pytest.mark.parametrize(
    ("end", "moves_back"),
    [(50, False), (100, False), (101, True), (299, True), (300, False), (400, False)],
)
def test_s4_a_committed_end_above_the_start_is_never_below_the_logical_end(end, moves_back):
    """S4's check beside its definition (``invariants.end_never_back``), on a stream holding
    [100, 300): an end at or below the start is a trimmed-away commit (AutoMQ's own), one at or
    above the logical end moves nothing back."""
    found = sinv.end_never_back(Stream(stream_id=0, start_offset=100, end_offset=300), end)
    assert found == (say("S4", "end_moves_back", end=end, logical_end=300) if moves_back else None)


def test_s4_counts_each_committed_end_once_whether_it_moves_back_or_not():
    """``checked`` counts each end an S3StreamEndOffsets record commits once, as the catalogue
    counts a check (``statemachine.invariants``): an end that moves back is one check and one
    violation, not two checks."""
    written = ObjectWritten(node_id=0, object_id=0, ranges=(StreamRange(stream_id=0, start_offset=0, end_offset=10),))
    records = [
        V6,
        NODE0,
        *_opened(),
        *_committed(0),
        written,
        S3StreamSetObject(node_id=0, object_id=0, order_id=0),
        *(S3StreamEndOffsets(end_offsets=(StreamEndOffset(stream_id=0, end_offset=e),)) for e in (10, 4)),
    ]
    report = _audit([msgspec.structs.replace(r, offset=i, ts_ms=1_000 + i) for i, r in enumerate(records)])
    [s4] = [i for i in report.invariants if i.id == "S4"]
    assert (s4.checked, s4.violations) == (2, 1)


# -- the coverage index --------------------------------------------------------------------------

_span = st.tuples(st.integers(0, 30), st.integers(0, 30))
_STREAMS = (0, 1, 2, 1 << 40)  # the last beyond what ``IdArray`` holds: the index falls back to its own sets
_stream = st.sampled_from(_STREAMS)
_coverage_ops = st.lists(
    st.one_of(
        st.tuples(st.just("so"), _stream, st.integers(0, 5), _span),  # add or replace a stream object
        st.tuples(st.just("unso"), _stream, st.integers(0, 5)),
        # a stream-set object's ranges (stream 3 does not exist), inline or packed
        st.tuples(
            st.just("sso"),
            st.integers(0, 4),
            st.lists(st.tuples(st.sampled_from((*_STREAMS, 3)), _span), max_size=5),
            st.booleans(),
        ),
        st.tuples(st.just("unsso"), st.integers(0, 4)),
        st.tuples(st.just("drop"), _stream),  # a stream removed, and its id used again
        st.tuples(st.just("settle")),
    ),
    max_size=30,
)


@settings(max_examples=examples(400), deadline=None)
@given(ops=_coverage_ops, lo=st.integers(0, 30), hi=st.integers(0, 30), small=st.sampled_from([0, 1000]))
def test_the_coverage_index_agrees_with_the_entries_it_holds(ops, lo, hi, small):
    """``Coverage`` (stream objects counted at once, stream-set objects' ranges summed a batch at
    a time, streams dropped with their entries) holds exactly the entries a plain model holds:
    ``of`` lists them, ``net``/``odd`` count them, ``exact`` answers as ``coverage`` (sort and
    sweep) does over them (None only for a stream with an empty or reversed entry), ``changed``
    names every stream whose count moved, and removing everything leaves nothing behind. Sums
    in arrays (``small`` 0) and in a dict alike."""
    from kraftlake.statemachine.s3stream import invariants as sinv
    from kraftlake.statemachine.s3stream.view import Node, Stream, StreamSetObjectMeta

    view = StreamsView()
    view.streams = {sid: Stream(stream_id=sid) for sid in _STREAMS}
    node = view.nodes[0] = Node(node_id=0, stream_set_objects={})
    cover = sinv.Coverage(small)
    for sid in _STREAMS:
        cover.add_stream(sid)
    so: dict[int, dict[int, tuple[int, int]]] = {}
    sso: dict[int, list[tuple[int, int, int]]] = {}

    def model(sid):
        return sorted(
            [(a, b, ("SO", k)) for k, (a, b) in so.get(sid, {}).items()]
            + [(a, b, ("SSO", o, 0)) for o, rs in sso.items() for s, a, b in rs if s == sid]
        )

    def counts(entries):
        net, odd = {}, 0
        for a, b, _ in entries:
            if a >= b:
                odd += 1
                continue
            net[a], net[b] = net.get(a, 0) + 1, net.get(b, 0) - 1
        return {at: n for at, n in net.items() if n}, odd

    def check():
        cover.settle()
        for sid in _STREAMS:
            entries = model(sid)
            assert sorted(cover.of(sid)) == entries
            assert (cover.net.get(sid, {}), cover.odd.get(sid, 0)) == counts(entries)
            overlap, gap = sinv.coverage(view, Stream(stream_id=sid, start_offset=lo, end_offset=hi), entries, ())
            fast = cover.exact(sid, lo, hi)
            if fast is None:
                assert any(a >= b for a, b, _ in entries)
            else:
                assert fast == (overlap is None and gap is None), (entries, lo, hi, overlap, gap)

    seen = {sid: counts(model(sid)) for sid in _STREAMS}
    for op in ops:
        kind = op[0]
        if kind == "so":
            _, sid, k, (a, b) = op
            cover.add(sid, k, a, b)
            so.setdefault(sid, {})[k] = (a, b)
        elif kind == "unso":
            _, sid, k = op
            assert cover.remove(sid, k) == (k in so.get(sid, {}))
            so.get(sid, {}).pop(k, None)
        elif kind == "sso":
            _, o, ranges, packed = op
            if o in sso:
                cover.drop_sso(o)
            rs = tuple(StreamRange(stream_id=s, start_offset=a, end_offset=b) for s, (a, b) in ranges)
            if packed:
                view.object_index[o] = StreamRanges.of(rs)
            else:
                view.object_index.pop(o, None)
            node.stream_set_objects[o] = StreamSetObjectMeta(
                object_id=o, order_id=o, data_time_in_ms=0, ranges=() if packed else rs
            )
            cover.add_sso(view, 0, o)
            sso[o] = [(s, a, b) for s, (a, b) in ranges if s in _STREAMS]
        elif kind == "unsso":
            cover.drop_sso(op[1])
            sso.pop(op[1], None)
        elif kind == "drop":
            sid = op[1]
            assert cover.drop_stream(sid) == sorted(so.pop(sid, {}))
            cover.add_stream(sid)
            for o in sso:
                sso[o] = [r for r in sso[o] if r[0] != sid]
            seen[sid] = counts([])  # a dropped stream is not judged: its count starts afresh
            cover.changed.discard(sid)
        else:
            now = {sid: counts(model(sid)) for sid in _STREAMS}
            check()
            assert {sid for sid in _STREAMS if now[sid] != seen[sid]} <= cover.changed
            cover.changed.clear()
            seen = now
    check()
    for sid in _STREAMS:
        for k in list(so.get(sid, {})):
            assert cover.remove(sid, k)
    for o in list(sso):
        cover.drop_sso(o)
    cover.settle()
    assert cover.net == {} and cover.odd == {} and cover.so == {} and cover.ssos == {}


# -- fixtures and CLI ------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.name)
def test_fixture_verdicts(fixture):
    expected = json.loads((FIXTURES / "expected.json").read_text())[fixture.name]
    report = _audit(iter_lines(fixture.open("rb")))
    assert report.verdict == expected["verdict"]
    found = {v.invariant for v in report.violations}
    assert set(expected["caught_by"]) <= found
    if not expected["caught_by"]:
        assert report.violations == []


def test_story_fixtures_tell_their_story():
    kinds = {
        f: collections.Counter(type(r).__name__ for r in iter_lines((FIXTURES / f).open("rb")))
        for f in ("compaction.jsonl", "failover.jsonl")
    }
    assert (
        kinds["compaction.jsonl"]["RemoveStreamSetObject"] > 0 and kinds["compaction.jsonl"]["RemoveS3StreamObject"] > 0
    )
    failover = list(iter_lines((FIXTURES / "failover.jsonl").open("rb")))
    assert any(isinstance(r, NodeWALMetadata) and r.failover_mode for r in failover)
    assert any(isinstance(r, NodeWALUncommittedOffsets) for r in failover)


def test_the_fixtures_are_what_the_simulator_writes(tmp_path):
    out = tmp_path / "x.jsonl"
    args = [
        "simulate",
        "--family",
        "s3stream",
        "--seed",
        "1",
        "--records",
        "300",
        "--nodes",
        "3",
        "--streams",
        "3",
        "--ops",
        "append,upload,reassign,failover",
        "--out",
        str(out),
    ]
    assert runner.invoke(app, args).exit_code == 0
    assert out.read_bytes() == (FIXTURES / "failover.jsonl").read_bytes()


def test_cli_simulate_audit_and_view_streams(tmp_path):
    sim = tmp_path / "s.jsonl"
    res = runner.invoke(
        app, ["simulate", "--family", "s3stream", "--seed", "2", "-n", "800", "--bug", "commit-gap", "-o", str(sim)]
    )
    assert res.exit_code == 0, res.output
    log = tmp_path / "log"
    assert runner.invoke(app, ["init", str(log)]).exit_code == 0
    assert runner.invoke(app, ["append", str(log), str(sim)]).exit_code == 0
    res = runner.invoke(app, ["audit", str(log), "--format", "json"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert "S12" in {v["invariant"] for v in doc["violations"]} and doc["streams_state_hash"]
    res = runner.invoke(app, ["view", str(log), "--streams"])
    assert res.exit_code == 0
    image = json.loads(res.stdout)
    assert image["state_hash"] == doc["streams_state_hash"] and image["streams"]
    sid = image["streams"][0]["stream_id"]
    res = runner.invoke(app, ["view", str(log), "--stream", str(sid), "-f", "table"])
    assert res.exit_code == 0 and f"stream {sid}" in res.stdout and "read order" in res.stdout
    one = json.loads(runner.invoke(app, ["view", str(log), "--stream", str(sid), "--offset", "100"]).stdout)
    assert one["offset"] == 100
    assert runner.invoke(app, ["view", str(log), "--stream", "99999"]).exit_code == 2
    res = runner.invoke(app, ["simulate", "--family", "s3stream", "--seed", "1", "--bug", "nope", "-o", str(sim)])
    assert res.exit_code == 2 and "unknown S3Stream bug" in res.output
    res = runner.invoke(app, ["simulate", "--family", "s3stream", "--seed", "1", "--ops", "append,fly", "-o", str(sim)])
    assert res.exit_code == 2 and "fly" in res.output


def test_notebook_facade_shows_streams_and_their_objects(tmp_path):
    import kraftlake
    from kraftlake.statemachine.s3stream import replay

    records = list(iter_lines((FIXTURES / "compaction.jsonl").open("rb")))
    lake = kraftlake.init(tmp_path / "log")
    lake.append(records)
    at = lake.at(offset=200)
    want = replay(records[:201])
    df = at.streams
    assert sorted(df.stream) == sorted(want.streams) and at.streams_view.state_hash() == want.state_hash()
    sid = int(df.stream[0])
    objects = at.objects_for(sid)
    s = want.streams[sid]
    if s.end_offset > s.start_offset:
        assert objects.start_offset.iloc[0] <= s.start_offset and objects.end_offset.iloc[-1] == s.end_offset
        assert list(objects.start_offset.iloc[1:]) == list(objects.end_offset.iloc[:-1])
    with pytest.raises(KeyError):
        at.objects_for(10**6)


@pytest.mark.parametrize("cut", [1, 120, 250])
def test_audit_from_an_offset_continues_the_s3stream_state(tmp_path, cut):
    """``kraftlake audit --from N`` replays the S3Stream state before N and finds what a whole
    audit finds from N on (a clean story stays clean, a bug's violations after N are found)."""
    for name in ("correct.jsonl", "commit-gap.jsonl"):
        log = tmp_path / name
        assert runner.invoke(app, ["init", str(log)]).exit_code == 0
        assert runner.invoke(app, ["append", str(log), str(FIXTURES / name)]).exit_code == 0
        whole = json.loads(runner.invoke(app, ["audit", str(log), "-f", "json"]).stdout)
        part = json.loads(runner.invoke(app, ["audit", str(log), "-f", "json", "--from", str(cut)]).stdout)
        assert part["streams_state_hash"] == whole["streams_state_hash"]
        later = [
            (v["invariant"], v["entity"], v["first_offset"]) for v in whole["violations"] if v["first_offset"] >= cut
        ]
        assert [(v["invariant"], v["entity"], v["first_offset"]) for v in part["violations"]] == later


def test_streams_snapshots_serve_time_travel(tmp_path):
    """``kraftlake snapshot`` stores the S3Stream view beside the controller's; the view at any
    offset (nearest snapshot + tail) hashes equal to a full replay."""
    from kraftlake.records import Log as LogT
    from kraftlake.replay.snapshots import SnapshotStore
    from kraftlake.replay.state import streams_at, take_snapshots
    from kraftlake.statemachine.s3stream import replay

    records = list(iter_lines((FIXTURES / "correct.jsonl").open("rb")))
    log = LogT.create(tmp_path / "log")
    log.append(records[:150])
    take_snapshots(log, every=50)
    log.append(records[150:])
    take_snapshots(log, every=50)  # continues from the newest snapshot
    store = SnapshotStore(log.path)
    assert [store.nearest_streams(o).offset for o in (49, 120, 299)] == [0, 100, 250]
    for o in (0, 49, 50, 77, 149, 150, 222, len(records) - 1):
        assert streams_at(log, offset=o).state_hash() == replay(records[: o + 1]).state_hash()
        assert streams_at(log, offset=o, use_snapshots=False).state_hash() == replay(records[: o + 1]).state_hash()
