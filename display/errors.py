"""Errors of the display layer.

One base for the layer; builtins mixed in where they fit::

    DisplayError(Exception)
    ├── WebConfigError(DisplayError, ConfigProblems)  a ``lammer web`` configuration that cannot
    │                                              be used: ``problems`` lists every one as
    │                                              ``key: what is wrong``
    ├── UsersFileError(DisplayError, ValueError)   a users file that cannot be read or written
    │                                              (``path`` and ``line`` say where)
    ├── ListenError(DisplayError, OSError)         ``lammer web`` cannot listen where told
    └── LoginRefused(DisplayError, PermissionError) the broker refused the MQTT user's login
"""

from __future__ import annotations

import errno
from pathlib import Path

from foundation.config_files import ConfigProblems


class DisplayError(Exception):
    """Base of every error raised by the display layer."""


class WebConfigError(DisplayError, ConfigProblems):
    """A ``lammer web`` configuration that cannot be used; ``problems`` lists every one
    (``ConfigProblems``)."""


class UsersFileError(DisplayError, ValueError):
    """A users file that cannot be used: unreadable, a bad line, a bad name."""

    def __init__(self, message: str, *, path: Path | None = None, line: int | None = None):
        where = "" if path is None else f"{path}" + ("" if line is None else f":{line}")
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line


class ListenError(DisplayError, OSError):
    """The web server cannot listen on ``listen``: the message says why in words."""

    def __init__(self, listen: str, exc: OSError) -> None:
        self.message = f"cannot listen on {listen}: {bind_problem(listen, exc)}"
        super().__init__(exc.errno, self.message)
        self.listen = listen

    def __str__(self) -> str:
        return self.message


class LoginRefused(DisplayError, PermissionError):
    """The broker refused the login of ``user`` (wrong name or password file)."""

    def __init__(self, user: str | None, where: str) -> None:
        who = "without a user" if user is None else f"as {user!r}"
        super().__init__(
            f"login refused by the MQTT broker at {where} {who}: check username and password_file"
        )
        self.user = user


def bind_problem(listen: str, exc: OSError) -> str:
    """Why a socket could not be bound, in words an operator acts on."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    match exc.errno:
        case errno.EADDRINUSE:
            return "the port is already in use (another lammer web, or another server)"
        case errno.EADDRNOTAVAIL:
            return f"{host} is not an address of this machine"
        case errno.EACCES:
            return "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
    return exc.strerror or str(exc)
