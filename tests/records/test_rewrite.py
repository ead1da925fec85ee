"""A new store connection writes the last minute's batches again: a standby promoted after
its primary died may lack the primary's last commits (asynchronous streaming replication),
which the service had already acknowledged to the broker. Here the loss is made by hand
(the rows deleted by the administrator, the service's connection cut) on the tests' real
PostgreSQL; ``tests/records/test_failover.py`` runs a real failover."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest
from psycopg import sql
from structlog.testing import capture_logs

from deploy.broker import free_port
from records.errors import StoreUnreachable
from records.provision import SCHEMA
from records.service import Records
from tests.helpers.records_service import settings_for
from tests.helpers.records_tables import roll, stored
from tests.records.conftest import StoreDb


def test_what_a_promoted_standby_lacks_is_written_again_on_the_new_connection(
    store_db: StoreDb,
) -> None:
    conn = psycopg.connect(store_db.dsn)
    records = Records(settings_for(store_db), conn)
    try:
        for seq in range(1, 6):
            records.handle("lammer/t1/craps/roll", roll("t1", seq, seq - 1 or None), 0.0)
        while (batch := records.take()) is not None:
            records.commit(batch)
            records.committed(batch)
        assert stored(store_db) == [("t1", s) for s in range(1, 6)]
        # The new primary never received the last commits: rolls 4 and 5, and the position.
        with store_db.admin() as admin:
            admin.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(SCHEMA)))
            admin.execute("DELETE FROM craps_roll WHERE seq > 3")
            admin.execute("DELETE FROM message WHERE seq > 3")
            admin.execute("UPDATE position SET seq = 3")
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (store_db.role,),
            )
        with capture_logs() as logs:
            records.reconnect()
        assert stored(store_db) == [("t1", s) for s in range(1, 6)]
        assert records.rewritten == 2
        # Said once: what was written again, what of it the server lacked, and which
        # server answers (of a multi-host DSN, the primary).
        pg = store_db.pg
        assert [(e["event"], e["log_level"]) for e in logs] == [("store reconnected", "info")]
        (line,) = logs
        assert (line["written_again"], line["were_lost"]) == (5, 2)
        assert line["server"] == f"{pg.host}:{pg.port}"
        # The new connection writes in transactions of its own, as the first did.
        assert records.conn.autocommit is False
        with psycopg.connect(store_db.dsn) as check:
            assert check.execute("SELECT seq FROM position").fetchall() == [(5,)]
    finally:
        records.conn.close()


def test_a_new_connection_that_cannot_be_opened_is_said_so(store_db: StoreDb) -> None:
    conn = psycopg.connect(store_db.dsn)
    records = Records(settings_for(store_db), conn)
    records.settings = dataclasses.replace(
        records.settings, dsn=f"host=127.0.0.1 port={free_port()} dbname=x connect_timeout=2"
    )
    with pytest.raises(
        StoreUnreachable, match=r"^the store cannot be reached \(a new connection\): "
    ):
        records.reconnect()
    assert conn.closed  # the lost one is let go
