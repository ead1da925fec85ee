"""The displays' MQTT sessions: every wait bounded, and a cancellation never lost.

aiomqtt bounds its own waits (connect, SUBACK, PUBACK) with ``asyncio.wait_for``, which in
Python 3.11 swallows a cancellation that arrives as the awaited acknowledgement does: the
wait returns normally and the task runs on, so a Ctrl-C or a SIGTERM would leave a display
reconnecting for ever. So every client here is made with ``timeout=UNBOUNDED`` and each wait
is bounded by ``asyncio.timeout`` instead: ``session`` for the connection, ``bounded`` for a
call. The daemon does the same (``daemon.mqtt``); a display does not import the daemon
(the displays read the MQTT contract only), hence this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable
from typing import Final, TypeVar

import aiomqtt

T = TypeVar("T")

UNBOUNDED: Final = math.inf
"""The ``timeout`` of every display's ``aiomqtt.Client`` (see the module docstring)."""

WAIT: Final = 10.0
"""Seconds a display waits for the broker: a connect, a SUBACK, a PUBACK."""

CLOSE_WAIT: Final = 2.0
"""Seconds a display waits for its DISCONNECT to go out."""


@contextlib.asynccontextmanager
async def session(client: aiomqtt.Client) -> AsyncIterator[aiomqtt.Client]:
    """``async with client``: the connect bounded by ``WAIT``, the disconnect by
    ``CLOSE_WAIT`` (``TimeoutError``, an ``OSError``, when longer). When the body fails or
    is cancelled, that is what propagates, never a failed DISCONNECT on top of it."""
    try:
        async with asyncio.timeout(WAIT):
            await client.__aenter__()
    except BaseException:
        abandon(client)
        raise
    try:
        yield client
    except BaseException as exc:
        with contextlib.suppress(aiomqtt.MqttError, OSError):
            async with asyncio.timeout(CLOSE_WAIT):
                await client.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    async with asyncio.timeout(CLOSE_WAIT):
        await client.__aexit__(None, None, None)


async def bounded(call: Awaitable[T], within: float = WAIT) -> T:
    """``await call``, a ``TimeoutError`` after ``within`` seconds."""
    async with asyncio.timeout(within):
        return await call


def abandon(client: aiomqtt.Client) -> None:
    """Close the socket of a connect that did not finish (no CONNACK in time, or
    cancelled). aiomqtt leaves it open then, with its reader and its once-a-second task
    running until the keepalive gives up: one more of each per attempt against a broker
    that accepts connections and never answers."""
    client._client._reset_sockets()  # paho: closes it, its callbacks stop the task
