"""Bodies the contract admits, for the feed's tests (tests/contract/test_feed*.py)."""

from __future__ import annotations

TS = "2026-12-01T14:00:00.000Z"


def _progress(numbers: list[int]) -> dict[str, object]:
    return {"pays": "34", "hit": [], "remaining": numbers, "complete": False, "chance": "1/3"}


BODIES: dict[str, dict[str, object]] = {
    "craps/roll": {"roll_id": 1, "dice": [1, 2], "total": 3, "status": "counted", "reason": None},
    "state": {"game": "CRAPS", "devices": {}, "alarms": []},
    "craps/board": {
        "paytable": 1,
        "betting_open": True,
        "numbers_hit": [],
        "all_small": _progress([2, 3, 4, 5, 6]),
        "all_tall": _progress([8, 9, 10, 11, 12]),
        "make_em_all": _progress([2, 3, 4, 5, 6, 8, 9, 10, 11, 12]),
        "pending_roll": None,
    },
    "response/resend": {},
}
"""A body the contract admits for each topic the simulated table publishes (the feed
checks every message before it counts: ``contract.feed.admit``)."""
