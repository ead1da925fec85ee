"""Every side's MQTT session: each wait bounded, a cancellation never lost, a dropped
connection's error always retrieved. The daemon, the displays and the floor's tools enter
their ``aiomqtt.Client`` through ``session`` (one home, so the bounds below hold for all).

aiomqtt bounds its own waits (connect, SUBACK, PUBACK) with ``asyncio.wait_for``, which in
Python 3.11 swallows a cancellation that arrives as the awaited acknowledgement does
(CPython gh-86296): the wait returns normally and the task runs on, so a Ctrl-C or a SIGTERM
would leave a program reconnecting for ever. So every client is made with
``timeout=UNBOUNDED`` and each wait is bounded by ``asyncio.timeout`` instead: ``session``
for the connection, ``bounded`` for a call.

aiomqtt 2.x also keeps a future that fails when the connection drops unasked, and only its
message iterator reads it: a client whose drop came while it was not iterating (stopping,
publishing) left "Future exception was never retrieved ... MqttCodeError('Unexpected
disconnection')" on stderr when the future was collected. ``session`` retrieves it
(``observe_disconnect``); the error itself still reaches the publish or the iterator that
met the drop, which is where an outage is handled and logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, TypeVar

import aiomqtt

T = TypeVar("T")

UNBOUNDED: Final = math.inf
"""The ``timeout`` of every ``aiomqtt.Client`` entered by ``session`` (module docstring)."""

WAIT: Final = 10.0
"""Seconds to wait for the broker by default: a connect, a SUBACK, a PUBACK."""

CLOSE_WAIT: Final = 2.0
"""Seconds to wait by default for the DISCONNECT to go out."""

FLOOR_KEEPALIVE: Final = 15
"""The MQTT keepalive, in seconds, of the floor's own clients (``lammer records``,
``lammer authenticate``): an idle client sends a PINGREQ this often, so a dead connection
is noticed within about twice it at either end (MQTT 3.1.1: the broker after 1.5 times),
for one small packet a client each 15 s."""


@contextlib.asynccontextmanager
async def session(
    client: aiomqtt.Client,
    *,
    within: float | None = None,
    close_within: float | None = None,
    on_close_error: Callable[[BaseException], None] | None = None,
) -> AsyncIterator[aiomqtt.Client]:
    """``async with client`` for a client made with ``timeout=UNBOUNDED``: the connect
    bounded by ``within`` seconds (``WAIT``), the disconnect by ``close_within``
    (``CLOSE_WAIT``); ``TimeoutError``, an ``OSError``, when either takes longer. When the
    body fails or is cancelled, that is what propagates: a failed DISCONNECT on top of it
    (the broker went away meanwhile) goes to ``on_close_error`` and never replaces a
    cancellation."""
    try:
        async with asyncio.timeout(WAIT if within is None else within):
            await client.__aenter__()
    except BaseException:
        abandon(client)
        raise
    observe_disconnect(client)
    close_wait = CLOSE_WAIT if close_within is None else close_within
    try:
        yield client
    except BaseException as exc:
        try:
            async with asyncio.timeout(close_wait):
                await client.__aexit__(type(exc), exc, exc.__traceback__)
        except (aiomqtt.MqttError, OSError) as close_exc:
            if on_close_error is not None:
                on_close_error(close_exc)
        raise
    async with asyncio.timeout(close_wait):
        await client.__aexit__(None, None, None)


async def bounded(call: Awaitable[T], within: float | None = None) -> T:
    """``await call``, a ``TimeoutError`` after ``within`` seconds (``WAIT``)."""
    async with asyncio.timeout(WAIT if within is None else within):
        return await call


def abandon(client: aiomqtt.Client) -> None:
    """Close the socket of a connect that did not finish (no CONNACK in time, or
    cancelled). aiomqtt leaves it open then, with its reader and its once-a-second task
    running until the keepalive gives up: one more of each per attempt against a broker
    that accepts connections and never answers."""
    client._client._reset_sockets()  # paho: closes it, its callbacks stop the task


def observe_disconnect(client: aiomqtt.Client) -> None:
    """Retrieve the error of ``client``'s lost connection whenever it comes (module
    docstring). Call it just after entering ``async with client``: ``__aenter__`` replaces
    the future of an earlier connection, so this is this connection's. ``session`` does."""
    client._disconnected.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
