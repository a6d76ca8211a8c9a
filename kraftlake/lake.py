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


_DURATIONS = {"unavailable_ms", "unavailable_after_ms", "time_to_move_ms"}
"""``*_ms`` columns of the tables that are durations, not points in time."""


class AuditResult:
    """An audit report with its violations, incidents and availability as DataFrames: offsets
    as integers, record times as timezone-aware datetimes (UTC), partitions as a ``topic`` and a
    ``partition`` column."""

    def __init__(self, report: AuditReport, times=None) -> None:
        self.report = report
        self.times = times
        """Offsets -> record times (``LogSnapshot.record_times``) of the log audited."""

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
        pandas' nullable Int64 where some are missing; each record time ``X_ms`` also as ``X_time``
        (a timezone-aware datetime, UTC)."""
        import pandas as pd
        import pyarrow as pa

        from kraftlake.replay import tables

        if name not in tables.SCHEMAS:
            raise ValueError(f"no table {name!r}: one of {', '.join(tables.NAMES)}")
        frame = tables.table(self.report, name, self.times).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        for col in [c for c in frame.columns if c.endswith("_ms") and c not in _DURATIONS]:
            if name != "availability":  # there every ``_ms`` is a duration
                frame[col.removesuffix("_ms") + "_time"] = pd.to_datetime(
                    frame[col].astype("float64"), unit="ms", utc=True
                )
        return frame

    def unavailability(self) -> pd.DataFrame:
        """Partition-seconds unavailable by what caused them: each kind of incident, and the time
        no incident caused; the rows add up to the total (``replay.attribution``: each instant of
        an outage is counted for one incident, where incidents overlap)."""
        import pandas as pd

        a = self.report.availability
        rows = [] if a is None else [{"cause": k, "unavailable_s": ms / 1000} for k, ms in a.by_kind.items()]
        if a is not None:
            rows.append({"cause": "outside any incident", "unavailable_s": a.outside_incidents_ms / 1000})
            rows.append({"cause": "total", "unavailable_s": a.unavailable_ms / 1000})
        return pd.DataFrame(rows, columns=["cause", "unavailable_s"])

    @property
    def incidents(self) -> Incidents:
        return Incidents(Incident(self.report, i, self.times) for i in self.report.incidents or ())

    @property
    def availability(self) -> pd.DataFrame:
        """Per partition with any time in a bad state, worst first; seconds of record time."""
        import pandas as pd

        a = self.report.availability
        rows = [
            {
                "topic": p.topic or self.report.topics.get(p.topic_id),
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
        from kraftlake.replay.summary import bounded

        r = bounded(self.report, times=self.times)
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
        """One row per incident: where, when (offsets and record times), what it hit and what it
        caused (``unavailable_s``: each instant counted for one incident, so the kinds' sums and
        ``AuditResult.unavailability()`` agree)."""
        import pandas as pd

        cols = ["id", "kind", "broker", "directory", "path", "failed_at", "failed_time", "reported_at"]
        cols += ["reported_time", "removed_at", "removed_time", "ended_at", "ended_time", "led", "in_isr"]
        cols += ["leaderless", "not_moved", "unavailable_s", "violations", "overlaps"]
        rows = [i.summary() for i in self]
        frame = pd.DataFrame(rows, columns=cols)
        for c in ("failed_time", "reported_time", "removed_time", "ended_time"):
            frame[c] = pd.to_datetime(frame[c], utc=True)
        return _ints(frame, "failed_at", "reported_at", "removed_at", "ended_at")

    def of(self, kind: str) -> Incidents:
        return Incidents(i for i in self if i.kind == kind)

    def _repr_html_(self) -> str:
        return f"<p>{len(self):,} incident(s)</p>" + self.table().head(50).to_html(index=False)


class Incident:
    """One incident of an audit (``replay.incidents.Incident``: its fields are attributes here)
    with the questions asked of it as DataFrames and a plot; its record times as datetimes
    (``failed_time``, ``reported_time``, ``removed_time``, ``ended_time``: UTC)."""

    def __init__(self, report: AuditReport, incident, times=None) -> None:
        self.report, self.incident, self.times = report, incident, times

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.incident, name)

    @property
    def failed_time(self) -> datetime | None:
        """When it failed: record time, UTC (``failed_at_ms`` as a datetime)."""
        return _time(self.incident.failed_at_ms)

    @property
    def reported_time(self) -> datetime | None:
        return _time(self.incident.reported_at_ms)

    @property
    def removed_time(self) -> datetime | None:
        return _time(self.incident.removed_at_ms)

    @property
    def ended_time(self) -> datetime | None:
        return _time(self.incident.ended_at_ms) if self.incident.ended_at is not None else None

    def summary(self) -> dict:
        i = self.incident
        return {
            "id": i.id,
            "kind": i.kind,
            "broker": i.broker,
            "directory": i.directory,
            "path": i.path or (self.report.dir_paths.get(i.directory) if i.directory else None),
            "failed_at": i.failed_at,
            "failed_time": self.failed_time,
            "reported_at": i.reported_at,
            "reported_time": self.reported_time,
            "removed_at": i.removed_at,
            "removed_time": self.removed_time,
            "ended_at": i.ended_at,
            "ended_time": self.ended_time,
            "led": sum(e.role == "leader" for e in i.effects),
            "in_isr": sum(e.role == "isr" for e in i.effects),
            "leaderless": i.leaderless,
            "not_moved": sum(e.ended_by is None for e in i.effects),
            "unavailable_s": i.unavailable_ms / 1000,
            "violations": len(i.violations),
            "overlaps": len(i.overlaps),
        }

    def _outages(self) -> dict:
        """Per partition it hit, the pieces of its outages, each tied to the incident that caused
        it (``replay.summary.ShownOutage``; ``replay.attribution``)."""
        from kraftlake.replay.attribution import outage_pieces
        from kraftlake.replay.names import partition_name
        from kraftlake.replay.summary import ShownOutage

        a = self.report.availability
        out: dict = {}
        if a is None:
            return out
        hit = {(e.topic_id, e.partition) for e in self.incident.effects}
        if a.outages and isinstance(a.outages[0], ShownOutage):
            for o in a.outages:  # a summary's: its rows are the pieces
                if (o.topic_id, o.partition) in hit:
                    out.setdefault((o.topic_id, o.partition), []).append(o)
            return out
        ids = [inc.id for inc in self.report.incidents or ()]
        topics = self.report.topics
        for o, first, from_ms, last, to_ms, who in outage_pieces(a):
            if (o.topic_id, o.partition) not in hit:
                continue
            out.setdefault((o.topic_id, o.partition), []).append(
                ShownOutage(
                    topic_id=o.topic_id,
                    topic=topics.get(o.topic_id),
                    partition=o.partition,
                    name=partition_name(topics, o.topic_id, o.partition),
                    why=o.why,
                    first_offset=first,
                    last_offset=last,
                    from_ms=from_ms,
                    to_ms=to_ms,
                    incident=ids[who] if who >= 0 else None,
                )
            )
        return out

    def _window(self) -> tuple[int | None, int | None]:
        i = self.incident
        a = self.report.availability
        end = i.ended_at_ms if i.ended_at is not None else (a.to_ms if a is not None else None)
        return i.failed_at_ms, end

    def impact(self) -> pd.DataFrame:
        """One row per partition it hit (``topic``, ``partition``): the broker's role there
        (leader, or ISR member only), when leadership and the ISR moved off it (offset, record
        time, seconds after the failure, to whom), and how long the partition was unavailable
        because of it (``replay.attribution``: also after it ended, where it left the partition
        without a leader). A partition where the broker only followed stays available."""
        import pandas as pd

        i = self.incident
        topics = self.report.topics
        t0 = i.failed_at_ms
        outages = self._outages()
        rows: dict = {}
        for e in i.effects:
            key = (e.topic_id, e.partition)
            row = rows.setdefault(
                key,
                {
                    "topic": e.topic or topics.get(e.topic_id) or e.topic_id,
                    "partition": e.partition,
                    "role": "ISR member",
                    "leader_moved_at": None,
                    "leader_moved_time": None,
                    "leader_moved_s": None,
                    "new_leader": None,
                    "isr_left_at": None,
                    "isr_left_time": None,
                    "isr_left_s": None,
                    "outcome": [],
                    "unavailable_s": 0.0,
                    "topic_id": e.topic_id,
                },
            )
            seconds = None if e.time_to_move_ms is None else e.time_to_move_ms / 1000
            when = None if t0 is None or e.time_to_move_ms is None else _time(t0 + e.time_to_move_ms)
            if e.role == "leader":
                row["role"] = "leader"
                row["leader_moved_at"], row["leader_moved_time"] = e.ended_by, when
                row["leader_moved_s"], row["new_leader"] = seconds, e.new_leader
            else:
                row["isr_left_at"], row["isr_left_time"], row["isr_left_s"] = e.ended_by, when, seconds
            row["outcome"].append("left with no leader" if e.role == "leader" and e.new_leader == -1 else e.outcome)
        end = self.report.availability.to_ms if self.report.availability is not None else None
        for key, row in rows.items():
            row["outcome"] = ", ".join(dict.fromkeys(row["outcome"]))
            caused = [
                (end if o.to_ms is None else o.to_ms) - o.from_ms
                for o in outages.get(key, ())
                if o.incident == i.id and o.from_ms is not None and (o.to_ms is not None or end is not None)
            ]
            row["unavailable_s"] = sum(caused) / 1000
        cols = ["topic", "partition", "role", "leader_moved_at", "leader_moved_time", "leader_moved_s", "new_leader"]
        cols += ["isr_left_at", "isr_left_time", "isr_left_s", "outcome", "unavailable_s", "topic_id"]
        frame = pd.DataFrame(list(rows.values()), columns=cols)
        for c in ("leader_moved_time", "isr_left_time"):
            frame[c] = pd.to_datetime(frame[c], utc=True)
        frame = frame.sort_values(
            ["unavailable_s", "role", "topic", "partition"], ascending=[False, False, True, True], kind="stable"
        )
        return _ints(frame.reset_index(drop=True), "partition", "leader_moved_at", "new_leader", "isr_left_at")

    def violations(self) -> pd.DataFrame:
        """The violations it caused: named (``orders/11``, the entity's id beside), with the
        record times of their first and last offsets."""
        import msgspec
        import pandas as pd

        from kraftlake.replay.names import entity_name

        picked = [self.report.violations[k] for k in self.incident.violations]
        wanted = {o for v in picked for o in (v.first_offset, v.last_offset) if o is not None}
        got = self.times(wanted) if self.times is not None and wanted else {}
        rows = []
        for v in picked:
            d = msgspec.to_builtins(v)
            d["name"] = entity_name(v.entity, self.report.topics, self.report.dir_paths)
            d["first_time"] = _time(got.get(v.first_offset))
            d["last_time"] = None if v.last_offset is None else _time(got.get(v.last_offset))
            rows.append(d)
        cols = ["invariant", "severity", "name", "first_offset", "first_time", "last_offset", "last_time"]
        cols += ["message", "evidence", "entity"]
        frame = pd.DataFrame(rows, columns=cols)
        for c in ("first_time", "last_time"):
            frame[c] = pd.to_datetime(frame[c], utc=True)
        return _ints(frame, "first_offset", "last_offset")

    def plot(self, ax=None, *, lanes: int = 16):
        """A lane per partition it hit (the ``lanes`` it cost most), x = seconds of record time
        after the failure: the failure, report, removal and end as vertical lines, the
        unavailability it caused shaded (another incident's hatched grey), a dot where
        leadership moved (hollow: left with no leader) and a square where the ISR let go."""
        import matplotlib.pyplot as plt

        from kraftlake.records.times import format_ms
        from kraftlake.replay.html import COLOURS
        from kraftlake.replay.names import incident_where

        i = self.incident
        impact = self.impact()
        shown = impact.head(lanes)
        lo, hi = self._window()
        ax = ax or plt.subplots(figsize=(11, 1.6 + 0.32 * max(1, len(shown))))[1]
        if lo is None or hi is None:
            ax.set_title(f"{i.id}: no record times")
            return ax
        outages = self._outages()
        end = self.report.availability.to_ms if self.report.availability is not None else hi
        caused_end = max(
            (end if o.to_ms is None else o.to_ms for pieces in outages.values() for o in pieces if o.incident == i.id),
            default=hi,
        )
        hi = max(hi, caused_end)
        labelled: set[str] = set()

        def once(label: str) -> str | None:
            if label in labelled:
                return None
            labelled.add(label)
            return label

        for y, row in enumerate(shown.itertuples()):
            key = (row.topic_id, int(row.partition))
            for o in outages.get(key, ()):
                if o.from_ms is None or o.from_ms > hi or (o.to_ms is not None and o.to_ms < lo):
                    continue
                span = ((o.from_ms - lo) / 1000, ((end if o.to_ms is None else o.to_ms) - o.from_ms) / 1000)
                if o.incident == i.id:
                    ax.broken_barh(
                        [span], (y - 0.3, 0.6), color=COLOURS["outage"], label=once("unavailable: caused by it")
                    )
                else:
                    ax.broken_barh(
                        [span],
                        (y - 0.15, 0.3),
                        facecolor="none",
                        edgecolor=COLOURS["other"],
                        hatch="///",
                        label=once("unavailable: another incident's"),
                    )
            if not _missing(row.leader_moved_s):
                leaderless = not _missing(row.new_leader) and row.new_leader == -1
                ax.plot(
                    [row.leader_moved_s],
                    [y],
                    "o",
                    color=COLOURS["leaderless" if leaderless else "leader"],
                    markerfacecolor="white" if leaderless else COLOURS["leader"],
                    label=once("left with no leader" if leaderless else "leadership moved"),
                )
            if not _missing(row.isr_left_s):
                ax.plot([row.isr_left_s], [y], "s", color=COLOURS["isr"], markersize=5, label=once("left the ISR"))
        for name, ms, colour in (
            ("failed", i.failed_at_ms, COLOURS["failed"]),
            ("reported", i.reported_at_ms, COLOURS["reported"]),
            ("removed from registration" if i.kind == "dir-failure" else "fenced", i.removed_at_ms, COLOURS["removed"]),
            ("ended", i.ended_at_ms if i.ended_at is not None else None, COLOURS["ended"]),
        ):
            if ms is not None:
                ax.axvline((ms - lo) / 1000, color=colour, linestyle="--", linewidth=1.2, label=name)
        ax.set_yticks(range(len(shown)), [f"{t}/{p}" for t, p in zip(shown["topic"], shown["partition"], strict=True)])
        ax.set_ylim(len(shown) - 0.5, -0.5)
        span = max((hi - lo) / 1000, 1.0)
        ax.set_xlim(-0.05 * span, span * 1.05)
        ax.set_xlabel(f"seconds after the failure at {format_ms(lo)} (record time, UTC)")
        ax.set_ylabel("partition")
        path = i.path or (self.report.dir_paths.get(i.directory) if i.directory else None)
        more = f" ({len(impact) - len(shown)} more not drawn)" if len(impact) > len(shown) else ""
        ax.set_title(f"{i.kind}: {incident_where(i.kind, i.broker, i.directory, path)}{more}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
        ax.figure.tight_layout()
        return ax

    def __repr__(self) -> str:
        return f"Incident({self.incident.id!r}, effects={len(self.incident.effects)}, unavailable_s={self.incident.unavailable_ms / 1000})"

    def _repr_html_(self) -> str:
        from kraftlake.replay.html import _card

        return _card(self.report, self.incident, [o for pieces in self._outages().values() for o in pieces])


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
        """The log's commits: Delta version, commit time (UTC), operation, the offsets and number
        of records each appended (integers; missing for a commit that appended none), producers."""
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
        frame = pd.DataFrame(
            rows, columns=["version", "time", "operation", "first_offset", "last_offset", "records", "producers"]
        )
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
        # A commit that appended no record (a compaction) has no offsets: integers that may be
        # missing, not floats.
        return _ints(frame, "version", "first_offset", "last_offset", "records")

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

        report = audit(
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
        # The rows are timed from the log as it is now: it holds every offset the report names.
        return AuditResult(report, self.log.at().record_times)

    def incidents(self, kind: str | None = None, **audit: Any) -> Incidents:
        """The incidents of the log (of one ``kind``: dir-failure, controlled-shutdown,
        broker-fenced), from an audit with ``audit``'s arguments (see ``audit``)."""
        found = self.audit(**audit).incidents
        return found if kind is None else found.of(kind)

    def availability(self, **audit: Any) -> pd.DataFrame:
        """Per partition: seconds without a leader, with the leader or an ISR member on an
        offline directory, under min.insync.replicas (see ``audit`` for the arguments)."""
        return self.audit(**audit).availability

    def offline_replicas(self, *, by_broker: bool = False) -> pd.DataFrame:
        """The number of replicas offline (broker unregistered or fenced, or directory offline)
        after every record that changed it; ``by_broker``: a column per broker (whose replicas
        they are) instead of the total."""
        import pandas as pd

        from kraftlake.statemachine.kraft.directory_ids import is_online

        def offline(view, p) -> tuple[int, ...]:
            out = []
            for b, d in zip(p.replicas, p.directories, strict=True):
                reg = view.brokers.get(b)
                if reg is None or reg.fenced or not is_online(d, reg.log_dirs):
                    out.append(b)
            return tuple(out)

        counts: dict[tuple[str, int], tuple[int, ...]] = {}
        per: dict[int, int] = {}
        rows = []
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
            before = dict(per)
            for k in keys:
                p = view.partition(*k)
                now = () if p is None else offline(view, p)
                for b in counts.get(k, ()):
                    per[b] -= 1
                for b in now:
                    per[b] = per.get(b, 0) + 1
                counts[k] = now
            if {b: n for b, n in per.items() if n} != {b: n for b, n in before.items() if n}:
                rows.append({"offset": r.offset, "time": _time(r.ts_ms), **{f"broker {b}": n for b, n in per.items()}})
        brokers = sorted({int(c.split()[1]) for row in rows for c in row if c.startswith("broker ")})
        cols = [f"broker {b}" for b in brokers]
        frame = pd.DataFrame(rows, columns=["offset", "time", *cols])
        frame[cols] = frame[cols].fillna(0).astype("int64")
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
        if by_broker:
            return frame
        total = frame[cols].sum(axis=1) if cols else pd.Series([], dtype="int64")
        return pd.DataFrame({"offset": frame["offset"], "time": frame["time"], "offline_replicas": total})

    # -- plots -----------------------------------------------------------------------------------

    def plot_partition(self, topic: str, partition: int, ax=None):
        """The partition's leader and ISR over offsets, a lane per broker holding a replica, with
        the failures of the directories that held its replicas marked where they hit (an x on
        the broker's lane) and the record time (UTC) on the top axis."""
        import matplotlib.pyplot as plt

        tl = self.timeline(topic, partition)
        ax = ax or plt.subplots(figsize=(11, 3.8))[1]
        if tl.empty:
            return ax
        offsets = list(tl["offset"]) + [self.log.last_offset]
        brokers = sorted({b for rs in tl["replicas"] for b in rs})
        lane = {b: n for n, b in enumerate(brokers)}  # evenly spaced, whatever the ids
        labelled: set[str] = set()

        def once(label: str) -> str | None:
            if label in labelled:
                return None
            labelled.add(label)
            return label

        for i, row in enumerate(tl.itertuples()):
            lo, hi = offsets[i], offsets[i + 1]
            for b in row.isr:
                ax.hlines(lane[b], lo, hi, colors="tab:blue", linewidth=7, alpha=0.3, label=once("in the ISR"))
            if row.leader >= 0 and row.leader in lane:
                ax.hlines(lane[row.leader], lo, hi, colors="tab:green", linewidth=2.5, label=once("leader"))
        # Only the failures of the directory that held this partition's replica at the time.
        hits = []
        for f in self.log.at().records(types=["LogDirFailed"]):
            before = tl[tl["offset"] <= f.offset]
            if before.empty:
                continue
            row = before.iloc[-1]
            if dict(zip(row["replicas"], row["directories"], strict=True)).get(f.broker_id) == _dir(f.directory):
                hits.append(f)
        if hits:
            ax.plot(
                [f.offset for f in hits],
                [lane[f.broker_id] for f in hits],
                "x",
                color="tab:red",
                markersize=9,
                markeredgewidth=2,
                label="its replica's directory failed",
            )
        ax.set_ylim(-0.6, len(brokers) - 0.4)
        ax.set_yticks(range(len(brokers)), [f"broker {b}" for b in brokers])
        ax.set_xlabel("offset")
        if offsets[-1] > offsets[0]:
            ax.set_xlim(offsets[0], offsets[-1])
        _time_axis(ax, list(tl["offset"]), [None if _missing(t) else t.timestamp() * 1000 for t in tl["time"]])
        ax.set_title(f"{topic}/{partition}: leader and ISR")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
        ax.figure.tight_layout()
        return ax

    def plot_offline(self, ax=None):
        """Offline replicas over record time, stacked by the broker whose replicas they are."""
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator

        data = self.offline_replicas(by_broker=True)
        ax = ax or plt.subplots(figsize=(11, 3.4))[1]
        cols = [c for c in data.columns if c.startswith("broker ")]
        if not data.empty and cols:
            times = data["time"].dt.tz_convert("UTC").dt.tz_localize(None)
            ax.stackplot(times, *[data[c] for c in cols], labels=cols, step="post", alpha=0.85)
            # At most eight ticks whatever the span (a date locator warns below a second).
            ax.xaxis.set_major_locator(MaxNLocator(8))
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
            day = data["time"].iloc[0].strftime("%Y-%m-%d")
            ax.set_xlabel(f"record time (UTC, {day})")
            if times.iloc[-1] > times.iloc[0]:
                ax.set_xlim(times.iloc[0], times.iloc[-1])
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="replicas of")
        else:
            ax.set_xlabel("record time (UTC)")
        ax.set_ylabel("offline replicas")
        ax.set_title("offline replicas over time, by broker")
        ax.figure.tight_layout()
        return ax

    def _repr_html_(self) -> str:
        return f"<p><b>kraftlake</b> {html.escape(self.path)}: offsets 0..{self.log.last_offset}, Delta version {self.log.version}</p>"

    def __repr__(self) -> str:
        return f"Lake({self.path!r})"
