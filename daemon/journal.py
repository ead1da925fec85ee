"""The table's journal: every device event, decision, outcome, alarm and published
message, in order, each with the daemon's ``seq``; and the outbox the MQTT link drains.

SQLite in WAL mode with ``synchronous=FULL``: every commit is fsynced to the WAL before
``append`` returns, so a record that was appended survives a crash of the process
(SIGKILL) *and* a power loss. The daemon acknowledges a device frame only after its
record is appended, so an ACK means the event is durable; a
crash before that makes the device send the frame again (link-layer.md).

``seq`` is strictly increasing and never reused, also across restarts and even if rows
were ever deleted (``AUTOINCREMENT`` keeps the high-water mark in ``sqlite_sequence``).

The file is created mode 0600 (SQLite gives its ``-wal`` and ``-shm`` the same mode) and
its directory, when missing, 0700: the journal holds every card before it is face up
(shuffler-icd.md, "Card data is secret until it is face up"). One process writes a
journal at a time (an ``flock`` held while open); readers such as ``lammer journal`` may
read it while the daemon runs.

The API is synchronous: the daemon calls it from the event loop and each call is one
short transaction. ``batch()`` groups several appends into one transaction (one fsync),
which is how a device frame and everything it causes become durable together.

Marking a message published is committed without its own fsync: after a power loss a
message may go out twice, and its unchanged ``seq`` lets displays ignore the repeat
(mqtt-api.md, "Conventions"). Nothing is ever lost that way, and the event loop does not
wait for the disk after every publish.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from daemon.clock import format_ts, parse_ts
from daemon.errors import JournalError, JournalFileError, JournalValueError
from daemon.outbox import OutboxMessage

Kind = Literal["daemon", "device", "decision", "outcome", "alarm", "publish"]
KINDS: Final[tuple[str, ...]] = ("daemon", "device", "decision", "outcome", "alarm", "publish")
"""Record kinds: ``daemon`` (start, stop, configuration), ``device`` (a device fact or a
driver event: connected, disconnected, a bad frame with its raw bytes), ``decision`` (a
stickperson's request), ``outcome`` (what the rules concluded), ``alarm`` (raised,
cleared), ``publish`` (a message for MQTT; written only by ``append_publish``)."""

APPLICATION_ID: Final = 0x4C4D4A4E  # "LMJN" in PRAGMA application_id: a lammer journal
SCHEMA_VERSION: Final = 2  # PRAGMA user_version (2: outbox.refused)

_PAGE = 256  # rows fetched at a time by records()
_RESERVED = frozenset({"seq", "ts", "kind"})  # keys of an exported line (JournalRecord.to_json)

_SCHEMA = """
CREATE TABLE records (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    ts   TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE outbox (
    seq       INTEGER PRIMARY KEY REFERENCES records(seq),
    topic     TEXT NOT NULL,
    payload   BLOB NOT NULL,
    retained  INTEGER NOT NULL,
    published INTEGER NOT NULL DEFAULT 0,
    refused   TEXT
);
CREATE INDEX outbox_pending ON outbox(seq) WHERE published = 0;
CREATE TABLE retained_latest (
    topic TEXT PRIMARY KEY,
    seq   INTEGER NOT NULL REFERENCES outbox(seq)
);
"""


def _ts_text(ts: datetime) -> str:
    try:
        return format_ts(ts)
    except ValueError as exc:
        raise JournalValueError(str(exc)) from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalRecord:
    """One stored record. For ``publish``, ``record`` holds ``topic``, ``retained``,
    ``payload`` (the JSON object sent, ``seq`` and ``ts`` included) and ``published``."""

    seq: int
    ts: datetime
    kind: str
    record: dict[str, object]

    def to_json(self) -> dict[str, object]:
        """The record as one JSON object (``lammer journal`` writes one per line)."""
        return {"seq": self.seq, "ts": format_ts(self.ts), "kind": self.kind, **self.record}


def _dumps(value: object, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise JournalValueError(f"{what} is not JSON: {exc}") from exc


def _check_topic(topic: str) -> None:
    # Topics are relative to the table's base topic (daemon/outbox.py); a publish never
    # uses wildcards (MQTT 3.1.1 section 4.7.1).
    if not topic or topic.startswith("/") or topic.endswith("/") or "//" in topic:
        raise JournalValueError(f"bad topic {topic!r}: expected levels such as 'craps/board'")
    if any(c in "+#\0" for c in topic):
        raise JournalValueError(f"bad topic {topic!r}: wildcards are not allowed in a publish")


class Journal:
    """The SQLite journal of one table; also the ``Outbox`` of its MQTT link.

    Open with ``Journal.open(path)`` (or ``readonly=True`` to read one that may be in
    use); close with ``close()`` or use it as a context manager.
    """

    def __init__(
        self, conn: sqlite3.Connection, path: Path, *, readonly: bool, lock_fd: int | None
    ) -> None:
        """Use ``Journal.open``."""
        self._conn = conn
        self._path = path
        self._readonly = readonly
        self._lock_fd = lock_fd
        self._depth = 0  # nesting of batch()
        self._closed = False
        self._last_seq = self._read_last_seq()

    # -- opening and closing ----------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False) -> Journal:
        """Open the journal at ``path``.

        Read-write (the daemon): creates the file (0600) and its directory (0700) when
        missing, takes the single-writer lock, and sets up the schema. Read-only: never
        creates anything; a missing file is an error.

        Raises ``JournalFileError`` for a file that is missing (read-only), cannot be
        opened, is locked by another writer, or is not a lammer journal.
        """
        path = Path(path)
        if readonly:
            return cls._open_readonly(path)
        lock_fd: int | None = None
        try:
            _make_dirs(path.parent)
            lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _restrict_mode(path)
        except BlockingIOError:
            if lock_fd is not None:
                os.close(lock_fd)
            raise JournalFileError(
                f"journal {path} is in use by another process", path=path
            ) from None
        except OSError as exc:
            if lock_fd is not None:
                os.close(lock_fd)
            raise JournalFileError(
                f"cannot open journal {path}: {exc.strerror}", path=path
            ) from exc
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(path, isolation_level=None)
            _setup(conn, path)
            return cls(conn, path, readonly=False, lock_fd=lock_fd)
        except BaseException:
            if conn is not None:
                conn.close()
            os.close(lock_fd)  # only after SQLite closed: closing an fd drops POSIX locks
            raise

    @classmethod
    def _open_readonly(cls, path: Path) -> Journal:
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
            return cls(conn, path, readonly=True, lock_fd=None)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close the journal (idempotent). Everything appended is already durable."""
        if self._closed:
            return
        self._closed = True
        self._conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # after SQLite closed: see open()
            self._lock_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._path

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` ever given out (0 for a new journal)."""
        return self._last_seq

    # -- writing ----------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group appends into one transaction: all become durable together, or none.

        Nesting is allowed (only the outermost commits). On an exception everything of
        the batch is rolled back and the ``seq`` numbers it took are given out again.
        """
        self._writable()
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        start = self._last_seq
        self._conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._conn.execute("ROLLBACK")
            self._last_seq = start
            raise
        self._depth = 0
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.execute("ROLLBACK")
            self._last_seq = start
            raise JournalError(
                f"journal {self._path}: commit failed: {exc}", path=self._path
            ) from exc

    def append(self, kind: str, record: dict[str, object], *, ts: datetime) -> int:
        """Store one record and return its new ``seq``; durable when this returns
        (or when the enclosing ``batch()`` ends).

        ``kind`` is one of ``KINDS`` except ``publish`` (use ``append_publish``);
        ``record`` is a JSON object (``daemon.records.to_record`` makes one from an event).
        Raises ``JournalValueError`` for a bad kind, a naive ``ts`` or a non-JSON record.
        """
        if kind not in KINDS or kind == "publish":
            allowed = ", ".join(k for k in KINDS if k != "publish")
            hint = " (use append_publish)" if kind == "publish" else ""
            raise JournalValueError(f"bad record kind {kind!r}{hint}: expected one of {allowed}")
        if not isinstance(record, dict):
            raise JournalValueError(f"record must be a dict, got {type(record).__name__}")
        reserved = sorted(_RESERVED & record.keys())
        if reserved:
            # The export writes seq, ts and kind beside the record's keys (JournalRecord).
            raise JournalValueError(
                f"record must not hold {', '.join(reserved)}: the journal adds them"
            )
        body = _dumps(record, "record")
        ts_text = _ts_text(ts)
        with self.batch():
            seq = self._last_seq + 1
            self._conn.execute(
                "INSERT INTO records (seq, ts, kind, body) VALUES (?, ?, ?, ?)",
                (seq, ts_text, kind, body),
            )
            self._last_seq = seq
        return seq

    def append_publish(
        self, topic: str, body: dict[str, object], *, retained: bool, ts: datetime
    ) -> OutboxMessage:
        """Store a message for MQTT and queue it in the outbox; returns it as published.

        ``topic`` is relative to the table's base topic (``craps/board``). The payload is
        ``body`` as compact UTF-8 JSON with ``seq`` and ``ts`` added (mqtt-api.md: every
        JSON payload has them); ``body`` must not hold them already. The caller puts
        ``table`` in ``body``.
        """
        _check_topic(topic)
        if not isinstance(body, dict):
            raise JournalValueError(f"body must be a dict, got {type(body).__name__}")
        clash = sorted({"seq", "ts"} & body.keys())
        if clash:
            raise JournalValueError(f"body must not hold {', '.join(clash)}: the journal adds them")
        ts_text = _ts_text(ts)
        meta = _dumps({"topic": topic, "retained": bool(retained)}, "topic")
        with self.batch():
            seq = self._last_seq + 1
            payload = _dumps({**body, "seq": seq, "ts": ts_text}, "body").encode("utf-8")
            self._conn.execute(
                "INSERT INTO records (seq, ts, kind, body) VALUES (?, ?, 'publish', ?)",
                (seq, ts_text, meta),
            )
            self._conn.execute(
                "INSERT INTO outbox (seq, topic, payload, retained) VALUES (?, ?, ?, ?)",
                (seq, topic, payload, int(bool(retained))),
            )
            self._last_seq = seq
        return OutboxMessage(seq=seq, topic=topic, payload=payload, retained=bool(retained))

    # -- the Outbox protocol (daemon/outbox.py) ---------------------------------------

    def set_aside(self, seq: int, reason: str) -> None:
        """Take message ``seq`` out of the queue because the client or the broker refused
        it (``reason`` says why); it stays in the journal, marked refused, for review.

        Committed like ``mark_published``. Raises ``JournalValueError`` for a ``seq``
        that is not a message.
        """
        self._writable()
        row = self._conn.execute("SELECT 1 FROM outbox WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            raise JournalValueError(f"seq {seq} is not a message of the outbox", path=self._path)
        with self.batch():
            self._conn.execute(
                "UPDATE outbox SET published = 1, refused = ? WHERE seq = ?", (reason[:500], seq)
            )

    def pending(self, limit: int = 100) -> list[OutboxMessage]:
        """Messages not yet published, in ``seq`` order, at most ``limit``."""
        rows = self._conn.execute(
            "SELECT seq, topic, payload, retained FROM outbox WHERE published = 0 "
            "ORDER BY seq LIMIT ?",
            (limit,),
        ).fetchall()
        return [_message(row) for row in rows]

    def mark_published(self, seq: int) -> None:
        """Record that message ``seq`` reached the broker. Idempotent.

        Committed without an fsync of its own (see the module docstring): after a power
        loss the message may be published again with its same ``seq``.
        Raises ``JournalValueError`` for a ``seq`` that is not a message.
        """
        self._writable()
        row = self._conn.execute(
            "SELECT topic, retained, published FROM outbox WHERE seq = ?", (seq,)
        ).fetchone()
        if row is None:
            raise JournalValueError(f"seq {seq} is not a message of the outbox", path=self._path)
        topic, retained, published = row
        if published:
            return
        relaxed = self._depth == 0
        if relaxed:
            self._conn.execute("PRAGMA synchronous = NORMAL")
        try:
            with self.batch():
                self._conn.execute("UPDATE outbox SET published = 1 WHERE seq = ?", (seq,))
                if retained:
                    self._conn.execute(
                        "INSERT INTO retained_latest (topic, seq) VALUES (?, ?) "
                        "ON CONFLICT (topic) DO UPDATE SET seq = excluded.seq "
                        "WHERE excluded.seq > retained_latest.seq",
                        (topic, seq),
                    )
        finally:
            if relaxed:
                self._conn.execute("PRAGMA synchronous = FULL")

    def retained(self) -> list[OutboxMessage]:
        """The latest published retained message of every topic, in ``seq`` order."""
        rows = self._conn.execute(
            "SELECT o.seq, o.topic, o.payload, o.retained FROM retained_latest r "
            "JOIN outbox o ON o.seq = r.seq ORDER BY o.seq"
        ).fetchall()
        return [_message(row) for row in rows]

    # -- reading ----------------------------------------------------------------------

    def records(self, after_seq: int = 0, *, kind: str | None = None) -> Iterator[JournalRecord]:
        """Stored records with ``seq > after_seq`` in ``seq`` order (replay, export),
        optionally only one ``kind``. Reads in pages, so appending meanwhile is safe."""
        if kind is not None and kind not in KINDS:
            raise JournalValueError(f"bad record kind {kind!r}: expected one of {', '.join(KINDS)}")
        last = after_seq
        while True:
            query = (
                "SELECT r.seq, r.ts, r.kind, r.body, o.payload, o.published, o.refused "
                "FROM records r "
                "LEFT JOIN outbox o ON o.seq = r.seq WHERE r.seq > ?"
                + (" AND r.kind = ?" if kind is not None else "")
                + " ORDER BY r.seq LIMIT ?"
            )
            params: tuple[object, ...] = (last, kind, _PAGE) if kind else (last, _PAGE)
            try:
                rows = self._conn.execute(query, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise JournalFileError(f"journal {self._path}: {exc}", path=self._path) from exc
            for seq, ts_text, row_kind, body, payload, published, refused in rows:
                record = json.loads(body)
                if row_kind == "publish" and payload is not None:
                    record["payload"] = json.loads(payload)
                    record["published"] = bool(published) and refused is None
                    if refused is not None:
                        record["refused"] = refused
                yield JournalRecord(seq=seq, ts=parse_ts(ts_text), kind=row_kind, record=record)
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

    # -- internals --------------------------------------------------------------------

    def _writable(self) -> None:
        if self._readonly:
            raise JournalValueError(f"journal {self._path} is open read-only", path=self._path)

    def _read_last_seq(self) -> int:
        row = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'records'"
        ).fetchone()
        return int(row[0]) if row else 0


def _message(row: tuple[int, str, bytes, int]) -> OutboxMessage:
    seq, topic, payload, retained = row
    return OutboxMessage(seq=seq, topic=topic, payload=bytes(payload), retained=bool(retained))


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


def _setup(conn: sqlite3.Connection, path: Path) -> None:
    new = _check_identity(conn, path, allow_new=True)
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise JournalFileError(f"journal {path}: cannot use WAL mode (got {mode})", path=path)
    # FULL: the WAL is fsynced at every commit, so an appended record survives power loss.
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    if new:
        conn.execute("BEGIN IMMEDIATE")
        _create(conn)
        conn.execute("COMMIT")
    else:
        _migrate(conn)
    _restrict_mode(path)


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a journal of an older schema up to ``SCHEMA_VERSION`` (one transaction)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    if version < 2:  # schema 2 added outbox.refused
        conn.execute("ALTER TABLE outbox ADD COLUMN refused TEXT")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("COMMIT")


def _create(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
