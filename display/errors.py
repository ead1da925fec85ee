"""Errors of the display layer.

One base for the layer; builtins mixed in where they fit::

    DisplayError(Exception)
    ├── WebConfigError(DisplayError, ValueError)   a ``lammer web`` configuration that cannot
    │                                              be used: ``problems`` lists every one as
    │                                              ``key: what is wrong``
    └── UsersFileError(DisplayError, ValueError)   a users file that cannot be read or written
                                                   (``path`` and ``line`` say where)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class DisplayError(Exception):
    """Base of every error raised by the display layer."""


class WebConfigError(DisplayError, ValueError):
    """A ``lammer web`` configuration that cannot be used; ``problems`` lists every one."""

    def __init__(self, path: Path | None, problems: Sequence[str]) -> None:
        self.path = path
        self.problems: tuple[str, ...] = tuple(problems)
        where = str(path) if path is not None else "configuration"
        count = len(self.problems)
        header = f"{where}: {count} problem{'s' if count != 1 else ''}"
        super().__init__("\n  ".join([header, *self.problems]))


class UsersFileError(DisplayError, ValueError):
    """A users file that cannot be used: unreadable, a bad line, a bad name."""

    def __init__(self, message: str, *, path: Path | None = None, line: int | None = None):
        where = "" if path is None else f"{path}" + ("" if line is None else f":{line}")
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line
