"""An in-memory KRaft controller: the Decider's ten-line infrastructure wrapper.

``Controller.handle(command)`` decides against the current view, gives the records their offsets
(the next ones after the view), folds them in with the reducer and returns the decision. The
simulator and the tests drive it; a service would append ``decision.records`` to the Delta log
instead and fold them in once committed.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kraftlake.records.base import Record, trusted

from .commands import Command, ControllerConfig, Decision
from .decider import decide
from .reducer import replay
from .view import ControllerView


class Controller:
    def __init__(self, records: Iterable[Record] = (), *, config: ControllerConfig | None = None) -> None:
        self.config = config or ControllerConfig()
        self.records: list[Record] = []
        self.view = ControllerView()
        self.append(records)

    def append(self, records: Iterable[Record]) -> list[Record]:
        """Give ``records`` the next offsets, fold them in and keep them; returns them as stored."""
        out = []
        offset = self.view.offset
        with trusted():  # records built by deciders were validated when they were made
            for r in records:
                offset += 1
                out.append(r if r.offset == offset else msgspec.structs.replace(r, offset=offset))
        replay(out, self.view)
        self.records.extend(out)
        return out

    def handle(self, command: Command) -> Decision:
        """Decide ``command``, then append and apply its records; the returned decision's records
        carry their offsets."""
        decision = decide(self.view, command, self.config)
        if not decision.records:
            return decision
        return msgspec.structs.replace(decision, records=tuple(self.append(decision.records)))
