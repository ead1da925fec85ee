"""The server's two MQTT connections and its browsers.

* ``Follower`` subscribes to ``<prefix>/+/#`` as the read-only ``display`` user, feeds every
  message to the ``Store`` and pushes what changed to the browsers through the ``Hub``.
* ``Terminal`` is a second connection, as the ``terminal`` user (which may publish only
  ``request/...``): it publishes the stickperson's requests and waits for the daemon's
  answer on ``response/<name>`` (mqtt-api.md "Requests").
* ``Hub``: one WebSocket per browser page, each with a bounded queue and its own writer, so
  a slow browser never holds up the others (it is disconnected instead, and reconnects).

Both connections reconnect forever with jittered, capped backoff; the browsers are told
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import aiomqtt
import structlog
from aiohttp import web

from display.web.config import WebConfig
from display.web.contract import PayloadError, validate_response
from display.web.store import Store, wire
from drivers.backoff import Backoff

log = structlog.get_logger("lammer.web")

QUEUE_LIMIT: Final = 2048
"""Live messages a browser may fall behind before it is disconnected (it then reconnects
and is sent the whole picture again)."""


BACKOFF: Final = Backoff(initial=0.25)
"""Reconnect delays of both connections (jittered, so that many servers do not reconnect in
step; capped at drivers.backoff's default)."""


def _nodelay() -> list[tuple[int, int, int]]:
    # Nagle off, as every lammer MQTT client (40 ms stalls otherwise).
    return [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


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
        self.rng = rng or random.Random()
        self.connected = False
        self.error: str | None = None
        self.on_connect = on_connect

    def _link(self, connected: bool, error: str | None = None) -> None:
        changed = connected != self.connected
        self.connected, self.error = connected, error
        if changed:
            self.hub.broadcast(wire("link", broker=connected))

    async def run(self) -> None:
        """Follow the broker until cancelled, reconnecting forever."""
        config = self.config
        identifier = f"lammer-web-{os.getpid()}-{secrets.token_hex(4)}"
        attempt = 0
        while True:
            try:
                async with aiomqtt.Client(
                    config.mqtt_host,
                    config.mqtt_port,
                    identifier=identifier,
                    username=config.mqtt_user,
                    password=config.mqtt_password(),
                    keepalive=max(5, config.keepalive // 2),
                    timeout=10,
                    socket_options=_nodelay(),
                ) as client:
                    await client.subscribe(f"{config.prefix}/+/#", qos=1)
                    self._link(True)
                    log.info("subscribed", broker=f"{config.mqtt_host}:{config.mqtt_port}")
                    attempt = 0
                    if self.on_connect is not None:
                        self.on_connect()
                    async for message in client.messages:
                        payload = message.payload
                        data = payload if isinstance(payload, bytes) else b""
                        update = self.store.apply(message.topic.value, data)
                        if update is not None:
                            self.hub.publish(*update)
            except aiomqtt.MqttError as exc:
                if self.connected or self.error is None:
                    log.warning("broker unreachable", error=str(exc) or type(exc).__name__)
                self._link(False, str(exc) or type(exc).__name__)
            await asyncio.sleep(BACKOFF.delay(attempt, self.rng))
            attempt += 1


class TerminalUnavailable(RuntimeError):
    """The terminal's MQTT connection is down or not configured."""


class Terminal:
    """The ``terminal`` user's connection: publishes requests, returns the answers."""

    def __init__(self, config: WebConfig, *, rng: random.Random | None = None) -> None:
        self.config = config
        self.rng = rng or random.Random()
        self.client: aiomqtt.Client | None = None
        self._waiting: dict[tuple[str, str, str], asyncio.Future[dict[str, Any]]] = {}

    @property
    def connected(self) -> bool:
        """Whether requests can be published now."""
        return self.client is not None

    async def run(self) -> None:
        """Keep the connection up until cancelled."""
        config = self.config
        identifier = f"lammer-web-terminal-{os.getpid()}-{secrets.token_hex(4)}"
        attempt = 0
        while True:
            try:
                async with aiomqtt.Client(
                    config.mqtt_host,
                    config.mqtt_port,
                    identifier=identifier,
                    username=config.terminal_user,
                    password=config.terminal_password(),
                    keepalive=max(5, config.keepalive // 2),
                    timeout=10,
                    socket_options=_nodelay(),
                ) as client:
                    await client.subscribe(f"{config.prefix}/+/response/+", qos=1)
                    self.client = client
                    attempt = 0
                    async for message in client.messages:
                        self._answer(message)
            except aiomqtt.MqttError as exc:
                log.warning("terminal link down", error=str(exc) or type(exc).__name__)
            finally:
                self.client = None
            await asyncio.sleep(BACKOFF.delay(attempt, self.rng))
            attempt += 1

    def _answer(self, message: aiomqtt.Message) -> None:
        parts = message.topic.value.split("/")
        if len(parts) < 4 or parts[-2] != "response":
            return
        table, name = parts[-3], parts[-1]
        payload = message.payload if isinstance(message.payload, bytes) else b""
        try:
            data = validate_response(table, payload)
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
            await client.publish(
                f"{self.config.prefix}/{table}/request/{name}", json.dumps(payload), qos=1
            )
            async with asyncio.timeout(wait):
                return await future
        except aiomqtt.MqttError as exc:
            raise TerminalUnavailable(f"the request could not be published: {exc}") from exc
        finally:
            self._waiting.pop(key, None)
            with contextlib.suppress(asyncio.InvalidStateError):
                future.cancel()


__all__ = ["Client", "Follower", "Hub", "Terminal", "TerminalUnavailable"]
