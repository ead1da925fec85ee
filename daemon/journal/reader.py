"""Reading a journal segment's records back: all of them in ``seq`` order, in pages (replay,
export), exactly as stored (the chain's check), and the few a start or a rotation looks up
(the latest snapshot, the first record, the last kind, the lowest ``seq``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Final

from daemon.clock import parse_ts
from daemon.errors import JournalValueError
from daemon.journal.record import KINDS, JournalRecord, RawRecord
from daemon.journal.store import Store

PAGE: Final = 256
"""Rows fetched at a time by ``records`` and ``raw_records``."""


class Reader:
    """The records of ``store``, read through its current connection."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def records(self, after_seq: int = 0, *, kind: str | None = None) -> Iterator[JournalRecord]:
        """Stored records with ``seq > after_seq`` in ``seq`` order, optionally only one
        ``kind``; a message's record with its payload and whether it went out."""
        if kind is not None and kind not in KINDS:
            raise JournalValueError(f"bad record kind {kind!r}: expected one of {', '.join(KINDS)}")
        last = after_seq
        while True:
            query = (
                "SELECT r.seq, r.ts, r.kind, r.body, o.payload, o.published, o.refused "
                "FROM records r LEFT JOIN outbox o ON o.seq = r.seq AND r.kind = 'publish' "
                "WHERE r.seq > ?"
                + (" AND r.kind = ?" if kind is not None else "")
                + " ORDER BY r.seq LIMIT ?"
            )
            params: tuple[object, ...] = (last, kind, PAGE) if kind else (last, PAGE)
            rows = self._store.read(query, params)
            for seq, ts_text, row_kind, body, payload, published, refused in rows:
                record = json.loads(body)
                if row_kind == "publish" and payload is not None:
                    record["payload"] = json.loads(payload)
                    record["published"] = bool(published) and refused is None
                    if refused is not None:
                        record["refused"] = refused
                yield JournalRecord(seq=seq, ts=parse_ts(ts_text), kind=row_kind, record=record)
            if len(rows) < PAGE:
                return
            last = rows[-1][0]

    def raw_records(self, after_seq: int = 0) -> Iterator[RawRecord]:
        """Records exactly as stored, a message's with the payload stored with it, if this
        segment still has it."""
        last = after_seq
        while True:
            rows = self._store.read(
                "SELECT r.seq, r.ts, r.kind, r.body, o.payload, r.hash FROM records r "
                "LEFT JOIN outbox o ON o.seq = r.seq AND r.kind = 'publish' "
                "WHERE r.seq > ? ORDER BY r.seq LIMIT ?",
                (last, PAGE),
            )
            for seq, ts_text, kind, body, payload, digest in rows:
                yield RawRecord(
                    seq=seq,
                    ts=ts_text,
                    kind=kind,
                    body=body,
                    payload=None if payload is None else bytes(payload),
                    hash=bytes(digest),
                )
            if len(rows) < PAGE:
                return
            last = rows[-1][0]

    def latest_snapshot(self) -> JournalRecord | None:
        """The newest ``snapshot`` record, or None (an index on kind finds it at once)."""
        row = self._store.read(
            "SELECT seq, ts, body FROM records WHERE kind = 'snapshot' ORDER BY seq DESC LIMIT 1",
            (),
        )
        if not row:
            return None
        seq, ts_text, body = row[0]
        return JournalRecord(
            seq=seq, ts=parse_ts(ts_text), kind="snapshot", record=json.loads(body)
        )

    def first_record(self) -> JournalRecord | None:
        """The oldest record (a segment's ``segment`` header, if it has one)."""
        row = self._store.read("SELECT seq, ts, kind, body FROM records ORDER BY seq LIMIT 1", ())
        if not row:
            return None
        seq, ts_text, kind, body = row[0]
        return JournalRecord(
            seq=int(str(seq)),
            ts=parse_ts(str(ts_text)),
            kind=str(kind),
            record=json.loads(str(body)),
        )

    def last_kind(self) -> str | None:
        """The kind of the latest record."""
        row = self._store.read("SELECT kind FROM records ORDER BY seq DESC LIMIT 1", ())
        return str(row[0][0]) if row else None

    def first_seq(self) -> int | None:
        """The lowest ``seq`` held, a record's or a carried message's."""
        row = self._store.read(
            "SELECT min(s) FROM (SELECT min(seq) AS s FROM records "
            "UNION ALL SELECT min(seq) FROM outbox)",
            (),
        )
        return row[0][0] if row and row[0][0] is not None else None
