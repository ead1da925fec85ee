"""``lammer web``'s records parts without a browser: the ``records_*`` settings, what a
``/reports`` query string may ask, and the store's integrity alarms (retained per table,
checked with the contract, cleared by an empty list or an empty retained message)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

import pytest

from display.errors import WebConfigError
from display.web.config import validate_web_config
from display.web.reports import MAX_DAYS, ReportUnavailable, question, today
from display.web.store import Store
from records.reports import FIRST_DAY, LAST_DAY

AREAS = {"Pit 1": ["bj-1", "uth-2"]}
LONG = "t" * 64
NOW = date(2026, 12, 1)


def test_the_records_settings_are_checked() -> None:
    config = validate_web_config(
        {
            "records_db": "host=floor-db dbname=lammer_records user=records_reader",
            "records_day_starts": "05:30",
            "records_timezone": "Europe/Paris",
            "records_big_hit": 250,
        }
    )
    assert config.day_starts == time(5, 30)
    assert config.records_timezone == "Europe/Paris"
    with pytest.raises(WebConfigError) as info:
        validate_web_config(
            {
                "records_db": "host=db user=r password=hunter2",
                "records_day_starts": "6am",
                "records_timezone": "Mars/Olympus",
                "records_big_hit": 1,
            }
        )
    problems = info.value.problems
    assert any(p.startswith("records_db: give its password in a pgpass file") for p in problems), (
        problems
    )
    assert any(p.startswith("records_day_starts: must be HH:MM") for p in problems), problems
    assert any(p.startswith("records_timezone: not a time zone") for p in problems), problems
    assert any(p.startswith("records_big_hit:") for p in problems), problems
    with pytest.raises(WebConfigError) as info:
        validate_web_config({"records_db": "host='unterminated"})
    assert info.value.problems[0].startswith("records_db: not a libpq connection string")


def test_a_query_string_asks_for_days_and_tables() -> None:
    asked = question({}, areas=AREAS, current=NOW)
    assert (asked.first, asked.last, asked.tables) == (NOW, NOW, None)
    asked = question({"day": "2026-11-30", "table": "bj-1"}, areas=AREAS, current=NOW)
    assert (asked.first, asked.last, asked.tables) == (date(2026, 11, 30),) * 2 + (["bj-1"],)
    asked = question({"from": "2026-11-01", "to": "2026-11-30", "area": "Pit 1"}, areas=AREAS,
                     current=NOW)  # fmt: skip
    assert (asked.first, asked.last, asked.tables) == (
        date(2026, 11, 1),
        date(2026, 11, 30),
        ["bj-1", "uth-2"],
    )
    # Empty fields (the form sends them) mean "not given".
    assert question({"day": "", "table": "", "area": ""}, areas=AREAS, current=NOW).tables is None
    wrong = [
        ({"day": "yesterday"}, "day: 'yesterday' is not a date YYYY-MM-DD"),
        ({"day": NOW.isoformat(), "from": NOW.isoformat()}, "give day, or from and to, not both"),
        ({"from": "2026-12-02", "to": "2026-12-01"}, "to 2026-12-01 is before from 2026-12-02"),
        ({"from": "2026-01-01", "to": "2026-12-01"}, f"at most {MAX_DAYS} gaming days at once"),
        ({"table": "bj-1", "area": "Pit 1"}, "give a table or an area, not both"),
        ({"area": "Pit 9"}, "no area 'Pit 9' (areas: Pit 1)"),
        # Issue 27: the gaming-day arithmetic overflowed (500), a NUL reached the store (503).
        ({"day": "9999-12-31"}, f"9999-12-31 is not a gaming day a report covers ({FIRST_DAY} "
         f"to {LAST_DAY})"),
        ({"from": "0001-01-01", "to": "0001-01-02"}, "0001-01-01 is not a gaming day a report "
         f"covers ({FIRST_DAY} to {LAST_DAY})"),
        ({"table": "\x00"}, "'\\x00' is not a table id (letters, digits, - and _, 1 to 64)"),
        ({"table": "t1\nt2"}, "'t1\\nt2' is not a table id (letters, digits, - and _, 1 to 64)"),
        ({"table": "t" * 65}, f"'{LONG}' is not a table id (letters, digits, - and _, 1 to 64)"),
        ({"area": "\x00" * 100}, "no area '" + "\\x00" * 64 + "' (areas: Pit 1)"),
        ({"day": "9" * 5000}, f"day: '{'9' * 40}' is not a date YYYY-MM-DD"),
    ]  # fmt: skip
    for query, sentence in wrong:
        with pytest.raises(ReportUnavailable) as info:
            question(query, areas=AREAS, current=NOW)
        assert (str(info.value), info.value.status) == (sentence, 400)


def test_the_gaming_day_now_starts_at_its_hour_in_the_floors_zone() -> None:
    paris = ZoneInfo("Europe/Paris")
    # 05:59 in Paris (04:59 UTC) is still the day before; 06:00 is the new one.
    assert today(time(6), paris, datetime(2026, 12, 2, 4, 59, tzinfo=UTC)) == date(2026, 12, 1)
    assert today(time(6), paris, datetime(2026, 12, 2, 5, 0, tzinfo=UTC)) == date(2026, 12, 2)


def _alarm(table: str, message: str = "cover_all, Royal Flush: 9 hits") -> bytes:
    return json.dumps(
        {
            "table": table,
            "ts": "2026-12-01T10:00:00.000Z",
            "alarms": [
                {
                    "bet": "cover_all",
                    "row": "Royal Flush",
                    "window": "day",
                    "observed": 9,
                    "expected": "0.60",
                    "p_value": "3.1e-13",
                    "since": "2026-12-01T09:00:00.000Z",
                    "side": "high",
                    "rounds": 4210,
                    "message": message,
                }
            ],
        }
    ).encode()


def test_the_store_keeps_each_tables_integrity_alarms_until_cleared() -> None:
    store = Store("lammer", max_tables=2)
    [(table, text)] = store.receive("lammer-floor/integrity/t1", _alarm("t1"), now=0.0)
    sent = json.loads(text)
    assert (table, sent["t"], sent["table"]) == ("t1", "integrity", "t1")
    assert [a["message"] for a in sent["alarms"]] == ["cover_all, Royal Flush: 9 hits"]
    # A page that connects later is sent it, with the table's picture and on the pit's.
    assert store.snapshot("t1") == [text]
    assert store.snapshot(None) == [text]
    assert store.snapshot("t2") == []
    # The same again (a node's retained copy) changes nothing.
    assert store.receive("lammer-floor/integrity/t1", _alarm("t1"), now=0.0) == []
    # Refused and counted: another table's, a bad topic, a payload the contract refuses,
    # and a table over the bound.
    assert store.receive("lammer-floor/integrity/t2", _alarm("t1"), now=0.0) == []
    assert store.receive("lammer-floor/integrity/a b", _alarm("a b"), now=0.0) == []
    assert store.receive("lammer-floor/integrity/t2", b'{"table":"t2"}', now=0.0) == []
    assert store.dropped == {"wrong_table": 1, "bad_topic": 1, "invalid": 1}
    assert store.receive("lammer-floor/integrity/t2", _alarm("t2"), now=0.0) != []
    assert store.receive("lammer-floor/integrity/t3", _alarm("t3"), now=0.0) == []
    assert store.dropped["too_many_tables"] == 1
    # Cleared by an empty list, or by the retained message deleted: the pages are told.
    empty = json.loads(_alarm("t1"))
    empty["alarms"] = []
    [(_, cleared)] = store.receive("lammer-floor/integrity/t1", json.dumps(empty).encode(), now=0.0)
    assert json.loads(cleared)["alarms"] == []
    assert store.snapshot("t1") == []
    [(_, deleted)] = store.receive("lammer-floor/integrity/t2", b"", now=0.0)
    assert json.loads(deleted)["alarms"] == []
    assert store.integrity == {}
    # Nothing drawn: nothing to clear.
    assert store.receive("lammer-floor/integrity/t2", b"", now=0.0) == []
