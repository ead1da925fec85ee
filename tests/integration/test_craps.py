"""A craps table end to end: the dice reader on a pty, the stickperson's requests over MQTT.

Expected figures come from seeds/sd-bonus-craps.txt (pay tables 1 and 2) and
seeds/in-craps-invalid-rolls.txt (68 IAC 10-4-4) through dice-reader-icd.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from daemon.records import from_record
from rules.events import DeviceConnected, DeviceDisconnected, DeviceHello, DeviceStatus
from tests.integration.conftest import MakeTable
from tests.integration.harness import Table

pytestmark = pytest.mark.integration

SMALL, TALL = [2, 3, 4, 5, 6], [8, 9, 10, 11, 12]


def _rolls(table: Table, since: int = 0) -> list[tuple[int, str, int | None]]:
    return [
        (b["roll_id"], b["status"], b["total"]) for b in table.recorder.bodies("craps/roll", since)
    ]


def _results(table: Table, since: int = 0) -> list[tuple[int, str, str, str | None]]:
    return [
        (b["roll_id"], b["bet"], b["outcome"], b.get("pays"))
        for b in table.recorder.bodies("craps/result", since)
    ]


def _board(table: Table) -> dict[str, Any]:
    board = table.recorder.latest("craps/board")
    assert board is not None
    return board


async def test_a_full_series_pays_every_bet_at_pay_table_2(make_table: MakeTable) -> None:
    table = make_table("CRAPS", extra_config="[bonus_craps]\npaytable = 2\n")
    script = """\
ROLL,101,1,1
ROLL,102,1,2
ROLL,103,2,2
ROLL,104,2,3
ROLL,105,3,3
ROLL,106,4,4
ROLL,107,4,5
ROLL,108,5,5
ROLL,109,5,6
ROLL,110,6,6
ROLL,111,3,4
ROLL,112,6,1
"""
    await table.start(script)
    await table.wait_for(lambda: len(_rolls(table)) == 12, what="12 rolls")
    await table.wait_published()
    assert _rolls(table) == [(101 + i, "counted", t) for i, t in enumerate([*SMALL, *TALL, 7, 7])]
    # Pay table 2: All Small 30, All Tall 30, Make 'Em All 150; each the moment its last
    # number is rolled. The seven that follows settles nothing more (all taken down); the
    # next seven starts a new series and loses all three (20:18:33:12 (1)(b)).
    assert _results(table) == [
        (105, "all_small", "win", "30"),
        (110, "all_tall", "win", "30"),
        (110, "make_em_all", "win", "150"),
        (112, "all_small", "lose", None),
        (112, "all_tall", "lose", None),
        (112, "make_em_all", "lose", None),
    ]
    boards = table.recorder.bodies("craps/board")
    full = next(b for b in boards if b["numbers_hit"] == [*SMALL, *TALL])
    assert full["paytable"] == 2
    for bet, pays in (("all_small", "30"), ("all_tall", "30"), ("make_em_all", "150")):
        assert full[bet]["pays"] == pays
        assert full[bet]["complete"] is True
        assert full[bet]["remaining"] == []
    final = _board(table)
    assert final["numbers_hit"] == []
    assert final["betting_open"] is True  # a new series: bets at its beginning only
    assert final["pending_roll"] is None
    table.recorder.check_order()


async def test_every_roll_and_decision_through_requests(make_table: MakeTable) -> None:
    table = make_table("CRAPS")
    rec = table.recorder
    # Phase A: counted rolls, a no-roll, a CHECK, and a ROLL that must wait behind it.
    await table.start(
        "ROLL,1,1,1\nROLL,2,1,2\nNOROLL,3,OFF_TABLE\nROLL,4,2,2\nROLL,5,2,3\n"
        "CHECK,6,3,3,ON_CHIPS\nROLL,7,4,4\n"
    )
    await table.wait_for(lambda: len(_rolls(table)) == 7, what="7 roll events")
    await table.wait_published()
    assert _rolls(table) == [
        (1, "counted", 2),
        (2, "counted", 3),
        (3, "noroll", None),
        (4, "counted", 4),
        (5, "counted", 5),
        (6, "pending", 6),
        (7, "pending", 8),
    ]
    noroll = rec.bodies("craps/roll")[2]
    assert noroll["dice"] == [0, 0]
    assert "(b)(1)" in noroll["reason"]
    board = _board(table)
    assert board["numbers_hit"] == [2, 3, 4, 5]  # 6 and 8 wait for the stickperson
    assert board["pending_roll"]["roll_id"] == 6
    assert board["pending_roll"]["dice"] == [3, 3]
    assert board["betting_open"] is False
    assert board["all_small"]["remaining"] == [6]

    # The ROLL behind the CHECK cannot be decided first.
    answer = await table.request("roll_decision", _decide(7, "valid"))
    assert answer["status"] == "error"
    assert "decide roll 6 first" in answer["error"]

    # The CHECK declared valid counts (All Small completes: 34 to 1, pay table 1), then
    # the ROLL that waited counts, in order.
    mark = rec.mark()
    answer = await table.request("roll_decision", _decide(6, "valid"))
    assert (answer["status"], answer["error"]) == ("ok", None)
    await table.wait_for(lambda: len(_rolls(table, mark)) == 2, what="rolls 6 and 7 counted")
    assert _rolls(table, mark) == [(6, "counted", 6), (7, "counted", 8)]
    assert _results(table, mark) == [(6, "all_small", "win", "34")]
    await table.wait_for(
        lambda: _board(table)["numbers_hit"] == [2, 3, 4, 5, 6, 8], what="the board with 6, 8"
    )
    assert _board(table)["pending_roll"] is None
    assert _board(table)["all_small"]["complete"] is True

    # Phase B: an unreadable die can only be declared invalid; then a seven.
    mark = rec.mark()
    await table.start_sim("CHECK,8,0,5,UNREADABLE\n")
    await table.wait_for(lambda: _rolls(table, mark) == [(8, "pending", None)], what="roll 8")
    answer = await table.request("roll_decision", _decide(8, "valid"))
    assert answer["status"] == "error"
    assert "unreadable" in answer["error"]
    answer = await table.request("roll_decision", _decide(8, "invalid"))
    assert answer["status"] == "ok"
    await table.wait_for(lambda: len(_rolls(table, mark)) == 2, what="roll 8 decided")
    assert _rolls(table, mark)[1] == (8, "declared_invalid", None)

    lammers = _board(table)
    mark = rec.mark()
    await table.start_sim("ROLL,9,3,4\n")
    await table.wait_for(lambda: len(_results(table, mark)) == 2, what="the seven settling")
    assert _results(table, mark) == [
        (9, "all_tall", "lose", None),
        (9, "make_em_all", "lose", None),
    ]
    await table.wait_for(lambda: _board(table)["numbers_hit"] == [], what="lammers down")

    # The stickperson voids the seven under 4-4(c)(2): its effect is undone exactly.
    mark = rec.mark()
    answer = await table.request("void_roll", {"operator": "stick-1", "roll_id": 9, "clause": 2})
    assert answer["status"] == "ok"
    await table.wait_for(lambda: _board(table)["numbers_hit"] == [2, 3, 4, 5, 6, 8], what="back")
    assert _rolls(table, mark) == [(9, "declared_invalid", 7)]
    assert "(c)(2)" in rec.bodies("craps/roll", mark)[0]["reason"]
    reversals = [(b["roll_id"], b["bet"], b["outcome"]) for b in rec.bodies("craps/reversal", mark)]
    assert reversals == [(9, "all_tall", "lose"), (9, "make_em_all", "lose")]
    # The bets and lammers are exactly as before the seven; only the last roll (added to
    # the board) says what happened to it.
    after = _board(table)
    assert after["last_roll"] == {
        "roll_id": 9,
        "dice": [3, 4],
        "total": 7,
        "status": "declared_invalid",
    }
    assert {**_strip(after), "last_roll": None} == {**_strip(lammers), "last_roll": None}

    # Overturned (4-4(c), last sentence): the seven counts again with its dice.
    mark = rec.mark()
    answer = await table.request("overturn", {"operator": "floor-2", "roll_id": 9})
    assert answer["status"] == "ok"
    await table.wait_for(lambda: _board(table)["numbers_hit"] == [], what="seven reinstated")
    assert _rolls(table, mark) == [(9, "reinstated", 7)]
    assert _results(table, mark) == [
        (9, "all_tall", "lose", None),
        (9, "make_em_all", "lose", None),
    ]

    # Declared invalid again under (c)(6), then the next roll closes both windows.
    answer = await table.request("void_roll", {"operator": "stick-1", "roll_id": 9, "clause": "6"})
    assert answer["status"] == "ok"
    mark = rec.mark()
    await table.start_sim("ROLL,10,5,5\n")
    await table.wait_for(lambda: _rolls(table, mark) == [(10, "counted", 10)], what="roll 10")
    await table.wait_for(
        lambda: _board(table)["numbers_hit"] == [2, 3, 4, 5, 6, 8, 10], what="ten lammered"
    )
    for name, body in (
        ("void_roll", {"operator": "stick-1", "roll_id": 9, "clause": 2}),
        ("overturn", {"operator": "stick-1", "roll_id": 9}),
    ):
        answer = await table.request(name, body)
        assert answer["status"] == "error"
        assert "roll 10 has arrived since" in answer["error"]

    # The table's record keeps who decided what, and when.
    decisions = [r["event"] for r in table.journal("--kind", "decision") if "event" in r]
    assert [(d["type"], d["roll_id"], d["operator"]) for d in decisions] == [
        ("RollDecided", 6, "stick-1"),
        ("RollDecided", 8, "stick-1"),
        ("RollVoided", 9, "stick-1"),
        ("VoidOverturned", 9, "floor-2"),
        ("RollVoided", 9, "stick-1"),
    ]
    assert all(d["at"] for d in decisions)
    rec.check_order()


def _decide(roll_id: int, decision: str) -> dict[str, Any]:
    return {"operator": "stick-1", "roll_id": roll_id, "decision": decision}


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("seq", "prev_seq", "ts")}


BAD_REQUESTS: list[tuple[str, bytes | dict[str, Any], str]] = [
    ("roll_decision", b'{"operator": "stick-1", "roll_id": 2,', "not valid JSON"),
    ("roll_decision", {"roll_id": 2, "decision": "valid"}, "operator is missing"),
    (
        "roll_decision",
        {"operator": "stick-1", "roll_id": 99, "decision": "valid"},
        "unknown roll 99",
    ),
    (
        "roll_decision",
        {"operator": "stick-1", "roll_id": 2, "decision": "maybe"},
        'must be "valid" or "invalid"',
    ),
    ("void_roll", {"operator": "stick-1", "roll_id": 2, "clause": 5}, "clause must be 2, 3 or 6"),
    ("void_roll", {"operator": "stick-1", "roll_id": 2, "clause": 2}, "waits for a decision"),
    ("overturn", {"operator": "stick-1", "roll_id": 1}, "roll 2 has arrived since"),
    ("shoot", {"operator": "stick-1", "roll_id": 2}, "unknown request 'shoot'"),
]


async def test_bad_requests_get_a_clear_error_and_change_nothing(make_table: MakeTable) -> None:
    table = make_table("CRAPS")
    rec = table.recorder
    await table.start("ROLL,1,2,2\nCHECK,2,1,6,ON_CHIPS\n")
    await table.wait_for(lambda: len(_rolls(table)) == 2, what="two rolls")
    await table.wait_published()
    board = _board(table)
    before = table.journal()
    mark = rec.mark()
    for name, body, words in BAD_REQUESTS:
        answer = await table.request(name, body)
        assert answer["status"] == "error", (name, body)
        assert words in answer["error"], answer["error"]
        assert answer["error"][0].isalpha(), answer["error"]  # a sentence, not a dump
    # Nothing changed: only the error responses were published, the board is the same
    # retained message, and the journal holds the refusals and nothing else.
    assert {m.topic for m in rec.messages[mark:]} == {
        "response/roll_decision",
        "response/void_roll",
        "response/overturn",
        "response/shoot",
    }
    assert _board(table) == board
    after = table.journal()[len(before) :]
    refused = [r for r in after if r["kind"] == "decision"]
    assert len(refused) == len(BAD_REQUESTS)
    assert all("rejected" in r and "event" not in r for r in refused)
    # The reader's own reports (its status, its link, its answer to the driver's silence
    # probe) may come meanwhile on a loaded machine (seen: a ``device`` record, and a probe
    # reply journaled without an event); none is a roll or anything a request made.
    device_reports = (DeviceStatus, DeviceHello, DeviceConnected, DeviceDisconnected)
    assert all(
        (r.get("probe") is True and "event" not in r)
        or ("event" in r and isinstance(from_record(r["event"]), device_reports))
        for r in after
        if r["kind"] == "device"
    ), [r for r in after if r["kind"] == "device"]
    assert {r["kind"] for r in after} - {"device"} == {"decision", "publish"}
    # Still running, and a good decision still works.
    answer = await table.request("roll_decision", _decide(2, "valid"))
    assert answer["status"] == "ok"
    await table.wait_for(lambda: len(_results(table)) == 3, what="the seven of roll 2 settling")
    assert _results(table) == [
        (2, bet, "lose", None) for bet in ("all_small", "all_tall", "make_em_all")
    ]
    rec.check_order()
