"""What the two configuration generators share (``deploy.broker_config``, ``lammer
broker-config``, and ``deploy.floor_config``, ``lammer floor-config``): the error listing
every problem found, the readers' user names, and the credentials each keeps.

Both brokers name the readers alike, so a display, a pit terminal or ``lammer records``
logs in with the same user name on a controller's broker and on the floor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from daemon.errors import DaemonError
from deploy.files import Change, keep_or_make_password

DISPLAY: Final = "display"
TERMINAL: Final = "terminal"
RECORDS: Final = "records"


class ProblemsError(DaemonError, ValueError):
    """Options or inputs that cannot make one configuration; ``problems`` lists every one,
    each a sentence naming the option, file or table, after a count."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''}"
        super().__init__("\n  ".join([header, *self.problems]))


def kept_password(path: Path, changes: list[Change], error: type[ProblemsError]) -> str:
    """The password of the credentials file ``path``, kept, or made and written there;
    ``error`` naming the file when it cannot be used."""
    try:
        return keep_or_make_password(path, changes)
    except ValueError as exc:
        raise error([str(exc)]) from exc


def stray_credentials(
    credentials: Path, known: Iterable[str], changes: list[Change], why: str
) -> None:
    """Report (never delete) each file in ``credentials`` that is no user's: ``why``."""
    names = set(known)
    for path in sorted(credentials.iterdir()):
        if path.name not in names:
            changes.append(Change(path, "left", why))
