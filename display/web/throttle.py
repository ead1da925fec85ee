"""Actions per user per second for ``lammer web`` (issue 20).

A logged-in stickperson decides a few rolls a minute; a script with a stolen session, or a
stuck key, could post hundreds of actions a second, each one an MQTT request the table must
read. ``ActionLimit`` gives every user a token bucket (``rate`` actions a second on
average, ``burst`` at once); an action beyond it is answered 429 with ``Retry-After`` and
publishes nothing. The table has its own bound for everyone together (``daemon.intake``);
this one keeps one user of the web server from using it all up.

Memory is bounded: at most ``MAX_USERS`` buckets are kept, the one used longest ago dropped
first (a dropped bucket starts full again: a user gains one burst after that many others).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Final

ACTION_RATE: Final = 2.0
"""Actions a second per user, on average."""

ACTION_BURST: Final = 5
"""Actions a user may post at once (a double click, a quick correction)."""

MAX_USERS: Final = 10_000
"""Buckets kept at most (users in the users file are far fewer)."""


def _positive(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number above 0, got {value!r}")
    return float(value)


class ActionLimit:
    """Per-user token buckets; ``retry_after(user, now)`` spends one or says how long to
    wait."""

    def __init__(self, *, rate: float = ACTION_RATE, burst: int = ACTION_BURST) -> None:
        self.rate = _positive("rate", rate)
        self.burst = _positive("burst", burst)
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at
        self.refused = 0
        """Actions refused since the start."""

    def retry_after(self, user: str, now: float) -> float:
        """0 when ``user`` may act at ``now`` (monotonic seconds; a token is spent), else
        the seconds until the next token."""
        if not math.isfinite(now):
            raise ValueError(f"not a time: {now!r}")
        tokens, at = self._buckets.pop(user, (self.burst, now))
        if now > at:
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            at = now
        if tokens >= 1:
            tokens -= 1
            wait = 0.0
        else:
            self.refused += 1
            wait = (1 - tokens) / self.rate
        self._buckets[user] = (tokens, at)
        while len(self._buckets) > MAX_USERS:
            self._buckets.popitem(last=False)
        return wait
