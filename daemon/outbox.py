"""The contract between the journal (which stores every message to publish) and the
MQTT link (which publishes them in order, once, and republishes retained state).

The journal is the outbox: a message is written there first, with its ``seq``, and goes
out when the broker is reachable. Nothing is held only in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxMessage:
    """One message to publish. ``topic`` is relative to the table's base topic
    (``state``, ``craps/board``, ``response/void_roll``); ``payload`` is the exact bytes,
    ``seq`` and ``ts`` already inside for JSON payloads."""

    seq: int
    topic: str
    payload: bytes
    retained: bool


class Outbox(Protocol):
    """What the MQTT link needs from the journal."""

    def pending(self, limit: int = 100) -> list[OutboxMessage]:
        """Messages not yet published, in ``seq`` order, at most ``limit``."""
        ...

    def mark_published(self, *seqs: int) -> None:
        """Record that the messages ``seqs`` reached the broker (QoS 1 acknowledged)."""
        ...

    def set_aside(self, seq: int, reason: str) -> None:
        """Take the message ``seq`` out of the queue: the client or the broker refused it
        (kept in the record as refused, with ``reason``)."""
        ...

    def retained(self) -> list[OutboxMessage]:
        """The latest published retained message of every topic, in ``seq`` order."""
        ...
