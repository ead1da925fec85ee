"""Messages the contract refuses, as a hostile client with the table's MQTT rights could
publish them on its topics, each with a ``seq`` ahead of the table's (issue 27): every
consumer must refuse them before they can take a seq (``contract.feed.admit``)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

TS = "2026-12-01T14:00:00.000Z"


class Forged(NamedTuple):
    """A forged message: what it is, where it goes (relative to the table's base topic),
    its bytes and the reason a consumer refuses it with (``PayloadError.reason``)."""

    kind: str
    topic: str
    payload: bytes
    reason: str


def _roll(table: str, seq: object, prev: int | None, **changes: Any) -> dict[str, Any]:
    body = {
        "table": table,
        "seq": seq,
        "prev_seq": prev,
        "ts": TS,
        "roll_id": 900_000,
        "dice": [6, 6],
        "total": 12,
        "status": "counted",
        "reason": None,
    }
    return {**body, **changes}


def _bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def forged(table: str, ahead: int, prev: int | None) -> list[Forged]:
    """One forged message of each kind for ``table``, seqs from ``ahead`` up (every one
    would be released at once if admitted: its ``prev_seq`` is ``prev``, the table's last)."""
    result = {
        "table": table,
        "seq": ahead + 1,
        "prev_seq": prev,
        "ts": TS,
        "roll_id": 900_000,
        "bet": "x" * 60_000,  # a 60 KB field: no bet is called that
        "outcome": "win",
        "pays": "175",
    }
    out = [
        Forged(
            "wrong types", "craps/roll", _bytes(_roll(table, ahead, prev, dice="six")), "invalid"
        ),
        Forged("an oversized field", "craps/result", _bytes(result), "invalid"),
        Forged(
            "another table's id",
            "craps/roll",
            _bytes(_roll("someone-else", ahead + 2, prev)),
            "wrong_table",
        ),
        Forged(
            "an unknown topic",
            "craps/jackpot",
            _bytes(_roll(table, ahead + 3, prev)),
            "unknown_topic",
        ),
        Forged(
            "a payload over 64 KiB",
            "craps/roll",
            _bytes(_roll(table, ahead + 4, prev, note="y" * 70_000)),
            "too_large",
        ),
    ]
    return out + seq_kinds(table, prev)


def seq_kinds(table: str, prev: int | None) -> list[Forged]:
    """A ``seq`` that is not a positive integer, of each kind: a string, negative, 0,
    ``true``, ``NaN``, a float."""
    nan = _bytes(_roll(table, 0, prev)).replace(b'"seq": 0', b'"seq": NaN')
    assert b"NaN" in nan
    return [
        Forged("seq a string", "craps/roll", _bytes(_roll(table, "12440", prev)), "invalid"),
        Forged("seq negative", "craps/roll", _bytes(_roll(table, -12440, prev)), "invalid"),
        Forged("seq 0", "craps/roll", _bytes(_roll(table, 0, prev)), "invalid"),
        Forged("seq true", "craps/roll", _bytes(_roll(table, True, prev)), "invalid"),
        Forged("seq NaN", "craps/roll", nan, "not_json"),
        Forged("seq a float", "craps/roll", _bytes(_roll(table, 12440.5, prev)), "invalid"),
    ]
