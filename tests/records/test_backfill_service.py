"""The records service's side of the backfill, on the tests' real PostgreSQL (no broker:
``Records`` is driven by hand, its clock passed in): a gap the feed gives up on becomes a
backfill job kept in the store, not a gap; what the job brings is checked and stored once;
a table first seen is backfilled below its first live message."""

from __future__ import annotations

import json

import psycopg

from contract.feed import Resend
from records.service import Records
from tests.helpers.records_service import settings_for
from tests.helpers.records_tables import roll, stored
from tests.records.conftest import StoreDb


def _drain(records: Records) -> None:
    while (batch := records.take()) is not None:
        records.commit(batch)
        records.committed(batch)


def _rows(store_db: StoreDb, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(store_db.dsn) as conn:
        return conn.execute(query).fetchall()


def _answer(ask: Resend, seq: int, sent: int) -> bytes:
    body = {
        "table": "t1",
        "seq": seq,
        "ts": "2026-12-02T12:00:00.000Z",
        "prev_seq": seq - 1,
        "request_id": ask.request_id,
        "status": "ok",
        "error": None,
        "sent": sent,
        "missing_before": None,
    }
    return json.dumps(body).encode()


def test_a_gap_too_long_for_the_feed_is_backfilled_not_given_up(store_db: StoreDb) -> None:
    with psycopg.connect(store_db.dsn) as conn:
        records = Records(settings_for(store_db), conn)
        for seq in range(1, 4):
            records.handle("lammer/t1/craps/roll", roll("t1", seq, seq - 1 or None), 0.0)
        _drain(records)
        # The service was away: rolls 4 to 9 never came; 10 does, and no answer to the feed.
        records.handle("lammer/t1/craps/roll", roll("t1", 10, 9), 1.0)
        now = 1.0
        asks: list[Resend] = []
        while now < 200 and not any(a.request_id.startswith("backfill-") for a in asks):
            now += 1.0
            asks += records.tick(now)
            _drain(records)
        (page,) = [a for a in asks if a.request_id.startswith("backfill-")]
        assert (page.from_seq, page.to_seq) == (4, 9)
        assert _rows(store_db, "SELECT base, floor, top FROM backfill") == [("lammer/t1", 4, 9)]
        assert _rows(store_db, "SELECT * FROM gap") == []
        # The table serves the page: the copies (marked), then its answer.
        for seq in range(4, 10):
            copy = json.loads(roll("t1", seq, seq - 1))
            records.handle(
                "lammer/t1/craps/roll", json.dumps({**copy, "resent": True}).encode(), now
            )
        records.handle("lammer/t1/response/resend", _answer(page, 11, 6), now)
        records.tick(now + 1)
        _drain(records)
    assert sorted(stored(store_db)) == [("t1", s) for s in range(1, 11)]
    assert _rows(store_db, "SELECT * FROM backfill") == []
    assert _rows(store_db, "SELECT * FROM gap") == []


def test_a_table_first_seen_is_asked_for_what_came_before(store_db: StoreDb) -> None:
    with psycopg.connect(store_db.dsn) as conn:
        records = Records(settings_for(store_db), conn)
        records.handle("lammer/t1/craps/roll", roll("t1", 50, 49), 0.0)
        _drain(records)
        asks = records.tick(1.0)
        _drain(records)
    (page,) = [a for a in asks if a.request_id.startswith("backfill-")]
    assert (page.from_seq, page.to_seq) == (1, 49)
    assert _rows(store_db, "SELECT base, floor, top, next_seq FROM backfill") == [
        ("lammer/t1", 1, 49, 49)
    ]
