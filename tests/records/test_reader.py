"""The store's reader role (``records.provision.provision_reader``, what ``lammer web
--records-db`` connects as): it reads every table of the store, those the migrations create
after it was made included, and can change nothing.
"""

from __future__ import annotations

import secrets

import psycopg
import pytest
from psycopg import sql

from deploy.postgres import Postgres
from records.migrate import migrate
from records.provision import provision, provision_reader

READER_PASSWORD = "reader-password-0123456789"


def test_the_reader_reads_every_table_and_writes_nothing(postgres: Postgres) -> None:
    suffix = secrets.token_hex(6)
    database, owner, reader = f"records_{suffix}", f"records_{suffix}", f"reader_{suffix}"
    password = secrets.token_urlsafe(18)
    with psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin:
        provision(admin, database=database, role=owner, password=password)
        # Before the migrations: their tables must be readable all the same.
        provision_reader(
            admin, database=database, role=reader, password=READER_PASSWORD, owner=owner
        )
    try:
        with psycopg.connect(postgres.dsn(owner, password, database), autocommit=True) as conn:
            migrate(conn)
            conn.execute(
                "INSERT INTO gap (table_id, from_seq, to_seq, reason) VALUES ('t', 1, 2, 'x')"
            )
            tables = [
                name
                for (name,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'records' ORDER BY 1"
                )
            ]
        assert "gap" in tables
        assert len(tables) >= 5
        with psycopg.connect(
            postgres.dsn(reader, READER_PASSWORD, database), autocommit=True
        ) as conn:
            for table in tables:
                conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
            assert conn.execute("SELECT from_seq, to_seq FROM gap").fetchall() == [(1, 2)]
            refused = [
                "INSERT INTO gap (table_id, from_seq, to_seq, reason) VALUES ('t', 3, 4, 'x')",
                "UPDATE gap SET reason = 'forged'",
                "DELETE FROM gap",
                "TRUNCATE gap",
                "CREATE TABLE records.mine (x int)",
                "CREATE TABLE public.mine (x int)",
                "DROP TABLE gap",
                "CREATE ROLE intruder",
            ]
            for statement in refused:
                # Read-only transactions refuse before the privileges are even looked at;
                # with read-only turned off, the privileges refuse.
                with pytest.raises(
                    (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)
                ):
                    conn.execute(statement)
            conn.execute("SET default_transaction_read_only = off")
            for statement in refused:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
            assert conn.execute("SELECT count(*) FROM gap").fetchone() == (1,)
    finally:
        with psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
            for role in (reader, owner):
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
