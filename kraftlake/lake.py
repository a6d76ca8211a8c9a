"""The notebook facade: ``lake = kraftlake.open(LOG)``, then ask what the cluster looked like.

- ``lake.at(offset=|version=|timestamp=)``: a ``PointInTime`` with ``.brokers``, ``.partitions``,
  ``.broker(b)`` as pandas DataFrames, ``.to_arrow()``, ``.to_spark(spark)``, the records of that
  snapshot (``.records()``, ``.table()``) and an HTML summary in a notebook.
- ``lake.history()``: the commits (version, time, offsets, producers) as a DataFrame.
- ``lake.diff(a, b)``: what changed per entity between two points (offsets or ``PointInTime``).
- ``lake.timeline(topic, partition)`` / ``lake.timeline(broker=b, dir=d)``: every change, with
  offset and time.
- ``lake.audit(...)``: the report, with its violations, incidents and availability as DataFrames.
- ``lake.incidents()``: the directory failures, controlled shutdowns and fenced brokers, one
  ``Incident`` each: ``.impact()`` (the partitions it hit, what moved them and when, how long
  they were unavailable), ``.violations()``, ``.plot()``; ``lake.availability()`` per partition.
- ``lake.plot_partition(topic, partition)``, ``lake.plot_offline()``: matplotlib figures.

Everything else of the log (``append``, ``maintain``, …) is on ``lake.log``; ``Appender(lake)`` and
``kraftlake.state_at(lake)`` take a lake as they take a log.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kraftlake.records import RESERVED_DIRECTORIES, Log, LogSnapshot
from kraftlake.replay.grace import GRACE_MS

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
    """An audit report with its violations, incidents and availability as DataFrames."""

    def __init__(self, report: AuditReport) -> None:
        self.report = report

    @property
    def verdict(self) -> str:
        return self.report.verdict

    @property
    def violations(self) -> pd.DataFrame:
        """Every violation (``table("violations")``)."""
        return self.table("violations")

    def table(self, name: str) -> pd.DataFrame:
        """One of the audit's complete tables (``replay.tables``: violations, incidents, effects,
        outages, availability; the columns ``kraftlake audit --tables`` writes), integers as
        pandas' nullable Int64 where some are missing."""
        import pandas as pd
        import pyarrow as pa

        from kraftlake.replay import tables

        if name not in tables.SCHEMAS:
            raise ValueError(f"no table {name!r}: one of {', '.join(tables.NAMES)}")
        return tables.table(self.report, name).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)

    @property
    def incidents(self) -> Incidents:
        return Incidents(Incident(self.report, i) for i in self.report.incidents or ())

    @property
    def availability(self) -> pd.DataFrame:
        """Per partition with any time in a bad state, worst first; seconds of record time."""
        import pandas as pd

        a = self.report.availability
        rows = [
            {
                "topic": p.topic,
                "partition": p.partition,
                "topic_id": p.topic_id,
                "unavailable_s": p.unavailable_ms / 1000,
                "no_leader_s": p.no_leader_ms / 1000,
                "leader_offline_s": p.leader_offline_ms / 1000,
                "under_min_isr_s": p.under_min_isr_ms / 1000,
                "isr_offline_s": p.isr_offline_ms / 1000,
            }
            for p in (a.partitions if a is not None else ())
        ]
        cols = ["topic", "partition", "topic_id", "unavailable_s", "no_leader_s", "leader_offline_s"]
        return pd.DataFrame(rows, columns=[*cols, "under_min_isr_s", "isr_offline_s"])

    def __repr__(self) -> str:
        return f"AuditResult(verdict={self.report.verdict!r}, records={self.report.records}, violations={self.report.violation_count})"

    def _repr_html_(self) -> str:
        from kraftlake.replay.html import _headline

        r = self.report
        color = "green" if r.verdict == "pass" else "red"
        head = f"<p><b style='color:{color}'>{r.verdict.upper()}</b></p>" + _headline(r)
        broken = [(i.id, i.severity, i.violations, i.definition) for i in r.invariants if i.violations]
        if broken:
            rows = "".join(
                f"<tr><td>{i}</td><td>{s}</td><td>{n:,}</td><td>{html.escape(d)}</td></tr>" for i, s, n, d in broken
            )
            head += (
                "<table><tr><th>invariant</th><th>severity</th><th>violations</th><th>definition</th></tr>"
                f"{rows}</table><p>(<code>.violations</code> lists them, <code>.incidents</code> ties them to incidents)</p>"
            )
        return head


def _ints(frame, *columns: str):
    """Offsets and counts as integers (pandas' nullable Int64 where some are missing), not floats."""
    for c in columns:
        frame[c] = frame[c].astype("Int64")
    return frame


class Incidents(list):
    """The incidents of an audit, in the order they began; ``.table()`` summarises them."""

    def table(self) -> pd.DataFrame:
        import pandas as pd

        cols = ["id", "kind", "broker", "directory", "failed_at", "failed_time", "reported_at", "removed_at"]
        cols += ["ended_at", "led", "in_isr", "never_moved", "unavailable_s", "violations"]
        rows = [i.summary() for i in self]
        return _ints(pd.DataFrame(rows, columns=cols), "failed_at", "reported_at", "removed_at", "ended_at")

    def of(self, kind: str) -> Incidents:
        return Incidents(i for i in self if i.kind == kind)

    def _repr_html_(self) -> str:
        return f"<p>{len(self):,} incident(s)</p>" + self.table().head(50).to_html(index=False)


class Incident:
    """One incident of an audit (``replay.incidents.Incident``: its fields are attributes here)
    with the questions asked of it as DataFrames and a plot."""

    def __init__(self, report: AuditReport, incident) -> None:
        self.report, self.incident = report, incident

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.incident, name)

    def summary(self) -> dict:
        i = self.incident
        return {
            "id": i.id,
            "kind": i.kind,
            "broker": i.broker,
            "directory": i.directory,
            "failed_at": i.failed_at,
            "failed_time": _time(i.failed_at_ms),
            "reported_at": i.reported_at,
            "removed_at": i.removed_at,
            "ended_at": i.ended_at,
            "led": sum(e.role == "leader" for e in i.effects),
            "in_isr": sum(e.role == "isr" for e in i.effects),
            "never_moved": sum(e.ended_by is None for e in i.effects),
            "unavailable_s": i.unavailable_ms / 1000,
            "violations": len(i.violations),
        }

    def _outages(self) -> dict:
        a = self.report.availability
        out: dict = {}
        for o in a.outages if a is not None else ():
            out.setdefault((o.topic_id, o.partition), []).append(o)
        return out

    def _window(self) -> tuple[int | None, int | None]:
        i = self.incident
        a = self.report.availability
        end = i.ended_at_ms if i.ended_at is not None else (a.to_ms if a is not None else None)
        return i.failed_at_ms, end

    def impact(self) -> pd.DataFrame:
        """One row per partition it hit: the broker's role there (leader, or ISR member only),
        when leadership and the ISR moved off it (offset, seconds after the failure, to whom),
        and how long the partition was unavailable (no leader, or the leader offline) while the
        incident lasted. A partition where the broker only followed stays available."""
        import pandas as pd

        i = self.incident
        topics = self.report.topics
        lo, hi = self._window()
        outages = self._outages()
        rows: dict = {}
        for e in i.effects:
            key = (e.topic_id, e.partition)
            row = rows.setdefault(
                key,
                {
                    "partition": f"{topics.get(e.topic_id, e.topic_id)}-{e.partition}",
                    "topic": e.topic or topics.get(e.topic_id),
                    "topic_id": e.topic_id,
                    "role": "ISR member",
                    "leader_moved_at": None,
                    "leader_moved_s": None,
                    "new_leader": None,
                    "isr_left_at": None,
                    "isr_left_s": None,
                    "outcome": [],
                    "unavailable_s": 0.0,
                },
            )
            seconds = None if e.time_to_move_ms is None else e.time_to_move_ms / 1000
            if e.role == "leader":
                row["role"] = "leader"
                row["leader_moved_at"], row["leader_moved_s"], row["new_leader"] = e.ended_by, seconds, e.new_leader
            else:
                row["isr_left_at"], row["isr_left_s"] = e.ended_by, seconds
            row["outcome"].append(e.outcome)
        for key, row in rows.items():
            row["outcome"] = ", ".join(dict.fromkeys(row["outcome"]))
            if lo is not None and hi is not None:
                down = 0
                for o in outages.get(key, ()):
                    to = hi if o.to_ms is None else o.to_ms
                    if o.from_ms is not None:
                        down += max(0, min(to, hi) - max(o.from_ms, lo))
                row["unavailable_s"] = down / 1000
        cols = ["partition", "topic", "topic_id", "role", "leader_moved_at", "leader_moved_s", "new_leader"]
        cols += ["isr_left_at", "isr_left_s", "outcome", "unavailable_s"]
        frame = pd.DataFrame(list(rows.values()), columns=cols)
        frame = frame.sort_values(["unavailable_s", "role", "partition"], ascending=[False, False, True], kind="stable")
        return _ints(frame.reset_index(drop=True), "leader_moved_at", "new_leader", "isr_left_at")

    def violations(self) -> pd.DataFrame:
        """The violations on its entities while it lasted."""
        import msgspec
        import pandas as pd

        from kraftlake.replay.html import entity_label

        rows = []
        for k in self.incident.violations:
            d = msgspec.to_builtins(self.report.violations[k])
            d["entity"] = entity_label(d["entity"], self.report.topics)
            rows.append(d)
        cols = ["invariant", "severity", "entity", "first_offset", "last_offset", "message", "evidence"]
        return _ints(pd.DataFrame(rows, columns=cols), "first_offset", "last_offset")

    def plot(self, ax=None, *, lanes: int = 16):
        """A lane per partition it hit (the ``lanes`` worst), x = seconds of record time after the
        failure: the failure, report, removal and end as vertical lines, unavailability shaded,
        a dot where leadership moved and a square where the ISR let go."""
        import matplotlib.pyplot as plt

        from kraftlake.records.store.time_travel import format_ms

        i = self.incident
        impact = self.impact()
        shown = impact.head(lanes)
        lo, hi = self._window()
        ax = ax or plt.subplots(figsize=(10, 1.2 + 0.32 * max(1, len(shown))))[1]
        if lo is None or hi is None:
            ax.set_title(f"{i.id}: no record times")
            return ax
        outages = self._outages()
        labelled: set[str] = set()

        def once(label: str) -> str | None:
            if label in labelled:
                return None
            labelled.add(label)
            return label

        for y, row in enumerate(shown.itertuples()):
            key = (row.topic_id, int(row.partition.rsplit("-", 1)[1]))
            spans = [
                ((o.from_ms - lo) / 1000, ((hi if o.to_ms is None else o.to_ms) - o.from_ms) / 1000)
                for o in outages.get(key, ())
                if o.from_ms is not None and o.from_ms <= hi and (o.to_ms is None or o.to_ms >= lo)
            ]
            if spans:
                ax.broken_barh(spans, (y - 0.3, 0.6), color="#ff8182", label=once("unavailable"))
            if row.leader_moved_s is not None and not _missing(row.leader_moved_s):
                ax.plot([row.leader_moved_s], [y], "o", color="#0969da", label=once("leadership moved"))
            if not _missing(row.isr_left_s):
                ax.plot([row.isr_left_s], [y], "s", color="#1a7f37", markersize=5, label=once("left the ISR"))
        for name, ms, colour in (
            ("failed", i.failed_at_ms, "#cf222e"),
            ("reported", i.reported_at_ms, "#bf8700"),
            ("removed from registration" if i.kind == "dir-failure" else "fenced", i.removed_at_ms, "#8250df"),
            ("ended", i.ended_at_ms, "#57606a"),
        ):
            if ms is not None:
                ax.axvline((ms - lo) / 1000, color=colour, linestyle="--", linewidth=1.2, label=name)
        ax.set_yticks(range(len(shown)), list(shown["partition"]))
        ax.set_ylim(len(shown) - 0.5, -0.5)
        span = max((hi - lo) / 1000, 1.0)
        ax.set_xlim(-0.05 * span, span * 1.05)
        ax.set_xlabel(f"seconds after the failure at {format_ms(lo)} (record time, UTC)")
        ax.set_ylabel("partition")
        where = f"broker {i.broker}" + (f", dir {i.directory}" if i.directory else "")
        more = f" ({len(impact) - len(shown)} more not drawn)" if len(impact) > len(shown) else ""
        ax.set_title(f"{i.kind}: {where}{more}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        ax.figure.tight_layout()
        return ax

    def __repr__(self) -> str:
        return f"Incident({self.incident.id!r}, effects={len(self.incident.effects)}, unavailable_s={self.incident.unavailable_ms / 1000})"

    def _repr_html_(self) -> str:
        from kraftlake.replay.html import _card

        return _card(self.report, self.incident, self._outages())


def _time_axis(ax, offsets: list[int], times_ms: list) -> None:
    """A second x axis on top with the record time (UTC) at the offsets' ticks, interpolated
    between the records drawn (offsets are the main axis: records share times)."""
    import numpy as np

    known = [(o, t) for o, t in zip(offsets, times_ms) if t is not None]
    if len(known) < 2:
        return
    xs = np.array([o for o, _ in known], dtype=float)
    ts = np.array([t for _, t in known], dtype=float)
    top = ax.secondary_xaxis("top")
    ticks = [x for x in ax.get_xticks() if xs[0] <= x <= xs[-1]] or [xs[0], xs[-1]]
    top.set_xticks(ticks)
    top.set_xticklabels(
        [datetime.fromtimestamp(float(np.interp(x, xs, ts)) / 1000, tz=UTC).strftime("%H:%M:%S") for x in ticks],
        fontsize=8,
    )
    top.set_xlabel(f"record time (UTC, {datetime.fromtimestamp(ts[0] / 1000, tz=UTC):%Y-%m-%d})", fontsize=8)


def _missing(value) -> bool:
    import pandas as pd

    return value is None or bool(pd.isna(value))


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
        grace_records: int | None = None,
        grace_ms: int = GRACE_MS,
        fail_on: str = "error",
        fail_on_unavailable_seconds: float | None = None,
        from_time: datetime | str | int | None = None,
        to_time: datetime | str | int | None = None,
        engine: str = "auto",
        **options: Any,
    ) -> AuditResult:
        """Audit ``[from_offset, to_offset]`` (or the records between ``from_time`` and
        ``to_time``: record time, ``ts_ms``; ISO text is UTC unless it has an offset):
        ``kraftlake.audit`` on this log, whose other arguments (``master``, ``memory_limit``...)
        ``options`` passes on."""
        from kraftlake.auditing import audit

        return AuditResult(
            audit(
                self.log,
                engine=engine,
                from_offset=from_offset,
                to_offset=to_offset,
                grace_records=grace_records,
                grace_ms=grace_ms,
                fail_on=fail_on,
                fail_on_unavailable_seconds=fail_on_unavailable_seconds,
                from_time=from_time,
                to_time=to_time,
                **options,
            )
        )

    def incidents(self, kind: str | None = None, **audit: Any) -> Incidents:
        """The incidents of the log (of one ``kind``: dir-failure, controlled-shutdown,
        broker-fenced), from an audit with ``audit``'s arguments (see ``audit``)."""
        found = self.audit(**audit).incidents
        return found if kind is None else found.of(kind)

    def availability(self, **audit: Any) -> pd.DataFrame:
        """Per partition: seconds without a leader, with the leader or an ISR member on an
        offline directory, under min.insync.replicas (see ``audit`` for the arguments)."""
        return self.audit(**audit).availability

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
        _time_axis(ax, list(tl["offset"]), [None if _missing(t) else t.timestamp() * 1000 for t in tl["time"]])
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
        ax.set_xlabel("record time (UTC)")
        ax.set_title("offline replicas over time")
        return ax

    def _repr_html_(self) -> str:
        return f"<p><b>kraftlake</b> {html.escape(self.path)}: offsets 0..{self.log.last_offset}, Delta version {self.log.version}</p>"

    def __repr__(self) -> str:
        return f"Lake({self.path!r})"
