"""What the log's own commits (appends and ``Log.compact``) are made of, beside the commit file
that ``delta_commit`` writes: the Parquet data file, durable and with the statistics its ``add``
action carries, and the commit's stamp (its time, and the engine version in ``engineInfo``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _package_version

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import CorruptStoreError
from . import digests
from .delta_commit import DataFile
from .location import Location, resolve

try:
    ENGINE_VERSION = _package_version("kraftlake")
except PackageNotFoundError:  # running from a checkout that was never installed
    ENGINE_VERSION = "0+unknown"
"""Written into every commit's ``engineInfo``."""
ROW_GROUP_ROWS = 32_768
PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
)
"""How the log's data files are read: the CRC-32 of every page that has one is checked (the
files written here carry them; a flipped bit once changed a ``partition_id`` silently)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


STATISTICS_COLUMNS = ("offset", "ts_ms")
"""The only columns whose row-group statistics are written: a range read (``offset``) skips the
groups outside it, and the ``add`` action's statistics are of these two; statistics of the other
columns cost ~1 ms a 10 000-record file and nothing reads them."""
UNDICTIONARIED_COLUMNS = ("offset", "record")
"""Top-level columns written without a dictionary: unique in every row (the offset, each
record's msgpack), so the dictionary page is built, found useless and dropped. The leaves of the
record types' struct columns are written plain too (a dictionary is kept only for the listed
top-level columns): the 10 000-record file comes out 1% smaller and ~1 ms faster
(bench/RESULTS.md, session 6)."""


def _parquet_options(rows: pa.Table) -> dict[str, object]:
    """The ``pq.write_table`` keywords of a data file holding ``rows``'s columns."""
    return {
        "compression": "zstd",
        "row_group_size": ROW_GROUP_ROWS,
        "write_page_checksum": True,
        "use_dictionary": [c for c in rows.column_names if c not in UNDICTIONARIED_COLUMNS],
        "write_statistics": list(STATISTICS_COLUMNS),
    }


def write_data_file(table: Location | str, rows: pa.Table, name: str) -> DataFile:
    """``rows`` (in offset order) as a durable data file of the table at ``table``, named
    ``name`` with the digest of its bytes in it (``digests``: ``DataFile.path`` is the name
    written), with the statistics its ``add`` action carries. On an object store the file is
    one put (a whole object or none)."""
    where = resolve(table)
    n = rows.num_rows
    # A column null in every row (the struct of each record type the rows do not hold) is
    # left out of the file: readers take the table's schema and read it as null, as they do
    # for files written before a column existed. A batch of a few types then writes a few
    # column chunks instead of 250 (faster and smaller: bench/RESULTS.md).
    rows = rows.select([c for c in rows.column_names if rows.column(c).null_count < n])
    # Row groups carry offset statistics: a read of a range (the tail after a snapshot)
    # skips the groups outside it instead of decompressing the whole file.
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, **_parquet_options(rows))
    body = sink.getvalue()
    name = digests.named(name, body)
    if where.local is not None:
        full = os.path.join(where.local, name)
        with open(full, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        size, mtime_ms = body.size, int(os.stat(full).st_mtime * 1000)
    else:
        where.write(name, body)
        size, mtime_ms = body.size, now_ms()
    offsets, ts = rows.column("offset"), rows.column("ts_ms")
    stats = {
        "numRecords": n,
        "minValues": {"offset": offsets[0].as_py(), "ts_ms": pc.min(ts).as_py()},
        "maxValues": {"offset": offsets[-1].as_py(), "ts_ms": pc.max(ts).as_py()},
        "nullCount": {"offset": 0, "ts_ms": 0},
    }
    return DataFile(name, size, mtime_ms, json.dumps(stats))


def read_parquet(
    files: Sequence[str], schema: pa.Schema, *, filesystem: pafs.FileSystem | None = None, **to_table: object
) -> pa.Table:
    """``files`` (the log's data files, or a snapshot table's; on ``filesystem`` when not local)
    read as one dataset, each file's bytes checked against the digest in its name before they
    are used (``digests``) and page checksums verified; a file that is missing, truncated or
    damaged raises ``CorruptStoreError`` naming it."""
    try:
        return checked_dataset(files, schema, filesystem).to_table(**to_table)
    except CorruptStoreError:
        raise
    except (OSError, pa.ArrowException) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        named = next((f for f in files if os.path.basename(f) in str(exc)), None)
        if named is None:  # pyarrow's words do not always name it: read them one by one
            named = (
                files[0] if len(files) == 1 else next((f for f in files if _unreadable(f, schema, filesystem)), None)
            )
        where = os.path.basename(named) if named else f"one of {len(files)} data files"
        raise CorruptStoreError(f"{where} cannot be read: {text}", file=named) from exc


def checked_dataset(files: Sequence[str], schema: pa.Schema, filesystem: pafs.FileSystem | None = None) -> ds.Dataset:
    """A dataset of ``files`` with ``schema`` (page checksums verified on read): a file whose
    name carries a digest is read whole first and checked (``CorruptStoreError`` naming it), and
    the dataset reads those very bytes; a file without one is read where it lies."""
    if not any(digests.expected(f) is not None for f in files):
        return ds.dataset(list(files), schema=schema, format=PARQUET, filesystem=filesystem)
    local = filesystem or pafs.LocalFileSystem()
    bodies = _read_checked(files, filesystem)
    fragments = [
        PARQUET.make_fragment(f, local) if body is None else PARQUET.make_fragment(pa.BufferReader(body))
        for f, body in zip(files, bodies)
    ]
    return ds.FileSystemDataset(fragments, schema, PARQUET)


def _read_checked(files: Sequence[str], filesystem: pafs.FileSystem | None) -> list[bytes | None]:
    """The checked bytes of each file that has a digest (None for the others); an object
    store's are fetched a few at a time (each a request)."""

    def one(f: str) -> bytes | None:
        return None if digests.expected(f) is None else digests.read_checked(f, filesystem)

    if filesystem is None or len(files) == 1:
        return [one(f) for f in files]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        return list(pool.map(one, files))


def _unreadable(file: str, schema: pa.Schema, filesystem: pafs.FileSystem | None) -> bool:
    try:
        checked_dataset([file], schema, filesystem).to_table()
    except (OSError, pa.ArrowException, CorruptStoreError):
        return True
    return False


def check_pages(file: str, filesystem: pafs.FileSystem | None = None) -> None:
    """Read every page of ``file`` (a data file named without a digest) with its checksum
    verified, for a reader that checks none itself (DuckDB); ``CorruptStoreError`` naming it."""
    try:
        source = file if filesystem is None else filesystem.open_input_file(file)
        with pq.ParquetFile(source, page_checksum_verification=True) as pf:
            for _ in pf.iter_batches(batch_size=65_536):
                pass
    except (OSError, pa.ArrowException) as exc:
        raise CorruptStoreError(f"{os.path.basename(file)} cannot be read: {exc}", file=file) from exc


def parquet_schema(file: str, filesystem: pafs.FileSystem | None = None) -> pa.Schema:
    """A data file's own schema (from its footer); ``CorruptStoreError`` naming a damaged file."""
    try:
        return pq.read_schema(file, filesystem=filesystem)
    except (OSError, pa.ArrowException) as exc:
        raise CorruptStoreError(f"{os.path.basename(file)} cannot be read: {exc}", file=file) from None
