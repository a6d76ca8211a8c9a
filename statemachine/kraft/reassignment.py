"""Partition reassignment's replica arithmetic, as Kafka's ``PartitionReassignmentReplicas`` and
``PartitionReassignmentRevert`` do it: which replicas a move adds and removes (sorted, Kafka's
``TreeSet``), the replica list while it runs (target, then the leaving ones), when it completes
(every remaining replica in the ISR), and what cancelling it goes back to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionReassignmentReplicas:
    removing: tuple[int, ...]
    adding: tuple[int, ...]
    replicas: tuple[int, ...]

    @classmethod
    def of(cls, current: tuple[int, ...], target: tuple[int, ...]) -> PartitionReassignmentReplicas:
        """A move from ``current`` to ``target``: removing and adding sorted, replicas = target
        then the removing ones."""
        removing = tuple(sorted(set(current) - set(target)))
        adding = tuple(sorted(set(target) - set(current)))
        return cls(removing, adding, tuple(target) + removing)

    def in_progress(self) -> bool:
        return bool(self.removing or self.adding)

    def maybe_complete(self, target_isr: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """``maybeCompleteReassignment``: (replicas, ISR) once the ISR without the removing
        replicas holds every remaining replica, else None."""
        if not self.in_progress():
            return None
        isr, replicas = tuple(target_isr), self.replicas
        if self.removing:
            isr = tuple(r for r in isr if r not in self.removing)
            if not isr:
                return None
            replicas = tuple(r for r in replicas if r not in self.removing)
            if not replicas:
                return None
        if not all(r in isr for r in replicas):
            return None
        return replicas, isr

    def original_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


@dataclass(frozen=True)
class PartitionReassignmentRevert:
    """What cancelling a running reassignment goes back to: the original replicas, the ISR
    without the adding ones; if that empties it, the first original replica (unclean)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    unclean: bool

    @classmethod
    def of(
        cls, replicas: Iterable[int], isr: Iterable[int], removing: Iterable[int], adding: Iterable[int]
    ) -> PartitionReassignmentRevert:
        ongoing = PartitionReassignmentReplicas(tuple(removing), tuple(adding), tuple(replicas))
        original = ongoing.original_replicas()
        kept = tuple(r for r in isr if r not in ongoing.adding)
        if kept:
            return cls(original, kept, False)
        if not original:
            raise ValueError("Invalid replica assignment: addingReplicas contains all replicas.")
        return cls(original, (original[0],), True)


__all__ = ["PartitionReassignmentReplicas", "PartitionReassignmentRevert"]
