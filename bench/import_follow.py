"""``import-kafka --follow`` benchmark (issue 30): records/s imported while following a metadata
log dir that a writer thread fills, and the lag from a batch written to the segment file to its
records landing in the kraftlake log (p50/p99).

The writer appends RecordBatch v2 bytes made with kraftlake's own encoder (``encode_batch``) from
the metadata records of the real logs in fixtures/kafka (NoOps left out: they are skipped), at
consecutive offsets, rolling a segment every ``--segment-records``. Two runs:

- throughput: ``--records`` records written as fast as the writer can, in batches of
  ``--batch``; records/s = records / (last landing - first write);
- lag: one batch of ``--lag-batch`` records every ``--interval-ms``; per batch, the time from
  its write (after ``flush``) to the follower's append returning. The throughput run's lags are
how far the follower trails a writer faster than it; beside it, a plain ``import_kafka`` of the
same files once written (the same decoding and appends, no following).

The follower runs with ``--settle-ms`` (0 by default here: the raw pipeline; the CLI default
5 000 adds that much to every lag by design). Usage::

    python bench/import_follow.py [--records 100000] [--poll-ms 10] [--settle-ms 0]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "kafka" / "three-snapshots" / "__cluster_metadata-0" / "00000000000000000000.log"


def metadata_values() -> list[bytes]:
    from kraftlake.records.kafka import MetadataDecoder, iter_batches
    from kraftlake.records.kraft import NoOp

    dec, out = MetadataDecoder(), []
    for b in iter_batches(FIXTURE.read_bytes()):
        if b.is_control:
            continue
        for off, ts, _k, v in b.records:
            if type(dec.decode(v, offset=off, ts_ms=ts, source=None)) is not NoOp:
                out.append(v)
    return out


class Writer:
    """Appends batches to ``part`` at consecutive offsets, rolling segments."""

    def __init__(self, part: Path, values: list[bytes], segment_records: int) -> None:
        self.part, self.values, self.segment_records = part, values, segment_records
        self.next = 0
        self.segment: Path | None = None
        self.in_segment = 0
        self.written: dict[int, float] = {}  # batch base offset -> monotonic time written

    def batch(self, n: int) -> None:
        from kraftlake.records.kafka.batches import encode_batch
        from kraftlake.records.kafka.layout import segment_name

        if self.segment is None or self.in_segment >= self.segment_records:
            self.segment, self.in_segment = self.part / segment_name(self.next), 0
        base = self.next
        now_ms = int(time.time() * 1000)
        recs = [(base + i, now_ms, None, self.values[(base + i) % len(self.values)]) for i in range(n)]
        data = encode_batch(recs, base_offset=base, partition_leader_epoch=1)
        with open(self.segment, "ab") as f:
            f.write(data)
            f.flush()
        self.written[base] = time.monotonic()
        self.next += n
        self.in_segment += n


def run(args, values, mode: str) -> dict:
    from kraftlake.records import Log
    from kraftlake.records.kafka.follow import KafkaFollower
    from kraftlake.records.kafka.importer import import_kafka, parse_source

    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "meta" / "__cluster_metadata-0"
        part.mkdir(parents=True)
        writer = Writer(part, values, args.segment_records)
        landed: dict[int, float] = {}

        def on_publish(records) -> None:
            t = time.monotonic()
            for r in records:
                landed.setdefault(parse_source(r.source)[1], t)

        log = Log.create(Path(tmp) / "log")
        writer.batch(args.batch)  # the follower needs a segment to start from
        follower = KafkaFollower(part.parent, log, settle_ms=args.settle_ms, on_publish=on_publish)
        stop = threading.Event()

        def write() -> None:
            if mode == "throughput":
                while writer.next < args.records:
                    writer.batch(args.batch)
            else:
                for _ in range(args.lag_batches):
                    writer.batch(args.lag_batch)
                    time.sleep(args.interval_ms / 1000)

        t = threading.Thread(target=write)
        start = time.monotonic()
        t.start()
        th = threading.Thread(target=follower.run, kwargs={"poll_ms": args.poll_ms, "stop": stop})
        th.start()
        t.join()
        while len(landed) < len(writer.written):
            time.sleep(0.01)
        end = time.monotonic()
        stop.set()
        th.join()
        if mode == "throughput":  # the same files, imported once they are complete: the baseline
            base_log = Log.create(Path(tmp) / "plain")
            t0 = time.monotonic()
            import_kafka(part.parent, base_log)
            plain = writer.next / (time.monotonic() - t0)
        lags = sorted((landed[b] - w) * 1000 for b, w in writer.written.items())
        q = statistics.quantiles(lags, n=100) if len(lags) > 1 else lags * 99
        return {
            "mode": mode,
            "records": writer.next,
            "batches": len(writer.written),
            "appends": follower.stats.appends,
            "rec_s": writer.next / (end - start),
            "p50": statistics.median(lags),
            "p99": q[98],
            "plain": plain if mode == "throughput" else None,
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=100, help="records per batch, throughput run")
    p.add_argument("--segment-records", type=int, default=25_000)
    p.add_argument("--lag-batches", type=int, default=200)
    p.add_argument("--lag-batch", type=int, default=10)
    p.add_argument("--interval-ms", type=int, default=20)
    p.add_argument("--poll-ms", type=int, default=10)
    p.add_argument("--settle-ms", type=int, default=0)
    args = p.parse_args()

    from rich.console import Console
    from rich.table import Table

    values = metadata_values()
    table = Table(title=f"import-kafka --follow (poll {args.poll_ms} ms, settle {args.settle_ms} ms)")
    for c in ("run", "records", "batches", "appends", "records/s", "lag p50 ms", "lag p99 ms", "plain import rec/s"):
        table.add_column(c, justify="right")
    for mode in ("throughput", "lag"):
        r = run(args, values, mode)
        table.add_row(
            mode,
            f"{r['records']:,}",
            f"{r['batches']:,}",
            f"{r['appends']:,}",
            f"{r['rec_s']:,.0f}",
            f"{r['p50']:.1f}",
            f"{r['p99']:.1f}",
            "" if r["plain"] is None else f"{r['plain']:,.0f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
