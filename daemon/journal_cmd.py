"""``lammer journal FILE [--after SEQ] [--kind KIND]``: a table's record as JSON lines.

For a dispute or an audit: one JSON object per record, in ``seq`` order, each
``{"seq", "ts", "kind", ...record}``. The journal is opened read-only and no file is ever
created, so it is safe while the daemon runs. A missing file or one that is not a lammer
journal is an error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from daemon.errors import JournalError
from daemon.journal import KINDS, Journal

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


def run(args: argparse.Namespace) -> int:
    """Write the records as JSON lines; the exit status."""
    try:
        journal = Journal.open(args.file, readonly=True)
    except JournalError as exc:
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    out = sys.stdout
    try:
        with journal:
            for record in journal.records(args.after, kind=args.kind):
                out.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
            out.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): not an error. Point stdout at /dev/null so the
        # interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
        return EXIT_OK
    except JournalError as exc:
        print(f"lammer journal: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
