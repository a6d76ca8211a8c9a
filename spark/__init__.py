"""The same replay and audits on Spark, at scale: ``session`` builds (or takes) a Spark session,
``read_log`` reads a log as of a version, timestamp or offset, ``state_at`` replays it per entity
with the local reducers (partitions and brokers DataFrames)."""

from .read import has_delta_connector, read_log, spark_schema
from .replay import broker_states, partition_states, state_at
from .session import session

__all__ = [
    "broker_states",
    "has_delta_connector",
    "partition_states",
    "read_log",
    "session",
    "spark_schema",
    "state_at",
]
