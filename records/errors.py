"""The records service's exceptions (the tree is drawn in ``records/__init__.py``)."""

from __future__ import annotations


class RecordsError(Exception):
    """Base of every error of the records service."""


class StoreError(RecordsError, RuntimeError):
    """The database refused an operation or could not be reached."""


class StoreUnreachable(StoreError, ConnectionError):
    """The connection to the database was lost (a restart, the network): what was being
    written was not committed, and may be written again on a new connection."""


class MigrationError(StoreError):
    """A migration failed; its transaction was rolled back, so none of it applied."""


class MessageError(RecordsError, ValueError):
    """A message that does not follow the MQTT contract (it is not stored). ``kind`` is
    one of a few fixed words (``availability``, or ``contract.payloads.PayloadError``'s
    reason): what the service's warnings are grouped by, whatever the sentence quotes."""

    def __init__(self, sentence: str, *, kind: str) -> None:
        super().__init__(sentence)
        self.kind = kind


class ReportError(RecordsError, ValueError):
    """A report was asked for something that does not exist or cannot be read."""


def one_line(exc: BaseException) -> str:
    """An error's text on one line (libpq's messages span several, with a hint)."""
    return " ".join(str(exc).split())
