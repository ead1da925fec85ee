"""The records service against real tables: the dice scripts they play, the waits on the
store, ``lammer records reconcile``, and a roll as a table chains it."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import CLI_BOUND_S
from tests.integration.harness import Table
from tests.records.conftest import StoreDb
from tests.records.messages import body, craps_roll

LAMMER = str(Path(sys.executable).parent / "lammer")
STORED_WITHIN = 120.0
"""Seconds the store may take to hold what tables published (a loaded machine: several
daemons, their simulators and the service)."""

FIRST = """\
ROLL,101,1,1
ROLL,102,1,2
ROLL,103,2,2
ROLL,104,2,3
ROLL,105,3,3
"""
SECOND = """\
ROLL,106,4,4
ROLL,107,3,4
ROLL,108,6,1
"""
THIRD = """\
ROLL,109,5,5
ROLL,110,2,1
"""


def roll(table: str, seq: int, prev: int | None) -> bytes:
    """A roll as a table publishes it, chained to the message before (``prev_seq``)."""
    return body({**craps_roll(table, seq, seq, 1 + seq % 6, 1 + seq // 6 % 6), "prev_seq": prev})


def stored(store_db: StoreDb) -> list[tuple[str, int]]:
    """Every (table, seq) in the store, repeats included (there must be none)."""
    with psycopg.connect(store_db.dsn) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT table_id, seq FROM craps_roll")]


async def reconciled(store_db: StoreDb, journal: Path) -> None:
    """``lammer records reconcile`` finds the store and ``journal`` agree: nothing missing,
    nothing extra, no recorded gap."""
    done = await asyncio.to_thread(
        subprocess.run,
        [LAMMER, "records", "reconcile", "--db", store_db.dsn, "--journal", str(journal)],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert ", 0 missing, 0 extra, 0 in recorded gaps" in done.stdout


def published(tables: list[Table]) -> set[tuple[str, int]]:
    """(table, seq) of every message the tables' journals say they published."""
    return {(t.table_id, r["seq"]) for t in tables for r in t.journal("--kind", "publish")}


async def stored_messages(store_db: StoreDb) -> set[tuple[str, int]]:
    """(table, seq) of every message in the store."""

    def query() -> set[tuple[str, int]]:
        with psycopg.connect(store_db.dsn) as conn:
            return {(r[0], r[1]) for r in conn.execute("SELECT table_id, seq FROM message")}

    return await asyncio.to_thread(query)


async def until_stored(store_db: StoreDb, tables: list[Table]) -> None:
    """Wait until the store holds every message the tables published (bounded); fail with
    what is missing, by topic."""
    expected = published(tables)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(STORED_WITHIN):
            while not expected <= await stored_messages(store_db):  # noqa: ASYNC110 - polling the database
                await asyncio.sleep(0.2)
    missing = sorted(expected - await stored_messages(store_db))
    topics = {
        (t.table_id, r["seq"]): r["topic"] for t in tables for r in t.journal("--kind", "publish")
    }
    assert [(m, topics[m]) for m in missing] == []


async def all_stored_at_the_end(store_db: StoreDb, tables: list[Table]) -> None:
    """The tables stop (nothing more is published: no answer to a request the service
    sends while it stops), then everything they published is stored."""
    for t in tables:
        await t.stop_daemon()
    await until_stored(store_db, tables)


async def stop_all(stop: asyncio.Event, service: asyncio.Task[None], tables: list[Table]) -> None:
    """Stop the service and every table still running."""
    stop.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(service, STORED_WITHIN)
    for t in tables:
        if t.daemon is not None:
            await t.stop_daemon()


async def start_all(tables: list[Table], script: str) -> None:
    """Start every table (its daemon and simulator) playing ``script``."""
    for t in tables:
        await t.start(script)


async def play_on(tables: list[Table], script: str, *, wait: bool = True) -> None:
    """Every table's simulator started again, playing ``script`` (``wait``: for its pty)."""
    for t in tables:
        await t.stop_sim()
        await t.start_sim(script, wait=wait)


async def until_played(tables: list[Table], *, sim_done: bool = True) -> None:
    """Wait until every table's simulator is done (``sim_done``) and what it sent is
    published."""
    for t in tables:
        if sim_done:
            await t.wait_sim_done()
        await t.wait_published()


def stored_twice(conn: psycopg.Connection[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """(table, seq) stored more than once: none, each message is stored once."""
    return conn.execute(
        "SELECT table_id, seq FROM message GROUP BY table_id, seq HAVING count(*) > 1"
    ).fetchall()
