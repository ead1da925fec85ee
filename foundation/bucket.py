"""A token bucket: ``rate`` tokens a second on average, at most ``burst`` at once.

The one rate limit of lammer: the table's request intake (``daemon.intake``) and the web
server's actions per user (``display.web.throttle``). Time is the caller's (a monotonic
clock in seconds, passed in), so the bucket is pure and a test drives it with numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def positive_rate(what: str, value: float) -> float:
    """``value`` as a float when it is a finite number above 0; ``TypeError`` or
    ``ValueError`` naming ``what`` otherwise (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number above 0, got {value!r}")
    return float(value)


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` kept, full at the start; ``take`` spends
    one if there is one. A clock that goes back adds none."""

    rate: float
    burst: float
    _tokens: float = field(init=False)
    _at: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        burst = self.burst
        self.rate = positive_rate("rate", self.rate)
        self.burst = positive_rate("burst", burst)
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self._tokens = self.burst

    def _refill(self, now: float) -> None:
        if not math.isfinite(now):
            raise ValueError(f"not a time: {now!r}")
        if self._at is not None and now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        if self._at is None or now > self._at:
            self._at = now

    def take(self, now: float) -> bool:
        """Spend a token at ``now`` if one is left; False when the bucket is empty."""
        return self.retry_after(now) == 0

    def retry_after(self, now: float) -> float:
        """0 when a token is left at ``now`` (it is spent), else the seconds until the next
        one (nothing spent)."""
        self._refill(now)
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self.rate
