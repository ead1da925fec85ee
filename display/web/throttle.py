"""Actions per user per second for ``lammer web``: one user cannot use up the table's intake.

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

from collections import OrderedDict
from typing import Final

from foundation.bucket import TokenBucket, positive_rate

ACTION_RATE: Final = 2.0
"""Actions a second per user, on average."""

ACTION_BURST: Final = 5
"""Actions a user may post at once (a double click, a quick correction)."""

MAX_USERS: Final = 10_000
"""Buckets kept at most (users in the users file are far fewer)."""


class ActionLimit:
    """Per-user token buckets; ``retry_after(user, now)`` spends one or says how long to
    wait."""

    def __init__(self, *, rate: float = ACTION_RATE, burst: int = ACTION_BURST) -> None:
        self.rate = positive_rate("rate", rate)
        self.burst = positive_rate("burst", burst)
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self.refused = 0
        """Actions refused since the start."""

    def retry_after(self, user: str, now: float) -> float:
        """0 when ``user`` may act at ``now`` (monotonic seconds; a token is spent), else
        the seconds until the next token."""
        bucket = self._buckets.pop(user, None) or TokenBucket(self.rate, self.burst)
        self._buckets[user] = bucket  # the most recently used last
        while len(self._buckets) > MAX_USERS:
            self._buckets.popitem(last=False)
        wait = bucket.retry_after(now)
        if wait:
            self.refused += 1
        return wait
