"""Producer and seq go together, and seq is not negative: one check (``ProducerSeq``), the same
refusal from ``Log.append``, ``Log.append_group``, the HTTP service and the CLI."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from kraftlake.records import Log, NoOp, ProducerSeq, RecordError
from kraftlake.records.store.log import Batch
from kraftlake.service.app import create_app

BOTH = "give both producer and seq, or neither"
NEGATIVE = "seq must be >= 0"
REFUSED = [("p", None, BOTH), (None, 0, BOTH), ("p", -1, NEGATIVE)]


def test_the_pair_or_neither():
    assert ProducerSeq.of("p", 0) == ProducerSeq("p", 0)
    assert ProducerSeq.of(None, None) is None


@pytest.mark.parametrize("producer, seq, message", REFUSED)
def test_one_refusal_naming_the_field(producer, seq, message):
    with pytest.raises(RecordError) as caught:
        ProducerSeq.of(producer, seq)
    assert (caught.value.message, caught.value.field) == (message, "seq")
    assert isinstance(caught.value, ValueError)  # what the log raised before


@pytest.mark.parametrize("producer, seq, message", REFUSED)
def test_the_log_refuses_before_writing(tmp_path, producer, seq, message):
    log = Log.create(tmp_path / "log")
    with pytest.raises(RecordError, match=message):
        log.append([NoOp()], producer=producer, seq=seq)
    with pytest.raises(RecordError, match=message):
        log.append_group([Batch([NoOp()]), Batch([NoOp()], producer, seq)])
    assert Log.open(tmp_path / "log").version == 0


def test_the_service_answers_the_same_message_and_field(tmp_path):
    Log.create(tmp_path / "log")
    with TestClient(app=create_app(tmp_path / "log", commit_process=False)) as c:
        for producer, seq, message in REFUSED:
            r = c.post("/v1/records", json={"producer": producer, "seq": seq, "records": [{"type": "NoOp"}]})
            assert (r.status_code, r.json()) == (400, {"error": message, "field": "seq"})
