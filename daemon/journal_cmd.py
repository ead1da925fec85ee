"""``lammer journal FILE [--after SEQ] [--kind KIND] [-o OUT]``: a table's record as JSON lines.

For a dispute or an audit: one JSON object per record, in ``seq`` order, each
``{"seq", "ts", "kind", ...record}``. The journal is opened read-only and nothing is
created beside it, so it is safe while the daemon runs. A missing file or one that is not
a lammer journal is an error (exit 2).

The export holds every card dealt: ``-o OUT`` writes it to a file only its owner may read
(0600, ``daemon.output.private_file``: an earlier ``OUT`` is replaced, never written into,
and an interrupted export leaves none). A shell redirection (``> OUT``) would create it
with the umask's mode, usually readable by everyone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from daemon.errors import JournalError
from daemon.journal import KINDS, Journal
from daemon.output import OutputFileError, check_private_target, private_file

EXIT_OK = 0
EXIT_ERROR = 2


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("file", type=Path, help="the journal (SQLite) file")
    parser.add_argument(
        "--after", type=_seq, default=0, metavar="SEQ", help="only records after this seq"
    )
    parser.add_argument("--kind", choices=KINDS, help="only records of this kind")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="write to OUT, readable by its owner only (0600), instead of stdout",
    )


def run(args: argparse.Namespace) -> int:
    """Write the records as JSON lines; the exit status."""
    try:
        if args.output is not None:
            check_private_target(args.output)  # before any work: a clear refusal
            _not_the_journal(args.output, args.file)
        journal = Journal.open(args.file, readonly=True)
    except (JournalError, OutputFileError) as exc:
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        with journal:
            if args.output is None:
                _export(journal, args, sys.stdout)
                sys.stdout.flush()
            else:
                with private_file(args.output) as out:
                    count = _export(journal, args, out)
                print(f"lammer journal: {count} records written to {args.output}", file=sys.stderr)
    except BrokenPipeError:
        raise  # the reader went away: `lammer` ends quietly with 141 (daemon.output)
    except (JournalError, OSError) as exc:  # OSError: writing OUT (a full disk)
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _not_the_journal(output: Path, journal: Path) -> None:
    """Refuse an ``OUT`` that would replace the journal (or its WAL): the record itself."""
    target = output.resolve()
    base = journal.resolve()
    if target in {base, base.with_name(base.name + "-wal"), base.with_name(base.name + "-shm")}:
        raise OutputFileError(output, "is the journal itself; choose another file")


def _export(journal: Journal, args: argparse.Namespace, out: TextIO) -> int:
    count = 0
    for record in journal.records(args.after, kind=args.kind):
        out.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        count += 1
    return count
