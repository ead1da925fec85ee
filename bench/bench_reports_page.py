"""The /reports page's data: what ``lammer web`` adds to the report the command builds.

    .venv/bin/python bench/bench_reports_page.py [--tables T] [--days D] [--rounds R]

T tables x D gaming days x R rounds of Cover All (UTH) inserted in SQL on a private
PostgreSQL (``bench_records.load_month``), then for one table's day, the floor's day and
the page's longest span (all D days, at most 31): ``records.reports.build`` alone (what
``lammer records report`` runs) beside ``display.web.reports.fetch`` (what the page asks
for: a connection of its own, the same build, then the JSON and each table's chart rows with
their 95 % band), medians of 3, and the size of the JSON sent.

Figures only, never assertions (docs/developers/benchmarks.md, "The floor's records").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date, timedelta
from datetime import time as clock
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_records import load_month
from bench.common import machine
from deploy.postgres import Postgres
from display.web.reports import Question, fetch
from records.reports import build

FIRST = date(2026, 11, 1)
UTC = ZoneInfo("UTC")


def median_of_3(run: Callable[[], object]) -> tuple[float, object]:
    """The median time of three calls of ``run`` and its last result."""
    times, result = [], None
    for _ in range(3):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    """Load a month, then time the three asks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--rounds", type=int, default=200, help="rounds per table-day")
    args = parser.parse_args()
    print(machine())
    pg = Postgres()
    pg.start()
    try:
        dsn, loading = load_month(pg, "bench_page", args.tables, args.days, args.rounds)
        total = args.tables * args.days * args.rounds
        print(f"loaded {total:,} results in {loading:.0f} s")
        last = FIRST + timedelta(days=min(args.days, 31) - 1)
        for what, first, end, tables in (
            ("one table, one day", FIRST, FIRST, ["t1"]),
            (f"{args.tables} tables, one day", FIRST, FIRST, None),
            (f"{args.tables} tables, {(last - FIRST).days + 1} days", FIRST, last, None),
        ):

            def command(
                first: date = first, end: date = end, tables: list[str] | None = tables
            ) -> object:
                with psycopg.connect(dsn) as conn:
                    return build(conn, first=first, last=end, starts=clock(6), tz=UTC,
                                 tz_name="UTC", tables=tables)  # fmt: skip

            def page(
                first: date = first, end: date = end, tables: list[str] | None = tables
            ) -> object:
                asked = Question(first=first, last=end, tables=tables, table=None, area=None)
                return fetch(dsn, asked, starts=clock(6), tz=UTC, tz_name="UTC", big_hit=100)

            built, _ = median_of_3(command)
            served, data = median_of_3(page)
            size = len(json.dumps(data, separators=(",", ":")))
            print(
                f"{what}: report {built:.2f} s, the page's data {served:.2f} s "
                f"({size / 1024:,.0f} KiB of JSON)"
            )
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
