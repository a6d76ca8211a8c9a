"""An in-memory KRaft controller: the Decider's ten-line infrastructure wrapper.

``Controller.handle(command)`` decides against the current view, gives the records their offsets
(the next ones after the view), folds them in with the reducer and returns the decision. The
simulator and the tests drive it; a service would append ``decision.records`` to the Delta log
instead and fold them in once committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from kraftlake.records.base import Record, trusted
from kraftlake.records.errors import ReplayError

from .commands import Command, ControllerConfig, Decision
from .decider import decide
from .reducer import apply, replay
from .view import ControllerView

Decide = Callable[[ControllerView, Command, ControllerConfig], Decision]


class Controller:
    """``decide_fn`` is the decider (``statemachine.kraft.bugs`` has faulty variants for tests
    of the audits); ``ts_ms``, when set, stamps the records that carry no time."""

    def __init__(
        self,
        records: Iterable[Record] = (),
        *,
        config: ControllerConfig | None = None,
        decide_fn: Decide = decide,
        strict: bool = True,
    ) -> None:
        self.config = config or ControllerConfig()
        self.decide_fn = decide_fn
        self.strict = strict
        """False: a record the reducer refuses (a faulty decider's) stays in the log and is skipped
        in the view, as an audit skips it; True: it raises ReplayError."""
        self.records: list[Record] = []
        self.view = ControllerView()
        self.ts_ms: int | None = None
        self.append(records)

    def append(self, records: Iterable[Record]) -> list[Record]:
        """Give ``records`` the next offsets, fold them in and keep them; returns them as stored."""
        out = []
        offset = self.view.offset
        ts = self.ts_ms
        replace = msgspec.structs.replace
        with trusted():  # records built by deciders were validated when they were made
            for r in records:
                offset += 1
                if ts is not None and r.ts_ms is None:
                    r = replace(r, offset=offset, ts_ms=ts)
                elif r.offset != offset:
                    r = replace(r, offset=offset)
                out.append(r)
        if self.strict:
            replay(out, self.view)
        else:
            for r in out:
                try:
                    apply(self.view, r)
                except ReplayError:
                    assert r.offset is not None  # given above
                    self.view.offset = r.offset
        self.records.extend(out)
        return out

    def handle(self, command: Command) -> Decision:
        """Decide ``command``, then append and apply its records; the returned decision's records
        carry their offsets."""
        decision = self.decide_fn(self.view, command, self.config)
        if not decision.records:
            return decision
        return msgspec.structs.replace(decision, records=tuple(self.append(decision.records)))
