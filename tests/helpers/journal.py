"""Journal tests' tools: SQLite made to refuse, as a full disk or an I/O error would."""

from __future__ import annotations

import sqlite3

from daemon.journal import Journal


def refuse(journal: Journal, statement: str) -> None:
    """SQLite refuses ``statement`` (``COMMIT``, or a pragma by name) from now on, as a full
    disk or an I/O error would: a real refusal by SQLite's own authorizer."""

    def authorize(action: int, arg1: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == statement:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and arg1 == statement:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    journal._store.conn.set_authorizer(authorize)
