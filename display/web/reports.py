"""The ``/reports`` page's data: ``lammer records report`` read from the records store.

The one module of the screens that reads the records service, by an explicit exception in
pyproject.toml's import-linter contracts: the report is ``records.reports.build`` (the
queries) and ``records.report_format`` (its JSON), exactly as the command prints them, and
the chart's rows with their 95 % band are ``records.chart.points`` (as the command's PNG);
writing the same queries again here would let the page and the command disagree. Nothing
else of ``records`` is imported: not the service, not the store's writer.

It connects per request (a report page is asked for a few times a day, not a second) as
the store's read-only role (``records.provision.provision_reader``), with its transactions
read-only and a statement timeout besides, so a wrong grant or a runaway query cannot turn
the web server into a writer or a load on the floor's database. Every failure is a
``ReportUnavailable`` with one sentence for the page; nothing raises through to a 500.

What a page may ask (the query string): ``day=YYYY-MM-DD`` or ``from=...&to=...`` (at most
``MAX_DAYS`` gaming days; default: the gaming day now), and ``table=ID`` or ``area=NAME``
(an area of web.toml's ``[areas]``; default: every table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, tzinfo
from typing import Any, Final
from zoneinfo import ZoneInfo

import psycopg

from records.chart import points
from records.observe import GamingDay, system_zone
from records.report_format import as_json, number, percent
from records.reports import Report, build, check_question

MAX_DAYS: Final = 31
"""Gaming days one page may ask for (a month of a floor is millions of rows)."""
CONNECT_TIMEOUT_S: Final = 5
STATEMENT_TIMEOUT_MS: Final = 30_000


class ReportUnavailable(Exception):
    """The report cannot be given; ``str()`` is one sentence for the page, ``status`` the
    HTTP status (400: the question is wrong; 503: the store is not there)."""

    def __init__(self, message: str, status: int = 503) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Question:
    """A report asked for: gaming days ``first`` to ``last``, ``tables`` (None: all)."""

    first: date
    last: date
    tables: list[str] | None
    table: str | None
    area: str | None


def zone(name: str | None) -> tuple[tzinfo, str]:
    """The floor's time zone and its IANA name (the system's when ``name`` is None)."""
    chosen = ZoneInfo(name) if name else system_zone()
    return chosen, chosen.key


def today(starts: time, tz: tzinfo, now: datetime | None = None) -> date:
    """The gaming day at ``now`` (default: now), as the tables and the service file it."""
    at = (now or datetime.now(tz)).astimezone(tz)
    return GamingDay(starts, tz).of(at.isoformat())


def _day(query: Mapping[str, str], key: str) -> date | None:
    text = query.get(key, "").strip()
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ReportUnavailable(f"{key}: {text[:40]!r} is not a date YYYY-MM-DD", 400) from None


def question(
    query: Mapping[str, str], *, areas: Mapping[str, list[str]], current: date
) -> Question:
    """What ``query`` asks for; ``ReportUnavailable`` (400) with a sentence if it is wrong."""
    day = _day(query, "day")
    first, last = _day(query, "from"), _day(query, "to")
    if day is not None and (first is not None or last is not None):
        raise ReportUnavailable("give day, or from and to, not both", 400)
    first = day or first or last or current
    last = day or last or first
    if last < first:
        raise ReportUnavailable(f"to {last} is before from {first}", 400)
    if (last - first).days + 1 > MAX_DAYS:
        raise ReportUnavailable(f"at most {MAX_DAYS} gaming days at once", 400)
    table = query.get("table", "").strip() or None
    area = query.get("area", "").strip() or None
    if table is not None and area is not None:
        raise ReportUnavailable("give a table or an area, not both", 400)
    tables: list[str] | None = None
    if table is not None:
        tables = [table]
    if area is not None:
        if area not in areas:
            known = ", ".join(sorted(areas)) or "none is configured"
            raise ReportUnavailable(f"no area {area[:64]!r} (areas: {known})", 400)
        tables = list(areas[area])
    try:
        # The command's own check (records.reports): days in range, table ids that are ids.
        check_question(first, last, tables)
    except ValueError as exc:
        raise ReportUnavailable(str(exc), 400) from None
    return Question(first=first, last=last, tables=tables, table=table, area=area)


def page_data(report: Report) -> dict[str, Any]:
    """The report as ``lammer records report --format json`` writes it, each figure also
    as the text the command prints (``text``: exact decimals rounded half-even, ``±`` the
    standard error of a simulated expectation), and per table the chart's rows."""
    data: dict[str, Any] = json.loads(as_json(report))
    for day, shown in zip(report.days, data["days"], strict=True):
        shown["hands_per_round_text"] = number(day.hands_per_round)
        for bet, bet_shown in zip(day.bets, shown["bets"], strict=True):
            theoretical = percent(bet.theoretical_hold)
            if bet.theoretical_hold_se:
                theoretical += f" ± {bet.theoretical_hold_se * 100:.2f}"
            bet_shown["theoretical_hold_text"] = theoretical
            bet_shown["observed_hold_text"] = percent(bet.observed_hold)
            for row, row_shown in zip(bet.rows, bet_shown["rows"], strict=True):
                expected = number(row.expected)
                if row.expected_se:
                    expected += f" ± {row.expected_se:.2f}"
                row_shown["expected_text"] = expected
    data["charts"] = {
        table: [
            {
                "label": p.label,
                "observed": p.observed,
                "expected": p.expected,
                "low": p.low,
                "high": p.high,
            }
            for p in rows
        ]
        for table, rows in sorted(points(report).items())
    }
    return data


def one_line(exc: BaseException) -> str:
    """libpq's message on one line, without its hints (a page shows one sentence)."""
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def fetch(
    dsn: str,
    asked: Question,
    *,
    starts: time,
    tz: tzinfo,
    tz_name: str,
    big_hit: int,
) -> dict[str, Any]:
    """The page's data of ``asked`` (blocking: run it in a thread). ``ReportUnavailable``
    when the store cannot be reached or refuses."""
    try:
        conn = psycopg.connect(
            dsn,
            connect_timeout=CONNECT_TIMEOUT_S,
            # Read-only and bounded whatever the role's settings; times in the floor's zone.
            options=(
                f"-c default_transaction_read_only=on -c statement_timeout={STATEMENT_TIMEOUT_MS}"
                f" -c TimeZone={tz_name}"
            ),
            application_name="lammer web reports",
        )
    except psycopg.Error as exc:
        raise ReportUnavailable(f"the records store cannot be reached: {one_line(exc)}") from exc
    try:
        with conn:
            report = build(
                conn,
                first=asked.first,
                last=asked.last,
                starts=starts,
                tz=tz,
                tz_name=tz_name,
                tables=asked.tables,
                big_hit=big_hit,
            )
    except ValueError as exc:  # a parameter records.reports.check_question refuses
        raise ReportUnavailable(str(exc), 400) from None
    except psycopg.OperationalError as exc:
        raise ReportUnavailable(f"the records store stopped answering: {one_line(exc)}") from exc
    except psycopg.Error as exc:
        raise ReportUnavailable(f"the records store refused the report: {one_line(exc)}") from exc
    data = page_data(report)
    data["asked"] = {
        "first": asked.first.isoformat(),
        "last": asked.last.isoformat(),
        "table": asked.table,
        "area": asked.area,
        "tables": asked.tables,
        "day_starts": starts.strftime("%H:%M"),
        "timezone": tz_name,
    }
    return data
