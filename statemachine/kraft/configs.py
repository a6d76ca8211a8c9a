"""Configuration changes (Kafka's ``ConfigurationControlManager.incrementalAlterConfig``) and the
records they bring with them under KIP-966: with eligible leader replicas on, every
``min.insync.replicas`` ConfigRecord is followed by a ClearElr of its topic, or of every topic for
the cluster default (``createClearElrRecordsAsNeeded``, Kafka 4.0)."""

from __future__ import annotations

from collections.abc import Iterable

from kraftlake.records.kraft import ClearElr, Config

from . import commands as c
from .replication import BROKER_RESOURCE, MIN_INSYNC_REPLICAS, TOPIC_RESOURCE, elr_enabled
from .view import ControllerView


def clear_elr_records(view: ControllerView, records: Iterable) -> list[ClearElr]:
    """``createClearElrRecordsAsNeeded`` for the config records of one operation."""
    if not elr_enabled(view):
        return []
    out = []
    for r in records:
        if isinstance(r, Config) and r.name == MIN_INSYNC_REPLICAS:
            out.append(ClearElr(topic_name=r.resource_name if r.resource_type == TOPIC_RESOURCE else ""))
    return out


def alter_config(view: ControllerView, cmd: c.AlterConfig) -> c.Decision:
    """IncrementalAlterConfigs for one key: SET (``value``) or DELETE (None), of a topic or of the
    cluster default (BROKER, ""). With ELR on, deleting the cluster's ``min.insync.replicas`` is
    refused (Kafka 4.0's rule) and changing one clears the ELRs it governs."""
    if cmd.resource_type == TOPIC_RESOURCE and cmd.resource_name not in view.topic_ids:
        return c.Decision(
            reply=c.Reply(error_code=c.UNKNOWN_TOPIC_OR_PARTITION, message=f"unknown topic {cmd.resource_name!r}")
        )
    if cmd.resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE):
        return c.Decision(reply=c.Reply(error_code=c.INVALID_REQUEST, message="only TOPIC and BROKER configs"))
    if (
        cmd.value is None
        and elr_enabled(view)
        and cmd.resource_type == BROKER_RESOURCE
        and cmd.resource_name == ""
        and cmd.name == MIN_INSYNC_REPLICAS
    ):
        return c.Decision(
            reply=c.Reply(
                error_code=c.INVALID_CONFIG,
                message="Cannot remove the cluster-level min.insync.replicas while ELR is enabled.",
            )
        )
    record = Config(resource_type=cmd.resource_type, resource_name=cmd.resource_name, name=cmd.name, value=cmd.value)
    return c.Decision(records=(record, *clear_elr_records(view, [record])))


__all__ = ["alter_config", "clear_elr_records"]
