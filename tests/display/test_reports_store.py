"""``/reports``' data when the records store stops in the middle of a report: one sentence,
503, never a traceback (``display.web.reports.fetch``, against a real PostgreSQL)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, date
from datetime import time as clock

import psycopg

from deploy.postgres import Postgres
from display.web.reports import Question, ReportUnavailable, fetch
from tests.helpers.reports import Records, records
from tests.records.conftest import postgres

__all__ = ["postgres", "records"]

WITHIN = 60.0  # a bound on a failure only


def test_a_store_that_stops_mid_report_is_said_plainly(
    postgres: Postgres, records: Records
) -> None:
    # The report's first query waits behind a lock another session holds, and the store
    # ends the report's session there (as an administrator's pg_terminate_backend, a
    # restart or a failover would): the connection is lost partway, after it was made.
    asked = Question(first=date(2026, 12, 1), last=date(2026, 12, 1), tables=None,
                     table=None, area=None)  # fmt: skip
    failed: list[BaseException] = []

    def report() -> None:
        try:
            fetch(f"{records.reader_dsn} passfile={records.pgpass}", asked,
                  starts=clock(6), tz=UTC, tz_name="UTC", big_hit=100)  # fmt: skip
        except BaseException as exc:
            failed.append(exc)

    with (
        psycopg.connect(records.owner_dsn) as locker,
        psycopg.connect(postgres.admin_dsn(), autocommit=True) as admin,
    ):
        locker.execute("LOCK TABLE message IN ACCESS EXCLUSIVE MODE")
        reading = threading.Thread(target=report, name="report")
        reading.start()
        deadline = time.monotonic() + WITHIN
        waiting = None
        while waiting is None and time.monotonic() < deadline:
            waiting = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = "
                "'lammer web reports' AND wait_event_type = 'Lock'"
            ).fetchone()
            if waiting is None:
                time.sleep(0.05)  # polling the server's view, bounded by the deadline
        assert waiting is not None, "the report never waited on the lock"
        admin.execute("SELECT pg_terminate_backend(%s)", waiting)
        reading.join(WITHIN)
        locker.rollback()
    assert not reading.is_alive()
    (error,) = failed
    assert isinstance(error, ReportUnavailable), repr(error)
    assert error.status == 503
    assert str(error).startswith("the records store stopped answering: "), str(error)
    assert "\n" not in str(error)
