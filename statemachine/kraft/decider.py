"""The KRaft controller's decider: ``decide(view, command) -> Decision``, one dispatch point.

Pure: the view is read, never changed; the records come back without offsets and start at
``view.offset + 1`` once appended (broker epochs and placement seeds are derived from that).
Fold them with ``reducer.apply`` to get the next view, as Kafka replays a committed batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import activation, brokers, configs, directory_deciders, topics
from . import commands as c
from .view import ControllerView

DEFAULT_CONFIG = c.ControllerConfig()

# Each handler takes the command of its key's class, which a dict type cannot say: Any, as in the reducers.
_DECIDE: dict[type, Callable[[ControllerView, Any, c.ControllerConfig], c.Decision]] = {
    c.Activate: lambda v, cmd, cfg: activation.activate(v, cmd),
    c.RegisterBroker: lambda v, cmd, cfg: brokers.register(v, cmd),
    c.Heartbeat: brokers.heartbeat,
    c.ExpireSession: lambda v, cmd, cfg: brokers.expire_session(v, cmd),
    c.UnregisterBroker: lambda v, cmd, cfg: brokers.unregister(v, cmd),
    c.CreateTopic: topics.create_topic,
    c.AssignReplicasToDirs: lambda v, cmd, cfg: directory_deciders.assign_replicas_to_dirs(v, cmd),
    c.AlterPartition: lambda v, cmd, cfg: topics.alter_partition(v, cmd),
    c.ReassignPartition: lambda v, cmd, cfg: topics.reassign_partition(v, cmd),
    c.AlterConfig: lambda v, cmd, cfg: configs.alter_config(v, cmd),
    c.DeleteTopics: lambda v, cmd, cfg: topics.delete_topics(v, cmd),
    c.ElectLeaders: lambda v, cmd, cfg: topics.elect_leaders(v, cmd),
    c.CreatePartitions: topics.create_partitions,
    c.ElectUncleanLeaders: lambda v, cmd, cfg: topics.elect_unclean_leaders(v),
}


def decide(view: ControllerView, command: c.Command, config: c.ControllerConfig = DEFAULT_CONFIG) -> c.Decision:
    """The records (and reply) the controller produces for ``command`` in state ``view``."""
    try:
        fn = _DECIDE[type(command)]
    except KeyError:
        raise TypeError(f"not a KRaft controller command: {type(command).__name__}") from None
    return fn(view, command, config)
