"""``request/resend`` (mqtt-api.md 1.3 and 1.4): who gets how many copies, and what is sent.

A subscriber that lost messages asks the table for a ``seq`` range (``contract.feed`` does
it for every consumer); the table publishes again, from its journal, every message it
published in the range, with the same bytes, to the same topics, never retained, marked
with the MQTT 5 user property ``resent`` = ``true`` (``RESENT_PROPERTY``).

Every copy goes to every subscriber of the table, and over its bridge to the whole floor,
so one request can cost a thousand messages: a client holding the ``display`` password
(every pit screen's) asking 50 times a second made one table publish 57,942 copies in
20 s (measured before the desk). ``ResendDesk`` decides, per asking user, what a request costs:

* **Who asks.** A read-only user asks on ``request/resend/<user>``, and the broker lets it
  publish at its own name only (mqtt-api.md 1.4; ``lammer broker-config`` and
  ``lammer floor-config`` write the grants); the bare ``request/resend`` is the
  terminal's (``contract.requests.BARE_USER``). Users are counted apart, at most
  ``MAX_USERS``: past that (a broker without an ACL, where any name can be a level) the
  rest share one account, ``OTHERS``.
* **A rate.** ``RESEND_RATE`` requests a second per user, ``RESEND_BURST`` at once (the
  token bucket of ``daemon.intake``); past it, answered ``RATE_ERROR`` (mqtt-api.md 1.3:
  "more are answered with an error that says so"). Before that, the MQTT link's intake
  has already refused a flood unread, per user at the user level (``daemon.mqtt``).
* **Copies shared.** A copy published in the last ``SHARE_WINDOW`` seconds is not
  published again: every subscriber of the table received it (or is about to: it waits in
  the link), so three screens asking for the same hole get it once. The answer counts it
  in ``sent`` all the same, so each asker's feed knows the range is complete when the
  copies have come; a subscriber that lost them too asks again after its timeout (5 s in
  ``contract.feed``), when they are published anew.
* **A budget.** At most ``contract.requests.copy_budget(user)`` copies for a user's
  requests in any 60 s (a sliding window, so a minute never holds more: 2,000 for
  ``display`` and any other user, 12,000 for ``records``). A request whose new copies do
  not fit is refused whole (a part would make the asker's feed take the rest for
  missing). Refusals past the budget are cheap: the first is answered (``budget_error``,
  journaled with the request), and the next ones of that user only counted, until a
  request of the user is served copies again or ``ANSWER_EVERY`` seconds have passed; the core
  journals the count once a minute (``resend_refused``). A flood at any rate thus costs
  one answer a minute and one counting record a minute, besides what it was served.

The copies wait in the MQTT link (``MqttLink.resend``), never in the outbox, and at most
``RESEND_BACKLOG`` of them: a resend asked while more wait is answered with
``BACKLOG_ERROR``. The link publishes the table's own new messages first and copies in
between, one window at a time, so a resend never holds a result back.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from contract.requests import copy_budget
from daemon.outbox import OutboxMessage
from foundation.bucket import TokenBucket

RESEND_RATE: Final = 4.0
"""Resend requests a table serves per second for one user, sustained."""
RESEND_BURST: Final = 8
"""Resend requests a table serves one user at once after a quiet time."""
RESEND_BACKLOG: Final = 8000
"""Copies at most waiting in the link; a resend asked beyond it is refused (busy)."""
BUDGET_WINDOW: Final = 60.0
"""Seconds over which a user's copies are counted against its budget."""
SHARE_WINDOW: Final = 5.0
"""Seconds a copy counts as sent to everyone: asked again within them, it is not
published again. No longer than ``contract.feed``'s timeout (5 s), after which a feed
that lost a copy asks again, and must then get it."""
ANSWER_EVERY: Final = 60.0
"""Seconds at least between two answered budget refusals of one user (the first after a
request served is answered at once)."""
MAX_USERS: Final = 64
"""Users counted apart; more share ``OTHERS``."""
OTHERS: Final = "(others)"
RESENT_PROPERTY: Final = ("resent", "true")
"""The MQTT 5 user property that marks a copy published again (mqtt-api.md 1.3)."""

RATE_ERROR: Final = (
    f"too many resend requests: this table serves at most {RESEND_RATE:g} a second "
    f"({RESEND_BURST} at once) to one user; ask again in a moment"
)
BACKLOG_ERROR: Final = "the table is still publishing earlier resends: ask again in a moment"
NO_LINK_ERROR: Final = "the table is not connected to its broker: ask again once it is online"


def budget_error(user: str, budget: int, asked: int, wait: float) -> str:
    """The answer to a resend past ``user``'s budget: ``asked`` new copies did not fit."""
    return (
        f"resend budget spent: this table publishes at most {budget:,} copies a minute for "
        f"{user}, and {asked:,} more were asked; ask again in {max(1, round(wait))} s"
    )


@dataclass(slots=True)
class CopyBudget:
    """At most ``budget`` copies in any ``window`` seconds: ``fits``, then ``spend``."""

    budget: int
    window: float = BUDGET_WINDOW
    _spent: deque[tuple[float, int]] = field(default_factory=deque)
    _total: int = 0

    def _expire(self, now: float) -> None:
        while self._spent and self._spent[0][0] <= now - self.window:
            self._total -= self._spent.popleft()[1]

    def left(self, now: float) -> int:
        """Copies that may still go out at ``now``."""
        self._expire(now)
        return self.budget - self._total

    def fits(self, copies: int, now: float) -> bool:
        """Whether ``copies`` more stay within the budget at ``now``."""
        return copies <= self.left(now)

    def spend(self, copies: int, now: float) -> None:
        """Count ``copies`` sent at ``now``."""
        if copies > 0:
            self._spent.append((now, copies))
            self._total += copies

    def free_in(self, copies: int, now: float) -> float:
        """Seconds until ``copies`` would fit (0: they do now; beyond the budget, the window)."""
        self._expire(now)
        need = self._total + copies - self.budget
        if need <= 0:
            return 0.0
        for at, count in self._spent:
            need -= count
            if need <= 0:
                return max(0.0, at + self.window - now)
        return self.window  # more than the whole budget: never, said as a window


@dataclass(slots=True)
class _Account:
    rate: TokenBucket
    budget: CopyBudget
    answered_at: float | None = None
    """When a budget refusal of this user was last answered."""
    served_since: bool = True
    """A request of this user was served copies since that answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Serve:
    """A resend to serve: ``publish`` the copies not shared; ``shared`` of the range went
    out in the last ``SHARE_WINDOW`` seconds."""

    publish: list[OutboxMessage]
    shared: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Refuse:
    """A resend refused: answer it with ``error``, or (``answer`` false) only count it."""

    error: str
    answer: bool


class ResendDesk:
    """What each user's resends cost (module docstring). ``clock``: monotonic seconds."""

    def __init__(
        self,
        *,
        rate: float = RESEND_RATE,
        burst: int = RESEND_BURST,
        budget: Callable[[str], int] = copy_budget,
        share_window: float = SHARE_WINDOW,
        max_users: int = MAX_USERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate
        self._burst = burst
        self._budget = budget
        self._share_window = share_window
        self._max_users = max_users
        self.clock = clock
        self._accounts: dict[str, _Account] = {}
        self._sent: dict[int, float] = {}  # seq -> when its copy was queued, oldest first
        self.published = 0
        """Copies handed to the link since the start."""
        self.shared = 0
        """Copies asked for and not published again (sent in the last few seconds)."""

    def account(self, user: str) -> str:
        """The name ``user``'s requests are counted under (``OTHERS`` past ``MAX_USERS``)."""
        if user in self._accounts or len(self._accounts) < self._max_users:
            return user
        return OTHERS

    def _of(self, user: str) -> _Account:
        name = self.account(user)
        account = self._accounts.get(name)
        if account is None:
            account = self._accounts[name] = _Account(
                rate=TokenBucket(self._rate, self._burst),
                budget=CopyBudget(self._budget(name)),
            )
        return account

    def take_request(self, user: str) -> bool:
        """A token of ``user``'s request rate, if there is one (``RATE_ERROR`` if not)."""
        return self._of(user).rate.take(self.clock())

    def plan(self, user: str, found: Iterable[OutboxMessage]) -> Serve | Refuse:
        """What to do with ``user``'s resend of the messages ``found`` in its range."""
        now = self.clock()
        self._forget(now)
        messages = list(found)
        fresh = [m for m in messages if m.seq not in self._sent]
        shared = len(messages) - len(fresh)
        account = self._of(user)
        if account.budget.fits(len(fresh), now):
            return Serve(publish=fresh, shared=shared)
        answer = (
            account.served_since
            or account.answered_at is None
            or now - account.answered_at >= ANSWER_EVERY
        )
        if answer:
            account.answered_at = now
            account.served_since = False
        error = budget_error(
            self.account(user),
            account.budget.budget,
            len(fresh),
            account.budget.free_in(len(fresh), now),
        )
        return Refuse(error=error, answer=answer)

    def served(self, user: str, serve: Serve) -> None:
        """``serve`` went out (its answer journaled): count its copies, share them."""
        now = self.clock()
        account = self._of(user)
        account.budget.spend(len(serve.publish), now)
        if serve.publish:  # the budget moved: a refusal after this is news again
            account.served_since = True
        for message in serve.publish:
            self._sent.pop(message.seq, None)
            self._sent[message.seq] = now
        self.published += len(serve.publish)
        self.shared += serve.shared

    def left(self, user: str) -> int:
        """Copies ``user`` may still be sent in the current window."""
        return self._of(user).budget.left(self.clock())

    def _forget(self, now: float) -> None:
        """Drop the copies older than the share window (dict order is queue order)."""
        while self._sent:
            seq, at = next(iter(self._sent.items()))
            if at > now - self._share_window:
                break
            del self._sent[seq]
