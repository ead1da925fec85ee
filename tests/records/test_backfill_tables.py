"""The records backfill against real daemons: three craps tables (the dice simulator on
real ptys) play, and only then does the records service start. What they published before
(each ``state``, ``alarms`` and ``craps/board`` they replaced, the rolls and results) comes
from their journals through ``request/resend/records``, and ``lammer records reconcile``
finds nothing missing; started the other way round (records first), the same.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import psycopg
import pytest

from deploy.broker import Broker
from records.service import run
from tests.helpers.records_service import settings_for
from tests.helpers.records_tables import (
    FIRST,
    SECOND,
    all_stored_at_the_end,
    play_on,
    reconciled,
    start_all,
    stop_all,
    stored_twice,
    until_played,
    until_stored,
)
from tests.integration.conftest import MakeTable, make_table
from tests.records.conftest import StoreDb

__all__ = ["make_table"]

pytestmark = [pytest.mark.integration, pytest.mark.heavy]


async def test_records_started_after_three_tables_played_gets_all_they_published(
    make_table: MakeTable, mosquitto_private: Broker, store_db: StoreDb
) -> None:
    tables = [make_table("CRAPS", broker=mosquitto_private) for _ in range(3)]
    await start_all(tables, FIRST)
    await until_played(tables)
    # Published before the service starts: several states and alarms per table, of which
    # the broker keeps only the latest (retained), and rolls and results it keeps nothing of.
    states = [r for r in tables[0].journal("--kind", "publish") if r["topic"] == "state"]
    assert len(states) > 1, "states the broker no longer holds (it keeps the latest)"
    settings = replace(
        settings_for(store_db, mosquitto_private.port, tick=0.2), mqtt_user="records"
    )
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    try:
        await until_stored(store_db, tables)
        # And it goes on live.
        await play_on(tables, SECOND)
        await until_played(tables)
        await all_stored_at_the_end(store_db, tables)
    finally:
        await stop_all(stop, service, tables)
    for t in tables:
        await reconciled(store_db, t.journal_path)
    with psycopg.connect(store_db.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM backfill").fetchone() == (0,)
        twice = stored_twice(conn)
    assert twice == []


async def test_records_started_before_three_tables_misses_nothing_either(
    make_table: MakeTable, mosquitto_private: Broker, store_db: StoreDb
) -> None:
    settings = replace(
        settings_for(store_db, mosquitto_private.port, tick=0.2), mqtt_user="records"
    )
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    tables = [make_table("CRAPS", broker=mosquitto_private) for _ in range(3)]
    try:
        await start_all(tables, FIRST)
        await until_played(tables)
        await all_stored_at_the_end(store_db, tables)
    finally:
        await stop_all(stop, service, tables)
    for t in tables:
        await reconciled(store_db, t.journal_path)
