"""The records service against real daemons: craps tables on the dice simulator (real
ptys) and their journals, through a real Mosquitto, into the private PostgreSQL.

Every message the tables published is stored once, through a restart of the records
service during play (its persistent session keeps what was published meanwhile) and a
restart of a broker that persists its sessions (as broker-config's does), and ``lammer
records reconcile`` reads each journal through ``lammer journal`` and reports 0 missing
and 0 extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
from pathlib import Path

import psycopg
import pytest

from deploy.broker import Broker
from records.observe import GamingDay
from records.service import run
from tests.helpers.records_service import settings_for
from tests.helpers.records_tables import (
    FIRST,
    SECOND,
    THIRD,
    play_on,
    reconciled,
    start_all,
    until_played,
)
from tests.integration.conftest import MakeTable, make_table
from tests.records.conftest import StoreDb

__all__ = ["make_table"]

pytestmark = pytest.mark.integration

DEADLINE = 30.0


async def test_every_result_is_stored_once_through_a_records_restart(
    make_table: MakeTable, mosquitto_private: Broker, store_db: StoreDb
) -> None:
    settings = settings_for(
        store_db,
        mosquitto_private.port,
        day=GamingDay(),
    )

    async def stored() -> set[int]:
        with psycopg.connect(store_db.dsn) as conn:
            return {r[0] for r in conn.execute("SELECT seq FROM message")}

    async def until_stored(expected: set[int]) -> None:
        async with asyncio.timeout(DEADLINE):
            while not expected <= await stored():  # noqa: ASYNC110 - polling the database
                await asyncio.sleep(0.05)

    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    table = make_table("CRAPS", broker=mosquitto_private)
    try:
        await table.start(FIRST)
        await table.wait_for(lambda: len(table.recorder.bodies("craps/roll")) == 5, what="5 rolls")
        await table.wait_published()
        published = {r["seq"] for r in table.journal("--kind", "publish")}
        await until_stored(published)
        # The records service stops; the table plays on; the service comes back.
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        await table.stop_sim()
        await table.start_sim(SECOND)
        await table.wait_for(lambda: len(table.recorder.bodies("craps/roll")) == 8, what="8 rolls")
        await table.wait_published()
        stop = asyncio.Event()
        service = asyncio.create_task(run(settings, stop))
        published = {r["seq"] for r in table.journal("--kind", "publish")}
        await until_stored(published)
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        await table.stop_daemon()
    with psycopg.connect(store_db.dsn) as conn:
        rows = conn.execute(
            "SELECT roll_id, die1, die2, status FROM craps_roll ORDER BY seq"
        ).fetchall()
        results = conn.execute("SELECT bet, outcome FROM craps_result ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == list(range(101, 109))
    assert ("all_small", "win") in results
    await reconciled(store_db, table.journal_path)


def persistent_broker(workdir: Path) -> Broker:
    """A private Mosquitto that keeps sessions and queued messages across a restart."""
    broker = Broker(workdir, config_file=workdir / "mosquitto.conf")
    (workdir / "data").mkdir()
    # Mosquitto started as root switches to the user mosquitto unless told otherwise, and
    # that user cannot write into the test's folder: keep this process's user.
    me = pwd.getpwuid(os.geteuid()).pw_name
    broker.conf.write_text(
        f"listener {broker.port} 127.0.0.1\nallow_anonymous true\npersistence true\nuser {me}\n"
        f"persistence_location {workdir / 'data'}/\nset_tcp_nodelay true\n"
        "log_dest stderr\nlog_type error\nlog_type warning\n"
    )
    return broker


@pytest.mark.slow
async def test_three_tables_through_a_broker_restart_and_a_records_restart(
    make_table: MakeTable, store_db: StoreDb, tmp_path: Path
) -> None:
    (tmp_path / "broker").mkdir()
    broker = persistent_broker(tmp_path / "broker")
    broker.start()
    settings = settings_for(store_db, broker.port)

    async def stored() -> set[tuple[str, int]]:
        with psycopg.connect(store_db.dsn) as conn:
            return {(r[0], r[1]) for r in conn.execute("SELECT table_id, seq FROM message")}

    def published() -> set[tuple[str, int]]:
        # As reconcile counts them: what the broker took, not what waits in a stopped
        # table's outbox (an answer journaled as the daemon stopped goes out at its next
        # start).
        return {
            (t.table_id, r["seq"])
            for t in tables
            for r in t.journal("--kind", "publish")
            if r.get("published", True) and not r.get("refused")
        }

    async def until_stored() -> None:
        expected = published()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DEADLINE * 4):  # a loaded machine: three daemons
                while not expected <= await stored():  # noqa: ASYNC110 - polling the database
                    await asyncio.sleep(0.1)
        missing = sorted(expected - await stored())
        flags = {
            (t.table_id, r["seq"]): (r["topic"], r.get("published"))
            for t in tables
            for r in t.journal("--kind", "publish")
        }
        assert [(m, flags[m]) for m in missing] == []

    async def play(script: str) -> None:
        await play_on(tables, script)
        for t in tables:
            await t.wait_sim_done()

    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    tables = [make_table("CRAPS", broker=broker) for _ in range(3)]
    try:
        await start_all(tables, FIRST)
        await until_played(tables, sim_done=False)
        await until_stored()
        # The broker restarts while the tables play on (they queue in their journals).
        broker.stop()
        await play(SECOND)
        broker.start()
        await play(THIRD)
        # (The harness's own subscriber has no persistent session: it misses what the
        # tables published before it subscribed again; the records service does not.)
        await until_stored()
        # The records service restarts while the tables play on.
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        await play(FIRST.replace("ROLL,10", "ROLL,20"))
        stop = asyncio.Event()
        service = asyncio.create_task(run(settings, stop))
        await until_stored()
        # The tables stop before the service: what a table publishes on its way (a device
        # gone quiet since its script ended: alarms and state) is stored too. Stopped after
        # the service, a loaded run once left such a message unstored (reconcile: 1 missing).
        for t in tables:
            await t.stop_daemon()
        await until_stored()
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
        for t in tables:
            if t.daemon is not None:
                await t.stop_daemon()
        broker.stop()
    for t in tables:
        await reconciled(store_db, t.journal_path)
