"""Reconnect delays: one policy for every link that lammer reopens (a device's port, the MQTT
broker, a display's broker connection).

``Backoff(initial, maximum).delay(attempt, rng)`` is exponential from ``initial`` seconds,
capped at ``maximum``, with "equal jitter": the delay is uniform in [half, all] of the step,
so tables that lost the same broker or the same device server do not all come back in the
same instant, yet none retries at once. The random source is passed in (a seeded
``random.Random`` in tests), so a sequence of delays can be reproduced.

Pure: no I/O, no clock; the caller sleeps.

The defaults (``DEFAULT_INITIAL``, ``DEFAULT_MAXIMUM``) are every link's: a device port and
the broker alike. The cap is what an operator waits at most, once the device or the broker
is back, before the table is live again (displays stay stale that long), so it is short:
5 s. A short cap costs one port open or TCP connect every 2.5-5 s while the peer is gone:
nothing a controller, a device server or a broker with hundreds of tables notices.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

_MAX_DOUBLINGS: Final = 62  # 2**62 times any sane initial is far beyond any cap

DEFAULT_INITIAL: Final = 0.5
"""Seconds before the first reconnect attempt (jittered to 0.25-0.5 s)."""

DEFAULT_MAXIMUM: Final = 5.0
"""The cap of the delays, in seconds: at most this long stale after the peer returns."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Reconnect delays: ``initial * 2**attempt`` seconds capped at ``maximum``, jittered.

    Raises ``ValueError`` unless ``0 < initial <= maximum`` (``drivers.settings`` reports it as
    its ``DriverConfigError``).
    """

    initial: float = DEFAULT_INITIAL
    maximum: float = DEFAULT_MAXIMUM

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                "reconnect delays need 0 < initial <= maximum, "
                f"got initial {self.initial:g} s and maximum {self.maximum:g} s"
            )

    def step(self, attempt: int) -> float:
        """The un-jittered delay before attempt ``attempt`` (0 for the first retry)."""
        return min(self.maximum, self.initial * 2.0 ** min(attempt, _MAX_DOUBLINGS))

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The delay before reconnect attempt ``attempt`` (0 for the first retry): uniform
        in [half, all] of ``step(attempt)``, drawn from ``rng``."""
        step = self.step(attempt)
        return rng.uniform(step / 2, step)
