"""The JSON report written a piece at a time (``replay.report_json``) is msgspec's whole
encoding, byte for byte."""

from __future__ import annotations

import io

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.replay.report_json import PROBE, encode, write_json
from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

from helpers.tiers import examples


class Leaf(msgspec.Struct, kw_only=True):
    name: str
    at: int | None = None
    evidence: list[int] = []


class Row(msgspec.Struct, array_like=True):
    a: int
    b: str


class Sparse(msgspec.Struct, omit_defaults=True):
    x: int = 0
    items: list[int] = []


class Renamed(msgspec.Struct, rename="camel"):
    first_offset: int
    many_items: list[int]


class Tagged(msgspec.Struct, tag=True):
    values: list[str]


class Node(msgspec.Struct, kw_only=True):
    leaves: list[Leaf]
    rows: list[Row]
    names: dict[str, str]
    numbers: dict[int, float]
    sparse: Sparse
    renamed: Renamed
    tagged: Tagged
    child: Leaf | None = None
    nested: list[list[int]] = []


texts = st.text(max_size=8)
ints = st.integers(-(2**63), 2**63 - 1)
long = dict(max_size=3 * PROBE)
leaves = st.builds(Leaf, name=texts, at=st.none() | ints, evidence=st.lists(ints, max_size=4))
nodes = st.builds(
    Node,
    leaves=st.lists(leaves, **long),
    rows=st.lists(st.builds(Row, ints, texts), **long),
    names=st.dictionaries(texts, texts, **long),
    numbers=st.dictionaries(ints, st.floats(allow_nan=False), **long),
    sparse=st.builds(Sparse, x=ints, items=st.lists(ints, **long)),
    renamed=st.builds(Renamed, first_offset=ints, many_items=st.lists(ints, **long)),
    tagged=st.builds(Tagged, values=st.lists(texts, **long)),
    child=st.none() | leaves,
    nested=st.lists(st.lists(ints, max_size=3), **long),
)


def streamed(value, **kw) -> bytes:
    out = io.BytesIO()
    write_json(value, out.write, **kw)
    return out.getvalue()


@settings(max_examples=examples(150), deadline=None)
@given(nodes, st.integers(1, 5000))
def test_any_struct_is_written_as_msgspec_encodes_it(node, chunk_bytes):
    assert streamed(node, chunk_bytes=chunk_bytes) == msgspec.json.encode(node)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.integers() | texts | st.none(), max_size=4 * PROBE), st.integers(1, 300))
def test_long_lists_of_scalars_are_written_in_chunks(items, chunk_bytes):
    pieces = []
    write_json(items, pieces.append, chunk_bytes=chunk_bytes)
    assert b"".join(pieces) == msgspec.json.encode(items)
    if len(items) > PROBE:
        # The list went in more than one piece: its items were not all encoded at once.
        assert len(pieces) > 3


@pytest.mark.parametrize("bug", [None, "keep-offline-replica-in-isr"])
def test_an_audit_report_with_incidents_is_written_byte_for_byte(bug):
    cfg = WorkloadConfig(brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=5, bug=bug)
    audit = Audit(AuditConfig())
    audit.feed([r for batch in generate(cfg, records=3000) for r in batch])
    report = audit.report()
    assert report.incidents and report.availability.partitions
    if bug:
        assert len(report.violations) > PROBE
    # msgspec encodes the Structs in columns (the violations, each incident's effects) once
    # they are lists.
    incidents = [msgspec.structs.replace(i, effects=list(i.effects)) for i in report.incidents]
    whole = msgspec.json.encode(
        msgspec.structs.replace(report, violations=list(report.violations), incidents=incidents)
    )
    assert streamed(report, chunk_bytes=256) == whole == encode(report)


def test_spilled_effects_encoded_inside_their_incidents_let_their_pages_go(monkeypatch):
    """An incident's effects (``EffectList``, spilled by the plan) are encoded inside the
    incident, through msgspec's hook: their pages are let go once read, as a long list's are
    chunk by chunk, and the bytes are the same."""
    from kraftlake.replay.columns import StructColumns, spill

    cfg = WorkloadConfig(brokers=6, dirs_per_broker=3, topics=3, partitions=24, seed=5)
    audit = Audit(AuditConfig())
    audit.feed([r for batch in generate(cfg, records=3000) for r in batch])
    report = audit.report()
    incidents = [msgspec.structs.replace(i, effects=list(i.effects)) for i in report.incidents]
    whole = msgspec.json.encode(
        msgspec.structs.replace(report, violations=list(report.violations), incidents=incidents)
    )
    spill([i.effects for i in report.incidents])
    held = [i.effects for i in report.incidents if len(i.effects)]
    assert held and all(e.spilled for e in held)
    dropped: list[int] = []
    real = StructColumns.drop_pages

    def counted(self):
        dropped.append(id(self))
        real(self)

    monkeypatch.setattr(StructColumns, "drop_pages", counted)
    assert streamed(report, chunk_bytes=256) == whole
    assert {id(e) for e in held} <= set(dropped)
