"""``Journal``, the face of one table's journal segment: what the daemon, the MQTT link and
``lammer journal`` call, each call composed of the parts of one job each (see
``daemon.journal``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from daemon.errors import JournalError, JournalValueError
from daemon.journal.messages import Messages, MessagesState, check_message
from daemon.journal.reader import Reader
from daemon.journal.record import (
    RESERVED,
    WRITABLE_KINDS,
    JournalRecord,
    RawRecord,
    dumps,
    ts_text,
)
from daemon.journal.store import Store, lock
from daemon.journal.tip import Tip, TipState
from daemon.outbox import OutboxMessage


class Journal:
    """The SQLite journal of one table (its live segment); also the ``Outbox`` of its MQTT
    link.

    Open with ``Journal.open(path)`` (or ``readonly=True`` to read one that may be in
    use); close with ``close()`` or use it as a context manager. ``key`` is the HMAC key
    of the hash chain, if the table has one.
    """

    def __init__(self, store: Store) -> None:
        """Use ``Journal.open``."""
        self._store = store
        self._depth = 0  # nesting of batch()
        self._tip = Tip(store, store.key)
        self._messages = Messages(store)
        self._reader = Reader(store)

    # -- opening and closing ----------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False, key: bytes | None = None) -> Journal:
        """Open the journal at ``path``.

        Read-write (the daemon): creates the file (0600) and its directory (0700) when
        missing, takes the single-writer lock, and sets up the schema. Read-only: never
        creates anything; a missing file is an error.

        Raises ``JournalFileError`` for a file that is missing (read-only), cannot be
        opened, is locked by another writer, or is not a lammer journal.
        """
        path = Path(path)
        if readonly:
            return cls._opened(Store.open_readonly(path, key))
        lock_fd = lock(path)
        try:
            return cls.open_locked(path, lock_fd, key=key)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def open_locked(cls, path: Path, lock_fd: int | None, *, key: bytes | None = None) -> Journal:
        """Open ``path`` read-write under a lock already held (``lock``; None for a
        segment being written beside the live one, under the live one's lock)."""
        return cls._opened(Store.open_locked(path, lock_fd, key))

    @classmethod
    def _opened(cls, store: Store) -> Journal:
        # The connection is closed if the journal cannot read its end; the lock is the
        # opener's to release.
        try:
            return cls(store)
        except BaseException:
            store.conn.close()
            raise

    def close(self) -> None:
        """Close the journal (idempotent). Everything appended is already durable."""
        self._store.close()

    def reconnect(self) -> None:
        """Close and open the database again (same file, same lock): after SQLite refused a
        write (a full disk), a fresh connection starts from what is on disk, whatever
        state the old one was left in. Raises ``JournalFileError`` if it cannot."""
        self._store.writable()
        if self._depth:
            raise JournalValueError("cannot reconnect inside a batch", path=self.path)
        self._store.reconnect()
        self._tip.reload()
        self._messages.forget()

    def replace_file(self, replace: Callable[[], None]) -> None:
        """Close the database, keeping the single-writer lock; let ``replace`` put another
        file at this path (a segment rotation, ``daemon.upkeep``: the sealed segment goes to
        the archive, the next one takes its place); open that one. The same object goes on
        in the new file, so whoever holds it (the MQTT link's outbox) follows. Raises what
        ``replace`` raises (the database stays closed), or ``JournalFileError``."""
        self._store.writable()
        if self._depth:
            raise JournalValueError("cannot replace the file inside a batch", path=self.path)
        # Closed before the files move: a connection closed after would checkpoint into, and
        # delete, the WAL now at the live path, which is the next segment's.
        self._store.conn.close()
        replace()
        self.reconnect()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._store.path

    @property
    def key(self) -> bytes | None:
        """The HMAC key of the chain (None: plain SHA-256)."""
        return self._store.key

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` ever given out (0 for a new journal)."""
        return self._tip.last_seq

    @property
    def in_batch(self) -> bool:
        """Inside a ``batch()`` (the outermost one has not ended yet)."""
        return self._depth > 0

    @property
    def last_hash(self) -> bytes:
        """The hash of the latest record (``GENESIS`` for an empty journal)."""
        return self._tip.last_hash

    # -- writing ----------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group appends into one transaction: all become durable together, or none.

        Nesting is allowed (only the outermost commits). On an exception everything of
        the batch is rolled back and the ``seq`` numbers it took are given out again.
        Raises ``JournalError`` when SQLite cannot begin or commit (a full disk, an I/O
        error), with SQLite's own reason.
        """
        self._store.writable()
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        start = self._tip.save(), self._messages.save()
        self._store.begin()
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._store.rollback()
            self._restore(start)
            raise
        self._depth = 0
        try:
            self._store.commit()
        except JournalError:
            self._restore(start)
            raise

    def _restore(self, start: tuple[TipState, MessagesState]) -> None:
        # What a rolled-back transaction took is given out again.
        self._tip.restore(start[0])
        self._messages.restore(start[1])

    def append(self, kind: str, record: dict[str, object], *, ts: datetime) -> int:
        """Store one record and return its new ``seq``; durable when this returns
        (or when the enclosing ``batch()`` ends).

        ``kind`` is one of ``WRITABLE_KINDS``; ``record`` is a JSON object
        (``daemon.records.to_record`` makes one from an event). Raises
        ``JournalValueError`` for a bad kind, a naive ``ts`` or a non-JSON record.
        """
        if kind not in WRITABLE_KINDS:
            allowed = ", ".join(sorted(WRITABLE_KINDS))
            hint = " (use append_publish)" if kind == "publish" else ""
            raise JournalValueError(f"bad record kind {kind!r}{hint}: expected one of {allowed}")
        if not isinstance(record, dict):
            raise JournalValueError(f"record must be a dict, got {type(record).__name__}")
        reserved = sorted(RESERVED & record.keys())
        if reserved:
            # The export writes seq, ts and kind beside the record's keys (JournalRecord).
            raise JournalValueError(
                f"record must not hold {', '.join(reserved)}: the journal adds them"
            )
        body = dumps(record)
        at = ts_text(ts)
        with self.batch():
            return self._tip.append(kind, body, at)

    def append_publish(
        self, topic: str, body: dict[str, object], *, retained: bool, ts: datetime
    ) -> OutboxMessage:
        """Store a message for MQTT and queue it in the outbox; returns it as published.

        ``topic`` is relative to the table's base topic (``craps/board``). The payload is
        ``body`` as compact UTF-8 JSON with ``seq``, ``prev_seq`` (the seq of the message
        before, null for the first) and ``ts`` added (mqtt-api.md: every JSON payload has
        ``seq`` and ``ts``); ``body`` must not hold them already. The caller puts
        ``table`` in ``body``.
        """
        check_message(topic, body)
        at = ts_text(ts)
        meta = dumps({"topic": topic, "retained": bool(retained)}, "topic")
        with self.batch():
            seq = self._tip.last_seq + 1
            # prev_seq: the seq of the message published before this one (null for a
            # journal's first), so a subscriber knows a gap from a seq that was a record
            # and not a message (contract.feed). Read inside the transaction, once.
            prev = self._messages.last()
            payload = dumps({**body, "seq": seq, "prev_seq": prev, "ts": at}, "body").encode(
                "utf-8"
            )
            self._tip.append("publish", meta, at, payload)
            self._messages.queue(seq, topic, payload, retained=retained)
        return OutboxMessage(seq=seq, topic=topic, payload=payload, retained=bool(retained))

    def append_segment(self, header: dict[str, object], *, ts: datetime) -> int:
        """The first record of a new segment: ``header`` names the segment before it and
        the hash of its last record, which the chain continues from (``start_chain``)."""
        with self.batch():
            return self._tip.append("segment", dumps(header, "segment header"), ts_text(ts))

    def seal(self, summary: dict[str, object], *, ts: datetime) -> tuple[int, bytes]:
        """The last record of a segment that closes; returns its ``seq`` and hash, which
        the next segment's first record names."""
        body = dumps({**summary, "last_hash": self._tip.last_hash.hex()}, "seal")
        with self.batch():
            seq = self._tip.append("seal", body, ts_text(ts))
        return seq, self._tip.last_hash

    def start_chain(self, last_seq: int, last_hash: bytes) -> None:
        """Continue ``seq`` and the chain of the segment before this (new, empty) one."""
        self._store.writable()
        if self._tip.last_seq:
            raise JournalValueError(f"journal {self.path} is not empty", path=self.path)
        with self.batch():
            self._tip.continue_from(last_seq, last_hash)

    def skip_to(self, last_seq: int) -> None:
        """The next record gets ``last_seq + 1`` (a gap the caller records at once: a
        ``daemon`` record ``seq_gap``, which ``lammer journal verify`` accepts)."""
        self._store.writable()
        if last_seq <= self._tip.last_seq:
            raise JournalValueError(f"seq {last_seq} is not above {self._tip.last_seq}")
        with self.batch():
            self._tip.skip_to(last_seq)

    def copy_outbox(self, source: Journal) -> int:
        """Carry the messages not yet published and the latest retained ones over from the
        segment before (rotation); returns how many rows came."""
        carried = source._messages.carried()
        with self.batch():
            return self._messages.take_over(carried)

    # -- the Outbox protocol (daemon/outbox.py) ---------------------------------------

    def set_aside(self, seq: int, reason: str) -> None:
        """Take message ``seq`` out of the queue because the client or the broker refused
        it (``reason`` says why); it stays in the journal, marked refused, for review.

        Committed like ``mark_published``. Raises ``JournalValueError`` for a ``seq``
        that is not a message.
        """
        self._store.writable()
        self._messages.require(seq)
        with self.batch():
            self._messages.set_aside(seq, reason)

    def pending(self, limit: int = 100) -> list[OutboxMessage]:
        """Messages not yet published, in ``seq`` order, at most ``limit``."""
        return self._messages.pending(limit)

    def pending_count(self) -> int:
        """How many messages are not yet published (the outbox's depth)."""
        return self._messages.pending_count()

    def mark_published(self, *seqs: int) -> None:
        """Record that messages ``seqs`` reached the broker, in one transaction.
        Idempotent.

        Committed without an fsync of its own (see ``daemon.journal``): after a power
        loss a message may be published again with its same ``seq``.
        Raises ``JournalValueError`` for a ``seq`` that is not a message (nothing is
        marked then).
        """
        self._store.writable()
        if not seqs:
            return
        rows = self._messages.unmarked(seqs)
        if not rows:
            return
        with self._store.relaxed(self._depth == 0), self.batch():
            self._messages.mark(rows)

    def retained(self) -> list[OutboxMessage]:
        """The latest published retained message of every topic, in ``seq`` order."""
        return self._messages.retained()

    # -- reading ----------------------------------------------------------------------

    def published_between(self, from_seq: int, to_seq: int) -> list[OutboxMessage]:
        """The messages of this segment with ``from_seq <= seq <= to_seq`` that reached
        the broker (published, not set aside), in ``seq`` order, exact bytes: what
        ``request/resend`` publishes again (mqtt-api.md 1.3)."""
        return self._messages.published_between(from_seq, to_seq)

    def first_seq(self) -> int | None:
        """The lowest ``seq`` this segment holds, a record's or a carried message's."""
        return self._reader.first_seq()

    def records(self, after_seq: int = 0, *, kind: str | None = None) -> Iterator[JournalRecord]:
        """Stored records with ``seq > after_seq`` in ``seq`` order (replay, export),
        optionally only one ``kind``. Reads in pages, so appending meanwhile is safe."""
        return self._reader.records(after_seq, kind=kind)

    def raw_records(self, after_seq: int = 0) -> Iterator[RawRecord]:
        """Records exactly as stored, for checking the chain (``daemon.verify``). A
        message's payload is the one stored with it, if this segment still has it."""
        return self._reader.raw_records(after_seq)

    def latest_snapshot(self) -> JournalRecord | None:
        """The newest ``snapshot`` record, or None."""
        return self._reader.latest_snapshot()

    def first_record(self) -> JournalRecord | None:
        """The oldest record of this segment (its ``segment`` header, if it has one)."""
        return self._reader.first_record()

    def last_kind(self) -> str | None:
        """The kind of the latest record (``seal`` for a closed segment)."""
        return self._reader.last_kind()

    def checkpoint(self) -> bool:
        """Move everything from the WAL into the database file and empty the WAL (before
        the file is archived). Never waits for a reader (the event loop must not stall: a
        frame's ACK is due within 250 ms): returns False when a reader kept the WAL from
        being emptied (``daemon.segments.archive`` then moves the WAL with the file)."""
        return self._store.checkpoint()
