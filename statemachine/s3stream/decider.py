"""The S3Stream controller's decider: ``decide(view, command) -> Decision``, one dispatch point.

Pure: the view is read, never changed. Fold the decision's records with ``reducer.apply`` to get
the next view, as AutoMQ replays a committed ControllerResult.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import cluster, commits, nodes, objects, streams
from . import commands as c
from .view import StreamsView

# Each handler takes the command of its key's class, which a dict type cannot say: Any, as in the reducers.
_DECIDE: dict[type, Callable[[StreamsView, Any], c.Decision]] = {
    c.CreateStream: streams.create,
    c.OpenStream: streams.open_stream,
    c.CloseStream: streams.close_stream,
    c.TrimStream: streams.trim_stream,
    c.DeleteStream: streams.delete_stream,
    c.PrepareObjects: objects.prepare,
    c.CommitStreamSetObject: commits.commit_stream_set_object,
    c.CommitStreamObject: commits.commit_stream_object,
    c.GetOpeningStreams: nodes.get_opening_streams,
    c.CheckObjectLifecycle: objects.check_lifecycle,
    c.DeleteMarkedObjects: objects.delete_marked,
    c.PutKV: nodes.put_kv,
    c.DeleteKV: nodes.delete_kv,
    c.RegisterNode: cluster.register,
    c.UnregisterNode: cluster.unregister,
    c.GetNodes: cluster.get_nodes,
    c.DescribeStreams: cluster.describe_streams,
    c.CleanupScaleInNodes: cluster.cleanup_scale_in_nodes,
}


def decide(view: StreamsView, command: c.Command) -> c.Decision:
    """The records (and reply) AutoMQ's controller produces for ``command`` in state ``view``."""
    try:
        fn = _DECIDE[type(command)]
    except KeyError:
        raise TypeError(f"not an S3Stream controller command: {type(command).__name__}") from None
    return fn(view, command)
