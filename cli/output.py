"""A command's output: when its reader goes away, and files that hold cards.

Pipes (``lammer journal FILE | head -1``).

Python ignores SIGPIPE, so a write to a pipe whose reader has exited raises
``BrokenPipeError`` where a C tool would die quietly of the signal. The ``lammer`` entry
point catches it around every command (``cli.main.main``): no traceback, stdout pointed
at ``/dev/null`` so the interpreter's last flush has nothing to complain about, and exit
status 141 (128 + SIGPIPE), the status a shell shows for ``cat FILE | head -1``'s ``cat``.
The output was cut short, so the status is not 0: a script with ``set -o pipefail`` that
exports a journal through a pipe learns that the export is incomplete.

Files that hold cards (``lammer journal -o FILE``): ``private_file`` writes them 0600,
replacing any earlier file of that name instead of writing into it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final, TextIO

from daemon.errors import DaemonError
from foundation.files import replaced_privately

EXIT_BROKEN_PIPE: Final = 128 + signal.SIGPIPE
"""141: the reader of the output went away before it was all written."""


def discard(stream: TextIO | None = None) -> None:
    """Point ``stream``'s file descriptor (stdout by default) at ``/dev/null``: whatever is
    still buffered, and anything written later, goes nowhere instead of raising again."""
    target = sys.stdout if stream is None else stream
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, target.fileno())
    finally:
        os.close(devnull)


class OutputFileError(DaemonError, OSError):
    """An output file that cannot be written as asked (``-o FILE``); ``path`` is the file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


def check_private_target(path: Path) -> None:
    """Raise ``OutputFileError`` unless ``private_file(path)`` can replace ``path``: its
    folder exists, and ``path`` is missing or a regular file (not a symlink, whose target
    may belong to someone else, nor a device or a pipe)."""
    if not path.parent.is_dir():
        raise OutputFileError(path, f"no folder {path.parent}")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        what = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
        raise OutputFileError(path, f"{what}; give the path of a regular file")


@contextlib.contextmanager
def private_file(path: Path) -> Iterator[TextIO]:
    """A text file that only its owner may read or write (mode 0600), for output that holds
    cards (shuffler-icd.md: the protected record).

    It is written under a temporary name in the same folder (created 0600 whatever the
    umask) and renamed over ``path`` only once complete and on disk. So ``path`` ends up
    0600 whatever an earlier file of that name allowed, a reader who had the earlier file
    open never sees the new cards, and an interrupted export leaves no half file behind.
    ``check_private_target`` runs first.
    """
    check_private_target(path)
    with replaced_privately(path) as out:
        yield out
