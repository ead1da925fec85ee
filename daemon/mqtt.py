"""The link to the MQTT broker: publish the journal's outbox in order, answer requests.

``MqttLink.run()`` keeps one connection to the broker for as long as the daemon runs
(mqtt-api.md):

1. connect with a stable client id and the will ``offline`` (retained, QoS 1) on
   ``<base>/availability``; TCP_NODELAY on the socket (with Nagle on, about 0.5% of
   messages stall 40 ms);
2. subscribe ``<base>/request/+`` and, for the requests read-only users send at their own
   level (mqtt-api.md 1.4, ``contract.requests.USER_LEVEL``), ``<base>/request/<name>/+``
   for ``authenticate`` and ``resend``
   (QoS 1), before saying ``online``, so a request sent the moment a terminal sees
   ``online`` finds the table listening;
3. publish ``online`` (retained);
4. republish every retained message of ``Outbox.retained()`` byte for byte, so a broker
   that lost them (restarted without persistence) holds the current state again at once,
   with the original ``seq`` and ``ts`` (mqtt-api.md, Conventions);
5. drain ``Outbox.pending()`` in ``seq`` order, QoS 1, and ``mark_published`` each message
   only once the broker acknowledged it (PUBACK); ``notify()`` wakes the drain when the
   journal queued more. A message acknowledged that the journal cannot mark (a full disk)
   is kept in memory as published and never sent again; the marks are tried again, and
   nothing waits behind them (``availability`` and newer messages go out at once), and
   ``on_journal_error`` tells the daemon (``JOURNAL_FAULT``).

When the broker is unreachable or the connection drops, the link logs the outage once
(and its end), and reconnects after a jittered, capped, exponential backoff
(``foundation.backoff``, the policy every link of lammer shares: 0.5 s, capped at 5 s, by
default, so displays are stale at most about 5 s after the broker returns). Nothing is
lost: unacknowledged messages stay pending in the journal and go out, in order, on the
next connection. Within one connection each message is published once; across a
reconnect a message whose PUBACK was lost is published again (QoS 1 is at least once),
and a display drops the ``seq`` it has already seen (mqtt-api.md).

MQTT 5 (the daemon only ever connects to its own controller's Mosquitto; the floor's
nats-server, which speaks 3.1.1 only, is reached through Mosquitto's bridge). Sessions:
the link connects with **clean start** and no session expiry (MQTT 5's clean session): a
request published while the daemon is not connected is not queued for it by the broker,
and gets no response; the pit terminal sees ``availability`` ``offline`` and sends it
again once ``online``. A stickperson's decision is made against the table as it is now;
a decision delivered minutes late could void a roll nobody means to void any more. The
will (``offline``, retained, QoS 1, no will delay) is the same as under 3.1.1.

A *retained* request is never acted on (issue 20): it would be handed to the table again
at every reconnect. Requests are subscribed with retain-as-published (so a request
published with retain keeps its flag even on live delivery) and no-local (the link's own
clearing publish does not come back). A retained request is answered with an error
(``daemon.requests.RETAINED_ERROR``), journaled as refused, and cleared from the broker
(an empty retained publish); ``survey`` clears one left from before the start and says
so.

``request/resend`` (mqtt-api.md 1.3, ``daemon.resend``): the core hands the copies to
``resend()``; the drain publishes them never retained, with the user property
``resent`` = ``true``, one window at a time *after* each batch of the table's own pending
messages, so a resend never holds a result back.

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
refused in a second on one subscription) is left unread: the link unsubscribes that
subscription for ``SHED_FOR`` s, the broker drops what nobody reads, and the table's
results stop waiting behind a flood's packets (issue 28: 5,000 resend requests a second
put a roll's p99 500 ms above quiet; left unread, 100 ms); the other subscription is
read as ever, so a flood of resends never keeps a stickperson's decision from the table.

The floor (docs/floor/cluster.md): when this controller's Mosquitto bridges its tables
to a floor cluster, the bridge says ``0`` on ``lammer-floor/bridge/<controller>`` the moment
its connection drops (Mosquitto's notification, also published locally). A floor node may
acknowledge a QoS 1 message and die before every subscriber has it. A floor subscriber
fills such a hole itself (``contract.feed``: the next message's ``prev_seq`` shows it, and
``request/resend`` brings it back), except at the very end of the stream: a lost last
message is seen only when the table next publishes. That is all ``floor_resend`` still
does: with ``floor_resend`` > 0 the link subscribes to that status and, at each ``0``,
publishes again the newest message it had acknowledged in the last ``floor_resend``
seconds (one copy per drop, not the window: the copies of the whole window were 55-110 per
drop, nearly all duplicates): same topic, same bytes (same ``seq``), never retained (the
broker's retained state must not go back to an older one), with the user property
``resent`` = ``true`` of a ``request/resend`` copy (mqtt-api.md 1.3: a copy is marked; the
mark does not cross the 3.1.1 bridge, and floor subscribers go by ``seq``). It reaches
the floor when the bridge returns, so every subscriber learns the table's latest ``seq``
and asks for the rest by its ``prev_seq``. The copy goes out before any message queued
after the ``0``.

Stopping: cancelling ``run()`` (SIGTERM through the daemon's TaskGroup) or ``close()``
publishes ``offline`` (retained) before a clean DISCONNECT, since the broker sends the
will only for an unclean loss; so does any error that ends a connection other than its
loss (a fault of the journal, a bug), so availability never stays ``online`` for a daemon
that stopped. A message the client refuses (a topic or a payload MQTT cannot carry) is
set aside in the journal with the reason (``Outbox.set_aside``) and the queue goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Final, Protocol

import aiomqtt
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from contract.floor import BRIDGE_STATUS_ROOT
from contract.follow import LOGIN_TRIES, login_refused
from contract.requests import USER_LEVEL
from contract.session import UNBOUNDED, session
from contract.tasks import cancel_and_wait
from daemon.errors import BrokerLoginRefused, JournalError, JournalValueError
from daemon.intake import SHED_AT, SHED_FOR, Flood, RequestGate, Verdict
from daemon.outbox import Outbox, OutboxMessage
from daemon.requests import Incoming
from daemon.resend import MAX_USERS, OTHERS, RESEND_BURST, RESEND_RATE, RESENT_PROPERTY
from foundation.backoff import Backoff

log = structlog.get_logger("lammer.mqtt")

ONLINE: Final = b"online"
OFFLINE: Final = b"offline"

RequestHandler = Callable[[Incoming], Awaitable[None]]
"""``on_request(incoming)``: a request received on ``<base>/request/<name>``, bounded."""

REQUEST_QUEUE: Final = 256
"""Requests waiting for the table at most; more are dropped and counted (a flood cannot
grow the daemon's memory)."""


class TlsSettings(Protocol):
    """TLS to the broker (``daemon.config.TlsSection`` fits): the CA that signed the
    broker's certificate (None: the system store), and a client certificate if it asks."""

    @property
    def ca_file(self) -> Path | None: ...
    @property
    def cert_file(self) -> Path | None: ...
    @property
    def key_file(self) -> Path | None: ...


class MqttLink:
    """One table's connection to the broker. See the module docstring for what it does.

    ``base_topic`` is ``<prefix>/<table_id>``; topics of ``OutboxMessage`` are relative to
    it. ``window`` is how many QoS 1 publishes may await their PUBACK at once (order is
    kept: they are written in ``seq`` order on one connection and marked in that order).
    ``timeout`` bounds a connect and each acknowledgement; a PUBACK that takes longer
    means the connection is dead, and it is dropped and made again.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        client_id: str,
        base_topic: str,
        outbox: Outbox,
        on_request: RequestHandler,
        username: str | None = None,
        password: str | None = None,
        tls: TlsSettings | None = None,
        keepalive: int = 30,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        window: int = 20,
        timeout: float = 10.0,
        close_timeout: float = 2.0,
        floor_resend: float = 0.0,
        intake: RequestGate | None = None,
        shed_at: int | None = SHED_AT,
        shed_for: float = SHED_FOR,
        on_journal_error: Callable[[], None] | None = None,
        on_login: Callable[[bool], None] | None = None,
        on_published: Callable[[list[OutboxMessage]], None] | None = None,
    ) -> None:
        if not base_topic or any(ch in base_topic for ch in "+#\0") or base_topic.endswith("/"):
            raise ValueError(f"not a usable base topic: {base_topic!r}")
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        if not 0 <= floor_resend <= 3600:
            raise ValueError(f"floor_resend must be 0 to 3600 seconds, got {floor_resend}")
        self._host = host
        self._port = port
        self._client_id = client_id
        self._base = base_topic
        self._outbox = outbox
        self._on_request = on_request
        self._username = username
        self._password = password
        self._tls = tls
        self._keepalive = keepalive
        self._backoff = backoff or Backoff()
        self._rng = rng or random.Random()  # noqa: S311  reconnect jitter, not a secret
        self._window = window
        self._timeout = timeout
        self._close_timeout = close_timeout
        self._wake = asyncio.Event()
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
        self._subscribed: set[str] = set()  # request filters subscribed on this connection
        self.sheds = 0
        """Times a request subscription was left unread for a flood (``daemon.intake``)."""
        self._on_journal_error = on_journal_error
        self._on_login = on_login
        self._on_published = on_published
        """Told of the outbox messages the broker acknowledged, in seq order (the metrics)."""
        """Told ``True`` when the broker refuses the login after the start (the table raises
        ``MQTT_LOGIN_REFUSED``), ``False`` when it takes it again."""
        self._login_refused = False
        # Acknowledged by the broker, not yet marked in the journal (it refused): never
        # published again, marked as soon as the journal writes.
        self._unmarked: set[int] = set()
        self._unmarkable: set[int] = set()  # published, refused by the outbox as unknown
        self._busy_logged: float | None = None
        self._busy_since_log = 0
        self._client: aiomqtt.Client | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._outage_since: float | None = None
        self._was_up = False
        self._outage_attempts = 0
        self._published = 0
        self._available = True  # what availability should say (set_available)
        self._said: bytes | None = None  # what it said last on this connection
        self._floor_resend = floor_resend
        # What the broker acknowledged lately, (monotonic time, message), oldest first.
        self._recent: deque[tuple[float, OutboxMessage]] = deque(maxlen=RESEND_MAX)
        self._resend: list[OutboxMessage] = []  # copies to publish before anything newer
        self._bridge_refused = False
        self.resent = 0
        """Messages published again because the floor bridge dropped (``floor_resend``)."""
        self._copies: deque[OutboxMessage] = deque()  # request/resend copies, in order
        self._clear: set[str] = set()  # retained requests to clear from the broker
        self.copies_sent = 0
        """Copies published for ``request/resend``."""

    # -- public --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while a connection to the broker is up (for the daemon's health check)."""
        return self._client is not None

    @property
    def availability_topic(self) -> str:
        """``<base>/availability``: ``online``, or ``offline`` (also the will message)."""
        return f"{self._base}/availability"

    @property
    def tcp_nodelay(self) -> bool | None:
        """Whether Nagle is off on the live connection's socket (None when not connected)."""
        client = self._client
        sock = None if client is None else client._client.socket()
        if not isinstance(sock, socket.socket):
            return None
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    @property
    def resend_backlog(self) -> int:
        """``request/resend`` copies queued and not yet published."""
        return len(self._copies)

    def resend(self, messages: list[OutboxMessage]) -> None:
        """Publish ``messages`` again (``request/resend``): same topics and bytes, never
        retained, marked with the user property ``resent``, after the copies queued
        before them, and never ahead of the table's own pending messages."""
        self._copies.extend(replace(m, retained=False) for m in messages)
        self._wake.set()

    @property
    def published(self) -> int:
        """How many outbox messages this link has had acknowledged since it started."""
        return self._published

    @property
    def available(self) -> bool:
        """What ``availability`` says: True for ``online`` (``set_available``)."""
        return self._available

    def notify(self) -> None:
        """New messages are in the outbox: wake the drain (sync; call from the loop)."""
        self._wake.set()

    def set_available(self, available: bool) -> None:
        """Say ``online`` or ``offline`` on ``availability`` from now on (also after every
        reconnect): ``offline`` while the daemon runs but cannot keep a record (its journal
        refuses to write), and ``online`` again after."""
        self._available = available
        self._wake.set()

    @property
    def _availability(self) -> bytes:
        return ONLINE if self._available else OFFLINE

    async def run(self) -> None:
        """Keep the link up until cancelled or ``close()``d; never returns otherwise.

        Cancellation (SIGTERM) and ``close()`` both publish ``offline`` and disconnect
        cleanly before ``run()`` ends. Errors of the outbox (the journal) are not the
        link's to hide: they propagate.
        """
        if self._worker is not None:
            raise RuntimeError("MqttLink.run() is already running")
        worker = asyncio.create_task(self._run_forever(), name=f"mqtt {self._client_id}")
        self._worker = worker
        try:
            await worker
        except asyncio.CancelledError:
            # Either we were cancelled (the await cancelled the worker, and it has
            # finished by now) or close() cancelled the worker: a graceful stop.
            current = asyncio.current_task()
            if self._closing and (current is None or current.cancelling() == 0):
                return
            raise
        finally:
            self._worker = None

    async def close(self) -> None:
        """Publish ``offline``, disconnect, and let ``run()`` return. Idempotent."""
        self._closing = True
        worker = self._worker
        if worker is not None and not worker.done():
            # Asked again until it ends (one cancellation can be lost: contract.tasks), but
            # only once its own stop (requests handed on, offline published, each bounded
            # by close_timeout) would have ended: a second cancel would cut that short.
            graceful = 2 * self._close_timeout + 1
            await cancel_and_wait([worker], within=3 * graceful, every=graceful)

    # -- connection loop -----------------------------------------------------------------

    async def _run_forever(self) -> None:
        dispatcher = asyncio.create_task(self._dispatch(), name="mqtt requests")
        attempt = 0
        try:
            while True:
                started = time.monotonic()
                try:
                    await self._session()
                except (aiomqtt.MqttError, OSError) as exc:
                    self._note_outage(exc)
                # A connection that stayed up longer than the longest delay was healthy:
                # start the backoff again. One that drops at once (another daemon with
                # our client id, a broker refusing us) backs off further each time.
                if time.monotonic() - started > self._backoff.maximum:
                    attempt = 0
                await asyncio.sleep(self._backoff.delay(attempt, self._rng))
                attempt += 1
        finally:
            # Requests already received are handed on before the link goes away
            # (nothing received is lost); bounded, so a stuck handler cannot hold a stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._close_timeout):
                    await self._requests.join()
            await cancel_and_wait([dispatcher], within=self._close_timeout)

    def _tls_params(self) -> aiomqtt.TLSParameters | None:
        if self._tls is None:
            return None
        return aiomqtt.TLSParameters(
            ca_certs=str(self._tls.ca_file) if self._tls.ca_file else None,
            certfile=str(self._tls.cert_file) if self._tls.cert_file else None,
            keyfile=str(self._tls.key_file) if self._tls.key_file else None,
        )

    def _new_client(self) -> aiomqtt.Client:
        tls = self._tls_params()
        client = aiomqtt.Client(
            self._host,
            self._port,
            identifier=self._client_id,
            username=self._username,
            password=self._password,
            will=aiomqtt.Will(self.availability_topic, OFFLINE, qos=1, retain=True),
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=True,  # and no session expiry: see "Sessions" in the docstring
            keepalive=self._keepalive,
            timeout=UNBOUNDED,  # every wait is bounded here instead (see UNBOUNDED)
            tls_params=tls,
            max_inflight_messages=self._window,
            queue_type=self._forwarding_queue(),
            # Disable Nagle: a small publish must not wait for the last ACK.
            socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        )
        # Up to a full window awaits its PUBACK by design; do not warn about it.
        client.pending_calls_threshold = self._window + 5
        return client

    async def survey(
        self, keep: frozenset[str], *, quiet: float = 0.15, within: float = 3.0
    ) -> int | None:
        """``_survey`` (below), tried again when the broker refuses the login: after
        ``LOGIN_TRIES`` refusals in a row, ``BrokerLoginRefused`` (a wrong user name or
        password file stops the start with one sentence instead of retrying forever)."""
        for attempt in range(LOGIN_TRIES):
            try:
                return await self._survey(keep, quiet=quiet, within=within)
            except _LoginRefusedOnce:
                log.warning(
                    "mqtt login refused at start",
                    host=self._host,
                    port=self._port,
                    user=self._username,
                    attempt=attempt + 1,
                    of=LOGIN_TRIES,
                )
                if attempt + 1 < LOGIN_TRIES:
                    await asyncio.sleep(self._backoff.delay(attempt, self._rng))
        raise BrokerLoginRefused(f"{self._host}:{self._port}", self._username)

    async def _survey(
        self, keep: frozenset[str], *, quiet: float = 0.15, within: float = 3.0
    ) -> int | None:
        """Before the table starts: read what the broker retains under the base topic.

        Returns the highest ``seq`` a retained payload carries (so ``seq`` goes on above
        it: a table id used before, with another journal; mqtt-api.md "never reused"), and
        clears (an empty retained payload) every retained topic not in ``keep`` (what
        another game of the same table id left). None when the broker cannot be reached
        within the timeout: the table starts all the same.
        """
        client = aiomqtt.Client(
            self._host,
            self._port,
            identifier=f"{self._client_id}-survey",
            username=self._username,
            password=self._password,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=True,
            timeout=UNBOUNDED,
            tls_params=self._tls_params(),
        )
        found: dict[str, bytes] = {}
        try:
            async with self._connected(client, within=within):
                async with asyncio.timeout(within):
                    await client.subscribe(f"{self._base}/#", qos=1)
                    while True:
                        try:
                            async with asyncio.timeout(quiet):
                                message = await anext(client.messages)
                        except TimeoutError:
                            break  # the retained ones come at once after the subscription
                        if message.retain:
                            payload = message.payload
                            data = payload if isinstance(payload, bytes) else str(payload).encode()
                            found[message.topic.value[len(self._base) + 1 :]] = data
                    for topic in sorted(set(found) - keep):
                        if found[topic]:
                            await client.publish(f"{self._base}/{topic}", b"", qos=1, retain=True)
                            if topic.startswith("request/"):
                                log.warning(
                                    "cleared a retained request (never acted on: a request "
                                    "is published without retain)",
                                    topic=topic,
                                    size=len(found[topic]),
                                )
                            else:
                                log.warning("cleared a retained topic of another game", topic=topic)
        except (aiomqtt.MqttError, OSError) as exc:
            if login_refused(exc):
                raise _LoginRefusedOnce from exc
            log.warning("mqtt: could not read the retained state at start", error=str(exc))
            return None
        return max((_seq(data) for data in found.values()), default=0)

    async def _session(self) -> None:
        client = self._new_client()
        async with self._connected(client):
            self._client = client
            self._note_connected()
            try:
                # Subscribed before saying online: a terminal that sends a request the
                # moment it sees online must find the table listening.
                self._subscribed = set()
                async with asyncio.timeout(self._timeout):
                    for level in REQUEST_LEVELS:
                        if level not in self._shed_until:  # a flood's pause outlives a drop
                            await client.subscribe(f"{self._base}/{level}", options=REQUEST_OPTIONS)
                            self._subscribed.add(level)
                await self._say_availability(client)
                # The retained state, as stored (original seq and ts), before anything
                # newer: after this, pending messages bring it up to date in order.
                await self._publish_all(client, self._outbox.retained(), mark=False)
                if self._floor_resend:
                    await self._follow_bridge(client)
                await self._serve(client)
            except (aiomqtt.MqttError, OSError):
                raise  # the connection is gone: the broker publishes the will (offline)
            except BaseException:
                # Anything else ends with a clean DISCONNECT, which suppresses the will: a
                # stop, or a fault that ends the daemon (the journal, a bug). Displays must
                # not keep seeing online, so say offline first.
                await self._say_offline(client)
                raise
            finally:
                self._client = None

    def _connected(
        self, client: aiomqtt.Client, *, within: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[aiomqtt.Client]:
        """``async with client``, each way bounded (``session``): a broker that does not
        answer is an outage, not a hang."""
        return session(
            client,
            within=self._timeout if within is None else within,
            close_within=self._close_timeout,
            on_close_error=_log_close_error,
        )

    async def _say_offline(self, client: aiomqtt.Client) -> None:
        # A clean DISCONNECT does not fire the will: say offline ourselves.
        try:
            async with asyncio.timeout(self._close_timeout):
                await client.publish(self.availability_topic, OFFLINE, qos=1, retain=True)
        except (aiomqtt.MqttError, OSError, TimeoutError) as exc:
            log.warning("mqtt could not publish offline before disconnecting", error=str(exc))

    async def _serve(self, client: aiomqtt.Client) -> None:
        # Both run until the connection fails; the watcher notices a dropped connection
        # even while the drain waits for a PUBACK that will never come.
        listen = asyncio.create_task(self._watch(client), name="mqtt watch")
        drain = asyncio.create_task(self._drain(client), name="mqtt drain")
        try:
            done, _ = await asyncio.wait({listen, drain}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel_all([listen, drain])
        for task in done:
            task.result()  # raises the error that ended the connection
        raise aiomqtt.MqttError("the connection ended")  # pragma: no cover

    # -- publishing ----------------------------------------------------------------------

    async def _say_availability(self, client: aiomqtt.Client) -> None:
        said = self._availability
        async with asyncio.timeout(self._timeout):
            await client.publish(self.availability_topic, said, qos=1, retain=True)
        self._said = said

    async def _drain(self, client: aiomqtt.Client) -> None:
        while True:
            self._wake.clear()  # before reading: a notify() after this is not missed
            if self._said != self._availability:
                await self._say_availability(client)
            if self._shed_due():
                await self._shed(client)
            if self._clear:
                await self._clear_requests(client)
            if self._resend:
                await self._publish_again(client)
                continue
            if self._unmarked:
                self._mark_unmarked()  # what the journal refused before, tried again
            skip = self._unmarked | self._unmarkable
            batch = [
                m for m in self._outbox.pending(self._window + len(skip)) if m.seq not in skip
            ][: self._window]
            if not batch:
                if self._copies:
                    await self._publish_copies(client)
                    continue
                await self._idle()
                continue
            await self._publish_all(client, batch, mark=True)
            if self._unmarked:
                # The journal refuses to mark them (a full disk): the broker has them, so
                # they are never sent again and are marked once the journal writes. Nothing
                # waits behind this: availability and what the journal still queues go out
                # at once (issue 20: offline came 5 s late, then every roll delivered in
                # that time was sent again).
                log.warning(
                    "mqtt: the journal cannot mark messages published",
                    waiting=len(self._unmarked),
                )
                if self._on_journal_error is not None:
                    self._on_journal_error()
            if self._copies:
                await self._publish_copies(client)  # one window between batches of results

    async def _publish_all(
        self,
        client: aiomqtt.Client,
        messages: list[OutboxMessage],
        *,
        mark: bool,
        properties: Properties | None = None,
    ) -> None:
        for start in range(0, len(messages), self._window):
            chunk = messages[start : start + self._window]
            # Tasks start in creation order, and each hands its packet to paho at once,
            # so the packets go out in seq order; PUBACKs are awaited in that order too.
            tasks = [
                asyncio.create_task(
                    client.publish(
                        f"{self._base}/{m.topic}",
                        m.payload,
                        qos=1,
                        retain=m.retained,
                        properties=properties,
                    )
                )
                for m in chunk
            ]
            acked: list[int] = []
            try:
                async with asyncio.timeout(self._timeout) as window:
                    for message, task in zip(chunk, tasks, strict=True):
                        try:
                            await task
                        except (ValueError, TypeError) as exc:
                            # The client refuses this message (a topic or payload MQTT cannot
                            # carry): no retry can send it, so it must not hold the queue.
                            self._set_aside(message, exc, mark=mark)
                            continue
                        acked.append(message.seq)
                        # Each PUBACK may take the whole timeout, not the chunk.
                        window.reschedule(asyncio.get_running_loop().time() + self._timeout)
            finally:
                # What the broker acknowledged is marked (one transaction), also when the
                # connection dropped behind it.
                if mark and acked:
                    self._published += len(acked)
                    if self._on_published is not None:
                        done_seqs = set(acked)
                        self._on_published([m for m in chunk if m.seq in done_seqs])
                    self._unmarked.update(acked)
                    self._mark_unmarked()
                    if self._floor_resend:
                        now = time.monotonic()
                        done = set(acked)
                        self._recent.extend((now, m) for m in chunk if m.seq in done)
                await _cancel_all(tasks)

    def _mark_unmarked(self) -> bool:
        """Mark what the broker acknowledged and the journal has not recorded yet; False
        while the journal refuses."""
        try:
            self._outbox.mark_published(*sorted(self._unmarked))
        except JournalValueError as exc:
            # A seq the outbox does not hold (a bug, never a full disk): it can never be
            # marked, and waiting on it would take the table offline for nothing. The
            # others are marked one by one.
            log.error("mqtt: a message published cannot be marked", error=str(exc))
            for seq in sorted(self._unmarked):
                try:
                    self._outbox.mark_published(seq)
                except JournalValueError:
                    self._unmarked.discard(seq)
                    self._unmarkable.add(seq)  # published: never again
                except JournalError:
                    return False
                else:
                    self._unmarked.discard(seq)
            return True
        except JournalError:
            return False
        self._unmarked.clear()
        return True

    async def _idle(self) -> None:
        """Nothing to publish: wait for something new, or for what is due."""
        if self._unmarked:  # try the marks again later; wake for anything new
            await self._wait_wake(self._backoff.maximum)
        elif self._shed_until:  # a flooded subscription to read again
            await self._wait_wake(max(0.0, min(self._shed_until.values()) - time.monotonic()))
        else:
            await self._wake.wait()

    async def _wait_wake(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    # -- the floor bridge ----------------------------------------------------------------

    async def _follow_bridge(self, client: aiomqtt.Client) -> None:
        """Subscribe to the floor bridge's status. Without the grant (an ACL of before the
        floor) the copies are lost, not the table: a broker that refuses the subscription is
        said once and the link goes on; Mosquitto 2.0 grants it and delivers nothing."""
        async with asyncio.timeout(self._timeout):
            granted = await client.subscribe(BRIDGE_STATUS, qos=1)
        codes = [getattr(code, "value", code) for code in granted]
        if not codes or any(not isinstance(c, int) or c >= 0x80 for c in codes):
            if not self._bridge_refused:
                log.warning(
                    "mqtt: the broker refuses the floor bridge's status to this table; "
                    "messages a floor node loses as it dies are not sent again "
                    "(run lammer broker-config again)",
                    topic=BRIDGE_STATUS,
                )
            self._bridge_refused = True

    def _bridge_status(self, topic: str, payload: bytes) -> None:
        if payload != b"0":
            return  # 1: connected (or its retained copy at subscribe); nothing to do
        now = time.monotonic()
        since = now - self._floor_resend
        while self._recent and self._recent[0][0] < since:
            self._recent.popleft()
        queued = {m.seq for m in self._resend}
        # The newest only: a subscriber learns the table's latest seq from it and asks for
        # whatever else it lacks (contract.feed, request/resend).
        newest = [m for _, m in self._recent][-1:]
        again = [m for m in newest if m.seq not in queued]
        if again:
            self._resend.extend(again)
            self._resend.sort(key=lambda m: m.seq)
            self._wake.set()
        log.warning(
            "floor bridge down: publishing the newest message again",
            bridge=topic,
            seconds=self._floor_resend,
            messages=len(again),
            first_seq=again[0].seq if again else None,
            last_seq=again[-1].seq if again else None,
        )

    async def _publish_again(self, client: aiomqtt.Client) -> None:
        again, self._resend = self._resend, []
        copies = [replace(m, retained=False) for m in again]
        try:
            # Marked as a request/resend copy is (mqtt-api.md 1.3): a non-retained copy of
            # a retained topic without the mark breaks the contract for a local display.
            await self._publish_all(client, copies, mark=False, properties=resent_properties())
        except BaseException:
            # Not sent (the connection dropped): they go on the next connection, first.
            self._resend = sorted({m.seq: m for m in again + self._resend}.values(), key=_by_seq)
            raise
        self.resent += len(copies)

    # -- request/resend and retained requests --------------------------------------------

    async def _publish_copies(self, client: aiomqtt.Client) -> None:
        """One window of ``request/resend`` copies, marked ``resent``; on a dropped
        connection they stay first in line for the next one."""
        chunk = [self._copies.popleft() for _ in range(min(self._window, len(self._copies)))]
        try:
            await self._publish_all(client, chunk, mark=False, properties=resent_properties())
        except BaseException:
            self._copies.extendleft(reversed(chunk))
            raise
        self.copies_sent += len(chunk)

    async def _clear_requests(self, client: aiomqtt.Client) -> None:
        """Clear retained requests from the broker (an empty retained publish)."""
        while self._clear:
            topic = min(self._clear)
            async with asyncio.timeout(self._timeout):
                await client.publish(topic, b"", qos=1, retain=True)
            self._clear.discard(topic)
            log.warning("cleared a retained request from the broker", topic=topic)

    def _set_aside(self, message: OutboxMessage, exc: Exception, *, mark: bool) -> None:
        reason = f"refused by the MQTT client: {exc}"
        log.error(
            "mqtt message refused; set aside in the journal",
            seq=message.seq,
            topic=message.topic[:100],
            size=len(message.payload),
            error=str(exc),
        )
        if mark:
            self._outbox.set_aside(message.seq, reason)

    # -- requests ------------------------------------------------------------------------

    def _forwarding_queue(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        # aiomqtt puts each received message in a queue of the type we give it, from the
        # paho callback that runs before the PUBACK goes back. Ours hands it straight to
        # the link's own request queue, which outlives the connection: a message
        # received just before a drop is never left behind in a discarded client.
        link = self

        class ForwardingQueue(asyncio.Queue[aiomqtt.Message]):
            def put_nowait(self, item: aiomqtt.Message) -> None:
                link._received(item)

        return ForwardingQueue

    def _received(self, message: aiomqtt.Message) -> None:
        prefix = f"{self._base}/request/"
        topic = message.topic.value
        if topic.startswith(BRIDGE_ROOT):
            payload = message.payload
            self._bridge_status(topic, payload if isinstance(payload, bytes) else b"")
            return
        if not topic.startswith(prefix):  # pragma: no cover  (only request/ is ours)
            return
        # request/<name>, or request/<name>/<user> (subscribed for USER_LEVEL names only).
        name, level, user_name = topic[len(prefix) :].partition("/")
        user = user_name if level else None
        payload = message.payload
        # paho gives bytes; aiomqtt may have decoded a number: keep what came. Bounded at
        # once: a 100 MB request is kept as its size, hash and first bytes, never queued.
        data = bytes(payload) if isinstance(payload, bytes | bytearray) else str(payload).encode()
        if message.retain:
            # Retain-as-published: it was published with retain (issue 20). An empty one
            # is somebody clearing it: nothing to answer.
            if not data:
                return
            log.warning(
                "retained request refused and cleared from the broker (a request is "
                "published without retain)",
                name=name[:80],
                size=len(data),
            )
            self._clear.add(topic)
            self._wake.set()
        # Over the rate, a request is refused before it is read (daemon.intake): a flood
        # costs a count, not a journal record and an answer each.
        gate = self.intake if user is None else self.user_gate(user)
        verdict = gate.check(time.monotonic())
        if verdict is not Verdict.ADMIT:
            self._note_busy(gate, user)
            if verdict is Verdict.COUNT:
                self._note_flood(REQUEST_LEVELS[0] if user is None else f"request/{name}/+", user)
                return
        incoming = Incoming.receive(name, data, retained=message.retain, user=user)
        if verdict is Verdict.ANSWER_BUSY:
            incoming = replace(incoming, busy=1 + gate.take_unanswered())
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
            level in self._subscribed or until <= now for level, until in self._shed_until.items()
        )

    async def _shed(self, client: aiomqtt.Client) -> None:
        """Unsubscribe what a flood came on; subscribe again what has waited its time."""
        now = time.monotonic()
        for level, until in sorted(self._shed_until.items()):
            topic = f"{self._base}/{level}"
            if until <= now:
                if level not in self._subscribed:
                    async with asyncio.timeout(self._timeout):
                        await client.subscribe(topic, options=REQUEST_OPTIONS)
                    self._subscribed.add(level)
                del self._shed_until[level]
                log.info("mqtt reading requests again", topic=topic)
            elif level in self._subscribed:
                async with asyncio.timeout(self._timeout):
                    await client.unsubscribe(topic)
                self._subscribed.discard(level)

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

    async def _watch(self, client: aiomqtt.Client) -> None:
        # Never yields (see _forwarding_queue); raises MqttError when the connection drops.
        async for _ in client.messages:  # pragma: no cover
            pass

    async def _dispatch(self) -> None:
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

    # -- outage log ----------------------------------------------------------------------

    def _note_outage(self, exc: BaseException) -> None:
        self._outage_attempts += 1
        was_up, self._was_up = self._was_up, False
        if login_refused(exc) and not self._login_refused:
            # Not "unreachable": the broker answered no. Waiting mends nothing, so the
            # operator is told what to check, and the table raises an alarm.
            self._login_refused = True
            log.error(
                "mqtt login refused: check username and password_file",
                host=self._host,
                port=self._port,
                user=self._username,
            )
            if self._on_login is not None:
                self._on_login(True)
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            what = "mqtt connection lost" if was_up else "mqtt broker unreachable"
            # Logged once per outage, not once per retry.
            log.warning(
                f"{what}; retrying with backoff, events queue in the journal",
                host=self._host,
                port=self._port,
                error=str(exc) or type(exc).__name__,
            )
        else:
            log.debug("mqtt reconnect failed", error=str(exc), attempt=self._outage_attempts)

    def _note_connected(self) -> None:
        if self._outage_since is None:
            log.info("mqtt connected", host=self._host, port=self._port, client_id=self._client_id)
        else:
            log.info(
                "mqtt broker reachable again",
                host=self._host,
                port=self._port,
                outage_s=round(time.monotonic() - self._outage_since, 3),
                attempts=self._outage_attempts,
            )
        self._outage_since = None
        self._outage_attempts = 0
        self._was_up = True
        if self._login_refused:
            self._login_refused = False
            if self._on_login is not None:
                self._on_login(False)


class _LoginRefusedOnce(Exception):
    """One refused login of ``_survey`` (``survey`` counts them)."""


BRIDGE_ROOT: Final = BRIDGE_STATUS_ROOT
BRIDGE_STATUS: Final = f"{BRIDGE_ROOT}+"
"""Where the controller's Mosquitto says whether its floor bridge is up (``1``) or not
(``0``): ``contract.floor.bridge_status_topic``, for any controller name."""

BUSY_LOG_S: Final = 60.0
"""Seconds between two log lines about requests refused for the rate."""

USER_BUSY_ANSWERS: Final = 1 / 60
"""Busy answers a second at most for one user's requests at the user level: one a minute
(a read-only user's flood costs a record a minute; its feed asks again by itself)."""

RESEND_MAX: Final = 2000
"""At most this many recent messages are kept for ``floor_resend`` (a table makes a few a
second at most; the bound holds whatever the window)."""


REQUEST_LEVELS: Final = ("request/+", *(f"request/{name}/+" for name in sorted(USER_LEVEL)))
"""The request subscriptions under the base topic: the bare ``request/<name>`` (the
terminal's), then each request read-only users send at their own name (mqtt-api.md 1.4)."""

REQUEST_OPTIONS: Final = SubscribeOptions(qos=1, noLocal=True, retainAsPublished=True)
"""How ``<base>/request/+`` is subscribed: a retained request keeps its retain flag on
live delivery (so it is seen for what it is), and the link's own clearing publish does
not come back to it."""


def resent_properties() -> Properties:
    """The PUBLISH properties of a ``request/resend`` copy and of a ``floor_resend`` copy:
    the user property ``resent`` = ``true`` (mqtt-api.md 1.3)."""
    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.UserProperty = [RESENT_PROPERTY]
    return properties


def _by_seq(message: OutboxMessage) -> int:
    return message.seq


def _log_close_error(exc: BaseException) -> None:
    log.debug("mqtt disconnect after an error failed", error=str(exc))


def _seq(payload: bytes) -> int:
    """The ``seq`` of a retained payload, 0 when it has none."""
    try:
        data = json.loads(payload)
    except ValueError:
        return 0
    seq = data.get("seq") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel tasks until they end (contract.tasks), and retrieve their errors."""
    await cancel_and_wait(tasks)
