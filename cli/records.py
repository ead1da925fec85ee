"""``lammer records``: the floor's records service, its reports and its reconciliation.

::

    lammer records run --db DSN [--mqtt HOST:PORT[,HOST:PORT...]] [--mqtt-user records]
        [--mqtt-password-file FILE] [--mqtt-ca-file CA] [--prefix lammer ...]
        [--day-starts 06:00] [--timezone TZ] [--batch 200] [--backfill-days 1]
    lammer records report --db DSN [--day YYYY-MM-DD | --from DAY --to DAY]
        [--table ID | --area NAME --areas FILE] [--format text|json|csv] [--big-hit 100]
        [--plot DIR]
    lammer records reconcile --db DSN --journal FILE [--journal FILE ...]

``--db`` is a libpq connection string (``"host=floor-db dbname=lammer_records
user=records"``); its password comes from libpq's own places (``PGPASSFILE``, a
``~/.pgpass`` of mode 0600), never from the command line. Every operator mistake ends in
one sentence on stderr and exit status 2; a report or reconciliation that finds
differences exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import ssl
import sys
from collections.abc import Iterator
from datetime import date, time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from contract.tasks import STOP_DEADLINE_S, exit_after
from foundation.endpoints import parse_nodes
from foundation.tls import client_context

if TYPE_CHECKING:
    from metrics.settings import MetricsSettings

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_USAGE = 2


def add_arguments(  # declarative: three subcommands' options
    parser: argparse.ArgumentParser,
) -> None:
    """The subcommands: run, report, reconcile."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run_p = sub.add_parser(
        "run",
        help="store every table's messages in PostgreSQL and watch their integrity",
        description="Subscribe to the floor (or one controller's broker) as the user "
        "records, store every message once by (table, seq), ask tables to resend what is "
        "missing, and publish integrity alarms on lammer-floor/integrity/<table>.",
    )
    _db(run_p)
    run_p.add_argument(
        "--mqtt",
        default="127.0.0.1:1883",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the broker, or every node of the floor, tried in order (default 127.0.0.1:1883)",
    )
    run_p.add_argument(
        "--mqtt-user", default="records", help="the MQTT user (broker-config's and floor-config's)"
    )
    run_p.add_argument(
        "--mqtt-password-file", type=Path, metavar="FILE", help="its password, one line"
    )
    run_p.add_argument(
        "--mqtt-ca-file",
        type=Path,
        metavar="CA",
        help="MQTT over TLS, the broker verified with this CA (the floor's ca.crt)",
    )
    run_p.add_argument(
        "--prefix", action="append", metavar="PREFIX", help="a tables' prefix (default lammer)"
    )
    run_p.add_argument(
        "--batch",
        type=_batch,
        default=None,
        metavar="N",
        help="messages stored in one transaction at most (default 200; 1: one each)",
    )
    run_p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics here (PORT alone: 127.0.0.1:PORT; default: none)",
    )
    run_p.add_argument(
        "--metrics-allow-from",
        action="append",
        default=[],
        metavar="ADDRESS[/BITS]",
        help="a Prometheus server allowed to scrape besides this machine (repeat; needed "
        "for a --metrics-listen beyond loopback)",
    )
    run_p.add_argument(
        "--backfill-days",
        type=_backfill_days,
        default=1,
        metavar="N",
        help="a table first seen, or a gap the broker did not keep, is asked from its "
        "journal back to the start of the current gaming day (1, the default), N gaming "
        "days back, or not at all (0)",
    )
    _day(run_p)
    run_p.set_defaults(_action=_run)

    report = sub.add_parser(
        "report",
        help="per table and gaming day: rounds, hits against the par sheet, holds, big hits",
    )
    _db(report)
    when = report.add_mutually_exclusive_group()
    when.add_argument("--day", type=_date, metavar="YYYY-MM-DD", help="one gaming day")
    when.add_argument(
        "--from", dest="first", type=_date, metavar="YYYY-MM-DD", help="the first gaming day"
    )
    report.add_argument(
        "--to", dest="last", type=_date, metavar="YYYY-MM-DD", help="the last gaming day"
    )
    which = report.add_mutually_exclusive_group()
    which.add_argument("--table", metavar="ID", help="one table (default: every table)")
    which.add_argument("--area", metavar="NAME", help="the tables of one area of --areas")
    report.add_argument(
        "--areas", type=Path, metavar="FILE", help="lammer web's TOML with [areas] (for --area)"
    )
    report.add_argument(
        "--format", choices=("text", "json", "csv"), default="text", help="the output's form"
    )
    report.add_argument(
        "--big-hit", type=int, default=100, metavar="ODDS", help="a big hit pays this to 1 or more"
    )
    report.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        help="also write a PNG per table into DIR: hits against the par sheet with a 95 %% band",
    )
    _day(report)
    report.set_defaults(_action=_report)

    reconcile = sub.add_parser(
        "reconcile", help="compare tables' journals (lammer journal's export) with the store"
    )
    _db(reconcile)
    reconcile.add_argument(
        "--journal",
        action="append",
        required=True,
        type=Path,
        metavar="FILE",
        help="a table's journal (its live segment), read through `lammer journal FILE`",
    )
    reconcile.set_defaults(_action=_reconcile)


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; its exit status."""
    from records.errors import RecordsError, one_line

    try:
        status: int = args._action(args)
    except RecordsError as exc:
        print(f"lammer records: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    return status


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", required=True, metavar="DSN", help="libpq connection string of the store"
    )


def _day(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--day-starts",
        type=_hour,
        default=time(6, 0),
        metavar="HH:MM",
        help="when a gaming day starts, local time (as the tables' [journal] day_starts)",
    )
    parser.add_argument(
        "--timezone",
        type=_zone,
        default=None,
        metavar="ZONE",
        help="the floor's (default: system's)",
    )


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a date YYYY-MM-DD") from None


def _hour(text: str) -> time:
    try:
        return time.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a time HH:MM") from None


def _batch(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 10_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a batch size from 1 to 10000")
    return int(text)


def _backfill_days(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 366:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of gaming days from 0 to 366")
    return int(text)


def _zone(text: str) -> ZoneInfo:
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not a time zone (Europe/Paris)"
        ) from None


def _nodes(text: str) -> list[tuple[str, int]]:
    try:
        return parse_nodes(text, 1883)
    except ValueError as exc:
        raise ValueError(f"--mqtt {text!r}: {exc}") from None


def _metrics(listen: str | None, allow: list[str]) -> MetricsSettings | None:
    """``--metrics-listen`` and ``--metrics-allow`` (``ValueError`` with a sentence)."""
    from metrics.settings import MetricsConfigError, metrics_settings

    if listen is None:
        if allow:
            raise ValueError("--metrics-allow-from needs --metrics-listen")
        return None
    try:
        return metrics_settings(listen, allow)
    except MetricsConfigError as exc:
        raise ValueError(
            "--metrics-listen: " + str(exc).replace("allow_from", "--metrics-allow-from")
        ) from None


def _run(args: argparse.Namespace) -> int:  # each option checked to a sentence
    from records.intake import BATCH, Settings
    from records.observe import GamingDay, system_zone
    from records.service import prefixes_of
    from records.service import run as serve

    try:
        (host, port), *others = _nodes(args.mqtt)
        prefixes = prefixes_of(args.prefix or ["lammer"])
        password = None
        metrics = _metrics(args.metrics_listen, args.metrics_allow_from)
        if args.mqtt_ca_file is not None:
            try:
                client_context(args.mqtt_ca_file)
            except (OSError, ssl.SSLError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                raise ValueError(f"--mqtt-ca-file {args.mqtt_ca_file}: {reason}") from None
        if args.mqtt_password_file is not None:
            try:
                password = args.mqtt_password_file.read_text().split("\n")[0]
            except (OSError, UnicodeDecodeError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                raise ValueError(f"cannot read {args.mqtt_password_file}: {reason}") from None
    except ValueError as exc:
        print(f"lammer records: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _logging()
    settings = Settings(
        mqtt_host=host,
        mqtt_port=port,
        other_nodes=tuple(others),
        mqtt_user=args.mqtt_user or None,
        mqtt_password=password,
        prefixes=prefixes,
        dsn=args.db,
        day=GamingDay(args.day_starts, args.timezone or system_zone()),
        mqtt_ca_file=args.mqtt_ca_file,
        batch=args.batch or BATCH,
        metrics=metrics,
        backfill_days=args.backfill_days,
    )
    import psycopg

    async def service() -> None:
        # SIGTERM (systemd's stop) and SIGINT end it between messages, connections closed.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping() -> None:
            if not stop.is_set():  # the last resort of a stop that hangs (contract.tasks)
                exit_after(STOP_DEADLINE_S, "lammer records")
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping)
        await serve(settings, stop)

    try:
        asyncio.run(service())
    except KeyboardInterrupt:
        return EXIT_OK
    except psycopg.Error as exc:
        from records.errors import one_line

        what = "cannot be reached" if isinstance(exc, psycopg.OperationalError) else "refused"
        print(f"lammer records: the store {what}: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _zone_name(zone: ZoneInfo | None) -> tuple[ZoneInfo, str]:
    from records.observe import system_zone

    chosen = zone or system_zone()
    return chosen, chosen.key


def _connect(dsn: str) -> Any:
    import psycopg

    from records.errors import StoreError

    try:
        return psycopg.connect(dsn)
    except psycopg.Error as exc:
        raise StoreError(f"the store cannot be reached: {exc}") from exc


@contextlib.contextmanager
def _refused() -> Iterator[None]:
    """A query the store refuses (no migrations yet, no rights) as one sentence."""
    import psycopg

    from records.errors import StoreError

    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(
            f"the store refused the query: {str(exc).strip().splitlines()[0]}"
        ) from exc


def _logging() -> None:
    """JSON lines without timestamps when not on a terminal (journald adds its own), the
    readable console otherwise; info and above."""
    import logging

    import structlog

    on_terminal = sys.stdout.isatty()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            *([structlog.processors.TimeStamper(fmt="iso")] if on_terminal else []),
            structlog.dev.ConsoleRenderer() if on_terminal else structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )


def _report(args: argparse.Namespace) -> int:
    from records import report_format
    from records.reports import build, check_question

    first = args.day or args.first or date.today()
    last = args.day or args.last or first
    if last < first:
        print(f"lammer records: --to {last} is before --from {first}", file=sys.stderr)
        return EXIT_USAGE
    tables: list[str] | None = [args.table] if args.table is not None else None
    try:
        if args.area is not None:
            tables = _area(args.areas, args.area)
        # Every parameter checked before the store is asked: a sentence, never a traceback.
        check_question(first, last, tables, args.big_hit)
    except ValueError as exc:
        print(f"lammer records: {exc}", file=sys.stderr)
        return EXIT_USAGE
    zone, name = _zone_name(args.timezone)
    with _connect(args.db) as conn, _refused():
        report = build(
            conn,
            first=first,
            last=last,
            starts=args.day_starts,
            tz=zone,
            tz_name=name,
            tables=tables,
            big_hit=args.big_hit,
        )
    formatter = {
        "text": report_format.text,
        "json": report_format.as_json,
        "csv": report_format.as_csv,
    }[args.format]
    sys.stdout.write(formatter(report))
    if args.plot is not None:
        from records.chart import write_charts

        for path in write_charts(report, args.plot):
            print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _area(path: Path | None, name: str) -> list[str]:
    """The tables of an area in lammer web's configuration (``[areas]``)."""
    import tomllib

    if path is None:
        raise ValueError("--area needs --areas FILE (lammer web's configuration with [areas])")
    try:
        areas = tomllib.loads(path.read_text()).get("areas", {})
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {str(exc)[:200]}") from None
    if not isinstance(areas, dict):
        raise ValueError(f"{path}: [areas] is not a table of area = [table ids]")
    tables = areas.get(name)
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        known = ", ".join(sorted(areas)) or "none"
        raise ValueError(f"{path} has no area {name[:64]!r} (areas: {known})")
    return list(tables)


def _reconcile(args: argparse.Namespace) -> int:
    from records.reconcile import journal_publications, reconcile, summary

    results = []
    with _connect(args.db) as conn, _refused():
        for path in args.journal:
            table, seqs = journal_publications(path)
            results.append(reconcile(conn, table, path, seqs))
    sys.stdout.write(summary(results))
    different = any(r.missing or r.extra for r in results)
    return EXIT_DIFFERENT if different else EXIT_OK
