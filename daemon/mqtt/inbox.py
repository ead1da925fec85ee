"""Requests in: what arrives on ``<base>/request/...``, gated, queued, handed to the table.

The session subscribes ``<base>/request/+`` and, for the requests read-only users send at
their own level (mqtt-api.md 1.4, ``contract.requests.USER_LEVEL``), each
``<base>/request/<name>/+`` (``REQUEST_LEVELS``), QoS 1, before it says ``online``.

Requests received are never dropped by a connection loss: they go into a queue that a
dispatcher task, living across connections, hands to ``on_request`` one at a time, in
order, yielding to the loop after each (the drain and the keepalive never wait behind a
queue of requests). ``on_request`` answers them through the journal (``response/<name>``).

Before a request is queued, or even read, the table's gate (``daemon.intake``) decides
whether it is served: past the rate it is refused unread, one a second handed on to be
answered busy, the rest only counted (a flood costs counts, not records). A request at a
user level (``request/resend/<user>``) goes through that user's own gate instead
(``user_gate``: the resend rate, ``daemon.resend``, one busy answer a minute), so a flood
from one user's password neither reaches the table's journal nor takes the terminal's
decisions' turn. A flood the gates would still have to read one by one (``SHED_AT``
refused in a second on one subscription) is left unread: that subscription is
unsubscribed for ``SHED_FOR`` s, the broker drops what nobody reads, and the table's
results stop waiting behind a flood's packets (5,000 resend requests a second put a roll's
p99 500 ms above quiet; left unread, 100 ms); the other subscription is read as ever, so
a flood of resends never keeps a stickperson's decision from the table.

A *retained* request is never acted on: it would be handed to the table again at every
reconnect. Requests are subscribed with retain-as-published (so a request published with
retain keeps its flag even on live delivery) and no-local (the link's own clearing
publish does not come back). A retained request is answered with an error
(``daemon.requests.RETAINED_ERROR``), journaled as refused, and cleared from the broker
(an empty retained publish).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Final

import aiomqtt
import structlog
from paho.mqtt.subscribeoptions import SubscribeOptions

from contract import topics
from contract.requests import USER_LEVEL
from daemon.intake import SHED_AT, SHED_FOR, Flood, RequestGate, Verdict
from daemon.requests import Incoming
from daemon.resend import MAX_USERS, OTHERS, RESEND_BURST, RESEND_RATE

log = structlog.get_logger("lammer.mqtt")

RequestHandler = Callable[[Incoming], Awaitable[None]]
"""``on_request(incoming)``: a request received under the base topic, bounded."""

REQUEST_QUEUE: Final = 256
"""Requests waiting for the table at most; more are dropped and counted (a flood cannot
grow the daemon's memory)."""

BUSY_LOG_S: Final = 60.0
"""Seconds between two log lines about requests refused for the rate."""

USER_BUSY_ANSWERS: Final = 1 / 60
"""Busy answers a second at most for one user's requests at the user level: one a minute
(a read-only user's flood costs a record a minute; its feed asks again by itself)."""

REQUEST_LEVELS: Final = (
    topics.request("+"),
    *(f"{topics.request(name)}/+" for name in sorted(USER_LEVEL)),
)
"""The request subscriptions under the base topic: the bare ``request/<name>`` (the
terminal's), then each request read-only users send at their own name (mqtt-api.md 1.4)."""

REQUEST_OPTIONS: Final = SubscribeOptions(qos=1, noLocal=True, retainAsPublished=True)
"""How the requests are subscribed: a retained request keeps its retain flag on live
delivery (so it is seen for what it is), and the link's own clearing publish does not
come back to it."""


class Inbox:
    """The requests of one table, across connections: gated when received, queued, and
    handed on by ``dispatch``; the subscriptions a flood leaves unread, and the retained
    requests to clear from the broker, tended on the live connection (``tend``)."""

    def __init__(
        self,
        *,
        base: str,
        on_request: RequestHandler,
        wake: asyncio.Event,
        timeout: float,
        intake: RequestGate | None = None,
        shed_at: int | None = SHED_AT,
        shed_for: float = SHED_FOR,
    ) -> None:
        self._base = base
        self._on_request = on_request
        self._wake = wake
        self._timeout = timeout
        self._requests: asyncio.Queue[Incoming] = asyncio.Queue(REQUEST_QUEUE)
        self.requests_overflowed = 0
        """Requests dropped because ``REQUEST_QUEUE`` were already waiting."""
        self.intake = intake if intake is not None else RequestGate()
        """The rate the table serves requests at (``daemon.intake``); its counts."""
        self.user_gates: dict[str, RequestGate] = {}
        """Per user, the gate of its requests at the user level (``user_gate``)."""
        self._shed_at = shed_at
        self._shed_for = shed_for
        self._floods: dict[str, Flood] = {}  # request filter -> its refusals' meter
        self._shed_until: dict[str, float] = {}  # request filter not read until then
        self.subscribed: set[str] = set()
        """The request filters subscribed on the live connection."""
        self.sheds = 0
        """Times a request subscription was left unread for a flood (``daemon.intake``)."""
        self.to_clear: set[str] = set()
        """Retained requests (full topics) to clear from the broker."""
        self._busy_logged: float | None = None
        self._busy_since_log = 0

    # -- on a connection -----------------------------------------------------------------

    async def subscribe(self, client: aiomqtt.Client) -> None:
        """Subscribe the requests on a new connection, but for a subscription a flood
        still leaves unread (its pause outlives a drop)."""
        self.subscribed = set()
        async with asyncio.timeout(self._timeout):
            for level in REQUEST_LEVELS:
                if level not in self._shed_until:
                    await client.subscribe(f"{self._base}/{level}", options=REQUEST_OPTIONS)
                    self.subscribed.add(level)

    async def tend(self, client: aiomqtt.Client) -> None:
        """Leave a flooded subscription or read one again, and clear retained requests."""
        if self._shed_due():
            await self._shed(client)
        if self.to_clear:
            await self._clear_requests(client)

    def due_in(self) -> float | None:
        """Seconds until a subscription left unread is to be read again; None: none is."""
        if not self._shed_until:
            return None
        return max(0.0, min(self._shed_until.values()) - time.monotonic())

    # -- received ------------------------------------------------------------------------

    def received(self, topic: str, message: aiomqtt.Message) -> None:
        """A request received on ``topic`` (``<base>/request/...``): gated, then queued
        for ``dispatch``. Called from the client's callback, before the PUBACK goes back."""
        # request/<name>, or request/<name>/<user> (subscribed for USER_LEVEL names only).
        rest = topics.request_name(topic[len(self._base) + 1 :])
        if not topic.startswith(f"{self._base}/") or rest is None:  # pragma: no cover
            return  # only the requests are ours
        name, level, user_name = rest.partition("/")
        user = user_name if level else None
        payload = message.payload
        # paho gives bytes; aiomqtt may have decoded a number: keep what came. Bounded at
        # once: a 100 MB request is kept as its size, hash and first bytes, never queued.
        data = bytes(payload) if isinstance(payload, bytes | bytearray) else str(payload).encode()
        if message.retain and not self._retained(topic, name, data):
            return
        # Over the rate, a request is refused before it is read (daemon.intake): a flood
        # costs a count, not a journal record and an answer each.
        gate = self.intake if user is None else self.user_gate(user)
        verdict = gate.check(time.monotonic())
        if verdict is not Verdict.ADMIT:
            self._note_busy(gate, user)
            if verdict is Verdict.COUNT:
                flooded = REQUEST_LEVELS[0] if user is None else f"{topics.request(name)}/+"
                self._note_flood(flooded, user)
                return
        incoming = Incoming.receive(name, data, retained=message.retain, user=user)
        if verdict is Verdict.ANSWER_BUSY:
            incoming = replace(incoming, busy=1 + gate.take_unanswered())
        self._queue(incoming)

    def _retained(self, topic: str, name: str, data: bytes) -> bool:
        """A request published with retain (retain-as-published): to clear from the broker
        and answer with an error; False for an empty one (somebody clearing it)."""
        if not data:
            return False
        log.warning(
            "retained request refused and cleared from the broker (a request is "
            "published without retain)",
            name=name[:80],
            size=len(data),
        )
        self.to_clear.add(topic)
        self._wake.set()
        return True

    def _queue(self, incoming: Incoming) -> None:
        try:
            self._requests.put_nowait(incoming)
        except asyncio.QueueFull:
            self.requests_overflowed += 1
            if self.requests_overflowed == 1 or self.requests_overflowed % 1000 == 0:
                log.warning(
                    "mqtt request queue full: request dropped",
                    name=incoming.name,
                    dropped=self.requests_overflowed,
                )

    def user_gate(self, user: str) -> RequestGate:
        """The gate of ``user``'s requests at the user level: ``RESEND_RATE`` a second,
        ``RESEND_BURST`` at once (what the core serves a user), one busy answer a minute.
        Past ``MAX_USERS`` users (a broker without an ACL) the rest share one gate."""
        key = user if user in self.user_gates or len(self.user_gates) < MAX_USERS else OTHERS
        gate = self.user_gates.get(key)
        if gate is None:
            gate = self.user_gates[key] = RequestGate(
                rate=RESEND_RATE, burst=RESEND_BURST, answers=USER_BUSY_ANSWERS
            )
        return gate

    # -- floods --------------------------------------------------------------------------

    def _note_flood(self, level: str, user: str | None) -> None:
        """A request of ``level`` (a subscription) refused unread: at ``shed_at`` a second
        (``SHED_AT``; None: never) the link stops reading that subscription for
        ``shed_for`` s (``SHED_FOR``, ``daemon.intake``):
        the broker drops what nobody reads, and the table's results no longer wait behind
        a flood's packets. The terminal's requests and the readers' resends are separate
        subscriptions: a flood of resends never stops a stickperson's decision."""
        if self._shed_at is None or level in self._shed_until:
            return  # already left unread; what was on its way still comes
        now = time.monotonic()
        if not self._floods.setdefault(level, Flood(self._shed_at)).refused(now):
            return
        self._shed_until[level] = now + self._shed_for
        self.sheds += 1
        log.warning(
            "mqtt requests left unread for a while: a flood",
            topic=f"{self._base}/{level}",
            user=user,
            seconds=self._shed_for,
            sheds=self.sheds,
        )
        self._wake.set()

    def _shed_due(self) -> bool:
        """A flooded subscription to leave, or one to read again."""
        now = time.monotonic()
        return any(
            level in self.subscribed or until <= now for level, until in self._shed_until.items()
        )

    async def _shed(self, client: aiomqtt.Client) -> None:
        """Unsubscribe what a flood came on; subscribe again what has waited its time."""
        now = time.monotonic()
        for level, until in sorted(self._shed_until.items()):
            topic = f"{self._base}/{level}"
            if until <= now:
                if level not in self.subscribed:
                    async with asyncio.timeout(self._timeout):
                        await client.subscribe(topic, options=REQUEST_OPTIONS)
                    self.subscribed.add(level)
                del self._shed_until[level]
                log.info("mqtt reading requests again", topic=topic)
            elif level in self.subscribed:
                async with asyncio.timeout(self._timeout):
                    await client.unsubscribe(topic)
                self.subscribed.discard(level)

    def _note_busy(self, gate: RequestGate, user: str | None) -> None:
        """Log refusals for the rate: the first of a flood at once, then one line a minute
        at most with the count (a flood of 10^4 requests is a few lines)."""
        self._busy_since_log += 1
        now = time.monotonic()
        if self._busy_logged is not None and now - self._busy_logged < BUSY_LOG_S:
            return
        log.warning(
            "mqtt requests refused: more arrive than the table serves",
            refused=self._busy_since_log,
            total=gate.refused,
            rate=gate.rate,
            user=user,
        )
        self._busy_logged = now
        self._busy_since_log = 0

    async def _clear_requests(self, client: aiomqtt.Client) -> None:
        """Clear retained requests from the broker (an empty retained publish)."""
        while self.to_clear:
            topic = min(self.to_clear)
            async with asyncio.timeout(self._timeout):
                await client.publish(topic, b"", qos=1, retain=True)
            self.to_clear.discard(topic)
            log.warning("cleared a retained request from the broker", topic=topic)

    # -- handed on -----------------------------------------------------------------------

    async def dispatch(self) -> None:
        """Hand the requests to ``on_request``, one at a time, in order; never returns."""
        while True:
            incoming = await self._requests.get()
            try:
                await self._on_request(incoming)
            except Exception:
                # A handler bug must not take the link down; the request is logged.
                log.exception("mqtt request handler failed", name=incoming.name, size=incoming.size)
            finally:
                self._requests.task_done()
            # Queue.get() does not yield while requests wait: without this, a queue of them
            # is served in one stretch and the drain, the keepalive and the devices wait.
            await asyncio.sleep(0)

    async def handed_on(self, within: float) -> None:
        """Wait, at most ``within`` seconds, until every request received is handed on
        (nothing received is lost at a stop; a stuck handler cannot hold it)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._requests.join()
