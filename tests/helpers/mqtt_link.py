"""The MQTT link's tests' tools: a fake outbox, a recorder of what a broker delivers, and
a wait on a condition."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiomqtt

from daemon.outbox import OutboxMessage
from tests.conftest import Broker

BASE = "lammer/t1"


class FakeOutbox:
    """The journal's outbox contract, in memory. ``hold`` makes ``pending()`` report
    nothing (as if no rows were queued yet), to let a test get ready first."""

    def __init__(self) -> None:
        self.rows: list[OutboxMessage] = []
        self.marked: list[int] = []
        self.refused: dict[int, str] = {}
        self.hold = False

    def add(self, topic: str, body: dict[str, object], *, retained: bool = False) -> OutboxMessage:
        seq = len(self.rows) + 1
        payload = json.dumps({"table": "t1", "seq": seq, **body}).encode()
        message = OutboxMessage(seq=seq, topic=topic, payload=payload, retained=retained)
        self.rows.append(message)
        return message

    def pending(self, limit: int = 100) -> list[OutboxMessage]:
        if self.hold:
            return []
        done = set(self.marked)
        return [m for m in self.rows if m.seq not in done][:limit]

    def mark_published(self, *seqs: int) -> None:
        for seq in seqs:
            assert seq not in self.marked, f"seq {seq} marked twice"
            self.marked.append(seq)

    def set_aside(self, seq: int, reason: str) -> None:
        self.mark_published(seq)
        self.refused[seq] = reason

    def retained(self) -> list[OutboxMessage]:
        done = set(self.marked)
        latest: dict[str, OutboxMessage] = {}
        for m in self.rows:
            if m.retained and m.seq in done:
                latest[m.topic] = m
        return sorted(latest.values(), key=lambda m: m.seq)


class Recorder:
    """A display: subscribes to the table's topics and keeps every message received."""

    def __init__(self) -> None:
        self.messages: list[aiomqtt.Message] = []

    def on(self, topic: str) -> list[bytes]:
        return [bytes(m.payload) for m in self.messages if m.topic.value == f"{BASE}/{topic}"]

    def seqs(self) -> list[int]:
        return [
            json.loads(bytes(m.payload))["seq"]
            for m in self.messages
            if m.topic.value.startswith(f"{BASE}/ev/")
        ]


@asynccontextmanager
async def collected(client: aiomqtt.Client) -> AsyncIterator[Recorder]:
    """Every message a subscribed ``client`` receives while the block runs."""
    recorder = Recorder()

    async def collect() -> None:
        with contextlib.suppress(aiomqtt.MqttError):  # the broker may be stopped
            async for message in client.messages:
                recorder.messages.append(message)

    task = asyncio.create_task(collect())
    try:
        yield recorder
    finally:
        task.cancel()
        await asyncio.wait({task})


@asynccontextmanager
async def recording(broker: Broker, topic: str = f"{BASE}/#") -> AsyncIterator[Recorder]:
    """A subscriber connected and subscribed when the block starts."""
    async with aiomqtt.Client(broker.host, broker.port, identifier=None) as client:
        await client.subscribe(topic, qos=1)
        async with collected(client) as recorder:
            yield recorder


async def eventually(check: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    """Wait until ``check()`` holds (a bound on waiting, not an assertion about speed)."""
    try:
        async with asyncio.timeout(limit):
            while True:
                if check():
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for: {what}") from None
