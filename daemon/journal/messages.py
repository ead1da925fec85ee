"""The outbox of one journal segment: the messages for MQTT, each stored beside its
``publish`` record, queued until the broker acknowledged it (or set aside when refused), the
latest retained one of each topic, and what a rotation carries over to the next segment.
``daemon.outbox`` is the protocol the MQTT link drains it through."""

from __future__ import annotations

import sqlite3

from daemon.errors import JournalError, JournalValueError
from daemon.journal.store import Store
from daemon.outbox import OutboxMessage

MessagesState = tuple[int | None, bool]
"""What ``Messages.save`` returns and ``Messages.restore`` takes."""

Unmarked = list[tuple[int, str, int]]
"""Messages to mark published: ``(seq, topic, retained)`` each (``Messages.unmarked``)."""

Carried = tuple[list[tuple[object, ...]], list[tuple[object, ...]]]
"""The outbox rows and the retained index a rotation carries over (``Messages.carried``)."""


def check_message(topic: str, body: object) -> None:
    """Raise ``JournalValueError`` unless ``topic`` is a publish topic and ``body`` a dict
    without the keys the journal adds (``seq``, ``prev_seq``, ``ts``)."""
    # Topics are relative to the table's base topic (daemon/outbox.py); a publish never
    # uses wildcards (MQTT 3.1.1 section 4.7.1).
    if not topic or topic.startswith("/") or topic.endswith("/") or "//" in topic:
        raise JournalValueError(f"bad topic {topic!r}: expected levels such as 'craps/board'")
    if any(c in "+#\0" for c in topic):
        raise JournalValueError(f"bad topic {topic!r}: wildcards are not allowed in a publish")
    if not isinstance(body, dict):
        raise JournalValueError(f"body must be a dict, got {type(body).__name__}")
    clash = sorted({"seq", "prev_seq", "ts"} & body.keys())
    if clash:
        raise JournalValueError(f"body must not hold {', '.join(clash)}: the journal adds them")


class Messages:
    """The ``outbox`` and ``retained_latest`` tables of ``store``; also the ``seq`` of the
    latest message, a new one's ``prev_seq``, kept in memory once read."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._last: int | None = None
        """The seq of the outbox's latest message (a new one's ``prev_seq``), once read:
        kept here, a message costs no query for it."""
        self._last_read = False

    def last(self) -> int | None:
        """The ``seq`` of the latest message (None before the first)."""
        if not self._last_read:
            row = self._store.conn.execute("SELECT max(seq) FROM outbox").fetchone()
            self._last = None if row is None or row[0] is None else int(row[0])
            self._last_read = True
        return self._last

    def forget(self) -> None:
        """Read the latest message from the file again when next needed."""
        self._last_read = False

    def save(self) -> MessagesState:
        """What ``restore`` puts back after a rolled-back transaction."""
        return self._last, self._last_read

    def restore(self, state: MessagesState) -> None:
        """Back to a saved state."""
        self._last, self._last_read = state

    def queue(self, seq: int, topic: str, payload: bytes, *, retained: bool) -> None:
        """Queue message ``seq`` (its record was just written in the same transaction)."""
        self._store.execute(
            "INSERT INTO outbox (seq, topic, payload, retained) VALUES (?, ?, ?, ?)",
            "queue a message",
            (seq, topic, payload, int(bool(retained))),
        )
        self._last = seq

    def carried(self) -> Carried:
        """What the next segment takes over at a rotation: the messages not yet published,
        the latest retained ones, and the index of those."""
        # The last message comes too (published or not), so the next segment's first
        # message names it as its prev_seq (append_publish).
        rows = self._store.conn.execute(
            "SELECT seq, topic, payload, retained, published, refused FROM outbox "
            "WHERE published = 0 OR seq IN (SELECT seq FROM retained_latest) "
            "OR seq = (SELECT max(seq) FROM outbox) ORDER BY seq"
        ).fetchall()
        latest = self._store.conn.execute("SELECT topic, seq FROM retained_latest").fetchall()
        return rows, latest

    def take_over(self, carried: Carried) -> int:
        """Store what ``carried`` read from the segment before; how many messages came."""
        rows, latest = carried
        self._store.conn.executemany(
            "INSERT INTO outbox (seq, topic, payload, retained, published, refused) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        self._store.conn.executemany(
            "INSERT INTO retained_latest (topic, seq) VALUES (?, ?)", latest
        )
        self._last_read = False
        return len(rows)

    def require(self, seq: int) -> None:
        """Raise ``JournalValueError`` unless ``seq`` is a message of the outbox."""
        row = self._store.conn.execute("SELECT 1 FROM outbox WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            raise JournalValueError(
                f"seq {seq} is not a message of the outbox", path=self._store.path
            )

    def set_aside(self, seq: int, reason: str) -> None:
        """Mark message ``seq`` refused, with the first 500 characters of ``reason``."""
        self._store.execute(
            "UPDATE outbox SET published = 1, refused = ? WHERE seq = ?",
            "set a message aside",
            (reason[:500], seq),
        )

    def pending(self, limit: int) -> list[OutboxMessage]:
        """Messages not yet published, in ``seq`` order, at most ``limit``."""
        rows = self._store.conn.execute(
            "SELECT seq, topic, payload, retained FROM outbox WHERE published = 0 "
            "ORDER BY seq LIMIT ?",
            (limit,),
        ).fetchall()
        return [_message(row) for row in rows]

    def pending_count(self) -> int:
        """How many messages are not yet published."""
        row = self._store.execute(
            "SELECT count(*) FROM outbox WHERE published = 0", "count the outbox"
        ).fetchone()
        return int(row[0])

    def unmarked(self, seqs: tuple[int, ...]) -> Unmarked:
        """Those of messages ``seqs`` not marked yet, in the order given. Raises
        ``JournalValueError`` for a ``seq`` that is not a message."""
        found = {
            seq: (topic, retained, published)
            for seq, topic, retained, published in self._store.conn.execute(
                "SELECT seq, topic, retained, published FROM outbox "  # noqa: S608  only '?' placeholders are joined in; the seqs are parameters
                f"WHERE seq IN ({','.join('?' * len(seqs))})",
                seqs,
            )
        }
        missing = [seq for seq in seqs if seq not in found]
        if missing:
            raise JournalValueError(
                f"seq {missing[0]} is not a message of the outbox", path=self._store.path
            )
        return [(seq, found[seq][0], found[seq][1]) for seq in seqs if not found[seq][2]]

    def mark(self, rows: Unmarked) -> None:
        """Mark ``rows`` published and index the retained ones as their topic's latest
        (inside the caller's transaction)."""
        # One statement for the marks and one for the retained: a frame's messages
        # are marked together, and each statement costs more than its rows.
        self._store.execute(
            "UPDATE outbox SET published = 1 "  # noqa: S608  only '?' placeholders are joined in
            f"WHERE seq IN ({','.join('?' * len(rows))})",
            "mark a message",
            tuple(seq for seq, _, _ in rows),
        )
        latest = [(topic, seq) for seq, topic, retained in rows if retained]
        if latest:
            try:
                self._store.conn.executemany(
                    "INSERT INTO retained_latest (topic, seq) VALUES (?, ?) "
                    "ON CONFLICT (topic) DO UPDATE SET seq = excluded.seq "
                    "WHERE excluded.seq > retained_latest.seq",
                    latest,
                )
            except sqlite3.Error as exc:
                raise JournalError(
                    f"journal {self._store.path}: cannot mark a retained message: {exc}",
                    path=self._store.path,
                ) from exc

    def retained(self) -> list[OutboxMessage]:
        """The latest published retained message of every topic, in ``seq`` order."""
        rows = self._store.conn.execute(
            "SELECT o.seq, o.topic, o.payload, o.retained FROM retained_latest r "
            "JOIN outbox o ON o.seq = r.seq ORDER BY o.seq"
        ).fetchall()
        return [_message(row) for row in rows]

    def published_between(self, from_seq: int, to_seq: int) -> list[OutboxMessage]:
        """The messages with ``from_seq <= seq <= to_seq`` that reached the broker
        (published, not set aside), in ``seq`` order, exact bytes."""
        rows = self._store.read(
            "SELECT seq, topic, payload, retained FROM outbox "
            "WHERE seq BETWEEN ? AND ? AND published = 1 AND refused IS NULL ORDER BY seq",
            (from_seq, to_seq),
        )
        return [_message(row) for row in rows]


def _message(row: tuple[int, str, bytes, int]) -> OutboxMessage:
    seq, topic, payload, retained = row
    return OutboxMessage(seq=seq, topic=topic, payload=bytes(payload), retained=bool(retained))
