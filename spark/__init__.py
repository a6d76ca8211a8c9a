"""The same replay and audits on Spark, at scale: ``session`` builds (or takes) a Spark session,
``read_log`` reads a log as of a version, timestamp or offset."""

from .read import has_delta_connector, read_log, spark_schema
from .session import session

__all__ = ["has_delta_connector", "read_log", "session", "spark_schema"]
