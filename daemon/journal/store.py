"""The SQLite file of one journal segment and its connection.

Opening creates the file (0600) and its directory (0700) when missing, under the
single-writer ``lock``, and sets the database up: WAL, ``synchronous=FULL``, the schema,
or a migration of an older one. ``Store`` holds the connection (a new one after
``reconnect``), runs statements with SQLite's errors worded for the operator, and begins,
commits and rolls back the transactions ``Journal.batch`` nests.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from daemon.errors import JournalError, JournalFileError, JournalValueError
from daemon.journal.chain import GENESIS, canonical, chain

APPLICATION_ID: Final = 0x4C4D4A4E  # "LMJN" in PRAGMA application_id: a lammer journal
SCHEMA_VERSION: Final = 3  # PRAGMA user_version (2: outbox.refused; 3: the hash chain)

WAL_CHECKPOINT_PAGES: Final = 256
"""``PRAGMA wal_autocheckpoint``: the WAL is copied into the database once it holds this many
pages (1 MiB at SQLite's 4 KiB pages; with SQLite's default, 1000, the WAL alone filled a
3 MB disk under a flood of requests)."""

WAL_LIMIT_BYTES: Final = 1024 * 1024
"""``PRAGMA journal_size_limit``: after a checkpoint the WAL file is cut back to this size
(SQLite otherwise keeps it at its largest). A reader that holds a snapshot for long (an
export) can keep a checkpoint from finishing and the WAL grows meanwhile; it shrinks back
at the next checkpoint after."""

_SCHEMA = """
CREATE TABLE records (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    ts   TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    hash BLOB NOT NULL
);
CREATE INDEX records_kind ON records(kind, seq);
CREATE TABLE outbox (
    seq       INTEGER PRIMARY KEY,
    topic     TEXT NOT NULL,
    payload   BLOB NOT NULL,
    retained  INTEGER NOT NULL,
    published INTEGER NOT NULL DEFAULT 0,
    refused   TEXT
);
CREATE INDEX outbox_pending ON outbox(seq) WHERE published = 0;
CREATE TABLE retained_latest (
    topic TEXT PRIMARY KEY,
    seq   INTEGER NOT NULL
);
"""


class Store:
    """The database file of one journal: its connection, its single-writer lock (if this
    one holds it) and, for a migration, the HMAC key of the chain.

    Open with ``Store.open_locked`` or ``Store.open_readonly``.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        readonly: bool,
        lock_fd: int | None,
        key: bytes | None,
    ) -> None:
        """Use ``Store.open_locked`` or ``Store.open_readonly``."""
        self.conn = conn
        """The connection (another one after ``reconnect``)."""
        self.path = path
        self.readonly = readonly
        self.key = key
        self._lock_fd = lock_fd
        self._closed = False

    @classmethod
    def open_locked(cls, path: Path, lock_fd: int | None, key: bytes | None) -> Store:
        """Open ``path`` read-write, creating it (0600) when missing, under a lock already
        held (``lock``; None for a segment written under the live one's lock)."""
        conn: sqlite3.Connection | None = None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            os.close(fd)
            _restrict_mode(path)
            conn = sqlite3.connect(path, isolation_level=None)
            _setup(conn, path, key)
            return cls(conn, path, readonly=False, lock_fd=lock_fd, key=key)
        except OSError as exc:
            if conn is not None:
                conn.close()
            raise JournalFileError(
                f"cannot open journal {path}: {exc.strerror or exc}", path=path
            ) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    @classmethod
    def open_readonly(cls, path: Path, key: bytes | None) -> Store:
        """Open ``path`` to read only; never creates anything."""
        if not path.is_file():
            what = "no such file" if not path.exists() else "not a regular file"
            raise JournalFileError(f"cannot read journal {path}: {what}", path=path)
        # Without a -wal file the database file is complete: open it immutable, so that
        # reading creates no -wal/-shm beside it. With one (the daemon runs, or it was
        # killed), read through the existing WAL.
        wal = path.with_name(path.name + "-wal")
        mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        uri = f"{path.resolve().as_uri()}?{mode}"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise JournalFileError(f"cannot read journal {path}: {exc}", path=path) from exc
        try:
            _check_identity(conn, path, allow_new=False)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                raise JournalFileError(
                    f"journal {path} has the older schema {version}: open it once with "
                    "lammer run (or a writable open) to bring it up to date",
                    path=path,
                )
            return cls(conn, path, readonly=True, lock_fd=None, key=key)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close the connection and release the lock (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def reconnect(self) -> None:
        """Close the connection and open the file again (the lock stays held)."""
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
            _setup(conn, self.path, self.key)
        except sqlite3.Error as exc:
            raise JournalFileError(
                f"cannot reopen journal {self.path}: {exc}", path=self.path
            ) from exc
        self.conn = conn

    def writable(self) -> None:
        """Raise ``JournalValueError`` if this store was opened read-only."""
        if self.readonly:
            raise JournalValueError(f"journal {self.path} is open read-only", path=self.path)

    def execute(self, sql: str, what: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        """Run a statement; SQLite's refusal is a ``JournalError`` saying what could not be
        done (``what``) and why."""
        try:
            return self.conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise JournalError(
                f"journal {self.path}: cannot {what}: {exc}", path=self.path
            ) from exc

    def read(self, query: str, params: tuple[object, ...]) -> list[Any]:
        """All rows of a query; a damaged file is a ``JournalFileError``."""
        try:
            return self.conn.execute(query, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise JournalFileError(f"journal {self.path}: {exc}", path=self.path) from exc

    def begin(self) -> None:
        """Begin a write transaction."""
        self.execute("BEGIN IMMEDIATE", "begin a transaction")

    def commit(self) -> None:
        """Commit; when SQLite cannot, roll back and raise ``JournalError``."""
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.rollback()
            raise JournalError(
                f"journal {self.path}: commit failed: {exc}", path=self.path
            ) from exc

    def rollback(self) -> None:
        """Roll back the transaction, if one is still open."""
        # A failed statement may have ended the transaction already (SQLite rolls back by
        # itself on a full disk): then there is nothing to roll back, and saying so would
        # hide the real error.
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the original error is what counts
                self.conn.execute("ROLLBACK")

    @contextmanager
    def relaxed(self, relax: bool) -> Iterator[None]:
        """Commits without an fsync of their own meanwhile (``synchronous=NORMAL``), when
        ``relax``; ``FULL`` again after."""
        if not relax:
            yield
            return
        self.conn.execute("PRAGMA synchronous = NORMAL")
        try:
            yield
        finally:
            self.conn.execute("PRAGMA synchronous = FULL")

    def checkpoint(self) -> bool:
        """Move everything from the WAL into the database file and empty the WAL, never
        waiting for a reader; False when a reader kept the WAL from being emptied."""
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _, _ = self.execute("PRAGMA wal_checkpoint(TRUNCATE)", "checkpoint").fetchone()
        finally:
            self.conn.execute("PRAGMA busy_timeout = 5000")
        return not busy


def lock(path: Path) -> int:
    """Take the single-writer lock of the journal at ``path`` (``<path>.lock``, 0600) and
    return its file descriptor. Creates the directory (0700) when missing."""
    lock_path = path.with_name(path.name + ".lock")
    fd: int | None = None
    try:
        _make_dirs(path.parent)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        if fd is not None:
            os.close(fd)
        raise JournalFileError(f"journal {path} is in use by another process", path=path) from None
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        raise JournalFileError(f"cannot open journal {path}: {exc.strerror}", path=path) from exc


def _make_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents, each 0700 (mkdir's ``parents=True``
    would give the parents the default mode)."""
    missing: list[Path] = []
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        candidate.mkdir(mode=0o700, exist_ok=True)


def _restrict_mode(path: Path) -> None:
    """0600 on the journal and its WAL files, also when an older file was looser."""
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        file = path.with_name(name)
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            file.chmod(mode & 0o700)


def _check_identity(conn: sqlite3.Connection, path: Path, *, allow_new: bool) -> bool:
    """True when ``path`` is a new, empty database; raises unless it is a lammer journal."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise JournalFileError(f"{path} is not a lammer journal: {exc}", path=path) from exc
    if app_id == 0 and tables == 0 and allow_new:
        return True
    if app_id != APPLICATION_ID:
        raise JournalFileError(f"{path} is not a lammer journal", path=path)
    if version > SCHEMA_VERSION:
        raise JournalFileError(
            f"journal {path} has schema {version}, newer than this lammer's {SCHEMA_VERSION}",
            path=path,
        )
    return False


def _setup(conn: sqlite3.Connection, path: Path, key: bytes | None) -> None:
    new = _check_identity(conn, path, allow_new=True)
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise JournalFileError(f"journal {path}: cannot use WAL mode (got {mode})", path=path)
    # FULL: the WAL is fsynced at every commit, so an appended record survives power loss.
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
    conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
    if new:
        conn.execute("BEGIN IMMEDIATE")
        _create(conn)
        conn.execute("COMMIT")
    else:
        _migrate(conn, key)
    _restrict_mode(path)


def _create(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _migrate(conn: sqlite3.Connection, key: bytes | None) -> None:
    """Bring a journal of an older schema up to ``SCHEMA_VERSION`` (one transaction)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    if version < 2:  # schema 2 added outbox.refused
        conn.execute("ALTER TABLE outbox ADD COLUMN refused TEXT")
    if version < 3:  # schema 3: the hash chain, computed over what is there
        conn.execute("ALTER TABLE records ADD COLUMN hash BLOB")
        conn.execute("CREATE INDEX records_kind ON records(kind, seq)")
        previous = GENESIS
        rows = conn.execute(
            "SELECT r.seq, r.ts, r.kind, r.body, o.payload FROM records r "
            "LEFT JOIN outbox o ON o.seq = r.seq AND r.kind = 'publish' ORDER BY r.seq"
        ).fetchall()
        for seq, ts_text, kind, body, payload in rows:
            data = None if payload is None else bytes(payload)
            previous = chain(previous, canonical(seq, ts_text, kind, body, data), key)
            conn.execute("UPDATE records SET hash = ? WHERE seq = ?", (previous, seq))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("COMMIT")
