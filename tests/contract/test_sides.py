"""One declaration, two sides: what a producer may build and what a consumer reads
(contract.payloads ``publication`` and ``parse``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contract.payloads import (
    MAX_PAYLOAD,
    Alarm,
    AlarmsBody,
    CrapsBoardMessage,
    CrapsResultBody,
    DeviceState,
    PayloadError,
    StateBody,
    parse,
    publication,
    relayed,
)
from rules.events import Device

TS = "2026-11-29T14:03:07.123Z"


def alarm(**fields: Any) -> Alarm:
    """An alarm as the daemon builds one (every field set)."""
    return Alarm(
        **{
            "code": "DECK_FAULT",
            "device": "shuffler",
            "message": "the deck check failed",
            "since": TS,
            "stops_payouts": True,
            "acknowledged_by": None,
            "acknowledged_at": None,
            **fields,
        }
    )


def test_a_producer_sets_every_field_and_no_other() -> None:
    body = AlarmsBody(table="t1", alarms=[alarm()])
    assert publication("alarms", body).body["alarms"][0]["stops_payouts"] is True
    # A field the declaration lacks: a builder's bug, refused where it is built.
    with pytest.raises(ValueError, match="colour: not a field of Alarm"):
        publication("alarms", AlarmsBody(table="t1", alarms=[alarm(colour="red")]))
    # A field left to its default: every listed key is always present (docs/mqtt.md).
    forgot = Alarm(
        code="X", device=None, message="m", since=TS, acknowledged_by=None, acknowledged_at=None
    )
    with pytest.raises(ValueError, match="stops_payouts: not set by the builder"):
        publication("alarms", AlarmsBody(table="t1", alarms=[forgot]))
    devices: dict[Device, DeviceState] = {"shuffler": DeviceState(connected=True, status="READY")}
    with pytest.raises(ValueError, match=r"mode: not set by the builder of DeviceState"):
        publication("state", StateBody(table="t1", game="CSP", devices=devices, alarms=[]))
    # A body of another topic.
    with pytest.raises(ValueError, match="not this topic's body"):
        publication("state", AlarmsBody(table="t1", alarms=[]))


def result(**fields: Any) -> bytes:
    """A craps/result payload of table t1."""
    body = {"table": "t1", "seq": 7, "ts": TS, "roll_id": 9, "bet": "all_small"}
    return json.dumps({**body, "outcome": "win", "pays": "34", **fields}).encode()


def test_a_consumer_keeps_a_newer_tables_fields_and_reads_an_older_one() -> None:
    newer = parse("craps/result", result(colour="red", extra={"a": [1]}), table="t1")
    assert isinstance(newer, CrapsResultBody)
    assert newer.model_extra == {"colour": "red", "extra": {"a": [1]}}
    assert relayed(newer) == json.loads(result(colour="red", extra={"a": [1]}))
    # craps/board of a table before lammer added last_roll, chance and clause.
    older = {
        "table": "t1",
        "seq": 3,
        "ts": TS,
        "paytable": 1,
        "betting_open": False,
        "numbers_hit": [4],
        "pending_roll": {"roll_id": 5, "dice": [1, 6], "reason": "ON_CHIPS"},
    }
    for bet, numbers, pays in (
        ("all_small", [2, 3, 5, 6], "34"),
        ("all_tall", [8, 9, 10, 11, 12], "34"),
        ("make_em_all", [2, 3, 5, 6, 8, 9, 10, 11, 12], "175"),
    ):
        older[bet] = {"pays": pays, "hit": [4] if bet != "all_tall" else [],
                      "remaining": numbers, "complete": False}  # fmt: skip
    board = parse("craps/board", json.dumps(older).encode(), table="t1")
    assert isinstance(board, CrapsBoardMessage)
    assert board.last_roll is None
    assert board.pending_roll is not None
    assert board.pending_roll.clause is None
    assert board.pending_roll.since is None
    assert (board.series, board.series_count) == ([], 0)
    assert "last_roll" not in relayed(board)  # passed on as it came
    assert "series" not in relayed(board)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (result(pays="9" * 10), "invalid"),  # odds beyond any pay table
        (result(roll_id=1_000_000), "invalid"),  # past MAX_ID
        (result(seq=2**53), "invalid"),  # not exact in a browser
        (result(bet="all_small<script>"), "invalid"),
        (result(table="t2"), "wrong_table"),
        (b"{" + b" " * MAX_PAYLOAD + b"}", "too_large"),
    ],
)
def test_a_consumer_refuses_what_is_not_bounded(payload: bytes, reason: str) -> None:
    with pytest.raises(PayloadError) as caught:
        parse("craps/result", payload, table="t1")
    assert caught.value.reason == reason


def test_a_long_text_or_list_is_refused() -> None:
    long = {"table": "t1", "seq": 1, "ts": TS}
    alarms = [alarm().model_dump()] * 129
    with pytest.raises(PayloadError, match="at most 128"):
        parse("alarms", json.dumps({**long, "alarms": alarms}).encode(), table="t1")
    shouting = [{**alarm().model_dump(), "message": "x" * 501}]
    with pytest.raises(PayloadError, match="at most 500"):
        parse("alarms", json.dumps({**long, "alarms": shouting}).encode(), table="t1")
