"""A new store connection writes the last minute's batches again: a standby promoted after
its primary died may lack the primary's last commits (asynchronous streaming replication),
which the service had already acknowledged to the broker. Here the loss is made by hand
(the rows deleted by the administrator, the service's connection cut) on the tests' real
PostgreSQL; ``tests/records/test_failover.py`` runs a real failover."""

from __future__ import annotations

import psycopg
from psycopg import sql

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
        records.reconnect()
        assert stored(store_db) == [("t1", s) for s in range(1, 6)]
        assert records.rewritten == 2
        with psycopg.connect(store_db.dsn) as check:
            assert check.execute("SELECT seq FROM position").fetchall() == [(5,)]
    finally:
        records.conn.close()
