"""The store survives its primary: the records service on a libpq multi-host connection
string (``host=a,b port=p1,p2 target_session_attrs=read-write``) against a real primary
and a streaming standby made with ``pg_basebackup -R`` (private clusters on free ports,
``deploy.postgres``). Tables play, the primary is stopped (``pg_ctl stop -m immediate``:
no shutdown checkpoint, its clients cut), the tables play on, the standby is promoted
(``pg_ctl promote``) and the service goes on with it: ``lammer records reconcile`` finds
nothing missing, and each (table, seq) is stored once.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from deploy.broker import Broker
from deploy.postgres import ADMIN, Postgres, postgres_bindir
from records.migrate import migrate
from records.provision import provision
from records.service import run
from tests.helpers.records_service import settings_for
from tests.helpers.records_tables import (
    FIRST,
    SECOND,
    THIRD,
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


def _as_cluster_user(pg: Postgres, *argv: str) -> None:
    done = subprocess.run(
        argv, capture_output=True, text=True, user=pg.user, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def standby_of(primary: Postgres) -> Postgres:
    """A streaming standby of ``primary`` (``pg_basebackup -R``), started on a port of its
    own: read-only until promoted."""
    folder = Path(tempfile.mkdtemp(prefix="lammer-pg-standby-"))
    if primary.user is not None:
        entry = pwd.getpwnam(primary.user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    standby = Postgres(user=primary.user, folder=folder)
    _as_cluster_user(
        primary,
        str(postgres_bindir() / "pg_basebackup"),
        "-D",
        str(folder / "data"),
        "-R",  # standby.signal and primary_conninfo: it streams from the primary
        "-X",
        "stream",
        "-h",
        primary.socket_dir,
        "-p",
        str(primary.port),
        "-U",
        ADMIN,
    )
    standby.start()
    return standby


@pytest.fixture
def clusters() -> Iterator[tuple[Postgres, Postgres]]:
    """A primary and its streaming standby, both removed afterwards."""
    primary = Postgres()
    primary.start()
    standby: Postgres | None = None
    try:
        standby = standby_of(primary)
        yield primary, standby
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()


def _in_recovery(pg: Postgres) -> bool:
    with psycopg.connect(pg.admin_dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


async def test_records_go_on_with_the_standby_when_the_primary_dies(
    make_table: MakeTable, mosquitto_private: Broker, clusters: tuple[Postgres, Postgres]
) -> None:
    primary, standby = clusters
    suffix = secrets.token_hex(4)
    db = StoreDb(primary, f"records_{suffix}", f"records_{suffix}", secrets.token_urlsafe(18))
    with psycopg.connect(primary.admin_dsn(), autocommit=True) as admin:
        provision(admin, database=db.database, role=db.role, password=db.password)
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        migrate(conn)
    assert _in_recovery(standby)
    both = (
        f"host={primary.host},{standby.host} port={primary.port},{standby.port} "
        f"user={db.role} password={db.password} dbname={db.database} "
        "target_session_attrs=read-write connect_timeout=5"
    )
    settings = replace(settings_for(db, mosquitto_private.port, tick=0.2), dsn=both)
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    tables = [make_table("CRAPS", broker=mosquitto_private) for _ in range(2)]
    after = StoreDb(standby, db.database, db.role, db.password)
    try:
        await start_all(tables, FIRST)
        await until_played(tables, sim_done=False)
        await until_stored(db, tables)
        # The primary dies mid-run: the tables play on, the service holds what comes.
        await play_on(tables, SECOND, wait=False)
        _as_cluster_user(
            primary,
            str(postgres_bindir() / "pg_ctl"),
            "stop",
            "-m",
            "immediate",
            "-D",
            str(primary.data),
        )
        await until_played(tables)
        # The standby is promoted; the service finds it by target_session_attrs.
        _as_cluster_user(
            standby, str(postgres_bindir() / "pg_ctl"), "promote", "-w", "-D", str(standby.data)
        )
        assert not _in_recovery(standby)
        await play_on(tables, THIRD)
        await until_played(tables, sim_done=False)
        await all_stored_at_the_end(after, tables)
    finally:
        await stop_all(stop, service, tables)
    for t in tables:
        await reconciled(after, t.journal_path)
    with psycopg.connect(after.dsn) as conn:
        twice = stored_twice(conn)
        rolls = conn.execute("SELECT count(*) FROM craps_roll").fetchone()
    assert twice == []
    assert rolls == (2 * (5 + 3 + 2),)
