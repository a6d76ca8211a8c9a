"""The plumbing every seeded workload of the S3Stream and BookKeeper families shares: a view folded
by its family's reducer, a decider (the correct one or a faulty one from the family's ``bugs``), the
simulated clock, and the records written so far; ``drive`` turns a cluster's steps into batches.

Pure like the deciders it drives: the only randomness is the workload's own seeded
``random.Random``, time is ``now`` (the workload moves it), and every record gets the next offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import msgspec

from kraftlake.records.base import Record


class Simulation:
    """A view, the decider in force and the clock; ``emit`` and ``run`` append to ``records``."""

    def __init__(
        self, view: Any, decide: Callable[[Any, Any], Any], apply: Callable[[Any, Record], Any], now_ms: int
    ) -> None:
        self.view = view
        self.decide = decide
        self._apply = apply
        self.records: list[Record] = []
        self.op = 0
        self.now = now_ms

    def emit(self, records: Iterable[Record]) -> None:
        """Append ``records`` at the next offsets, at the current time, and fold them in."""
        for r in records:
            r = msgspec.structs.replace(r, offset=self.view.offset + 1, ts_ms=self.now)
            self._apply(self.view, r)
            self.records.append(r)

    def run(self, cmd: Any) -> Any:
        """Decide ``cmd`` on the current view and append what it decided (an error decides nothing)."""
        d = self.decide(self.view, cmd)
        self.emit(d.records)
        return d


class Steps(Protocol):
    records: list[Record]

    def bootstrap(self) -> None: ...

    def step(self) -> None: ...


def drive(cluster: Steps, records: int) -> Iterator[list[Record]]:
    """Batches (one per operation) until at least ``records`` records were produced."""
    produced = 0
    cluster.bootstrap()
    while True:
        batch, cluster.records = cluster.records, []
        if batch:
            produced += len(batch)
            yield batch
        if produced >= records:
            return
        cluster.step()
