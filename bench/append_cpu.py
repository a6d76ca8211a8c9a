"""CPU milliseconds of one local ``Log.append`` per input form, beside raw delta-rs.

    python bench/append_cpu.py --size 10000 --rounds 8

Wall times on a shared machine follow the load; CPU time (``time.process_time``: this process,
all its threads) follows it far less, so this is the number to compare code versions with (run
two checkouts one after the other, several times). For each round one batch of ``--size``
records (bench/append.py's workload) is appended to one log per form: Python Structs
(``python``), JSON Lines split and decoded in the call (``jsonl``, as ``kraftlake append``
does), msgpack bytes decoded as the HTTP service does (``msgpack``: ``append.service_msgpack``) and a pyarrow Table of the rows (``arrow``), then the
batch's Arrow table is written to a raw Delta table with ``write_deltalake`` (converted untimed,
as in bench/append.py), and once more with ``WriterProperties(compression="ZSTD")`` (``raw_zstd``:
the codec kraftlake's data files use; delta-rs's default is snappy). The first round is a warm-up. Prints the median per form; ``--json``
prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgspec  # noqa: E402
import pyarrow as pa  # noqa: E402
from append import ARROW_DROPPED, Workload, service_msgpack  # noqa: E402 - bench/append.py's
from deltalake import DeltaTable, WriterProperties, write_deltalake  # noqa: E402

from kraftlake.records import Log  # noqa: E402
from kraftlake.records.arrow import LOG_SCHEMA, to_table  # noqa: E402
from kraftlake.records.codec import encode_lines  # noqa: E402
from kraftlake.records.columnar import from_lines  # noqa: E402
from kraftlake.records.store.log import TABLE_PROPERTIES  # noqa: E402

FORMS = ("python", "jsonl", "msgpack", "arrow")
RAW = {"raw": None, "raw_zstd": WriterProperties(compression="ZSTD")}
"""Raw ``write_deltalake`` with delta-rs's default Parquet settings, and with kraftlake's codec."""


def _append(form: str, log: Log, batch: list, rows: pa.Table, lines: bytes, packed: bytes) -> None:
    if form == "python":
        log.append(batch)
    elif form == "jsonl":
        log.append(from_lines(lines.splitlines()), validated=True)
    elif form == "msgpack":
        log.append(service_msgpack(packed), validated=True)
    else:
        log.append(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=10_000, help="records per batch (default 10000)")
    ap.add_argument("--rounds", type=int, default=8, help="timed rounds (default 8)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the medians as one JSON object")
    args = ap.parse_args()
    work = Workload(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        logs = {form: Log.create(os.path.join(tmp, form)) for form in FORMS}
        raws = {
            name: DeltaTable.create(os.path.join(tmp, name), schema=LOG_SCHEMA, configuration=TABLE_PROPERTIES)
            for name in RAW
        }
        cpu: dict[str, list[float]] = {form: [] for form in (*FORMS, *RAW)}
        for i in range(args.rounds + 1):
            batch = work.batch(args.size)
            table = to_table(batch, first_offset=i * args.size, ts_ms=time.time_ns() // 1_000_000)
            rows, lines, packed = table.drop_columns(ARROW_DROPPED), encode_lines(batch), msgspec.msgpack.encode(batch)
            for form in (*FORMS, *RAW):
                start = time.process_time()
                if form in RAW:
                    write_deltalake(raws[form], table, mode="append", writer_properties=RAW[form])
                else:
                    _append(form, logs[form], batch, rows, lines, packed)
                if i:
                    cpu[form].append((time.process_time() - start) * 1000)
    medians = {form: round(statistics.median(v), 1) for form, v in cpu.items()}
    if args.json:
        print(json.dumps(medians))
        return
    print(f"CPU ms per append of {args.size:,} records (median of {args.rounds}; load {os.getloadavg()[0]:.1f})")
    for form, ms in medians.items():
        print(f"  {form:8s} {ms:8.1f}")


if __name__ == "__main__":
    main()
