"""``follow``: ``contract.feed.Feed`` on an aiomqtt client (the thin asyncio shell).

The consumer owns the connection (broker, login, TLS, reconnects); ``follow`` subscribes
to its tables, feeds every message to the ``Feed``, publishes the resend requests it asks
for, wakes up for its deadlines, and yields the tables' messages in order and the gaps::

    feed = Feed(start=saved_positions)          # or Feed() to start where the stream is
    async with aiomqtt.Client(host, port, username=..., password=...,
                              protocol=aiomqtt.ProtocolVersion.V5) as client:
        async for event in follow(client, ["lammer/t1", "lammer/t2"], feed, operator="pit",
                                  user="display"):
            match event:
                case Message(): ...             # exactly once, in seq order, per table
                case Gap(): ...                 # record it: those seqs will not come
                case Other(): ...               # availability
                case Refused(): ...             # not the contract's: log and count it
    save(feed.positions())
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Final

import aiomqtt

from contract.feed import Event, Feed, Gap, Message, Other, Refused, Resend

LOGIN_REFUSED_CODES: Final = frozenset({4, 5, 0x86, 0x87})
"""CONNACK codes of a refused login: MQTT 3.1.1's 4 (bad user name or password) and 5 (not
authorized), MQTT 5's 0x86 and 0x87 (the same two)."""

LOGIN_TRIES: Final = 3
"""Refused logins in a row at start-up before a command gives up (a wrong password does not
get right by itself; a broker still loading its password file may refuse once)."""


def login_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the broker refusing the login (not a broker out of reach)."""
    if not isinstance(exc, aiomqtt.MqttCodeError):
        return False
    code = getattr(exc.rc, "value", exc.rc)
    return code in LOGIN_REFUSED_CODES


def resent_mark(message: aiomqtt.Message) -> bool:
    """True when ``message`` carries the MQTT 5 user property ``resent`` = ``true``."""
    properties = message.properties
    pairs = getattr(properties, "UserProperty", None) if properties is not None else None
    return bool(pairs) and ("resent", "true") in list(pairs or ())


def split_topic(topic: str, bases: Iterable[str]) -> tuple[str, str] | None:
    """``(base, rest)`` for a topic under one of ``bases``, else None."""
    for base in bases:
        if topic.startswith(base + "/"):
            return base, topic[len(base) + 1 :]
    return None


async def follow(
    client: aiomqtt.Client,
    bases: Sequence[str],
    feed: Feed,
    *,
    operator: str = "feed",
    user: str | None = None,
    clock: Callable[[], float] | None = None,
) -> AsyncIterator[Message | Gap | Other | Refused]:
    """Subscribe ``client`` (connected; MQTT 5 keeps the ``resent`` marking) to every
    table of ``bases`` (``<prefix>/<table id>``), feed what arrives to ``feed``, publish its
    resend requests (``operator`` names the asker in the table's record; ``user``, the MQTT
    user the client logged in with, is the request's topic level, mqtt-api.md 1.4: None
    for a client without a login, which asks on the bare topic), and yield the tables'
    messages in order, the gaps and what the contract refused. Runs until the connection
    fails (``aiomqtt.MqttError``) or the caller stops iterating; ``feed`` keeps its
    positions, so a new connection goes on with the same ``feed``."""
    now = clock or asyncio.get_running_loop().time
    for base in bases:
        await client.subscribe(f"{base}/#", qos=1)
    messages = aiter(client.messages)
    # One read in flight across deadlines: a timeout never cancels it (cancelling an
    # async generator's anext would end the generator).
    reading: asyncio.Task[aiomqtt.Message] | None = None
    try:
        while True:
            deadline = feed.next_deadline()
            events: list[Event]
            if deadline is not None and deadline <= now():
                events = feed.tick(now())
            else:
                if reading is None:
                    reading = asyncio.ensure_future(anext(messages))
                wait = None if deadline is None else max(0.0, deadline - now())
                done, _ = await asyncio.wait({reading}, timeout=wait)
                if not done:
                    continue
                message, reading = reading.result(), None
                where = split_topic(message.topic.value, bases)
                if where is None:
                    continue
                payload = message.payload
                data = payload if isinstance(payload, bytes) else str(payload).encode()
                events = feed.receive(
                    where[0],
                    where[1],
                    data,
                    now=now(),
                    retained=bool(message.retain),
                    resent=resent_mark(message),
                )
            for event in events:
                if isinstance(event, Resend):
                    topic = event.topic_for(user)
                    await client.publish(topic, event.payload(operator), qos=1)
                else:
                    yield event
    finally:
        if reading is not None:
            reading.cancel()
