"""The notebook facade: ``lake = kraftlake.open(LOG)``, then ask what the cluster looked like.

- ``lake.at(offset=|version=|timestamp=)``: a ``PointInTime`` with ``.brokers``, ``.partitions``,
  ``.broker(b)`` as pandas DataFrames, ``.to_arrow()``, ``.to_spark(spark)``, the records of that
  snapshot (``.records()``, ``.table()``) and an HTML summary in a notebook.
- ``lake.history()``: the commits (version, time, offsets, producers) as a DataFrame.
- ``lake.diff(a, b)``: what changed per entity between two points (offsets or ``PointInTime``).
- ``lake.timeline(topic, partition)`` / ``lake.timeline(broker=b, dir=d)``: every change, with
  offset and time.
- ``lake.audit(...)``: the report, with its violations as a DataFrame.
- ``lake.plot_partition(topic, partition)``, ``lake.plot_offline()``: matplotlib figures.

Everything else of the log (``append``, ``maintain``, …) is on ``lake.log``; ``Appender(lake)`` and
``kraftlake.state_at(lake)`` take a lake as they take a log.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kraftlake.records import RESERVED_DIRECTORIES, Log, LogSnapshot

if TYPE_CHECKING:
    import pandas as pd

    from kraftlake.replay.audit import AuditReport
    from kraftlake.statemachine.bookkeeper.view import BookiesView
    from kraftlake.statemachine.kraft.view import ControllerView
    from kraftlake.statemachine.s3stream.view import StreamsView


def _dir(d: str) -> str:
    return RESERVED_DIRECTORIES.get(d, d)


def _time(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


class PointInTime:
    """The cluster after the record at ``offset`` (what Kafka published: never inside an open
    metadata transaction)."""

    def __init__(self, lake: Lake, snapshot: LogSnapshot, where: dict[str, Any]) -> None:
        self.lake, self.snapshot, self._where = lake, snapshot, where
        self._view: ControllerView | None = None
        self._streams: StreamsView | None = None
        self._bookies: BookiesView | None = None

    def __getattr__(self, name: str) -> Any:  # records(), table(), last_offset, ... of the snapshot
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.snapshot, name)

    @property
    def view(self) -> ControllerView:
        """The controller's view (replayed on first use, from the log's snapshots when any)."""
        if self._view is None:
            from kraftlake.replay.state import state_at

            self._view = state_at(self.lake.log, **self._where).published()
        return self._view

    @property
    def streams_view(self) -> StreamsView:
        """AutoMQ's S3Stream view at this point (replayed from the start on first use)."""
        if self._streams is None:
            from kraftlake.replay.state import streams_at

            self._streams = streams_at(self.lake.log, **self._where)
        return self._streams

    @property
    def streams(self) -> pd.DataFrame:
        """S3Stream streams: state, epoch, owner node, [start, end), ranges, stream objects, tags."""
        import pandas as pd

        cols = ["stream", "state", "epoch", "owner", "start_offset", "end_offset", "ranges", "stream_objects", "tags"]
        rows = [
            {
                "stream": s.stream_id,
                "state": s.state,
                "epoch": s.epoch,
                "owner": next((r.node_id for r in s.ranges if r.range_index == s.range_index), None),
                "start_offset": s.start_offset,
                "end_offset": s.end_offset,
                "ranges": len(s.ranges),
                "stream_objects": len(s.objects),
                "tags": dict(s.tags),
            }
            for s in self.streams_view.image().streams
        ]
        return pd.DataFrame(rows, columns=cols)

    def objects_for(self, stream: int, start: int | None = None, end: int = -1) -> pd.DataFrame:
        """The objects holding ``stream``'s offsets from ``start`` (default: its start) in read
        order (AutoMQ's getObjects)."""
        import msgspec
        import pandas as pd

        from kraftlake.statemachine.s3stream.read import objects_for

        view = self.streams_view
        s = view.streams.get(stream)
        if s is None:
            raise KeyError(f"no stream {stream} at offset {view.offset}")
        got = objects_for(view, stream, s.start_offset if start is None else start, end)
        rows = [] if got is None else [msgspec.to_builtins(o) for o in got.objects]
        return pd.DataFrame(rows, columns=["object_id", "object_type", "start_offset", "end_offset", "node_id"])

    @property
    def bookies_view(self) -> BookiesView:
        """The BookKeeper view at this point (replayed from the start on first use)."""
        if self._bookies is None:
            from kraftlake.replay.state import bookies_at

            self._bookies = bookies_at(self.lake.log, **self._where)
        return self._bookies

    @property
    def bookies(self) -> pd.DataFrame:
        """BookKeeper bookies: lifecycle state, availability, rack, free/total bytes, ledgers naming them."""
        import pandas as pd

        v = self.bookies_view
        cols = ["bookie", "state", "availability", "rack", "free_bytes", "total_bytes", "ledgers", "state_reason"]
        rows = [
            {
                "bookie": b.bookie_id,
                "state": b.state,
                "availability": b.availability,
                "rack": b.rack,
                "free_bytes": b.free_bytes,
                "total_bytes": b.total_bytes,
                "ledgers": len(v.refs.get(b.bookie_id, ())),
                "state_reason": b.state_reason,
            }
            for _, b in sorted(v.bookies.items())
        ]
        return pd.DataFrame(rows, columns=cols)

    @property
    def under_replicated(self) -> pd.DataFrame:
        """Under-replicated ledgers: missing bookies, mark time, the worker holding the lock, lost entries."""
        import pandas as pd

        v = self.bookies_view
        rows = [
            {
                "ledger": lid,
                "missing": list(m.missing),
                "since_ms": m.since_ms,
                "worker": v.locks.get(lid),
                "lost_entries": v.lost_entries(v.ledgers[lid]) if lid in v.ledgers else [],
            }
            for lid, m in sorted(v.under_replicated.items())
        ]
        return pd.DataFrame(rows, columns=["ledger", "missing", "since_ms", "worker", "lost_entries"])

    @property
    def offset(self) -> int:
        return self.view.offset

    @property
    def state_hash(self) -> str:
        return self.view.state_hash()

    @property
    def brokers(self) -> pd.DataFrame:
        import pandas as pd

        rows = [
            {
                "broker": b.id,
                "epoch": b.epoch,
                "state": "fenced" if b.fenced else "shutting down" if b.in_controlled_shutdown else "active",
                "rack": b.rack,
                "online_dirs": list(b.log_dirs),
                "offline_dirs": list(b.removed_dirs),
                "registered_at": b.registered_at,
            }
            for b in self.view.image().brokers
        ]
        return pd.DataFrame(
            rows, columns=["broker", "epoch", "state", "rack", "online_dirs", "offline_dirs", "registered_at"]
        )

    @property
    def partitions(self) -> pd.DataFrame:
        import pandas as pd

        from kraftlake.statemachine.kraft.directory_ids import is_online

        view = self.view
        rows = []
        for p in view.image().partitions:
            offline = []
            for a in p.assignment:
                reg = view.brokers.get(a.broker)
                if reg is None or reg.fenced or not is_online(a.directory, reg.log_dirs):
                    offline.append(a.broker)
            rows.append(
                {
                    "topic": view.topics[p.topic_id].name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "isr": list(p.isr),
                    "replicas": list(p.replicas),
                    "directories": [_dir(a.directory) for a in p.assignment],
                    "offline_replicas": offline,
                    "leader_epoch": p.leader_epoch,
                    "partition_epoch": p.partition_epoch,
                    "topic_id": p.topic_id,
                }
            )
        cols = [
            "topic",
            "partition",
            "leader",
            "isr",
            "replicas",
            "directories",
            "offline_replicas",
            "leader_epoch",
            "partition_epoch",
            "topic_id",
        ]
        return pd.DataFrame(rows, columns=cols)

    def broker(self, broker: int) -> pd.DataFrame:
        """What ``broker`` serves (its BrokerView): one row per replica it hosts."""
        import pandas as pd

        from kraftlake.statemachine.kraft.broker_view import broker_view

        bv = broker_view(self.view, broker)
        rows = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "role": r.role,
                "directory": _dir(r.directory),
                "online": r.online,
                "in_isr": r.in_isr,
                "leader": r.leader,
                "leader_epoch": r.leader_epoch,
            }
            for r in bv.replicas
        ]
        return pd.DataFrame(
            rows, columns=["topic", "partition", "role", "directory", "online", "in_isr", "leader", "leader_epoch"]
        )

    def to_arrow(self) -> dict:
        import pyarrow as pa

        return {
            "brokers": pa.Table.from_pandas(self.brokers, preserve_index=False),
            "partitions": pa.Table.from_pandas(self.partitions, preserve_index=False),
        }

    def to_spark(self, spark) -> dict:
        return {name: spark.createDataFrame(table) for name, table in self.to_arrow().items()}

    def _repr_html_(self) -> str:
        brokers, parts = self.brokers, self.partitions
        unavailable = int((parts["leader"] == -1).sum()) if len(parts) else 0
        head = (
            f"<p><b>kraftlake</b> {html.escape(self.lake.path)} at offset {self.offset} — {len(brokers)} brokers, "
            f"{len(parts)} partitions, {unavailable} without a leader; state hash <code>{self.state_hash[:16]}…</code></p>"
        )
        return head + brokers.to_html(index=False) + parts.head(50).to_html(index=False)

    def __repr__(self) -> str:
        return f"PointInTime({self.lake.path!r}, offset={self.offset})"


class AuditResult:
    """An audit report with its violations as a DataFrame."""

    def __init__(self, report: AuditReport) -> None:
        self.report = report

    @property
    def verdict(self) -> str:
        return self.report.verdict

    @property
    def violations(self) -> pd.DataFrame:
        import msgspec
        import pandas as pd

        cols = ["invariant", "severity", "entity", "first_offset", "last_offset", "message", "evidence"]
        return pd.DataFrame([msgspec.to_builtins(v) for v in self.report.violations], columns=cols)

    def __repr__(self) -> str:
        return f"AuditResult(verdict={self.report.verdict!r}, records={self.report.records}, violations={len(self.report.violations)})"

    def _repr_html_(self) -> str:
        r = self.report
        color = "green" if r.verdict == "pass" else "red"
        head = (
            f"<p><b style='color:{color}'>{r.verdict.upper()}</b> — {r.records:,} records "
            f"({r.first_offset}..{r.last_offset}), {len(r.violations)} violation(s)</p>"
        )
        return head + self.violations.head(100).to_html(index=False)


class Lake:
    """A log opened for analysis (see the module's docstring)."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def __getattr__(self, name: str) -> Any:  # append, read, maintain, last_offset, ... of the log
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.log, name)

    @property
    def path(self) -> str:
        return self.log.path

    def at(
        self, *, offset: int | None = None, version: int | None = None, timestamp: datetime | str | None = None
    ) -> PointInTime:
        snapshot = self.log.at(offset=offset, version=version, timestamp=timestamp)
        return PointInTime(self, snapshot, {"offset": offset, "version": version, "timestamp": timestamp})

    def history(self) -> pd.DataFrame:
        import pandas as pd

        rows = []
        for c in self.log.history():
            producers = sorted({p for p, *_ in c.batches if p} | ({c.producer} if c.producer else set()))
            rows.append(
                {
                    "version": c.version,
                    "time": _time(c.timestamp_ms),
                    "operation": c.operation,
                    "first_offset": c.first_offset,
                    "last_offset": c.last_offset,
                    "records": c.records,
                    "producers": producers,
                }
            )
        return pd.DataFrame(
            rows, columns=["version", "time", "operation", "first_offset", "last_offset", "records", "producers"]
        )

    def diff(self, a: int | PointInTime, b: int | PointInTime) -> pd.DataFrame:
        """Per entity (broker, topic, partition) and field: the value at ``a`` and at ``b``."""
        import msgspec
        import pandas as pd

        pa_, pb = (x if isinstance(x, PointInTime) else self.at(offset=x) for x in (a, b))
        rows = []
        for kind, key in (
            ("brokers", lambda x: f"broker/{x['id']}"),
            ("topics", lambda x: f"topic/{x['id']}"),
            ("partitions", lambda x: f"partition/{x['topic_id']}/{x['partition']}"),
        ):
            before = {key(x): x for x in msgspec.to_builtins(getattr(pa_.view.image(), kind))}
            after = {key(x): x for x in msgspec.to_builtins(getattr(pb.view.image(), kind))}
            for entity in sorted(set(before) | set(after)):
                x, y = before.get(entity), after.get(entity)
                if x == y:
                    continue
                if x is None or y is None:
                    rows.append({"entity": entity, "field": "*", "before": x and "exists", "after": y and "exists"})
                    continue
                for f in x:
                    if x[f] != y.get(f):
                        rows.append({"entity": entity, "field": f, "before": x[f], "after": y.get(f)})
        return pd.DataFrame(rows, columns=["entity", "field", "before", "after"])

    def timeline(
        self,
        topic: str | None = None,
        partition: int | None = None,
        *,
        broker: int | None = None,
        dir: str | None = None,
    ) -> pd.DataFrame:  # noqa: A002 - the user's word for it
        """A partition's every change (leader, ISR, directories, epochs), or a broker's (and one
        directory's) registrations, fencing, directory changes, failures and reports."""
        if topic is not None:
            if partition is None:
                raise ValueError("give the partition with the topic")
            return self._partition_timeline(topic, partition)
        if broker is not None:
            return self._broker_timeline(broker, dir)
        raise ValueError("give a topic and partition, or broker= (and dir=)")

    def _replay(self):
        """(record, view after it) for every record, in offset order."""
        from kraftlake.records.errors import ReplayError
        from kraftlake.statemachine.kraft.reducer import apply
        from kraftlake.statemachine.kraft.view import ControllerView

        view = ControllerView()
        for batch in self.log.at().iter_records():
            for r in batch:
                try:
                    apply(view, r)
                except ReplayError:
                    view.offset = r.offset
                yield r, view

    def _partition_timeline(self, topic: str, partition: int) -> pd.DataFrame:
        import pandas as pd

        from kraftlake.records import Partition, PartitionChange

        rows, topic_id = [], None
        for r, view in self._replay():
            if type(r).__name__ == "Topic" and r.name == topic:
                topic_id = r.topic_id
            if (
                topic_id is None
                or not isinstance(r, Partition | PartitionChange)
                or r.topic_id != topic_id
                or r.partition_id != partition
            ):
                continue
            p = view.partition(topic_id, partition)
            if p is None:
                continue
            rows.append(
                {
                    "offset": r.offset,
                    "time": _time(r.ts_ms),
                    "record": type(r).__name__,
                    "leader": p.leader,
                    "isr": list(p.isr),
                    "replicas": list(p.replicas),
                    "directories": [_dir(d) for d in p.directories],
                    "leader_epoch": p.leader_epoch,
                    "partition_epoch": p.partition_epoch,
                }
            )
        if topic_id is None:
            raise KeyError(f"no topic named {topic!r} in {self.path}")
        cols = [
            "offset",
            "time",
            "record",
            "leader",
            "isr",
            "replicas",
            "directories",
            "leader_epoch",
            "partition_epoch",
        ]
        return pd.DataFrame(rows, columns=cols)

    def _broker_timeline(self, broker: int, directory: str | None) -> pd.DataFrame:
        import pandas as pd

        fields = ("directory", "offline_log_dirs", "log_dirs", "fenced", "online_dirs", "offline_dirs")
        rows, online_before = [], False
        for r, view in self._replay():
            name = type(r).__name__
            who = None if name in ("Partition", "PartitionChange") else getattr(r, "broker_id", getattr(r, "id", None))
            if who != broker:
                continue
            reg = view.brokers.get(broker)
            online_now = reg is not None and directory in reg.log_dirs
            detail = {f: getattr(r, f) for f in fields if getattr(r, f, None) not in (None, ())}
            if directory is not None:
                named = set()
                for f in (f for f in fields if f != "fenced"):
                    v = detail.get(f, ())
                    named.update(v if isinstance(v, tuple) else (v,))
                # The records that name the directory, and those that bring it online or take it away.
                if (
                    directory not in named
                    and online_now == online_before
                    and name not in ("RegisterBroker", "UnregisterBroker")
                ):
                    continue
            online_before = online_now
            rows.append(
                {
                    "offset": r.offset,
                    "time": _time(r.ts_ms),
                    "record": name,
                    "detail": detail,
                    "registered": reg is not None,
                    "fenced": None if reg is None else reg.fenced,
                    "online_dirs": [] if reg is None else list(reg.log_dirs),
                }
            )
        return pd.DataFrame(rows, columns=["offset", "time", "record", "detail", "registered", "fenced", "online_dirs"])

    def audit(
        self,
        *,
        from_offset: int | None = None,
        to_offset: int | None = None,
        grace_records: int = 1000,
        grace_ms: int = 5000,
        fail_on: str = "error",
    ) -> AuditResult:
        from kraftlake.replay.audit import AuditConfig, audit_log
        from kraftlake.replay.state import state_at

        start = state_at(self.log, offset=from_offset - 1) if from_offset else None
        config = AuditConfig(grace_records=grace_records, grace_ms=grace_ms, fail_on=fail_on)
        return AuditResult(
            audit_log(self.log.at(), config=config, from_offset=from_offset, to_offset=to_offset, start=start)
        )

    def offline_replicas(self) -> pd.DataFrame:
        """The number of replicas offline (broker unregistered or fenced, or directory offline)
        after every record that changed it."""
        import pandas as pd

        from kraftlake.statemachine.kraft.directory_ids import is_online

        def offline(view, p) -> int:
            n = 0
            for b, d in zip(p.replicas, p.directories):
                reg = view.brokers.get(b)
                n += reg is None or reg.fenced or not is_online(d, reg.log_dirs)
            return n

        counts: dict[tuple[str, int], int] = {}
        total, rows = 0, []
        for r, view in self._replay():
            name = type(r).__name__
            if name in ("Partition", "PartitionChange"):
                keys = [(r.topic_id, r.partition_id)]
            elif name in (
                "RegisterBroker",
                "UnregisterBroker",
                "BrokerRegistrationChange",
                "FenceBroker",
                "UnfenceBroker",
            ):
                b = getattr(r, "broker_id", getattr(r, "id", None))
                keys = [p.key for p in view.partitions_of(b)] + [k for k in counts if view.partition(*k) is None]
            elif name == "RemoveTopic":
                keys = [k for k in counts if k[0] == r.topic_id]
            else:
                continue
            before = total
            for k in keys:
                p = view.partition(*k)
                n = 0 if p is None else offline(view, p)
                total += n - counts.get(k, 0)
                counts[k] = n
            if total != before:
                rows.append({"offset": r.offset, "time": _time(r.ts_ms), "offline_replicas": total})
        return pd.DataFrame(rows, columns=["offset", "time", "offline_replicas"])

    # -- plots -----------------------------------------------------------------------------------

    def plot_partition(self, topic: str, partition: int, ax=None):
        """The partition's leader and ISR over offsets, with the failures of the directories that
        held its replicas marked."""
        import matplotlib.pyplot as plt

        tl = self.timeline(topic, partition)
        ax = ax or plt.subplots(figsize=(10, 3.5))[1]
        if tl.empty:
            return ax
        offsets = list(tl["offset"]) + [self.log.last_offset]
        brokers = sorted({b for rs in tl["replicas"] for b in rs})
        for i, row in enumerate(tl.itertuples()):
            lo, hi = offsets[i], offsets[i + 1]
            for b in row.isr:
                ax.hlines(
                    b,
                    lo,
                    hi,
                    colors="tab:blue",
                    linewidth=6,
                    alpha=0.35,
                    label="in ISR" if (i, b) == (0, row.isr[0]) else None,
                )
            if row.leader >= 0:
                ax.hlines(row.leader, lo, hi, colors="tab:green", linewidth=2.5, label="leader" if i == 0 else None)
        # Only the failures of the directory that held this partition's replica at the time.
        hits = []
        for f in self.log.at().records(types=["LogDirFailed"]):
            before = tl[tl["offset"] <= f.offset]
            if before.empty:
                continue
            row = before.iloc[-1]
            if dict(zip(row["replicas"], row["directories"])).get(f.broker_id) == _dir(f.directory):
                hits.append(f)
        for j, f in enumerate(hits):
            ax.axvline(
                f.offset, color="tab:red", linestyle="--", linewidth=1, label="its directory failed" if j == 0 else None
            )
            ax.annotate(f"b{f.broker_id}", (f.offset, max(brokers) + 0.25), color="tab:red", fontsize=8)
        ax.set_ylim(min(brokers) - 0.5, max(brokers) + 0.6)
        ax.set_yticks(brokers)
        ax.set_ylabel("broker")
        ax.set_xlabel("offset")
        ax.set_title(f"{topic}-{partition}: leader and ISR")
        ax.legend(loc="upper right", fontsize=8)
        return ax

    def plot_offline(self, ax=None):
        """The number of offline replicas over time (a step plot)."""
        import matplotlib.pyplot as plt

        data = self.offline_replicas()
        ax = ax or plt.subplots(figsize=(10, 3))[1]
        if not data.empty:
            ax.step(data["time"], data["offline_replicas"], where="post", color="tab:red")
        ax.set_ylabel("offline replicas")
        ax.set_title("offline replicas over time")
        return ax

    def _repr_html_(self) -> str:
        return f"<p><b>kraftlake</b> {html.escape(self.path)}: offsets 0..{self.log.last_offset}, Delta version {self.log.version}</p>"

    def __repr__(self) -> str:
        return f"Lake({self.path!r})"
