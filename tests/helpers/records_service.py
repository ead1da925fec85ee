"""The records service's tests' tools: a table that publishes, its settings, a wait."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiomqtt
import psycopg

from deploy.broker import Broker
from records.intake import Settings
from tests.records.conftest import StoreDb
from tests.records.messages import craps_roll, ts

DEADLINE = 20.0
LAMMER = str(Path(sys.executable).parent / "lammer")


class FakeTable:
    """A table as mqtt-api.md 1.3 says: it numbers its journal's records (``seq``; not every
    record is a message), chains its messages by ``prev_seq``, and answers
    ``request/resend`` from what its journal still holds."""

    def __init__(self, broker: Broker, table: str) -> None:
        self.broker = broker
        self.table = table
        self.base = f"lammer/{table}"
        self.next = 1
        self.last: int | None = None  # the seq of the last message published
        self.journal_from = 1  # the first seq its journal still holds
        self.published: dict[int, tuple[str, dict[str, Any]]] = {}
        self.asked: list[tuple[str, int, dict[str, Any]]] = []
        """The resend asks served: (topic, QoS as delivered, body)."""

    def client(self) -> aiomqtt.Client:
        return aiomqtt.Client("127.0.0.1", self.broker.port, identifier=f"lammer-{self.table}")

    def skip(self) -> None:
        """A journal record that is not a message (a device fact)."""
        self.next += 1

    def stamp(self, topic: str, body: dict[str, Any]) -> dict[str, Any]:
        """The body numbered and chained, as the table's journal would."""
        seq = self.next
        self.next += 1
        stamped = {**body, "table": self.table, "seq": seq, "ts": ts(seq), "prev_seq": self.last}
        self.last = seq
        self.published[seq] = (topic, stamped)
        return stamped

    async def publish(
        self,
        client: aiomqtt.Client,
        topic: str,
        body: dict[str, Any],
        *,
        lost: bool = False,
        retain: bool = False,
    ) -> int:
        stamped = self.stamp(topic, body)
        if not lost:  # a message lost between the table and the floor
            payload = json.dumps(stamped).encode()
            await client.publish(f"{self.base}/{topic}", payload, qos=1, retain=retain)
        return int(stamped["seq"])

    async def serve_resends(self, client: aiomqtt.Client) -> None:
        # Asked at any level (``request/resend`` and a user's ``request/resend/<user>``,
        # mqtt-api.md 1.4), at QoS 2: each ask comes at the level it was published at.
        await client.subscribe(f"{self.base}/request/resend/#", qos=2)
        async for message in client.messages:
            ask = json.loads(message.payload if isinstance(message.payload, bytes) else b"{}")
            self.asked.append((message.topic.value, message.qos, ask))
            first, last = ask["from_seq"], ask["to_seq"]
            sent = 0
            for seq in sorted(self.published):
                if max(first, self.journal_from) <= seq <= last:
                    topic, body = self.published[seq]
                    resent = json.dumps({**body, "resent": True}).encode()
                    await client.publish(f"{self.base}/{topic}", resent, qos=1)
                    sent += 1
            answer = self.stamp(
                "response/resend",
                {
                    "request_id": ask["request_id"],
                    "status": "ok",
                    "error": None,
                    "sent": sent,
                    "missing_before": self.journal_from if first < self.journal_from else None,
                },
            )
            await client.publish(f"{self.base}/response/resend", json.dumps(answer).encode(), qos=1)


async def until(check: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    """Poll a condition (the store, or the lines logged so far: neither notifies), bounded;
    ``check`` may be a coroutine function or a plain one."""

    async def holds() -> bool:
        result = check()
        return await result if inspect.isawaitable(result) else result

    async with asyncio.timeout(DEADLINE):
        while not await holds():  # noqa: ASYNC110 - polling a database, not an event
            await asyncio.sleep(0.05)
    assert await holds(), what


def settings_for(store_db: StoreDb, port: int = 1, **extra: Any) -> Settings:
    """The service's settings on the test's database (``port``: its broker)."""
    base: dict[str, Any] = {
        "mqtt_host": "127.0.0.1",
        "mqtt_port": port,
        "mqtt_user": None,
        "mqtt_password": None,
        "prefixes": ("lammer",),
        "dsn": store_db.dsn,
    }
    return Settings(**{**base, **extra})


async def publish_until_stored(table: FakeTable, client: aiomqtt.Client, store_db: StoreDb) -> None:
    """Publish rolls of ``table`` until the service, which subscribes at some point after its
    start (what comes before is not for it), has stored one."""

    async def stored() -> bool:
        await table.publish(client, "craps/roll", craps_roll(table.table, 0, 1, 1, 2))
        with psycopg.connect(store_db.dsn) as conn:
            query = "SELECT count(*) FROM message WHERE table_id = %s"
            row = conn.execute(query, (table.table,)).fetchone()
        return row is not None and row[0] > 0

    await until(stored, "the service stores what it receives")
