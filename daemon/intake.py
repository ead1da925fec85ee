"""How many requests a table serves: the gate between the broker and ``TableCore.decide``.

A table needs a stickperson's decision every few rolls; each one costs a journal
transaction (an fsync) and an answer on the wire. A client that may publish requests (a
pit terminal, or whoever holds its password) can send thousands a second. Served one by
one, they would push the table's results behind their answers and fill the journal
(issue 20: 5,000 requests in 2 s delayed a roll by 19.8 s and grew the journal 1.3 KB a
request). So the MQTT link asks ``RequestGate.check`` for every request as it arrives,
before it is queued:

* ``ADMIT``: within the rate (a token bucket: ``rate`` a second on average, ``burst`` at
  once); the request is served as always (journaled, answered).
* ``ANSWER_BUSY``: over the rate; the request is refused without being parsed, and this
  one is answered ``busy`` on ``response/<name>`` (journaled, so it has its ``seq``). At
  most ``answers`` such answers a second go out: a busy answer costs a record too.
* ``COUNT``: over the rate, and a busy answer went out less than a second ago: counted
  only. The next busy answer's record carries how many were refused since the last one,
  and the core reports the count once a minute (``DropCounter``), so the record of a
  flood is a few lines whatever its size.

The gate is the table's, not a user's, because the daemon cannot tell who published a
request. Neither MQTT 3.1.1 nor MQTT 5 (the link's protocol) carries the publisher's user
or client id to a subscriber: Mosquitto delivers the same topic, payload and flags whoever
sent them. What a request does carry is its sender's own claim: ``operator`` (mqtt-api.md
"Requests") and, under MQTT 5, any user property, both passed on unchecked, so a flooding
client can name the stickperson, or a new name for every request (a bucket per name would
then bound nothing). The only part the broker checks is the topic (its ACL), and every
request user may publish on the same ``<base>/request/+``. So under a flood a legitimate
decision is refused busy too, and the stickperson sends it again (docs/floor/broker.md: a
flood of requests, and what per-user limiting would need). The broker keeps the flood from everyone
else (displays do not read requests: ``deploy.broker_config``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Final

REQUEST_RATE: Final = 5.0
"""Requests a second a table serves on average (a stickperson decides a few a minute)."""

REQUEST_BURST: Final = 20
"""Requests a table serves at once before the rate applies (a pit that catches up)."""

BUSY_ANSWERS: Final = 1.0
"""Busy answers a second at most (each one is a journal record and a message)."""


class Verdict(enum.Enum):
    """What to do with one request (see the module docstring)."""

    ADMIT = "admit"
    ANSWER_BUSY = "answer_busy"
    COUNT = "count"


def _checked_rate(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number above 0, got {value!r}")
    return float(value)


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` kept; ``take`` spends one if there is one.
    Time is the caller's (a monotonic clock in seconds): a clock that goes back adds none."""

    rate: float
    burst: float
    _tokens: float = field(init=False)
    _at: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.rate = _checked_rate("rate", self.rate)
        self.burst = _checked_rate("burst", self.burst)
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {self.burst!r}")
        self._tokens = self.burst

    def take(self, now: float) -> bool:
        """Spend a token at ``now`` if one is left; False when the bucket is empty."""
        if not math.isfinite(now):
            raise ValueError(f"not a time: {now!r}")
        if self._at is not None and now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        if self._at is None or now > self._at:
            self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class RequestGate:
    """The table's request intake: ``check(now)`` for each request as it arrives."""

    def __init__(
        self,
        *,
        rate: float = REQUEST_RATE,
        burst: int = REQUEST_BURST,
        answers: float = BUSY_ANSWERS,
    ) -> None:
        self.rate = _checked_rate("rate", rate)
        self._requests = TokenBucket(rate, burst)
        self._answers = TokenBucket(answers, 1)
        self.admitted = 0
        """Requests let through since the start."""
        self.refused = 0
        """Requests refused busy since the start (answered or only counted)."""
        self.unanswered = 0
        """Requests refused since the last busy answer went out (that answer excluded)."""

    def check(self, now: float) -> Verdict:
        """The verdict for a request that arrives at ``now`` (monotonic seconds)."""
        if self._requests.take(now):
            self.admitted += 1
            return Verdict.ADMIT
        self.refused += 1
        if self._answers.take(now):
            return Verdict.ANSWER_BUSY
        self.unanswered += 1
        return Verdict.COUNT

    def take_unanswered(self) -> int:
        """How many refusals the busy answer going out now stands for besides its own;
        the count starts again."""
        count, self.unanswered = self.unanswered, 0
        return count


BUSY_ERROR: Final = (
    "busy: requests arrive faster than the table serves them; this one was not read. Send it again"
)
"""The sentence a request refused for the rate is answered with."""
