"""The Delta log store: a log as a Delta Lake table with gapless offsets, on a local disk or an
object store (``location``), appended in whole batches exactly once (``log``, ``appending``,
``delta_commit``, ``store_commit``), its data files checked where they are read (``data_files``,
``digests``, ``log_checks``, ``lineage``), read as of a version, time or offset (``snapshot``,
``time_travel``, ``history``), followed as it grows (``follow``) and kept compact (``compaction``).

Apart from the record types (``kraftlake.records``), which the pure state machines import: importing
this package loads deltalake and pyarrow. ``kraftlake.records`` gives its main names (``Log``,
``LogSnapshot``, ``AppendResult``…) on first use.
"""
