"""A private file replaced whole: what lammer writes that holds cards (a journal export, a
simulator's record), so no one else reads it and no reader sees half of it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


@contextlib.contextmanager
def replaced_privately(path: Path) -> Iterator[TextIO]:
    """A text file written under a temporary name in ``path``'s folder (created 0600
    whatever the umask), flushed to disk and renamed over ``path`` only once complete.
    So ``path`` ends up 0600 whatever an earlier file of that name allowed, a reader who
    had the earlier file open never sees the new content, and an interruption (any
    exception) leaves no half file behind."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
