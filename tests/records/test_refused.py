"""Messages the contract refuses, forged on a real table's topics with seqs ahead of the
table's (issue 27), against the records service and ``lammer web``'s store on a real
Mosquitto, a real daemon (dice simulator) and the private PostgreSQL: every genuine message
that follows is stored and drawn, ``lammer records reconcile`` finds 0 missing, and each
refusal is counted (``Records.status``, the store's ``refused`` of ``/api/health``).

(The test broker has no logins: any client may publish on the table's topics, as the
table's own MQTT user may on the floor's.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import MutableMapping
from typing import Any

import aiomqtt
import psycopg
import pytest
from structlog.testing import capture_logs

from contract.feed import Resend
from deploy.broker import Broker
from display.web.store import Store
from records.observe import GamingDay
from records.service import Records, run
from records.store import Store as RecordsStore
from tests.helpers.forged import forged, seq_kinds
from tests.helpers.records_service import settings_for
from tests.helpers.records_tables import FIRST, SECOND, reconciled
from tests.integration.conftest import MakeTable, make_table
from tests.records.conftest import StoreDb
from tests.records.messages import body, craps_roll

__all__ = ["make_table"]

pytestmark = pytest.mark.integration

DEADLINE = 60.0


async def _pit(broker: Broker, store: Store, ready: asyncio.Event) -> None:
    """``lammer web``'s store on the broker: every message through it, its resend requests
    published (bare: the test broker has no logins), its waits ticked."""
    async with aiomqtt.Client("127.0.0.1", broker.port, identifier="test-pit") as client:
        await client.subscribe("lammer/+/#", qos=1)
        ready.set()
        messages = aiter(client.messages)
        # The next message is awaited across ticks, never cancelled: a read cancelled by a
        # timeout can lose the message it had just taken off the queue.
        reading: asyncio.Task[aiomqtt.Message] | None = None
        try:
            while True:
                if reading is None:
                    reading = asyncio.ensure_future(anext(messages))
                done, _ = await asyncio.wait({reading}, timeout=0.2)
                if done:
                    message, reading = reading.result(), None
                    payload = message.payload
                    data = payload if isinstance(payload, bytes) else str(payload).encode()
                    store.receive(
                        message.topic.value, data, now=time.monotonic(), retained=message.retain
                    )
                store.tick(time.monotonic())
                while store.resends:
                    ask: Resend = store.resends.popleft()
                    await client.publish(ask.topic, ask.payload("pit"), qos=1)
        finally:
            if reading is not None:
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                    await reading


async def test_forged_messages_ahead_of_a_table_lose_none_of_its_genuine_ones(
    make_table: MakeTable, mosquitto_private: Broker, store_db: StoreDb
) -> None:
    settings = settings_for(store_db, mosquitto_private.port, day=GamingDay())
    store = Store("lammer")
    ready = asyncio.Event()
    pit = asyncio.create_task(_pit(mosquitto_private, store, ready))
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    table = make_table("CRAPS", broker=mosquitto_private)

    async def stored() -> set[int]:
        with psycopg.connect(store_db.dsn) as conn:
            return {r[0] for r in conn.execute("SELECT seq FROM message")}

    def published() -> set[int]:
        return {r["seq"] for r in table.journal("--kind", "publish")}

    async def all_there(what: str) -> None:
        expected = published()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DEADLINE):
                while not (  # noqa: ASYNC110 - polling the database and the store
                    expected <= await stored()
                    and store.feed.positions().get(table.base, 0) >= max(expected)
                ):
                    await asyncio.sleep(0.1)
        assert sorted(expected - await stored()) == [], f"{what}: not stored"
        drawn = store.feed.positions().get(table.base, 0)
        assert drawn >= max(expected), f"{what}: drawn up to {drawn} of {sorted(expected)}"

    try:
        async with asyncio.timeout(DEADLINE):
            await ready.wait()
        await table.start(FIRST)
        await table.wait_published()
        await all_there("before the forgeries")
        last = max(published())
        bad = forged(table.table_id, last + 12_440, last)
        async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as hostile:
            for message in bad:
                await hostile.publish(f"{table.base}/{message.topic}", message.payload, qos=1)
        # The harness's own subscriber checks every payload against the spec: the forged
        # ones are the test's, not the table's.
        payloads = {m.payload for m in bad}
        async with asyncio.timeout(DEADLINE):
            while sum(m.payload in payloads for m in table.recorder.messages) < len(bad):  # noqa: ASYNC110 - the recorder
                await asyncio.sleep(0.05)
        table.recorder.violations.clear()
        # The table plays on: every genuine message is stored and drawn.
        await table.stop_sim()
        await table.start_sim(SECOND)
        # The forged roll over 64 KiB is a roll to the spec (extra fields are allowed; the
        # bound is lammer's): the recorder keeps it, so the genuine rolls are counted apart.
        await table.wait_for(
            lambda: sum(m.payload not in payloads for m in table.recorder.on("craps/roll")) == 8,
            what="8 genuine rolls",
        )
        await table.wait_published()
        await all_there("after the forgeries")
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        pit.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pit
        await table.stop_daemon()
    counters = store.counters()
    assert counters["refused_total"] == len(bad)
    expected: dict[str, int] = {}
    for message in bad:
        expected[message.reason] = expected.get(message.reason, 0) + 1
    assert counters["refused"] == expected
    drawn = [seq for seq, _ in store.tables[table.table_id].history["craps/roll"]]
    rolls = [r["seq"] for r in table.journal("--kind", "publish") if r["topic"] == "craps/roll"]
    assert drawn == rolls
    with psycopg.connect(store_db.dsn) as conn:
        ids = [r[0] for r in conn.execute("SELECT roll_id FROM craps_roll ORDER BY seq")]
        assert conn.execute("SELECT count(*) FROM gap").fetchone() == (0,)
    assert ids == list(range(101, 109))
    await reconciled(store_db, table.journal_path)


def _status_after(
    records: Records, deliveries: list[tuple[str, bytes]]
) -> list[MutableMapping[str, Any]]:
    """Deliver to the service's message path, store what it releases; its log lines."""
    with capture_logs() as logs:
        for topic, payload in deliveries:
            records.handle(topic, payload, time.monotonic())
            while (batch := records.take()) is not None:
                records.commit(batch)
                records.committed(batch)
    return logs


def test_the_service_logs_and_counts_each_refusal_and_stores_the_genuine_ones(
    store_db: StoreDb,
) -> None:
    settings = settings_for(store_db)
    base = "lammer/t1"
    conn = psycopg.connect(store_db.dsn)
    try:
        records = Records(settings, conn)
        first = ("lammer/t1/craps/roll", body({**craps_roll("t1", 1, 1, 1, 2), "prev_seq": None}))
        bad = forged("t1", 12_440, 1)
        genuine = [
            (f"{base}/craps/roll", body({**craps_roll("t1", s, s, 2, 3), "prev_seq": s - 1}))
            for s in (2, 3)
        ]
        logs = _status_after(
            records, [first, *((f"{base}/{m.topic}", m.payload) for m in bad), *genuine]
        )
        status = records.status()
        with psycopg.connect(store_db.dsn) as check:
            seqs = [r[0] for r in check.execute("SELECT seq FROM message ORDER BY seq")]
        positions = RecordsStore(conn).positions()
    finally:
        conn.close()
    assert seqs == [1, 2, 3]
    assert positions == {base: 3}
    assert status["stored"] == 3
    assert status["refused_total"] == len(bad) == status["dropped"]
    assert set(status["refused"]) == {m.reason for m in bad}
    # Said: a line per table and reason (at most one a minute), each naming what was wrong.
    lines = [e for e in logs if e["event"] == "message dropped"]
    assert {e["reason"].split(": ")[1] for e in lines} == {m.reason for m in bad}
    assert len(lines) == len({m.reason for m in bad})
    # The seq of each wrong type is named (a string, negative, 0, true, a float; NaN is
    # not JSON at all).
    invalid = next(e for e in lines if ": invalid: " in e["reason"])
    assert "seq" in invalid["reason"] or "dice" in invalid["reason"]
    assert {m.kind for m in seq_kinds("t1", 1)} <= {m.kind for m in bad}
    assert json.dumps(status)  # the status is plain JSON (for a metrics collector)
