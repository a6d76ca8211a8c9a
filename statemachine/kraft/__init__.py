"""The KRaft family's state machines: the controller view and its reducer, the partition change
builder, the controller's deciders and the per-broker view (KIP-858 directory handling).

Target semantics: Kafka 3.8/3.9 (metadata.version >= 3.7-IV2), eligible leader replicas off.
"""

from .partitions import Election, PartitionChangeBuilder, merge
from .reducer import apply, replay
from .view import BrokerRegistration, ControllerImage, ControllerView, PartitionRegistration

__all__ = [
    "BrokerRegistration",
    "ControllerImage",
    "ControllerView",
    "Election",
    "PartitionChangeBuilder",
    "PartitionRegistration",
    "apply",
    "merge",
    "replay",
]
