"""Kafka's own formats: the ``__cluster_metadata`` log and its snapshots, read and written.

- ``wire``: the flexible ("compact") encoding primitives.
- ``metadata``: metadata record values and Raft control records <-> kraftlake records.
- ``batches``: RecordBatch v2 framing with CRC-32C, and ``.checkpoint`` snapshots.
- ``layout``: where segments, snapshots and ``meta.properties`` are in a metadata log dir.
- ``importer`` / ``exporter``: a metadata log dir <-> a kraftlake log.
- ``dump``: a ``kafka-dump-log``-like listing of the binary files.
"""

from .batches import Batch, CheckpointContent, encode_batch, iter_batches, read_checkpoint
from .errors import KafkaFormatError
from .layout import KafkaDirError, MetadataDir, open_metadata_dir
from .metadata import MetadataDecoder, decode_control, decode_fields, encode_control, encode_value

__all__ = [
    "Batch",
    "CheckpointContent",
    "KafkaDirError",
    "KafkaFormatError",
    "MetadataDecoder",
    "MetadataDir",
    "decode_control",
    "decode_fields",
    "encode_batch",
    "encode_control",
    "encode_value",
    "iter_batches",
    "open_metadata_dir",
    "read_checkpoint",
]
