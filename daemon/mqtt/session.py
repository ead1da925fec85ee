"""The session: one connection to the broker at a time, made again whenever it drops.

Each connection (MQTT 5, clean start, no session expiry: see ``daemon.mqtt``): the will
``offline`` (retained, QoS 1) on ``<base>/availability``, TCP_NODELAY on the socket (with
Nagle on, about 0.5% of messages stall 40 ms); the requests subscribed (``Inbox``) before
``online`` is said (retained), so a request sent the moment a terminal sees ``online``
finds the table listening; then the publisher's retained state and its drain.

When the broker is unreachable or the connection drops, the outage is logged once (and
its end, ``OutageLog``), and the session reconnects after a jittered, capped, exponential
backoff (``foundation.backoff``, the policy every link of lammer shares: 0.5 s, capped at
5 s, by default, so displays are stale at most about 5 s after the broker returns).

The floor bridge (docs/floor/cluster.md): with ``floor_resend`` > 0 the session subscribes
to ``lammer-floor/bridge/<controller>`` (``contract.floor``), where this controller's
Mosquitto says ``0`` the moment its bridge to the floor drops; the publisher then sends
the newest message again (``Publisher.bridge_dropped``).

Stopping: cancelling ``run()`` or ``close()`` publishes ``offline`` (retained) before a
clean DISCONNECT, since the broker sends the will only for an unclean loss; so does any
error that ends a connection other than its loss (a fault of the journal, a bug), so
availability never stays ``online`` for a daemon that stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import Callable
from typing import Final

import aiomqtt
import structlog

from contract.floor import BRIDGE_STATUS_ROOT
from contract.follow import login_refused
from contract.session import UNBOUNDED
from contract.tasks import cancel_and_wait
from contract.topics import Topic
from daemon.mqtt.broker import BrokerSettings
from daemon.mqtt.inbox import Inbox
from daemon.mqtt.publisher import Publisher
from foundation.backoff import Backoff

log = structlog.get_logger("lammer.mqtt")

ONLINE: Final = b"online"
OFFLINE: Final = b"offline"

BRIDGE_ROOT: Final = BRIDGE_STATUS_ROOT
BRIDGE_STATUS: Final = f"{BRIDGE_ROOT}+"
"""Where the controller's Mosquitto says whether its floor bridge is up (``1``) or not
(``0``): ``contract.floor.bridge_status_topic``, for any controller name."""


class OutageLog:
    """Says an outage once (and its end), not once per retry; tells ``on_login`` when the
    broker refuses the login (``True``: the table raises ``MQTT_LOGIN_REFUSED``) and when
    it takes it again (``False``)."""

    def __init__(
        self, broker: BrokerSettings, on_login: Callable[[bool], None] | None = None
    ) -> None:
        self._broker = broker
        self._on_login = on_login
        self.since: float | None = None
        """When the outage began (monotonic), None while connected or never up."""
        self.attempts = 0
        """Connections tried and failed since the last one that was made."""
        self._was_up = False
        self._login_refused = False

    def lost(self, exc: BaseException) -> None:
        """A connection failed or dropped with ``exc``."""
        self.attempts += 1
        was_up, self._was_up = self._was_up, False
        if login_refused(exc) and not self._login_refused:
            # Not "unreachable": the broker answered no. Waiting mends nothing, so the
            # operator is told what to check, and the table raises an alarm.
            self._login_refused = True
            log.error(
                "mqtt login refused: check username and password_file",
                host=self._broker.host,
                port=self._broker.port,
                user=self._broker.username,
            )
            if self._on_login is not None:
                self._on_login(True)
        if self.since is None:
            self.since = time.monotonic()
            what = "mqtt connection lost" if was_up else "mqtt broker unreachable"
            log.warning(
                f"{what}; retrying with backoff, events queue in the journal",
                host=self._broker.host,
                port=self._broker.port,
                error=str(exc) or type(exc).__name__,
            )
        else:
            log.debug("mqtt reconnect failed", error=str(exc), attempt=self.attempts)

    def connected(self) -> None:
        """A connection was made."""
        broker = self._broker
        if self.since is None:
            log.info(
                "mqtt connected", host=broker.host, port=broker.port, client_id=broker.client_id
            )
        else:
            log.info(
                "mqtt broker reachable again",
                host=broker.host,
                port=broker.port,
                outage_s=round(time.monotonic() - self.since, 3),
                attempts=self.attempts,
            )
        self.since = None
        self.attempts = 0
        self._was_up = True
        if self._login_refused:
            self._login_refused = False
            if self._on_login is not None:
                self._on_login(False)


class Session:
    """Keeps one connection to the broker up, says ``availability`` on it, and serves the
    publisher and the inbox on it until it drops. ``wake`` is set when something is to be
    done on the connection (new messages, copies, availability, a flood)."""

    def __init__(
        self,
        *,
        broker: BrokerSettings,
        base: str,
        publisher: Publisher,
        inbox: Inbox,
        wake: asyncio.Event,
        window: int,
        backoff: Backoff,
        rng: random.Random,
        floor_resend: float = 0.0,
        on_login: Callable[[bool], None] | None = None,
    ) -> None:
        self._broker = broker
        self._base = base
        self._publisher = publisher
        self._inbox = inbox
        self._wake = wake
        self._window = window
        self._backoff = backoff
        self._rng = rng
        self._floor_resend = floor_resend
        self.outage = OutageLog(broker, on_login)
        self._client: aiomqtt.Client | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._available = True  # what availability should say (set_available)
        self._said: bytes | None = None  # what it said last on this connection
        self._bridge_refused = False

    # -- public --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while a connection to the broker is up (for the daemon's health check)."""
        return self._client is not None

    @property
    def availability_topic(self) -> str:
        """``<base>/availability``: ``online``, or ``offline`` (also the will message)."""
        return f"{self._base}/{Topic.AVAILABILITY}"

    @property
    def tcp_nodelay(self) -> bool | None:
        """Whether Nagle is off on the live connection's socket (None when not connected)."""
        client = self._client
        sock = None if client is None else client._client.socket()
        if not isinstance(sock, socket.socket):
            return None
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    @property
    def available(self) -> bool:
        """What ``availability`` says: True for ``online`` (``set_available``)."""
        return self._available

    def set_available(self, available: bool) -> None:
        """Say ``online`` or ``offline`` from now on (also after every reconnect)."""
        self._available = available
        self._wake.set()

    async def run(self) -> None:
        """Keep the link up until cancelled or ``close()``d; never returns otherwise.

        Cancellation (SIGTERM) and ``close()`` both publish ``offline`` and disconnect
        cleanly before ``run()`` ends. Errors of the outbox (the journal) are not the
        link's to hide: they propagate.
        """
        if self._worker is not None:
            raise RuntimeError("MqttLink.run() is already running")
        worker = asyncio.create_task(self._run_forever(), name=f"mqtt {self._broker.client_id}")
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
            graceful = 2 * self._broker.close_timeout + 1
            await cancel_and_wait([worker], within=3 * graceful, every=graceful)

    # -- connection loop -----------------------------------------------------------------

    async def _run_forever(self) -> None:
        dispatcher = asyncio.create_task(self._inbox.dispatch(), name="mqtt requests")
        attempt = 0
        try:
            while True:
                started = time.monotonic()
                try:
                    await self._session()
                except (aiomqtt.MqttError, OSError) as exc:
                    self.outage.lost(exc)
                # A connection that stayed up longer than the longest delay was healthy:
                # start the backoff again. One that drops at once (another daemon with
                # our client id, a broker refusing us) backs off further each time.
                if time.monotonic() - started > self._backoff.maximum:
                    attempt = 0
                await asyncio.sleep(self._backoff.delay(attempt, self._rng))
                attempt += 1
        finally:
            # Requests already received are handed on before the link goes away.
            await self._inbox.handed_on(self._broker.close_timeout)
            await cancel_and_wait([dispatcher], within=self._broker.close_timeout)

    def _new_client(self) -> aiomqtt.Client:
        broker = self._broker
        client = aiomqtt.Client(
            broker.host,
            broker.port,
            identifier=broker.client_id,
            username=broker.username,
            password=broker.password,
            will=aiomqtt.Will(self.availability_topic, OFFLINE, qos=1, retain=True),
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=True,  # and no session expiry: see "Sessions" in daemon.mqtt
            keepalive=broker.keepalive,
            timeout=UNBOUNDED,  # every wait is bounded here instead (see UNBOUNDED)
            tls_params=broker.tls_params(),
            max_inflight_messages=self._window,
            queue_type=self._forwarding_queue(),
            # Disable Nagle: a small publish must not wait for the last ACK.
            socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        )
        # Up to a full window awaits its PUBACK by design; do not warn about it.
        client.pending_calls_threshold = self._window + 5
        return client

    async def _session(self) -> None:
        client = self._new_client()
        async with self._broker.connected(client):
            self._client = client
            self.outage.connected()
            try:
                # Subscribed before saying online: a terminal that sends a request the
                # moment it sees online must find the table listening.
                await self._inbox.subscribe(client)
                await self._say_availability(client)
                await self._publisher.republish_retained(client)
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

    async def _serve(self, client: aiomqtt.Client) -> None:
        # Both run until the connection fails; the watcher notices a dropped connection
        # even while the drain waits for a PUBACK that will never come.
        listen = asyncio.create_task(self._watch(client), name="mqtt watch")
        drain = asyncio.create_task(self._drain(client), name="mqtt drain")
        try:
            done, _ = await asyncio.wait({listen, drain}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait([listen, drain])
        for task in done:
            task.result()  # raises the error that ended the connection
        raise aiomqtt.MqttError("the connection ended")  # pragma: no cover

    async def _watch(self, client: aiomqtt.Client) -> None:
        # Never yields (see _forwarding_queue); raises MqttError when the connection drops.
        async for _ in client.messages:  # pragma: no cover
            pass

    async def _drain(self, client: aiomqtt.Client) -> None:
        while True:
            self._wake.clear()  # before reading: a notify() after this is not missed
            if self._said != self._availability:
                await self._say_availability(client)
            await self._inbox.tend(client)
            if not await self._publisher.step(client):
                await self._idle()

    async def _idle(self) -> None:
        """Nothing to publish: wait for something new, or for what is due (the marks the
        journal refused, tried again first; a flooded subscription to read again)."""
        retry = self._publisher.retry_in()
        due = retry if retry is not None else self._inbox.due_in()
        if due is None:
            await self._wake.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(due):
                await self._wake.wait()

    # -- availability --------------------------------------------------------------------

    @property
    def _availability(self) -> bytes:
        return ONLINE if self._available else OFFLINE

    async def _say_availability(self, client: aiomqtt.Client) -> None:
        said = self._availability
        async with asyncio.timeout(self._broker.timeout):
            await client.publish(self.availability_topic, said, qos=1, retain=True)
        self._said = said

    async def _say_offline(self, client: aiomqtt.Client) -> None:
        # A clean DISCONNECT does not fire the will: say offline ourselves.
        try:
            async with asyncio.timeout(self._broker.close_timeout):
                await client.publish(self.availability_topic, OFFLINE, qos=1, retain=True)
        except (aiomqtt.MqttError, OSError, TimeoutError) as exc:
            log.warning("mqtt could not publish offline before disconnecting", error=str(exc))

    # -- received ------------------------------------------------------------------------

    def _forwarding_queue(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        # aiomqtt puts each received message in a queue of the type we give it, from the
        # paho callback that runs before the PUBACK goes back. Ours hands it straight on
        # (the requests to the inbox's own queue, which outlives the connection): a
        # message received just before a drop is never left behind in a discarded client.
        received = self._received

        class ForwardingQueue(asyncio.Queue[aiomqtt.Message]):
            def put_nowait(self, item: aiomqtt.Message) -> None:
                received(item)

        return ForwardingQueue

    def _received(self, message: aiomqtt.Message) -> None:
        topic = message.topic.value
        if topic.startswith(BRIDGE_ROOT):
            payload = message.payload
            self._bridge_status(topic, payload if isinstance(payload, bytes) else b"")
        else:
            self._inbox.received(topic, message)

    # -- the floor bridge ----------------------------------------------------------------

    async def _follow_bridge(self, client: aiomqtt.Client) -> None:
        """Subscribe to the floor bridge's status. Without the grant (an ACL of before the
        floor) the copies are lost, not the table: a broker that refuses the subscription is
        said once and the link goes on; Mosquitto 2.0 grants it and delivers nothing."""
        async with asyncio.timeout(self._broker.timeout):
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
        if payload == b"0":  # 1: connected (or its retained copy at subscribe): nothing to do
            self._publisher.bridge_dropped(topic)
