"""What a journal record is: its kinds, the two forms a reader gets it in
(``JournalRecord``, parsed; ``RawRecord``, as stored) and the compact JSON its body is
stored as (``dumps``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from daemon.clock import format_ts
from daemon.errors import JournalValueError

Kind = Literal[
    "daemon", "device", "decision", "outcome", "alarm", "publish", "snapshot", "segment", "seal"
]
KINDS: Final[tuple[str, ...]] = (
    "daemon",
    "device",
    "decision",
    "outcome",
    "alarm",
    "publish",
    "snapshot",
    "segment",
    "seal",
)
"""Record kinds: ``daemon`` (start, stop, configuration), ``device`` (a device fact or a
driver event: connected, disconnected, a bad frame with its raw bytes), ``decision`` (a
stickperson's request), ``outcome`` (what the rules concluded), ``alarm`` (raised,
cleared), ``publish`` (a message for MQTT; written only by ``append_publish``),
``snapshot`` (the table's whole state), ``segment`` (the first record of a segment) and
``seal`` (the last record of a closed segment)."""

WRITABLE_KINDS: Final = frozenset(("daemon", "device", "decision", "outcome", "alarm", "snapshot"))
"""The kinds ``append`` takes (publish, segment and seal have their own writers)."""

RESERVED: Final = frozenset({"seq", "ts", "kind"})
"""The keys of an exported line (``JournalRecord.to_json``), which a record must not hold."""


def ts_text(ts: datetime) -> str:
    """``ts`` as the journal stores it (``JournalValueError`` for a naive one)."""
    try:
        return format_ts(ts)
    except ValueError as exc:
        raise JournalValueError(str(exc)) from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalRecord:
    """One stored record. For ``publish``, ``record`` holds ``topic``, ``retained``,
    ``payload`` (the JSON object sent, ``seq`` and ``ts`` included) and ``published``."""

    seq: int
    ts: datetime
    kind: str
    record: dict[str, object]

    def to_json(self) -> dict[str, object]:
        """The record as one JSON object (``lammer journal`` writes one per line)."""
        return {"seq": self.seq, "ts": format_ts(self.ts), "kind": self.kind, **self.record}


@dataclass(frozen=True, slots=True, kw_only=True)
class RawRecord:
    """A record as stored, for the chain's check: text and bytes exactly as in the file."""

    seq: int
    ts: str
    kind: str
    body: str
    payload: bytes | None
    hash: bytes


_JSON: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""``json.dumps`` with these options makes an encoder per call; a frame writes several."""


def dumps(value: object, what: str = "record") -> str:
    """Compact JSON, as the journal stores bodies (``JournalValueError`` if not JSON)."""
    try:
        return _JSON.encode(value)
    except (TypeError, ValueError) as exc:
        raise JournalValueError(f"{what} is not JSON: {exc}") from exc
