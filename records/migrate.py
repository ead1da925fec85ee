"""Numbered SQL migrations, applied at start, one transaction each.

``records/migrations/NNNN_name.sql`` are applied in order of their number; the table
``schema_migration`` holds the numbers applied. Each runs in its own transaction with the
row that records it, so a failing migration leaves nothing of itself behind and the next
start tries it again (the way Django and yoyo-migrations number theirs, without their
machinery). Two services starting at once serialise on an advisory lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from records.errors import MigrationError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK = 0x6C616D6D  # "lamm": the advisory lock key of the migrations

_CREATE = """
CREATE TABLE IF NOT EXISTS schema_migration (
    number   integer     PRIMARY KEY,
    name     text        NOT NULL,
    applied  timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One numbered migration file."""

    number: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """Every migration of the package, in order; a file not named ``NNNN_name.sql`` or a
    number twice is a packaging mistake (``MigrationError``)."""
    found: dict[int, Migration] = {}
    for entry in resources.files("records.migrations").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _NAME.match(entry.name)
        if match is None:
            raise MigrationError(f"migration file {entry.name!r} is not named NNNN_name.sql")
        number = int(match.group(1))
        if number in found:
            raise MigrationError(f"two migrations are numbered {number:04d}")
        found[number] = Migration(number=number, name=match.group(2), sql=entry.read_text())
    return [found[n] for n in sorted(found)]


def applied(conn: psycopg.Connection[Any]) -> list[int]:
    """The numbers of the migrations applied to this database."""
    with conn.transaction():
        conn.execute(_CREATE)
        return [row[0] for row in conn.execute("SELECT number FROM schema_migration ORDER BY 1")]


def migrate(conn: psycopg.Connection[Any]) -> list[Migration]:
    """Apply every migration not applied yet, each in one transaction; the ones applied.

    ``conn`` must be in autocommit mode (each migration opens its own transaction).
    """
    if not conn.autocommit:
        raise MigrationError("migrate() needs a connection in autocommit mode")
    done: list[Migration] = []
    conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
    try:
        have = set(applied(conn))
        for migration in migrations():
            if migration.number in have:
                continue
            try:
                with conn.transaction():
                    conn.execute(migration.sql.encode())  # bytes: psycopg sends it as is
                    conn.execute(
                        "INSERT INTO schema_migration (number, name) VALUES (%s, %s)",
                        (migration.number, migration.name),
                    )
            except psycopg.Error as exc:
                raise MigrationError(
                    f"migration {migration.number:04d}_{migration.name} failed: {exc}"
                ) from exc
            done.append(migration)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))
    return done
