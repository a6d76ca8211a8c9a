"""The columnar audit plan, written once as SQL (``sql``) in the subset DuckDB and Spark SQL share
(``dialect``), run by an engine (``duck``: DuckDB in this process; ``sparksql``: Spark), with the
driver's side (``driver``, ``run``) shared by both."""
