"""Adversarial producer ids (issue 33, finding 1): no two producers share a stored key, ids are
bounded, and logs written with the old, ambiguous keys stay readable."""

from __future__ import annotations

import pytest

from kraftlake.records import Log, RecordError
from kraftlake.records.kraft import NoOp
from kraftlake.records.store import appending


def _noop():
    return [NoOp()]


def test_producer_named_like_anothers_key_keeps_exactly_once(new_log):
    first = new_log.append(_noop() * 3, producer="w/first", seq=1000)
    new_log.append(_noop(), producer="w", seq=0)
    again = new_log.append(_noop() * 3, producer="w/first", seq=1000)
    assert again.duplicate and (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    retry = new_log.append(_noop(), producer="w", seq=0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (3, 3)
    assert new_log.last_offset == 3


@pytest.mark.parametrize("suffix", ["version", "first", "last"])
def test_first_batch_of_a_producer_named_like_a_key_lands(new_log, suffix):
    new_log.append(_noop(), producer="h", seq=5)
    landed = new_log.append(_noop(), producer=f"h/{suffix}", seq=0)
    assert not landed.duplicate and landed.first_offset == 1
    assert Log.open(new_log.path).producer_seq("h") == 5
    assert Log.open(new_log.path).producer_seq(f"h/{suffix}") == 0


@pytest.mark.parametrize("name", ["a%2Fb", "a/b", "a%b", "%", "/", "a//first"])
def test_escaping_is_injective(new_log, name):
    other = {"a%2Fb": "a/b", "a/b": "a%2Fb", "a%b": "a%25b", "%": "%25", "/": "%2F", "a//first": "a/%2Ffirst"}[name]
    new_log.append(_noop(), producer=name, seq=7)
    assert new_log.producer_seq(other) is None
    assert appending.producer_key(name) != appending.producer_key(other)


def test_long_producer_id_is_refused_naming_the_field(new_log):
    with pytest.raises(RecordError) as info:
        new_log.append(_noop(), producer="p" * (appending.MAX_PRODUCER_LENGTH + 1), seq=0)
    assert info.value.field == "producer" and str(appending.MAX_PRODUCER_LENGTH) in str(info.value)
    assert new_log.last_offset == -1
    new_log.append(_noop(), producer="p" * appending.MAX_PRODUCER_LENGTH, seq=0)


def test_empty_producer_id_is_refused(new_log):
    with pytest.raises(RecordError) as info:
        new_log.append(_noop(), producer="", seq=0)
    assert info.value.field == "producer"


def test_seq_beyond_int64_is_refused_naming_the_field(new_log):
    with pytest.raises(RecordError) as info:
        new_log.append(_noop(), producer="p", seq=2**63)
    assert info.value.field == "seq"
    assert new_log.append(_noop(), producer="p", seq=2**63 - 1).first_offset == 0


def _old_keys(producer, seq, first, last, version):
    """How kraftlake wrote a producer's app transactions before the ids were escaped."""
    p = appending.PRODUCER_TXN + producer
    return [(p, seq), (p + "/first", first), (p + "/last", last), (p + "/version", version)]


def test_log_written_with_the_old_keys_still_answers_retries(log_path, monkeypatch):
    """A table as the old code wrote it (no key format, raw ids in the keys): the
    retries of its batches are still acknowledged, including ids with ``/`` whose old keys were
    ambiguous (read from the commits' metadata instead)."""
    with monkeypatch.context() as m:
        m.setattr("kraftlake.records.store.log.KEY_FORMAT", 0)  # the old code set no key format
        m.setattr(appending, "_producer_txns", _old_keys)
        old = Log.create(log_path)
        a = old.append(_noop() * 2, producer="svc/a", seq=3)
        b = old.append(_noop(), producer="plain", seq=9)
        c = old.append(_noop(), producer="svc/a", seq=4)
    log = Log.open(log_path)
    assert log.producer_seq("svc/a") == 4 and log.producer_seq("plain") == 9
    for result, producer, seq in ((c, "svc/a", 4), (a, "svc/a", 3), (b, "plain", 9)):
        again = log.append(_noop(), producer=producer, seq=seq)
        assert again.duplicate and (again.first_offset, again.last_offset, again.version) == (
            result.first_offset,
            result.last_offset,
            result.version,
        )
    nxt = log.append(_noop(), producer="svc/a", seq=5)
    assert not nxt.duplicate and nxt.first_offset == 4
    assert Log.open(log_path).producer_seq("svc/a") == 5
    assert log.append(_noop(), producer="svc/a", seq=5).duplicate
