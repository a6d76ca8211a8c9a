"""The S3Stream family's state machines (AutoMQ, automq.version V6): the controller view and its
reducer, the read path, the controller's deciders, the invariants and the simulator workload."""

from .read import InRangeObjects, ObjectRef, objects_for
from .reducer import apply, replay
from .view import StreamsView

__all__ = ["InRangeObjects", "ObjectRef", "StreamsView", "apply", "objects_for", "replay"]
