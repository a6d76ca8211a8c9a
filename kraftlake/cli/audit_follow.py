"""``kraftlake audit LOG --follow``: the per-record audit (``replay.live_audit``) run on the log's
records as they land (``Log.follow_batches``), printing each violation when it opens and when it
closes, and each incident (a directory failed, a broker went away) when it opens and when it
ends: a line of text each, with record times and names, or JSON Lines (``--format jsonl``).
Ctrl-C ends it (exit 0)."""

from __future__ import annotations

import threading

import msgspec

from kraftlake.cli.console import end_on_ctrl_c, write_bytes


def follow_audit(
    opened,
    from_offset: int,
    config,
    *,
    jsonl: bool,
    poll: float = 0.1,
    start=None,
    streams_start=None,
    stop: threading.Event | None = None,
) -> None:
    """Audit ``opened`` (a ``Log``) from ``from_offset`` on, for ever (until ``stop`` or Ctrl-C),
    ``start``/``streams_start`` being the state before it."""
    from kraftlake.replay.live_audit import LiveAudit

    live = LiveAudit(config, start, streams=streams_start)
    try:
        for batch in opened.follow_batches(from_offset, poll=poll, stop=stop):
            events = live.feed(batch)
            if events:
                write_bytes(b"".join((_jsonl if jsonl else _text)(e) for e in events))
    except KeyboardInterrupt:
        end_on_ctrl_c()


def _jsonl(event) -> bytes:
    return msgspec.json.encode(event) + b"\n"


def _text(event) -> bytes:
    when = event.at_time or "-"
    if event.event.startswith("incident_"):
        inc = event.incident
        verb = "INCIDENT" if event.event == "incident_open" else "ENDED"
        what = f"{inc.kind} {inc.where}"
        if event.event == "incident_open":
            hit = f"leader of {_n(inc.led, 'partition')}, in the ISR of {inc.in_isr}"
            return f"{when} {verb:8} {what} at offset {event.at_offset}: {hit}\n".encode()
        moved = (
            f"{inc.moved} of {_n(inc.led, 'leadership')} moved to a live leader, {inc.leaderless} left with no leader"
            if inc.led
            else "it led no partition"
        )
        return f"{when} {verb:8} {what} at offset {event.at_offset} (failed {inc.failed_time}): {moved}\n".encode()
    v = event.violation
    span = f"{v.first_offset}-{'' if v.last_offset is None else v.last_offset}"
    since = f" since {event.first_time}" if event.event == "open" and event.first_time else ""
    return (
        f"{when} {event.event.upper():8} {v.invariant} {v.severity} {event.name or v.entity}"
        f" offsets {span}{since}: {v.message}\n"
    ).encode()


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
