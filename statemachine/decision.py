"""What every family's deciders share: the base of their commands, the reply convention and the
one ``Decision`` a decider returns (Kafka's and AutoMQ's ``ControllerResult``: the records to
append, in order, and the reply to send once they are committed).

The reply convention, the same in every family: ``error_code`` says what kept the command from
being done as asked, ``NONE`` (0) for nothing, and ``message`` says why. The codes are the
modelled system's: for the KRaft and S3Stream controllers, whose replies mirror Kafka's and
AutoMQ's RPCs, the numbers of their ``org.apache.kafka.common.protocol.Errors`` (a command they
refuse decides no records); for BookKeeper, the names of what its client, admin, auditor and
replication worker throw or answer (most of them have no number in ``BKException.Code``; the HTTP
service returns the names), some of which still decide records (a failed repair defers its lock).
A family's replies subclass ``Reply`` with the fields its RPCs answer.
"""

from __future__ import annotations

import msgspec

NONE = 0
"""``error_code`` of a reply that reports no error, in every family."""


class Command(msgspec.Struct, frozen=True, kw_only=True, tag_field="command", tag=True):
    """Base of every family's commands (each family's own base subclasses it): frozen, keyword
    arguments, tagged by class name in the field ``command``."""


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """What a decider answers: ``error_code`` (``NONE`` = no error) and a ``message``."""

    error_code: int | str = NONE
    message: str | None = None


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What a command decided: the records to append, in order (applied together, or not at
    all), and the reply to send once they are committed."""

    records: tuple = ()
    reply: Reply = Reply()

    @property
    def error_code(self) -> int | str:
        """The reply's ``error_code``."""
        return self.reply.error_code


__all__ = ["NONE", "Command", "Decision", "Reply"]
