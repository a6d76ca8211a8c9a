"""AutoMQ's ``KVControlManagerTest``, case by case, on kraftlake's real decider and reducer
(``getKV`` is a read of the view's KV, which kraftlake keeps as real state)."""

from __future__ import annotations

import pytest
from test_s3stream_scenarios import Ctl

from kraftlake.records.s3stream import KV, KeyValue, RemoveKV
from kraftlake.statemachine.s3stream import commands as c
from kraftlake.statemachine.s3stream.reducer import apply


def _get(k: Ctl, key: str, namespace: str | None = None) -> bytes | None:
    return k.view.kv.get(namespace, {}).get(key)


def test_testBasicReadWrite():
    k = Ctl()
    d = k.ok(c.PutKV(key="key1", value=b"value1"))
    assert len(d.records) == 1 and d.reply.value == b"value1"
    d = k.do(c.PutKV(key="key1", value=b"value1-1"))
    assert d.records == () and d.error_code == c.KEY_EXIST and d.reply.value == b"value1"
    d = k.ok(c.PutKV(key="key1", value=b"value1-2", overwrite=True))
    assert len(d.records) == 1 and d.reply.value == b"value1-2"
    assert _get(k, "key1") == b"value1-2" and _get(k, "key2") is None
    d = k.do(c.DeleteKV(key="key2"))
    assert d.records == () and d.error_code == c.KEY_NOT_EXIST
    d = k.ok(c.DeleteKV(key="key1"))
    assert len(d.records) == 1 and d.reply.value == b"value1-2" and _get(k, "key1") is None
    assert k.err(c.DeleteKV(key="key1")) == c.KEY_NOT_EXIST


def test_testNamespaceIsolation():
    k = Ctl()
    k.ok(c.PutKV(key="key1", value=b"ns1-value", namespace="ns1"))
    k.ok(c.PutKV(key="key1", value=b"ns2-value", namespace="ns2"))
    assert (_get(k, "key1", "ns1"), _get(k, "key1", "ns2"), _get(k, "key1")) == (b"ns1-value", b"ns2-value", None)


def test_testNamespacedDelete():
    k = Ctl()
    k.ok(c.PutKV(key="key1", value=b"value", namespace="ns1"))
    miss = k.do(c.DeleteKV(key="key1", namespace="ns2"))
    assert miss.error_code == c.KEY_NOT_EXIST and miss.records == ()
    assert k.ok(c.DeleteKV(key="key1", namespace="ns1")).reply.value == b"value"
    assert _get(k, "key1", "ns1") is None


def test_testNamespacedOverwrite():
    k = Ctl()
    k.ok(c.PutKV(key="k", value=b"v1", namespace="ns"))
    assert k.err(c.PutKV(key="k", value=b"v2", namespace="ns")) == c.KEY_EXIST
    k.ok(c.PutKV(key="k", value=b"v2", namespace="ns", overwrite=True))
    assert _get(k, "k", "ns") == b"v2"


def test_testNullAndNamespacedCoexist():
    k = Ctl()
    k.ok(c.PutKV(key="k", value=b"no-ns"))
    k.ok(c.PutKV(key="k", value=b"with-ns", namespace="ns"))
    assert (_get(k, "k"), _get(k, "k", "ns")) == (b"no-ns", b"with-ns")


def test_testReplayRemoveKVRecord():
    k = Ctl()
    apply(k.view, KV(key_values=(KeyValue(key="k1", value=b"v1"),)))
    apply(k.view, KV(key_values=(KeyValue(key="k1", value=b"v2", namespace="ns"),)))
    v0 = RemoveKV(version=0, keys=("k1",))
    assert v0.namespaces is None
    apply(k.view, v0)
    assert _get(k, "k1", "ns") == b"v2" and _get(k, "k1") is None
    apply(k.view, RemoveKV(keys=("k1",), namespaces=("ns",)))
    assert _get(k, "k1", "ns") is None
    with pytest.raises(ValueError, match="namespaces"):
        RemoveKV(keys=("k1", "k2"), namespaces=("ns",))  # AutoMQ's replay throws; kraftlake's record refuses it
