"""The end of a journal's hash chain, kept in memory: the highest ``seq`` given out and the
latest record's hash. Read from the file once (and again after a reconnect), so that an
append costs no query for them; each record appended extends it."""

from __future__ import annotations

from daemon.journal.chain import GENESIS, canonical, chain
from daemon.journal.store import Store

TipState = tuple[int, bytes]
"""What ``Tip.save`` returns and ``Tip.restore`` takes: the last seq and hash."""


class Tip:
    """The chain's end in ``store``: ``last_seq`` and ``last_hash``. ``append`` writes a
    record after them with its hash (HMAC with ``key`` when the table has one). A
    transaction that is rolled back gives its ``seq`` numbers out again: ``save`` before
    it, ``restore`` after."""

    def __init__(self, store: Store, key: bytes | None) -> None:
        self._store = store
        self._key = key
        self.last_seq = 0
        """The highest ``seq`` ever given out (0 for a new journal)."""
        self.last_hash = GENESIS
        """The hash of the latest record (``GENESIS`` for an empty journal)."""
        self.reload()

    def reload(self) -> None:
        """Read the end from the file (``AUTOINCREMENT`` keeps the high-water mark of
        ``seq`` in ``sqlite_sequence``, even past deleted rows)."""
        conn = self._store.conn
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
        self.last_seq = int(row[0]) if row else 0
        row = conn.execute("SELECT hash FROM records ORDER BY seq DESC LIMIT 1").fetchone()
        self.last_hash = bytes(row[0]) if row else GENESIS

    def save(self) -> TipState:
        """The end as it is now."""
        return self.last_seq, self.last_hash

    def restore(self, state: TipState) -> None:
        """Back to a saved end (what a rolled-back transaction took is given out again)."""
        self.last_seq, self.last_hash = state

    def append(self, kind: str, body: str, ts_text: str, payload: bytes | None = None) -> int:
        """Write the record after the end (inside the caller's transaction); its ``seq``."""
        seq = self.last_seq + 1
        digest = chain(self.last_hash, canonical(seq, ts_text, kind, body, payload), self._key)
        self._store.execute(
            "INSERT INTO records (seq, ts, kind, body, hash) VALUES (?, ?, ?, ?, ?)",
            "write a record",
            (seq, ts_text, kind, body, digest),
        )
        self.last_seq, self.last_hash = seq, digest
        return seq

    def continue_from(self, last_seq: int, last_hash: bytes) -> None:
        """Go on after the end of another segment's chain (this one is empty)."""
        self._store.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('records', ?)",
            "continue the sequence",
            (last_seq,),
        )
        self.last_seq, self.last_hash = last_seq, last_hash

    def skip_to(self, last_seq: int) -> None:
        """The next record gets ``last_seq + 1``."""
        self._store.execute(
            "UPDATE sqlite_sequence SET seq = ? WHERE name = 'records'",
            "skip the sequence",
            (last_seq,),
        )
        self.last_seq = last_seq
