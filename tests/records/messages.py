"""Payloads as tables publish them, for the records tests (built as JSON by hand, checked
by the contract's models when the store parses them)."""

from __future__ import annotations

import json
from typing import Any

TS = "2026-12-01T14:03:07.123Z"


def ts(second: int) -> str:
    """A contract timestamp ``second`` seconds after 14:00 on 2026-12-01."""
    minutes, seconds = divmod(second, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2026-12-01T{14 + hours:02d}:{minutes:02d}:{seconds:02d}.000Z"


def body(payload: dict[str, Any]) -> bytes:
    """The payload as bytes on the wire."""
    return json.dumps(payload).encode()


def cover_all_result(
    table: str,
    seq: int,
    round_id: int,
    *,
    hands: int = 6,
    hand: str | None = None,
    pays: str | None = None,
    game: str = "UTH",
    outcome: str | None = None,
) -> dict[str, Any]:
    """A ``cover_all/result``: a win with ``hand`` or a round without a qualifier."""
    won = hand is not None
    return {
        "table": table,
        "seq": seq,
        "ts": ts(seq),
        "round_id": round_id,
        "game": game,
        "hands": hands,
        "outcome": outcome or ("win" if won else "no_qualifier"),
        "highest": {"hand": hand, "position": "P2", "cards": ["As", "Ks", "Qs", "Js", "Ts"]}
        if won
        else None,
        "pays": pays if won else None,
        "reason": None,
    }


def craps_roll(table: str, seq: int, roll_id: int, d1: int, d2: int) -> dict[str, Any]:
    """A counted ``craps/roll``."""
    return {
        "table": table,
        "seq": seq,
        "ts": ts(seq),
        "roll_id": roll_id,
        "dice": [d1, d2],
        "total": d1 + d2,
        "status": "counted",
        "reason": None,
    }


def alarms(table: str, seq: int, *codes: str) -> dict[str, Any]:
    """An ``alarms`` message listing ``codes`` active since seq 1's time."""
    return {
        "table": table,
        "seq": seq,
        "ts": ts(seq),
        "alarms": [
            {
                "code": code,
                "device": "shuffler",
                "message": f"{code} raised",
                "since": ts(1),
                "stops_payouts": False,
            }
            for code in codes
        ],
    }
