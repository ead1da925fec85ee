"""A private PostgreSQL (``deploy.postgres``) and a fresh store database per test.

The cluster is one per pytest process (one per xdist worker: each worker is its own
session), on its own port, in its own folder, as an unprivileged user when the tests run
as root. Each test gets a database and a login role of its own, provisioned as docs/floor/records.md
tells an administrator to, with the migrations applied by the service's own role.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from deploy.postgres import Postgres
from records.migrate import migrate
from records.provision import provision


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A private PostgreSQL cluster for this test process."""
    pg = Postgres()
    pg.start()
    yield pg
    pg.stop()


@dataclass(frozen=True)
class StoreDb:
    """A database of the test's own and the records role that owns its schema."""

    pg: Postgres
    database: str
    role: str
    password: str

    @property
    def dsn(self) -> str:
        """The records role's connection string (TCP, password)."""
        return self.pg.dsn(self.role, self.password, self.database)

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """A superuser's connection to this database (autocommit)."""
        return psycopg.connect(self.pg.admin_dsn(self.database), autocommit=True)


@pytest.fixture
def store_db(postgres: Postgres) -> Iterator[StoreDb]:
    """A provisioned, migrated store database; dropped after the test."""
    yield from _database(postgres, migrated=True)


@pytest.fixture
def bare_store_db(postgres: Postgres) -> Iterator[StoreDb]:
    """A provisioned store database no migration has touched, as an administrator hands
    it over (docs/floor/records.md); dropped after the test."""
    yield from _database(postgres, migrated=False)


def _database(postgres: Postgres, *, migrated: bool) -> Iterator[StoreDb]:
    suffix = secrets.token_hex(6)
    db = StoreDb(postgres, f"records_{suffix}", f"records_{suffix}", secrets.token_urlsafe(18))
    with psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin:
        provision(admin, database=db.database, role=db.role, password=db.password)
    if migrated:
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            migrate(conn)
    yield db
    with psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(db.database)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(db.role)))
