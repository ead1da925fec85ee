"""What a database administrator does once for the records service (docs/floor/records.md,
"Deployment"): a login role and a database in which that role owns one schema, ``records``,
and may do nothing else.

The role is not a superuser, creates no database and no role, and cannot create anything
in ``public`` (PostgreSQL 15 already revokes that from everyone; revoked again here for
older servers). Its search_path is its own schema, where the migrations create its tables.

``provision_reader`` adds a second login role that may only read that schema (``lammer web
--records-db``: the ``/reports`` page): SELECT on its tables, those the migrations create
later included (default privileges of the owner), and every transaction read-only.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

SCHEMA = "records"
"""The schema that holds the store's tables, owned by the service's role."""


def provision(admin: psycopg.Connection[Any], *, database: str, role: str, password: str) -> None:
    """Create ``role`` (LOGIN, password) and ``database`` with the ``records`` schema it
    owns. ``admin`` is a superuser's connection in autocommit mode (CREATE DATABASE cannot
    run in a transaction); ``admin.info`` gives the server to connect to the new database.
    """
    ident_role = sql.Identifier(role)
    admin.execute(
        sql.SQL(
            "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD {}"
        ).format(ident_role, sql.Literal(password))
    )
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    conninfo = make_conninfo(admin.info.dsn, dbname=database)
    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        db.execute(
            sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database))
        )
        db.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(database), ident_role
            )
        )
        db.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(SCHEMA), ident_role)
        )
        db.execute(
            sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}").format(
                ident_role, sql.Identifier(database), sql.Identifier(SCHEMA)
            )
        )


def provision_reader(
    admin: psycopg.Connection[Any], *, database: str, role: str, password: str, owner: str
) -> None:
    """Create ``role`` (LOGIN, password) that may read the ``records`` schema of
    ``database`` (owned by ``owner``, made by ``provision``) and nothing else: CONNECT,
    USAGE on the schema, SELECT on every table in it now and on every table ``owner``
    creates there later (the migrations run as ``owner`` when the service starts). Its
    transactions are read-only by default as well, so even a grant given by mistake later
    does not make the web server a writer. ``admin`` as for ``provision``.
    """
    ident_role = sql.Identifier(role)
    schema = sql.Identifier(SCHEMA)
    admin.execute(
        sql.SQL(
            "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD {}"
        ).format(ident_role, sql.Literal(password))
    )
    conninfo = make_conninfo(admin.info.dsn, dbname=database)
    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(database), ident_role
            )
        )
        db.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, ident_role))
        db.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, ident_role)
        )
        db.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA {} GRANT SELECT ON TABLES TO {}"
            ).format(sql.Identifier(owner), schema, ident_role)
        )
        for setting, value in (("search_path", SCHEMA), ("default_transaction_read_only", "on")):
            db.execute(
                sql.SQL("ALTER ROLE {} IN DATABASE {} SET {} = {}").format(
                    ident_role,
                    sql.Identifier(database),
                    sql.Identifier(setting),
                    sql.Literal(value),
                )
            )
