"""Batched writes: one transaction a batch, acknowledged to the broker only once committed,
and nothing lost when the database restarts or is down (the real private PostgreSQL).

The failures are real: the test's PostgreSQL is restarted or stopped under the service
(``deploy.postgres.Postgres``, the cluster of this test process), a constraint added by
the administrator makes the store refuse a message. The fake table of ``test_service``
does not answer resends here, so what is stored came by the broker, not by the feed's
gap filling: a message acknowledged before it was stored would be missing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import psycopg
import pytest
import structlog

from deploy.broker import Broker
from records.errors import StoreError, StoreUnreachable
from records.intake import Ack, Batch
from records.messages import Message as Stored
from records.messages import parse
from records.service import Records, run
from records.store import Missing, Store
from tests.helpers.records_service import (
    DEADLINE,
    FakeTable,
    publish_until_stored,
    settings_for,
    until,
)
from tests.helpers.records_tables import roll, stored
from tests.records.conftest import StoreDb
from tests.records.messages import body, craps_roll


def test_a_batch_is_bounded_and_acknowledged_only_once_committed(store_db: StoreDb) -> None:
    acked: list[int] = []

    def ack(seq: int) -> Callable[[], object]:
        return lambda: acked.append(seq)

    with psycopg.connect(store_db.dsn) as conn:
        records = Records(settings_for(store_db, batch=2), conn)
        for seq in range(1, 6):
            records.handle(
                "lammer/t1/craps/roll", roll("t1", seq, seq - 1 or None), 0.0, ack=ack(seq)
            )
        batches: list[set[int]] = []
        while (batch := records.take()) is not None:
            # Nothing is acknowledged before its batch committed (the writer's order).
            assert acked == sorted(s for b in batches for s in b)
            records.commit(batch)
            assert Store(conn).positions() == ({"lammer/t1": 5} if batch.positions else {})
            batches.append({item.seq for item in batch.items if isinstance(item, Stored)})
            records.committed(batch)
        # Two messages a transaction at most; the positions with the last batch only (the
        # earlier ones had messages of the feed's positions still waiting).
        assert batches == [{1, 2}, {3, 4}, {5}]
        assert acked == [1, 2, 3, 4, 5]
    assert stored(store_db) == [("t1", s) for s in range(1, 6)]


def test_acknowledgements_alone_are_sent_without_the_store(store_db: StoreDb) -> None:
    # What the broker sent again that was stored already, or QoS 1 requests of nothing to
    # store: released even while the store is away (the writer would wait on it otherwise).
    acked: list[str] = []
    conn = psycopg.connect(store_db.dsn)
    records = Records(settings_for(store_db), conn)
    conn.close()
    batch = Batch([], None, [Ack(lambda: acked.append("sent"))])
    records.commit(batch)
    records.committed(batch)
    assert acked == ["sent"]
    assert records.batches == 1


def test_a_refused_batch_leaves_nothing_and_a_replayed_one_changes_nothing(
    store_db: StoreDb,
) -> None:
    with store_db.admin() as admin:  # the store refuses sixes on the first die
        admin.execute("ALTER TABLE records.craps_roll ADD CONSTRAINT no_six CHECK (die1 < 6)")
    items = [parse("t", "craps/roll", body(craps_roll("t", s, s, 1 + s % 6, 1))) for s in (1, 2)]
    gap = Missing(table="t", from_seq=1, to_seq=4, reason="gone: test")
    with psycopg.connect(store_db.dsn) as conn:
        store = Store(conn)
        refused = parse("t", "craps/roll", body(craps_roll("t", 5, 5, 6, 1)))
        with pytest.raises(StoreError, match="refused a batch of 4") as caught:
            store.write_batch([*items, gap, refused], {"lammer/t": 5})
        assert not isinstance(caught.value, StoreUnreachable)
        assert stored(store_db) == []
        assert store.positions() == {}
        # Written again (a retry after a lost connection): once, the gap around the
        # batch's own messages (seqs 1 and 2 are stored by the same transaction).
        assert store.write_batch([*items, gap], {"lammer/t": 4}) == [True, True, [(3, 4)]]
        # (the gap is kept again, the same row: keyed by (table, from_seq))
        assert store.write_batch([*items, gap], {"lammer/t": 4}) == [False, False, [(3, 4)]]
        assert stored(store_db) == [("t", 1), ("t", 2)]
        gaps = conn.execute("SELECT from_seq, to_seq FROM gap").fetchall()
        assert gaps == [(3, 4)]
        assert store.positions() == {"lammer/t": 4}


async def test_a_database_restart_mid_run_loses_nothing(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    stop = asyncio.Event()
    settings = settings_for(store_db, mosquitto_private.port, tick=0.05)
    pg = store_db.pg
    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        tables = [FakeTable(mosquitto_private, f"t{i}") for i in range(3)]
        try:
            async with tables[0].client() as client:
                await publish_until_stored(tables[0], client, store_db)
                first = min(seq for _, seq in stored(store_db))

                async def publish(rounds: range) -> None:
                    for n in rounds:
                        for t in tables:
                            await t.publish(client, "craps/roll", craps_roll(t.table, 0, n, 3, 4))
                        await asyncio.sleep(0.005)  # a floor's pace

                publishing = asyncio.create_task(publish(range(2, 52)))
                await until(lambda: len(stored(store_db)) >= 60, "a first part stored")
                # Stopped mid-run, in this thread: PostgreSQL dies with the thread that
                # started it (deploy.children), and a worker thread of to_thread ends.
                pg.stop(remove=False)
                await publishing
                await publish(range(52, 62))  # 30 messages while the database is away

                def in_hand() -> bool:
                    # The writer retries its batch, the rest waits behind it, unacknowledged:
                    # 20 at most, Mosquitto's window of unacknowledged messages (its
                    # max_inflight_messages); the other 10 wait on the broker. Three tries
                    # at least, for their backoff (below).
                    said = [e for e in list(logs) if e["event"] == "store unreachable"]
                    return len(said) >= 3 and any(e["batch"] + e["behind"] >= 20 for e in said)

                await until(in_hand, "the service holds what came meanwhile")
                pg.start()
                # (what t0 published before the service subscribed went nowhere)
                expected = {
                    (t.table, s)
                    for t in tables
                    for s in t.published
                    if t.table != "t0" or s >= first
                }
                await until(lambda: set(stored(store_db)) >= expected, "everything stored")
            assert not service.done()  # it reconnected, it did not stop
        finally:
            stop.set()
            if pg.process is None:
                pg.start()
            await asyncio.wait_for(service, DEADLINE)
    rows = stored(store_db)
    assert len(rows) == len(set(rows)) == len(expected)
    assert len(expected) > 180
    # Each try said, its wait as STORE_BACKOFF's docstring: 0.2-0.4 s, doubling, capped at 5 s
    # (the same batch all along: the others wait behind it).
    said = [e for e in logs if e["event"] == "store unreachable"]
    assert len(said) >= 3  # the first write and the tries while PostgreSQL was away
    for n, e in enumerate(said):
        step = min(5.0, 0.4 * 2**n)
        assert step / 2 - 0.005 <= e["retry_in"] <= step + 0.005, (n, e["retry_in"])
        assert e["retry_in"] == round(e["retry_in"], 2)  # said to the hundredth
        assert e["log_level"] == "error"
        assert e["batch"] == said[0]["batch"] >= 1
        assert "\n" not in e["error"]  # psycopg's first line only
    assert "the store cannot be reached" in said[0]["error"]
    with psycopg.connect(store_db.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM gap").fetchone() == (0,)


async def test_what_the_service_held_when_it_stopped_with_the_database_down_comes_again(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    stop = asyncio.Event()
    # A message a batch: the rest wait behind the one retried, and are counted there.
    settings = settings_for(store_db, mosquitto_private.port, tick=0.05, settle=0.2, batch=1)
    table = FakeTable(mosquitto_private, "t1")
    pg = store_db.pg
    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        try:
            async with table.client() as client:
                await publish_until_stored(table, client, store_db)
                before = set(stored(store_db))
                pg.stop(remove=False)  # in this thread (see above)
                ten = [
                    await table.publish(client, "craps/roll", craps_roll("t1", 0, n, 2, 5))
                    for n in range(2, 12)
                ]
                # The last one three times more (copies a table sent again): nothing to
                # store, only acknowledgements, which wait behind the batch retried.
                again = json.dumps(table.published[ten[-1]][1]).encode()
                for _ in range(3):
                    await client.publish(f"{table.base}/craps/roll", again, qos=1)

                # The ten, with any roll the wait for the first one sent after it (those
                # before the first one stored went nowhere).
                first = min(seq for _, seq in before)
                held = [s for s in table.published if s > first and ("t1", s) not in before]

                def all_in_hand() -> bool:
                    # The writer retries its batch, the others wait behind it: all are in
                    # the service's hands, none acknowledged.
                    return any(
                        e["event"] == "store unreachable" and e["batch"] + e["behind"] >= len(held)
                        for e in list(logs)
                    )

                await until(all_in_hand, "the service holds all ten")
                stop.set()
                await asyncio.wait_for(service, DEADLINE)
        finally:
            stop.set()
            if pg.process is None:
                pg.start()
            if not service.done():
                await asyncio.wait_for(service, DEADLINE)
    assert not set(stored(store_db)) & {("t1", s) for s in ten}  # nothing of the ten stored
    tries = [e for e in logs if e["event"] == "store unreachable"]
    assert len(held) >= 10
    # (messages counted, not the acknowledgements that wait with them)
    assert max(e["batch"] + e["behind"] for e in tries) == len(held)
    unstored = [e for e in logs if e["event"].startswith("stopped with a batch unstored")]
    assert unstored == [
        {"event": "stopped with a batch unstored: the broker sends it again",
         "log_level": "warning"}
    ]  # fmt: skip
    # Started again, the same session: the broker sends what was never acknowledged.
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    try:
        expected = before | {("t1", s) for s in ten}
        await until(lambda: set(stored(store_db)) >= expected, "the ten stored")
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
    rows = stored(store_db)
    assert len(rows) == len(set(rows))  # once each
    with psycopg.connect(store_db.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM gap").fetchone() == (0,)


async def test_a_write_the_store_refuses_stops_the_service_with_nothing_acknowledged(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    # Not a lost connection but a refusal (here a constraint an administrator added): the
    # service stops with the store's error (systemd restarts it and the unit's journal
    # says why), saying what it did; the refused message was never acknowledged, so the
    # broker sends it again to the service started once the store accepts it.
    settings = settings_for(store_db, mosquitto_private.port, tick=0.05, settle=0.2)
    table = FakeTable(mosquitto_private, "t1")
    stop = asyncio.Event()
    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        try:
            async with table.client() as client:
                await publish_until_stored(table, client, store_db)
                with store_db.admin() as admin:
                    admin.execute(
                        "ALTER TABLE records.craps_roll ADD CONSTRAINT no_six CHECK (die1 < 6)"
                    )
                six = await table.publish(client, "craps/roll", craps_roll("t1", 0, 2, 6, 1))
                with pytest.raises(StoreError, match="refused a batch") as caught:
                    await asyncio.wait_for(service, DEADLINE)  # stopped by itself
        finally:
            stop.set()
            if not service.done():
                await asyncio.wait_for(service, DEADLINE)
    assert not isinstance(caught.value, StoreUnreachable)
    assert "no_six" in str(caught.value)
    done = [e for e in logs if e["event"] == "records stopped"]
    assert len(done) == 1
    assert done[0]["log_level"] == "info"
    assert done[0]["stored"] == len(stored(store_db)) >= 1  # the status, as it stood
    assert ("t1", six) not in stored(store_db)
    with store_db.admin() as admin:
        admin.execute("ALTER TABLE records.craps_roll DROP CONSTRAINT no_six")
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    try:
        await until(lambda: ("t1", six) in stored(store_db), "the six sent again")
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
