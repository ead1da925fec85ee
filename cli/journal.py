"""``lammer journal``: a table's record as JSON lines, and ``lammer journal verify``.

Export: ``lammer journal [FILE] [--config TOML] [--after SEQ] [--from WHEN] [--to WHEN]
[--kind KIND] [--snapshots] [-o OUT]``. For a dispute or an audit: one JSON object per
record, in ``seq`` order across every segment (the archive's, then the live one:
``daemon.segments``), each ``{"seq", "ts", "kind", ...record}``. ``FILE`` is the live
segment (``[journal] path``), or taken from ``--config``. Filters:

* ``--after SEQ``: records after that seq;
* ``--from``/``--to`` (inclusive): a date ``YYYY-MM-DD`` is a *gaming day* as the journal
  files it: every segment is one gaming day, named in its header (``gaming_day``), so a
  record belongs to the day of its segment, whatever ``day_starts`` says today; a time
  (ISO 8601 with its zone, ``2026-12-01T14:00Z``) compares with each record's ``ts``;
* ``--kind KIND``: one kind of record.

Snapshots (the whole table state, a record of several kilobytes every
``snapshot_every`` records) are left out unless ``--snapshots`` or ``--kind snapshot`` is
given: they repeat what the records before them say.

Verify: ``lammer journal verify [FILE] [--config TOML] [--key-file F]`` checks the hash
chain, the segments and every snapshot (``daemon.verify``); exit 0 intact, 1 with the first
problem named as ``segment FILE, seq N: what``, 2 when it cannot check (a missing or
unreadable journal, bad arguments).

Every segment is opened read-only and nothing is created beside it, so both are safe while
the daemon runs. A missing file or one that is not a lammer journal is an error (exit 2).

The export holds every card dealt: ``-o OUT`` writes it to a file only its owner may read
(0600, ``cli.output.private_file``: an earlier ``OUT`` is replaced, never written into,
and an interrupted export leaves none). A shell redirection (``> OUT``) would create it
with the umask's mode, usually readable by everyone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import TextIO
from zoneinfo import ZoneInfo

from cli.output import OutputFileError, check_private_target, private_file
from daemon.config import TableConfig, load_config
from daemon.core import rules_settings
from daemon.errors import ConfigFileError, JournalError
from daemon.journal import KINDS, Journal, JournalRecord
from daemon.segments import archive_dir, archived, gaming_day, next_path, segment_paths
from daemon.verify import verify_journal

EXIT_OK = 0
EXIT_BROKEN = 1  # verify: the journal is not what was written
EXIT_ERROR = 2

VERIFY = "verify"
DEFAULT_DAY_STARTS = time(6, 0)  # [journal] day_starts' default (daemon.config)

USAGE = """lammer journal [FILE] [--config TOML] [--after SEQ] [--from WHEN] [--to WHEN]
                      [--kind KIND] [--snapshots] [-o OUT]
       lammer journal verify [FILE] [--config TOML] [--key-file F]"""


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class When:
    """A bound of ``--from``/``--to``: a gaming day, or an instant."""

    day: date | None = None
    at: datetime | None = None


def _when(text: str) -> When:
    if len(text) == 10:
        try:
            return When(day=date.fromisoformat(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {text!r}") from None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a date (YYYY-MM-DD) or a time (ISO 8601, e.g. 2026-12-01T14:00Z): {text!r}"
        ) from None
    if at.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no time zone: add Z (UTC) or an offset such as +01:00"
        )
    return When(at=at)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments (both forms: see the module docstring)."""
    parser.usage = USAGE
    parser.description = (
        "Export a table's journal as JSON lines (every segment, in seq order), or, with "
        "'verify', check that nobody edited it: exit 0 intact, 1 with the first problem, 2 "
        "when it cannot be checked."
    )
    parser.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="the journal's live segment ([journal] path; default: --config's), or 'verify'",
    )
    parser.add_argument("path", nargs="?", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument(
        "--config",
        type=Path,
        metavar="TOML",
        help="a table's configuration: its [journal] path, and for verify its hmac_key_file",
    )
    export = parser.add_argument_group("export")
    export.add_argument(
        "--after", type=_seq, default=0, metavar="SEQ", help="only records after this seq"
    )
    export.add_argument(
        "--from",
        dest="since",
        type=_when,
        metavar="WHEN",
        help="from this gaming day (YYYY-MM-DD, as the segments file them) or time "
        "(ISO 8601 with its zone), inclusive",
    )
    export.add_argument(
        "--to",
        dest="until",
        type=_when,
        metavar="WHEN",
        help="to this gaming day or time, inclusive",
    )
    export.add_argument("--kind", choices=KINDS, help="only records of this kind")
    export.add_argument(
        "--snapshots",
        action="store_true",
        help="include the snapshots of the table state (left out by default)",
    )
    export.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="write to OUT, readable by its owner only (0600), instead of stdout",
    )
    check = parser.add_argument_group("verify")
    check.add_argument(
        "--key-file",
        type=Path,
        metavar="F",
        help="the HMAC key of the chain ([journal] hmac_key_file), if the table has one",
    )


def run(args: argparse.Namespace) -> int:
    """Export, or verify; the exit status."""
    if args.file == VERIFY:
        return _run_verify(args)
    return _run_export(args)


# -- export ----------------------------------------------------------------------------


def _run_export(args: argparse.Namespace) -> int:
    try:
        if args.path is not None:
            raise _Usage(f"unexpected argument {args.path!r} (one FILE; did you mean verify?)")
        if args.key_file is not None:
            raise _Usage("--key-file is for 'lammer journal verify'")
        config = _config(args.config)
        live = _live(args.file, config)
        if args.output is not None:
            check_private_target(args.output)  # before any work: a clear refusal
            _not_the_journal(args.output, live)
        day_rule = _day_rule(config)
        selected = _selected(live, args, day_rule)
        first = next(selected, None)  # opens the first segment: a bad journal fails here
        records = itertools.chain([] if first is None else [first], selected)
    except _Usage as exc:
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (JournalError, OutputFileError) as exc:
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        if args.output is None:
            _export(records, sys.stdout)
            sys.stdout.flush()
        else:
            with private_file(args.output) as out:
                count = _export(records, out)
            print(f"lammer journal: {count} records written to {args.output}", file=sys.stderr)
    except BrokenPipeError:
        raise  # the reader went away: `lammer` ends quietly with 141 (cli.output)
    except (JournalError, OSError) as exc:  # OSError: writing OUT (a full disk)
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


class _Usage(Exception):
    """Arguments that do not go together (exit 2)."""


def _config(path: Path | None) -> TableConfig | None:
    if path is None:
        return None
    try:
        return load_config(path)
    except ConfigFileError as exc:
        raise _Usage(f"{path}: " + "; ".join(exc.problems)) from exc


def _live(file: str | None, config: TableConfig | None) -> Path:
    if file is not None:
        return Path(file)
    if config is not None:
        return config.journal_path
    raise _Usage("a FILE (the journal's live segment) or --config is required")


def _not_the_journal(output: Path, live: Path) -> None:
    """Refuse an ``OUT`` that would replace a segment of the journal (or its WAL), or land
    in its archive folder: the record itself."""
    target = output.resolve()
    if target.parent == archive_dir(live.resolve()):
        raise OutputFileError(output, "is in the journal's archive folder; choose another file")
    files = [live, next_path(live), *(s.path for s in archived(live))]
    for path in files:
        base = path.resolve()
        names = {base, base.with_name(base.name + "-wal"), base.with_name(base.name + "-shm")}
        if target in names:
            raise OutputFileError(output, "is the journal itself; choose another file")


DayRule = tuple[time, ZoneInfo | None]


def _day_rule(config: TableConfig | None) -> DayRule:
    """How to tell the gaming day of a segment without a header (a journal from before
    segments): ``[journal]``'s, or the daemon's defaults (06:00, the system's zone)."""
    if config is None:
        return DEFAULT_DAY_STARTS, None
    return config.journal.day_start, config.journal.zone


def _segment_day(path: Path, journal: Journal, live: Path, rule: DayRule) -> date | None:
    """The gaming day a segment files its records under (None: it holds none)."""
    first = journal.first_record()
    if first is None:
        return None
    if first.kind == "segment":
        return date.fromisoformat(str(first.record["gaming_day"]))
    for segment in archived(live):
        if segment.path == path:
            return segment.day
    return gaming_day(first.ts, *rule)


def _selected(live: Path, args: argparse.Namespace, rule: DayRule) -> Iterator[JournalRecord]:
    """The records the arguments ask for, in ``seq`` order across the segments."""
    since: When | None = args.since
    until: When | None = args.until
    snapshots = args.snapshots or args.kind == "snapshot"
    after = args.after
    for path in segment_paths(live):
        with Journal.open(path, readonly=True) as journal:
            if (since is not None and since.day) or (until is not None and until.day):
                day = _segment_day(path, journal, live, rule)
                if day is None:
                    continue
                if since is not None and since.day is not None and day < since.day:
                    continue
                if until is not None and until.day is not None and day > until.day:
                    continue
            last = after
            for record in journal.records(after, kind=args.kind):
                last = record.seq
                if record.kind == "snapshot" and not snapshots:
                    continue
                if since is not None and since.at is not None and record.ts < since.at:
                    continue
                if until is not None and until.at is not None and record.ts > until.at:
                    continue
                yield record
            after = max(after, last)


def _export(records: Iterable[JournalRecord], out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        count += 1
    return count


# -- verify ----------------------------------------------------------------------------


def _run_verify(args: argparse.Namespace) -> int:
    try:
        used = [
            name
            for name, value in (
                ("--after", args.after or None),
                ("--from", args.since),
                ("--to", args.until),
                ("--kind", args.kind),
                ("--snapshots", args.snapshots or None),
                ("-o", args.output),
            )
            if value is not None
        ]
        if used:
            raise _Usage(f"{', '.join(used)}: for the export, not for verify")
        config = _config(args.config)
        live = _live(args.path, config)
        key = _key(args.key_file, config)
        settings = None if config is None else rules_settings(config)
        report = verify_journal(live, key=key, settings=settings)
    except _Usage as exc:
        print(f"lammer journal verify: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except JournalError as exc:
        print(f"lammer journal verify: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if report.problem is not None:
        print(f"lammer journal verify: {report.problem}")
        print("checked before it:")
        print("\n".join(report.summary()))
        return EXIT_BROKEN
    print("lammer journal verify: intact")
    print("\n".join(report.summary()))
    return EXIT_OK


def _key(path: Path | None, config: TableConfig | None) -> bytes | None:
    """The chain's key: ``--key-file``'s bytes, else the configuration's, else none (the
    daemon uses the file's bytes as they are, a final newline included)."""
    if path is None:
        if config is None:
            return None
        path = config.journal.hmac_key_file
        if path is None:
            return None
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise _Usage(f"cannot read the key file {path}: {exc.strerror or exc}") from exc
    if not key:
        raise _Usage(f"the key file {path} is empty")
    return key
