"""Metadata transactions in the audit (``replay.transactions``): a committed transaction's records
are audited as they are, an aborted or unfinished one's as NoOps at the same offsets and times,
and ``unpublished_ranges`` (what the Spark audit leaves out) names exactly the NoOps' offsets."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlake.records import NoOp, Partition, PartitionChange, ReplicaDirectory, Topic
from kraftlake.records.kraft import AbortTransaction, BeginTransaction, EndTransaction
from kraftlake.replay.audit import Audit, AuditConfig
from kraftlake.replay.transactions import Transactions, published, unpublished_ranges

from helpers.kraft import bootstrap, registration, uid
from helpers.tiers import examples

_KINDS = {
    "B": BeginTransaction,
    "E": EndTransaction,
    "A": AbortTransaction,
    "n": NoOp,
    "p": lambda **kw: PartitionChange(topic_id=uid("t"), partition_id=0, isr=(1,), **kw),
}


def _log(kinds: str) -> list:
    return [_KINDS[k](offset=i, ts_ms=1_000 + 10 * i) for i, k in enumerate(kinds)]


def _out(kinds: str) -> str:
    """What ``published`` gives, one letter a record: a NoOp given for another record is '-'."""
    records = _log(kinds)
    out = list(published(records))
    assert [r.offset for r in out] == [r.offset for r in records]  # every offset, in order
    assert [r.ts_ms for r in out] == [r.ts_ms for r in records]
    return "".join("-" if type(o) is NoOp and k != "n" else k for o, k in zip(out, kinds))


def test_committed_records_pass_aborted_and_unfinished_ones_become_noops():
    assert _out("npBppEn") == "npBppEn"
    assert _out("npBpnpAp") == "np--n--p"  # a NoOp stays one
    assert _out("pBppEpBpA") == "pBppEp---"
    assert _out("npBpp") == "np---"  # still open at the end
    assert _out("pEpAp") == "pEpAp"  # End and Abort outside a transaction: the reducer refuses them
    assert _out("BpBpApEp") == "-----pEp"  # a Begin inside is one of the transaction's records


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="BEAnp", max_size=30))
def test_unpublished_ranges_are_the_offsets_given_as_noops(kinds):
    """The Spark audit leaves out the offsets ``unpublished_ranges`` names (from the transaction
    records alone); the local audit sees NoOps at exactly those offsets."""
    t = Transactions()
    out = list(published(_log(kinds), t))
    noops = {o.offset for o, k in zip(out, kinds) if type(o) is NoOp and k != "n"}
    events = [(i, _KINDS[k].__name__) for i, k in enumerate(kinds) if k in "BEA"]
    ranges = unpublished_ranges(events, len(kinds) - 1)
    assert {o for lo, hi in ranges for o in range(lo, hi + 1) if kinds[o] != "n"} == noops
    assert ranges == t.ranges + ([] if t.unfinished is None else [(t.unfinished, len(kinds) - 1)])


def test_the_audit_sees_the_published_history():
    """A partition made wrong inside an aborted transaction never was (Kafka reverted it before
    anyone saw it); the same change committed is wrong from its offset; the records of a
    transaction still open at the end are not audited. Offsets stay gapless (no L1)."""
    t, d = uid("t"), {b: uid(f"d{b}") for b in (1, 2, 3)}
    head = [
        *bootstrap(),
        *(registration(b, [d[b]], epoch=b, fenced=False) for b in (1, 2, 3)),
        Topic(name="t", topic_id=t),
        Partition(
            topic_id=t,
            partition_id=0,
            replicas=(1, 2),
            isr=(1, 2),
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
            assignment=(ReplicaDirectory(broker=1, directory=d[1]), ReplicaDirectory(broker=2, directory=d[2])),
        ),
    ]
    bad = PartitionChange(topic_id=t, partition_id=0, leader=3)  # K1: leader 3 is not a replica

    def found(*body):
        records = [*head, *body, NoOp(), NoOp()]
        a = Audit(AuditConfig(grace_records=0))
        a.feed(msgspec.structs.replace(r, offset=i) for i, r in enumerate(records))
        report = a.report()
        assert report.records == len(records)
        return [(v.invariant, v.first_offset) for v in report.violations]

    n = len(head)
    assert found(BeginTransaction(), bad, AbortTransaction()) == []
    assert found(BeginTransaction(), bad, EndTransaction()) == [("K1", n + 1)]
    assert found(bad) == [("K1", n)]
    assert found(NoOp(), BeginTransaction(), bad) == []
