"""How many requests a table serves: the gate between the broker and ``RequestDesk.decide``.

A table needs a stickperson's decision every few rolls; each one costs a journal
transaction (an fsync) and an answer on the wire. A client that may publish requests (a
pit terminal, or whoever holds its password) can send thousands a second. Served one by
one, they would push the table's results behind their answers and fill the journal
(measured without the gate: 5,000 requests in 2 s delayed a roll by 19.8 s and grew the
journal 1.3 KB a request). So the MQTT link asks ``RequestGate.check`` for every request as
it arrives, before it is queued:

* ``ADMIT``: within the rate (a token bucket: ``rate`` a second on average, ``burst`` at
  once); the request is served as always (journaled, answered).
* ``ANSWER_BUSY``: over the rate; the request is refused without being parsed, and this
  one is answered ``busy`` on ``response/<name>`` (journaled, so it has its ``seq``). At
  most ``answers`` such answers a second go out: a busy answer costs a record too.
* ``COUNT``: over the rate, and a busy answer went out less than a second ago: counted
  only. The next busy answer's record carries how many were refused since the last one,
  and the core reports the count once a minute (``DropCounter``), so the record of a
  flood is a few lines whatever its size.

The gate of the bare ``request/<name>`` is the table's, not a user's, because the daemon
cannot tell who published such a request (a request at a user's own level,
``request/resend/<user>`` of mqtt-api.md 1.4, has a gate per user: ``daemon.mqtt``).
Neither MQTT 3.1.1 nor MQTT 5 (the link's protocol) carries the publisher's user
or client id to a subscriber: Mosquitto delivers the same topic, payload and flags whoever
sent them. What a request does carry is its sender's own claim: ``operator`` (mqtt-api.md
"Requests") and, under MQTT 5, any user property, both passed on unchecked, so a flooding
client can name the stickperson, or a new name for every request (a bucket per name would
then bound nothing). The only part the broker checks is the topic (its ACL), and every
request user may publish on the same ``<base>/request/+``. So under a flood a legitimate
decision is refused busy too, and the stickperson sends it again (docs/floor/broker.md: a
flood of requests, and what per-user limiting would need). The broker keeps the flood from
everyone else (displays do not read requests: ``deploy.broker_config``). A flood the gate
would still read one by one is left unread for a while (``Flood``, ``SHED_AT``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from foundation.bucket import TokenBucket, positive_rate

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


class RequestGate:
    """The table's request intake: ``check(now)`` for each request as it arrives."""

    def __init__(
        self,
        *,
        rate: float = REQUEST_RATE,
        burst: int = REQUEST_BURST,
        answers: float = BUSY_ANSWERS,
    ) -> None:
        self.rate = positive_rate("rate", rate)
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


SHED_AT: Final = 500
"""Requests refused unread within one second, on one subscription, that make the MQTT link
stop reading that subscription for a while (``Flood``): a hundred times the rate the gate
serves, never a pit's own pace."""

SHED_FOR: Final = 10.0
"""Seconds the link leaves a flooded subscription unread before it reads it again."""


@dataclass(slots=True)
class Flood:
    """Counts the requests of one subscription refused unread; ``refused(now)`` is True
    when ``at`` of them came within ``window`` seconds (a flood the gate alone would read
    one by one: each costs the link a packet parsed and acknowledged on the table's event
    loop, thousands a second, and the table's results wait behind them). The link then
    unsubscribes for ``SHED_FOR`` seconds: the broker drops what nobody reads, at no cost
    to the table (a flood measured at 5,000 resend requests a second from one user)."""

    at: int = SHED_AT
    window: float = 1.0
    _since: float | None = None
    _count: int = 0

    def refused(self, now: float) -> bool:
        """One request refused unread at ``now``; True when the flood is on."""
        if self._since is None or now - self._since >= self.window or now < self._since:
            self._since, self._count = now, 0
        self._count += 1
        return self._count >= self.at


BUSY_ERROR: Final = (
    "busy: requests arrive faster than the table serves them; this one was not read. Send it again"
)
"""The sentence a request refused for the rate is answered with."""
