"""The server's two MQTT connections and its browsers.

* ``Follower`` subscribes to ``<prefix>/+/#`` as the ``display`` user (and, on the floor, to
  the bridges' status), feeds every message to the ``Store`` (whose ``contract.feed`` puts
  each table's messages in seq order, once), publishes the resend requests the feed asks
  for (``request/resend``: the one topic ``display`` may publish) and pushes what changed to
  the browsers through the ``Hub``. It follows one node at a time and relies on the gap
  fill for what a failover loses (docs/floor/screens.md: the pit on the floor).
* ``Terminal`` is a second connection, as the ``terminal`` user (which may publish only
  ``request/...``): it publishes the stickperson's requests and waits for the daemon's
  answer on ``response/<name>`` (mqtt-api.md "Requests").
* ``Hub``: one WebSocket per browser page, each with a bounded queue and its own writer, so
  a slow browser never holds up the others (it is disconnected instead, and reconnects).

Both connections reconnect forever: to the next broker of ``mqtt_host`` at once when one
fails (the nodes of the floor cluster, which all hold every table's retained state), and
with jittered, capped backoff once every one has failed in a row; the browsers are told
when the broker link is down (a page then shows "table closed": it cannot know the table).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import aiomqtt
import structlog
from aiohttp import web

from contract.floor import BRIDGE_STATUS_ROOT, INTEGRITY_ROOT, SOFTWARE_ROOT
from contract.follow import LOGIN_TRIES, login_refused
from contract.nodes import Nodes
from contract.payloads import PayloadError, parse_as, relayed
from contract.requests import ResponseMessage, request_topic
from contract.session import UNBOUNDED, bounded, session
from contract.tasks import cancel_and_wait
from contract.topics import RESPONSE, response
from display.errors import LoginRefused
from display.web.config import WebConfig
from display.web.store import Store, wire
from foundation.backoff import Backoff

log = structlog.get_logger("lammer.web")

QUEUE_LIMIT: Final = 2048
"""Live messages a browser may fall behind before it is disconnected (it then reconnects
and is sent the whole picture again)."""


BACKOFF: Final = Backoff(initial=0.25)
"""Reconnect delays of both connections (jittered, so that many servers do not reconnect in
step; capped at foundation.backoff's default)."""

OPTIONAL: Final = {
    INTEGRITY_ROOT: "integrity alarms",
    SOFTWARE_ROOT: "software status",  # lammer authenticate's, granted with the same ACL
}
"""The subscriptions the pit goes on without when refused (the topic roots, what they are)."""

RESUBSCRIBE: Final = Backoff(initial=5.0, maximum=60.0)
"""Delays between tries of a refused optional subscription while the connection lives: a
floor node grants it once JetStream has new leaders (seconds to a minute after a node's
death), an ACL once corrected and reloaded; one SUBSCRIBE a minute at most otherwise."""

TICK: Final = 0.25
"""Seconds at most between two looks at the feed's waits while nothing arrives: a wait
runs out at most this late, and a quiet relay wakes four times a second."""


def _nodelay() -> list[tuple[int, int, int]]:
    # Nagle off, as every lammer MQTT client (40 ms stalls otherwise).
    return [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


class SubscriptionRefused(aiomqtt.MqttError):
    """The broker answered a SUBSCRIBE with a failure (0x80): nothing would arrive."""


async def subscribe(client: aiomqtt.Client, topic: str) -> None:
    """Subscribe at QoS 1; ``SubscriptionRefused`` when the broker grants nothing. A floor
    node whose JetStream is electing new leaders (a node of the cluster just died) refuses
    a QoS 1 subscription it cannot back with a consumer: the connection is then of no use,
    and the next node is tried."""
    granted = await bounded(client.subscribe(topic, qos=1))
    codes = [getattr(code, "value", code) for code in granted]
    if not codes or any(not isinstance(c, int) or c >= 0x80 for c in codes):
        raise SubscriptionRefused(f"the broker refused the subscription to {topic} ({codes})")


@dataclass(eq=False)
class Client:
    """One browser page's WebSocket: which table it shows (None: all) and its queue."""

    ws: web.WebSocketResponse
    table: str | None
    queue: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    limit: int = QUEUE_LIMIT
    overflowed: bool = False

    def push(self, text: str) -> None:
        """Queue a message; a page too far behind is closed (it reconnects)."""
        if self.overflowed:
            return
        if self.queue.qsize() >= self.limit:
            self.overflowed = True
            self.queue.put_nowait("")  # wakes the writer, which closes the socket
            return
        self.queue.put_nowait(text)

    async def write(self) -> None:
        """Send the queue to the browser until the socket closes."""
        while True:
            text = await self.queue.get()
            if self.overflowed and not text:
                await self.ws.close(code=1013, message=b"too far behind; reconnect")
                return
            await self.ws.send_str(text)


class Hub:
    """Every browser page connected over a WebSocket."""

    def __init__(self, *, limit: int = 200) -> None:
        self.limit = limit
        self.clients: set[Client] = set()

    @property
    def full(self) -> bool:
        """Whether another page would exceed the limit."""
        return len(self.clients) >= self.limit

    def add(self, ws: web.WebSocketResponse, table: str | None, first: list[str]) -> Client:
        """Register a page; ``first`` (hello and snapshot) goes out before any update."""
        client = Client(ws, table, limit=QUEUE_LIMIT + len(first))
        for text in first:
            client.queue.put_nowait(text)
        self.clients.add(client)
        return client

    def remove(self, client: Client) -> None:
        """Forget a page."""
        self.clients.discard(client)

    def publish(self, table: str, text: str) -> None:
        """Push one table's update to the pages that show it."""
        for client in self.clients:
            if client.table is None or client.table == table:
                client.push(text)

    def broadcast(self, text: str) -> None:
        """Push a message to every page (the broker link, a heartbeat)."""
        for client in self.clients:
            client.push(text)


def _client(
    config: WebConfig, host: str, port: int, identifier: str, user: str | None, password: str | None
) -> aiomqtt.Client:
    """An MQTT client of the server's: keepalive half the page's, waits bounded by
    ``session``, Nagle off."""
    return aiomqtt.Client(
        host,
        port,
        identifier=identifier,
        username=user,
        password=password,
        keepalive=max(5, config.keepalive // 2),
        timeout=UNBOUNDED,
        socket_options=_nodelay(),
        tls_context=config.mqtt_tls(),
    )


class Follower:
    """The ``display`` user's subscription: broker -> store -> browsers."""

    def __init__(
        self,
        config: WebConfig,
        store: Store,
        hub: Hub,
        *,
        rng: random.Random | None = None,
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.hub = hub
        self.rng = rng or random.Random()  # noqa: S311  reconnect jitter, not a secret
        self.connected = False
        self.error: str | None = None
        self.on_connect = on_connect
        self.nodes = Nodes(config.mqtt_nodes, self.rng, BACKOFF.delay)
        self.login = LoginWatch(config.mqtt_user)
        self.integrity: bool | None = None
        """Whether the integrity alarms' subscription was granted (None: not tried yet)."""
        self._refused: set[str] = set()
        """The optional subscriptions refused and said so, until granted again."""

    def _link(self, connected: bool, error: str | None = None) -> None:
        changed = connected != self.connected
        self.connected, self.error = connected, error
        if changed:
            self.hub.broadcast(wire("link", broker=connected))

    def _push(self, updates: list[tuple[str | None, str]]) -> None:
        for table, text in updates:
            if table is None:
                self.hub.broadcast(text)
            else:
                self.hub.publish(table, text)

    async def _optional(self, client: aiomqtt.Client, roots: Iterable[str]) -> list[str]:
        """Subscribe to what the pit can go on without (``OPTIONAL``: the integrity alarms
        of ``lammer records``, ``lammer authenticate``'s software status); the roots
        refused. A refusal is said once until granted again: a display user without the
        grant (broker-config and floor-config give it), or a floor node whose JetStream
        cannot back the subscription yet (a node of the cluster just died). The caller
        tries the refused ones again while the connection lives (``_resubscribe``), so
        the pit is not left blind to integrity alarms after a failover."""
        refused: list[str] = []
        for root in roots:
            what = OPTIONAL[root]
            try:
                await subscribe(client, f"{root}+")
            except SubscriptionRefused as exc:
                refused.append(root)
                if root not in self._refused:
                    self._refused.add(root)
                    log.error(
                        f"{what} not readable: check the broker's ACL (tried again meanwhile)",
                        error=str(exc),
                    )
            else:
                if root in self._refused:
                    self._refused.discard(root)
                    log.info(f"{what} readable again")
            if root == INTEGRITY_ROOT:
                self.integrity = root not in refused
        return refused

    async def _resubscribe(self, client: aiomqtt.Client, refused: list[str]) -> None:
        """Try the refused optional subscriptions again, ``RESUBSCRIBE`` apart, until
        granted or the connection ends (a dead link is the reader's to see)."""
        attempt = 0
        while refused:
            await asyncio.sleep(RESUBSCRIBE.delay(attempt, self.rng))
            attempt += 1
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                refused = await self._optional(client, refused)

    async def _requests(self, client: aiomqtt.Client) -> None:
        """Publish the feed's resend requests (QoS 1, bounded: a lost one is asked again
        by the feed after its timeout)."""
        while self.store.resends:
            resend = self.store.resends.popleft()
            payload = resend.payload(self.config.mqtt_user or "display")
            topic = resend.topic_for(self.config.mqtt_user)  # mqtt-api.md 1.4: its own level
            await bounded(client.publish(topic, payload, qos=1))

    async def _tick(self, client: aiomqtt.Client) -> None:
        """Let the feed's waits run out while nothing arrives (a gap at a quiet table)."""
        loop = asyncio.get_running_loop()
        while True:
            deadline = self.store.feed.next_deadline()
            now = loop.time()
            wait = TICK if deadline is None else min(TICK, max(0.0, deadline - now))
            await asyncio.sleep(wait)
            self._push(self.store.tick(loop.time()))
            # A lost request is asked again by the feed after its timeout; a dead link is
            # the reader's to see.
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                await self._requests(client)

    async def run(self) -> None:
        """Follow the broker until cancelled, reconnecting forever."""
        config = self.config
        identifier = f"lammer-web-{os.getpid()}-{secrets.token_hex(4)}"
        while True:
            host, port = self.nodes.current
            try:
                client = _client(
                    config, host, port, identifier, config.mqtt_user, config.mqtt_password()
                )
                async with session(client):
                    await subscribe(client, f"{config.prefix}/+/#")
                    if self.store.controllers:  # on the floor: the bridges' status too
                        await subscribe(client, f"{BRIDGE_STATUS_ROOT}+")
                    refused = await self._optional(client, OPTIONAL)
                    self._link(True)
                    self.login.connected()
                    self.nodes.connected()
                    log.info("subscribed", broker=str(self.nodes))
                    if self.on_connect is not None:
                        self.on_connect()
                    loop = asyncio.get_running_loop()
                    ticker = asyncio.create_task(self._tick(client))
                    retries = asyncio.create_task(self._resubscribe(client, refused))
                    try:
                        async for message in client.messages:
                            payload = message.payload
                            data = payload if isinstance(payload, bytes) else b""
                            self._push(
                                self.store.receive(
                                    message.topic.value,
                                    data,
                                    now=loop.time(),
                                    retained=bool(message.retain),
                                )
                            )
                            await self._requests(client)
                    finally:
                        # Not ``cancel(); await ticker`` under a suppress: that would swallow
                        # our own cancellation if it came during the wait.
                        await cancel_and_wait([ticker, retries])
            except (aiomqtt.MqttError, OSError) as exc:  # TimeoutError is an OSError
                self.login.failed(exc, str(self.nodes))
                if self.connected or self.error is None:
                    log.warning(
                        "broker unreachable",
                        broker=str(self.nodes),
                        error=str(exc) or type(exc).__name__,
                    )
                self._link(False, str(exc) or type(exc).__name__)
            await asyncio.sleep(self.nodes.failed())


class LoginWatch:
    """Refused logins of one MQTT user before its first connection: after ``LOGIN_TRIES``
    in a row, ``refused`` says so in a sentence and ``gave_up`` is set (``lammer web``
    stops with it: a wrong password does not get right by waiting). Once connected, a
    refusal is only logged as such (the server keeps serving what it holds)."""

    def __init__(self, user: str | None, *, required: bool = True) -> None:
        self.user = user
        self.required = required
        """Whether a refused login stops the server (the terminal's connection without a
        terminal user configured is optional: the pages are served without actions)."""
        self.count = 0
        self.ever_connected = False
        self.refused: LoginRefused | None = None
        self.gave_up = asyncio.Event()

    def failed(self, exc: BaseException, where: str) -> None:
        """A connection attempt to ``where`` failed with ``exc``."""
        if not login_refused(exc):
            self.count = 0
            return
        self.count += 1
        if self.count == 1:  # once per run of refusals, not at every retry
            log.error("mqtt login refused: check username and password_file", user=self.user)
        if self.required and not self.ever_connected and self.count >= LOGIN_TRIES:
            self.refused = LoginRefused(self.user, where)
            self.gave_up.set()

    def connected(self) -> None:
        """A connection succeeded."""
        self.ever_connected = True
        self.count = 0


class TerminalUnavailable(RuntimeError):
    """The terminal's MQTT connection is down or not configured."""


class Terminal:
    """The ``terminal`` user's connection: publishes requests, returns the answers."""

    def __init__(self, config: WebConfig, *, rng: random.Random | None = None) -> None:
        self.config = config
        self.rng = rng or random.Random()  # noqa: S311  reconnect jitter, not a secret
        self.client: aiomqtt.Client | None = None
        self.nodes = Nodes(config.mqtt_nodes, self.rng, BACKOFF.delay)
        self.login = LoginWatch(config.terminal_user, required=config.terminal_user is not None)
        self._down = False
        self._waiting: dict[tuple[str, str, str], asyncio.Future[dict[str, Any]]] = {}

    @property
    def connected(self) -> bool:
        """Whether requests can be published now."""
        return self.client is not None

    async def run(self) -> None:
        """Keep the connection up until cancelled."""
        config = self.config
        identifier = f"lammer-web-terminal-{os.getpid()}-{secrets.token_hex(4)}"
        while True:
            host, port = self.nodes.current
            try:
                client = _client(
                    config, host, port, identifier, config.terminal_user, config.terminal_password()
                )
                async with session(client):
                    await subscribe(client, f"{config.prefix}/+/{response('+')}")
                    self.client = client
                    self._down = False
                    self.login.connected()
                    self.nodes.connected()
                    log.info("terminal link up", broker=str(self.nodes))
                    async for message in client.messages:
                        self._answer(message)
            except (aiomqtt.MqttError, OSError) as exc:
                self.login.failed(exc, str(self.nodes))
                # Once per outage, as the follower: not once per node per retry.
                if self.client is not None or not self._down:
                    log.warning(
                        "terminal link down",
                        broker=str(self.nodes),
                        error=str(exc) or type(exc).__name__,
                    )
                self._down = True
            finally:
                self.client = None
            await asyncio.sleep(self.nodes.failed())

    def _answer(self, message: aiomqtt.Message) -> None:
        parts = message.topic.value.split("/")
        if len(parts) < 4 or parts[-2] != RESPONSE:
            return
        table, name = parts[-3], parts[-1]
        payload = message.payload if isinstance(message.payload, bytes) else b""
        try:
            data = relayed(parse_as(ResponseMessage, payload, table=table))
        except PayloadError:
            return
        future = self._waiting.get((table, name, str(data.get("request_id"))))
        if future is not None and not future.done():
            future.set_result(data)

    async def request(
        self, table: str, name: str, body: dict[str, Any], *, wait: float = 5.0
    ) -> dict[str, Any]:
        """Publish ``request/<name>`` for ``table``; the daemon's response, or
        ``TimeoutError`` when none comes within ``wait`` s."""
        client = self.client
        if client is None:
            raise TerminalUnavailable("the terminal's connection to the broker is down")
        request_id = f"web-{secrets.token_hex(8)}"
        key = (table, name, request_id)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        try:
            payload = {**body, "request_id": request_id}
            topic = request_topic(f"{self.config.prefix}/{table}", name)
            try:
                await bounded(client.publish(topic, json.dumps(payload), qos=1), wait)
            except (aiomqtt.MqttError, TimeoutError) as exc:
                why = str(exc) or f"no PUBACK within {wait:g} s"
                raise TerminalUnavailable(f"the request could not be published: {why}") from exc
            async with asyncio.timeout(wait):
                return await future
        finally:
            self._waiting.pop(key, None)
            with contextlib.suppress(asyncio.InvalidStateError):
                future.cancel()


__all__ = ["Client", "Follower", "Hub", "Terminal", "TerminalUnavailable"]
