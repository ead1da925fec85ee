"""``request/resend`` (mqtt-api.md 1.3): how often a table serves one, and what it sends.

A subscriber that lost messages asks the table for a ``seq`` range (``contract.feed`` does
it for every consumer); the table publishes again, from its journal, every message it
published in the range, with the same bytes, to the same topics, never retained, marked
with the MQTT 5 user property ``resent`` = ``true`` (``RESENT_PROPERTY``).

The rate (a choice where the spec says only "a few a second"): a token bucket per table,
``RESEND_RATE`` requests a second with bursts of ``RESEND_BURST``, shared by all clients.
A request beyond it is answered with ``RATE_ERROR`` and nothing is sent. One resend is at
most 1,001 messages, so the table publishes at most about 4,000 copies a second at the
sustained rate; the copies wait in the MQTT link (``MqttLink.resend``), never in the
outbox, and at most ``RESEND_BACKLOG`` of them: a resend asked while more wait is answered
with ``BUSY_ERROR``. The link publishes the table's own new messages first and copies in
between, one window at a time, so a resend never holds a result back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Protocol

from daemon.outbox import OutboxMessage

RESEND_RATE: Final = 4.0
"""Resend requests a table serves per second, sustained (all clients together)."""
RESEND_BURST: Final = 8
"""Resend requests a table serves at once after a quiet time."""
RESEND_BACKLOG: Final = 8000
"""Copies at most waiting in the link; a resend asked beyond it is refused (busy)."""
RESENT_PROPERTY: Final = ("resent", "true")
"""The MQTT 5 user property that marks a copy published again (mqtt-api.md 1.3)."""

RATE_ERROR: Final = (
    f"too many resend requests: this table serves at most {RESEND_RATE:g} a second "
    f"({RESEND_BURST} at once); ask again in a moment"
)
BUSY_ERROR: Final = "the table is still publishing earlier resends: ask again in a moment"
NO_LINK_ERROR: Final = "the table is not connected to its broker: ask again once it is online"


class TokenBucket:
    """``take()`` is true at most ``rate`` times a second on average, ``burst`` at once.
    ``clock`` is monotonic seconds (injected in tests)."""

    def __init__(
        self,
        rate: float = RESEND_RATE,
        burst: int = RESEND_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        """One token if there is one: true, and it is used; false otherwise."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class Resender(Protocol):
    """Where the copies go (``daemon.mqtt.MqttLink`` fits)."""

    @property
    def resend_backlog(self) -> int:
        """Copies queued and not yet published."""
        ...

    @property
    def connected(self) -> bool:
        """True while the link to the broker is up."""
        ...

    def resend(self, messages: list[OutboxMessage]) -> None:
        """Publish ``messages`` again, non-retained, marked, after what is queued."""
        ...
