"""Every family's deciders return the one ``Decision`` (``statemachine.decision``) with the one
reply convention: ``error_code``, ``NONE`` for no error, and no records when the decision errs.
Given a view, when a command, then the decision."""

from __future__ import annotations

import pytest

from kraftlake.records import Topic
from kraftlake.records.bookkeeper import AuditorElected, BookieState
from kraftlake.records.s3stream import KV
from kraftlake.statemachine import decision, state_hash
from kraftlake.statemachine.bookkeeper import commands as bc
from kraftlake.statemachine.bookkeeper import view as bookkeeper_view
from kraftlake.statemachine.bookkeeper.decider import decide as decide_bookies
from kraftlake.statemachine.bookkeeper.view import BookiesView
from kraftlake.statemachine.kraft import commands as kc
from kraftlake.statemachine.kraft import view as kraft_view
from kraftlake.statemachine.kraft.view import ControllerView
from kraftlake.statemachine.s3stream import commands as sc
from kraftlake.statemachine.s3stream import view as s3stream_view
from kraftlake.statemachine.s3stream.decider import decide as decide_streams
from kraftlake.statemachine.s3stream.view import StreamsView
from tests.helpers.kraft import controller_with_brokers, uid


def _kraft(command):
    """The KRaft controller with broker 1 registered and unfenced decides ``command``."""
    return controller_with_brokers({1: [uid("d1")]}).handle(command)


FAMILIES = {
    # family: (decide, a command it takes, a record it then writes, a command it refuses, the code)
    "kraft": (
        _kraft,
        kc.CreateTopic(name="t", partitions=1, replication_factor=1),
        Topic,
        kc.UnregisterBroker(broker_id=7),
        kc.BROKER_ID_NOT_REGISTERED,
    ),
    "s3stream": (
        lambda cmd: decide_streams(StreamsView(), cmd),
        sc.RegisterNode(node_id=0, node_epoch=1, wal_config="w", tags=()),
        KV,
        sc.OpenStream(node_id=0, node_epoch=0, stream_id=7, stream_epoch=0),
        sc.NODE_EPOCH_NOT_EXIST,
    ),
    "bookkeeper": (
        lambda cmd: decide_bookies(BookiesView(), cmd),
        bc.ElectAuditor(auditor="a"),
        AuditorElected,
        bc.ChangeBookieState(bookie_id="nope", state=BookieState.DRAINING),
        bc.NO_SUCH_BOOKIE,
    ),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_decides_the_one_decision_with_the_one_reply_convention(family):
    decide, ok, record_type, bad, code = FAMILIES[family]

    done = decide(ok)
    assert type(done) is decision.Decision
    assert isinstance(done.reply, decision.Reply)
    assert done.error_code == done.reply.error_code == decision.NONE
    assert any(type(r) is record_type for r in done.records)

    refused = decide(bad)
    assert type(refused) is decision.Decision
    assert refused.error_code == refused.reply.error_code == code != decision.NONE
    assert refused.records == ()


def test_one_state_hash_for_every_family_view():
    """The state hash is written once; each view's hash is it of the view's image."""
    assert kraft_view.state_hash_of is s3stream_view.state_hash_of is bookkeeper_view.state_hash_of
    assert kraft_view.state_hash_of is state_hash.state_hash_of
    for v in (ControllerView(), StreamsView(), BookiesView()):
        assert v.state_hash() == state_hash.state_hash_of(v._image_fields())
