"""An integrity alarm is said once (issue 27): the records service logs it and publishes the
table's retained integrity topic when an alarm is raised, changes or clears, not at every
result while the table stays in alarm (2,458 lines for one table in one run before). The
service's message path and store against the private PostgreSQL; its clock is the test's."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from records.intake import REFRESH
from records.service import Records
from tests.helpers.records_service import settings_for
from tests.records.conftest import StoreDb
from tests.records.messages import body, cover_all_result

TABLE = "lir-9"


def _result(seq: int, royal: bool) -> tuple[str, bytes]:
    result = cover_all_result(
        TABLE, seq, seq, hands=1, game="LIR",
        hand="Royal Flush" if royal else None, pays="500" if royal else None,
    )  # fmt: skip
    return f"lammer/{TABLE}/cover_all/result", body({**result, "prev_seq": seq - 1 or None})


def _play(records: Records, first: int, count: int) -> list[MutableMapping[str, Any]]:
    """``count`` results from seq ``first`` (a Royal Flush every 7th: beyond any honest
    table), stored; the log lines."""
    with capture_logs() as logs:
        for seq in range(first, first + count):
            records.handle(*_result(seq, royal=seq % 7 == 0), now=0.0)
            while (batch := records.take()) is not None:
                records.commit(batch)
                records.committed(batch)
    return logs


@pytest.mark.heavy  # a thousand evaluations of the watch
def test_a_thousand_results_in_alarm_say_it_once(store_db: StoreDb) -> None:
    conn = psycopg.connect(store_db.dsn)
    try:
        records = Records(settings_for(store_db), conn)
        clock = [0.0]
        records.clock = lambda: clock[0]
        raised = _play(records, 1, 60)
        assert any(e["event"] == "integrity alarm" for e in raised)
        assert records.published[TABLE]  # in alarm
        records.outbox.clear()
        logs = _play(records, 61, 1000)
        alarms = [e for e in logs if e["event"] == "integrity alarm"]
        publishes = [p for t, p in records.outbox if t == TABLE]
        # Said again only when an alarm was raised, changed or cleared (a window or a row
        # joining); never once per result.
        changes = len(alarms)
        print(f"1,000 results in alarm: {changes} log lines, {len(publishes)} publishes")
        assert changes <= 5, [e["alarms"] for e in alarms]
        assert len(publishes) == changes
        assert all(p["alarms"] for p in publishes)
        assert records.published[TABLE]
        # The figures of a standing alarm go out again after REFRESH, without a log line.
        records.outbox.clear()
        clock[0] += REFRESH
        logs = _play(records, 1061, 7)
        assert [e for e in logs if e["event"] == "integrity alarm"] == []
        assert len(records.outbox) == 1
        (_, refreshed), *_ = records.outbox
        assert {a["rounds"] for a in refreshed["alarms"]} == {1061}  # the first result after
        records.outbox.clear()
        logs = _play(records, 1068, 7)
        assert records.outbox == []  # within REFRESH of the last one
    finally:
        conn.close()
