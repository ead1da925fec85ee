"""Errors of the daemon layer.

One base for the layer; builtins mixed in where they fit, so callers may catch either::

    DaemonError(Exception)
    ├── ConfigFileError(DaemonError, ConfigProblems)  a table configuration that cannot be used:
    │                                               ``problems`` lists every one as
    │                                               ``key.path: what is wrong``
    ├── JournalError(DaemonError)                   the journal refused an operation
    │   ├── JournalFileError(JournalError, OSError)     missing, unreadable or not a journal
    │   └── JournalValueError(JournalError, ValueError) a bad kind, a naive time, a value that
    │                                                   is not JSON, an unknown ``seq``
    ├── RecordError(DaemonError, ValueError)        an event that cannot be turned into a
    │                                               journal record or back (``path`` says where)
    └── BrokerLoginRefused(DaemonError, PermissionError)  the MQTT broker refused the table's
                                                    login at start-up (``where``, ``user``)

Each carries structured attributes besides its message, so callers can report without
parsing text. Other daemon modules add their errors under ``DaemonError`` here.
"""

from __future__ import annotations

from pathlib import Path

from foundation.config_files import ConfigProblems


class DaemonError(Exception):
    """Base of every error raised by the daemon layer."""


class ConfigFileError(DaemonError, ConfigProblems):
    """A table configuration that cannot be used: ``path`` is the file (``None`` when
    validated from data), ``problems`` every problem found (``ConfigProblems``)."""


class JournalError(DaemonError):
    """Base of the journal's errors; ``path`` is the journal file when known."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class JournalFileError(JournalError, OSError):
    """The journal file is missing (read-only open), unreadable, or not a lammer journal."""


class JournalValueError(JournalError, ValueError):
    """A call the journal refuses: unknown kind, naive time, non-JSON value, unknown seq."""


class RecordError(DaemonError, ValueError):
    """An object that is not a registered event, or a record that does not decode.

    ``path`` says where in the record (``HandDealt.cards[2]``).
    """

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class BrokerLoginRefused(DaemonError, PermissionError):
    """The MQTT broker refused the table's login at start-up, every try: a wrong user name
    or password file, which waiting does not mend (``lammer run`` exits 2 with this)."""

    def __init__(self, where: str, user: str | None) -> None:
        self.where = where
        self.user = user
        who = "without a user" if user is None else f"as {user!r}"
        self.message = (
            f"login refused by the MQTT broker at {where} {who}: check username and password_file"
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class MetricsListenError(DaemonError, OSError):
    """``[metrics] listen`` cannot be listened on (a port in use, an address not this
    machine's): the daemon stops with this sentence, and systemd tries again."""

    def __init__(self, listen: str, exc: OSError) -> None:
        reason = exc.strerror or str(exc)
        super().__init__(f"cannot serve metrics on {listen} ([metrics] listen): {reason}")
