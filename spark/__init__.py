"""The same replay and audits on Spark, at scale."""
