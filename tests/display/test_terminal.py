"""``lammer display``: what a person sees for the payloads of mqtt-api.md.

Payloads are written from the specs' examples (shuffler-icd.md's Caribbean Stud round 812,
dice-reader-icd.md's rolls, the seeds' pay tables), never from this module's output.
Frames are rendered to plain text, as a person would read them.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from contract.payloads import TOPICS
from contract.schemas import parse_message
from display.terminal import (
    Link,
    Screen,
    TableView,
    add_arguments,
    card_text,
    follow,
    render,
    route,
    run,
)
from foundation.backoff import Backoff
from tests.conftest import Broker, free_port
from tests.display.conftest import AuthBroker

TS = "2026-06-15T20:31:07.412Z"

# shuffler-icd.md, "Example: one Caribbean Stud round": the CSP column for 3 total hands.
CSP_3_HANDS = [
    ("Royal Flush", "300"),
    ("Straight Flush", "125"),
    ("Four of a Kind", "40"),
    ("Full House", "30"),
    ("Flush", "20"),
    ("Straight", "17"),
    ("Three of a Kind", "6"),
]
SUIT_SYMBOLS = "♠♥♦♣"
LAMMER_NUMBERS = (2, 3, 4, 5, 6, 8, 9, 10, 11, 12)  # sd-bonus-craps.txt: every number but 7


def payload(seq: int, table: str = "t1", **fields: Any) -> bytes:
    """A JSON payload with the conventions' ``table``, ``seq`` and ``ts``."""
    return json.dumps({"table": table, "seq": seq, "ts": TS, **fields}).encode()


def frame(views: list[TableView], *, width: int = 100, side_by_side: bool = False) -> str:
    """The views rendered as plain text, as a person would read them."""
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(render(views, side_by_side=side_by_side))
    return console.export_text()


def lines_with(text: str, needle: str) -> list[str]:
    """The lines of a frame that contain ``needle``."""
    return [line for line in text.splitlines() if needle in line]


def csp_state(seq: int = 3) -> bytes:
    """``state`` of a Caribbean Stud table whose shuffler is set to CSP and ready."""
    return payload(
        seq,
        game="CSP",
        devices={"shuffler": {"connected": True, "status": "READY", "mode": "CSP"}},
        alarms=[],
    )


def csp_round_812() -> TableView:
    """A CSP table after ``ROUND,7,812,3``: the payouts for 3 hands are up."""
    view = TableView(table="t1")
    assert view.apply("lammer/t1/availability", b"online")
    assert view.apply("lammer/t1/state", csp_state())
    paytable = [{"hand": hand, "pays": pays} for hand, pays in CSP_3_HANDS]
    assert view.apply(
        "lammer/t1/cover_all/payouts",
        payload(7, round_id=812, game="CSP", hands=3, paytable=paytable),
    )
    return view


def settle_812(cards: object = ("Qh", "Jh", "Th", "8h", "7h"), seq: int = 8) -> bytes:
    """``cover_all/result`` at ``SETTLE,8,812``: the flush at P3 pays 20 to 1."""
    return payload(
        seq,
        round_id=812,
        game="CSP",
        hands=3,
        outcome="win",
        highest={"hand": "Flush", "position": "P3", "cards": cards},
        pays="20",
        reason=None,
    )


# ---------------------------------------------------------------------------------------
# Cover All


def test_at_round_the_3_hand_csp_column_is_shown_and_no_card() -> None:
    text = frame([csp_round_812()])
    assert "Table t1" in text
    assert "● online" in text
    assert "Caribbean Stud Poker" in text
    assert "round 812" in text
    assert "3 hands" in text
    for hand, pays in CSP_3_HANDS:
        assert any(
            re.search(rf"\b{re.escape(hand)}\s+{pays} to 1\b", line)
            for line in lines_with(text, hand)
        ), f"no row {hand} {pays}"
    # Until SETTLE no card is shown (shuffler-icd.md, "Card data is secret").
    assert not set(SUIT_SYMBOLS) & set(text)
    assert "▶" not in text


@pytest.mark.parametrize("cards", ["QhJhTh8h7h", ["Qh", "Jh", "Th", "8h", "7h"]])
def test_at_settle_the_flush_row_is_highlighted_and_the_cards_shown(cards: object) -> None:
    view = csp_round_812()
    assert view.apply("lammer/t1/cover_all/result", settle_812(cards))
    text = frame([view])
    marked = lines_with(text, "▶")
    assert len(marked) == 1
    assert re.search(r"▶\s+Flush\s+20 to 1", marked[0])
    assert "Flush at P3" in text
    assert "Q♥ J♥ 10♥ 8♥ 7♥" in text
    assert "pays 20 to 1" in text


def test_a_win_of_an_earlier_round_does_not_highlight_the_new_pay_table() -> None:
    view = csp_round_812()
    assert view.apply("lammer/t1/cover_all/result", settle_812())
    paytable = [{"hand": hand, "pays": pays} for hand, pays in CSP_3_HANDS]
    assert view.apply(
        "lammer/t1/cover_all/payouts",
        payload(20, round_id=813, game="CSP", hands=3, paytable=paytable),
    )
    text = frame([view])
    assert "round 813" in text
    assert "▶" not in text
    assert "Round 812: WIN" in text  # the last result stays up until the next one


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"outcome": "no_qualifier", "highest": None, "pays": None, "reason": None},
            "no qualifying hand",
        ),
        ({"outcome": "void", "highest": None, "pays": None, "reason": None}, "VOID"),
        (
            {"outcome": "flagged", "highest": None, "pays": None, "reason": "9c dealt twice"},
            "FLAGGED",
        ),
    ],
)
def test_results_that_do_not_pay(fields: dict[str, Any], expected: str) -> None:
    view = csp_round_812()
    assert view.apply(
        "lammer/t1/cover_all/result",
        payload(8, round_id=812, game="CSP", hands=3, **fields),
    )
    text = frame([view])
    assert f"Round 812: {expected}" in text
    assert "▶" not in text
    if fields.get("reason"):
        assert "9c dealt twice" in text
    assert not set(SUIT_SYMBOLS) & set(text)


@pytest.mark.parametrize(
    ("code", "face", "colour"),
    [("Qh", "Q♥", "red"), ("Td", "10♦", "red"), ("As", "A♠", "black"), ("2c", "2♣", "black")],
)
def test_cards_are_drawn_with_suit_symbols_in_red_or_black(
    code: str, face: str, colour: str
) -> None:
    text = card_text(code)
    assert text.plain == face
    assert str(text.style).startswith(f"bold {colour} on white")


def test_mode_mismatch_and_alarms_are_shown() -> None:
    view = TableView(table="t1")
    assert view.apply(
        "lammer/t1/state",
        payload(
            4,
            game="UTH",
            devices={"shuffler": {"connected": True, "status": "READY", "mode": "CSP"}},
            alarms=[],
        ),
    )
    alarm = {
        "code": "MODE_MISMATCH",
        "device": "shuffler",
        "message": "shuffler set to CSP, table plays UTH",
        "since": TS,
    }
    assert view.apply("lammer/t1/alarms", payload(5, alarms=[alarm]))
    text = frame([view], width=140)
    assert "CSP ≠ UTH" in text
    assert "ALARM MODE_MISMATCH [shuffler]: shuffler set to CSP, table plays UTH" in text
    # A later ``state`` without alarms clears them; the newer of the two topics wins.
    assert view.apply(
        "lammer/t1/state",
        payload(
            9,
            game="UTH",
            devices={"shuffler": {"connected": True, "status": "READY", "mode": "UTH"}},
            alarms=[],
        ),
    )
    assert "MODE_MISMATCH" not in frame([view], width=140)
    assert "no alarms" in frame([view], width=140)


def test_an_empty_retained_payload_clears_its_section() -> None:
    view = csp_round_812()
    assert view.apply("lammer/t1/cover_all/result", settle_812())
    assert view.apply("lammer/t1/cover_all/result", b"")
    text = frame([view])
    assert "Round 812" not in text
    assert "round 812" in text  # the pay table is a different topic


# ---------------------------------------------------------------------------------------
# Bonus Craps


def bet(pays: str, remaining: list[int], hit: list[int]) -> dict[str, Any]:
    """One bet of ``craps/board``."""
    return {"pays": pays, "hit": hit, "remaining": remaining, "complete": not remaining}


def board(
    seq: int,
    numbers_hit: list[int],
    *,
    betting_open: bool = False,
    table: str = "t2",
    pending_roll: dict[str, Any] | None = None,
) -> bytes:
    """``craps/board`` with pay table 1 (sd-bonus-craps.txt: 34, 34, 175)."""
    small = [n for n in (2, 3, 4, 5, 6) if n not in numbers_hit]
    tall = [n for n in (8, 9, 10, 11, 12) if n not in numbers_hit]
    return payload(
        seq,
        table,
        paytable=1,
        betting_open=betting_open,
        numbers_hit=numbers_hit,
        all_small=bet("34", small, [n for n in numbers_hit if n < 7]),
        all_tall=bet("34", tall, [n for n in numbers_hit if n > 7]),
        make_em_all=bet("175", small + tall, numbers_hit),
        pending_roll=pending_roll,
        last_roll=None,
    )


def lammers(text: str) -> dict[int, str]:
    """Number -> its mark, read from the lammer strip of a frame."""
    rows = [line for line in text.splitlines() if line.count("│") >= 11]
    header, marks = rows[0], rows[1]
    cells = [c.strip() for c in header.split("│")[2:-2]]
    signs = [c.strip() for c in marks.split("│")[2:-2]]
    return {int(n): s for n, s in zip(cells, signs, strict=True)}


def test_the_board_shows_lammers_bets_and_betting() -> None:
    view = TableView(table="t2")
    hit = [2, 3, 4, 5, 6, 9]
    assert view.apply("lammer/t2/craps/board", board(30, hit, betting_open=False))
    text = frame([view])
    assert lammers(text) == {
        n: ("●" if n in hit else "·") for n in (2, 3, 4, 5, 6, 8, 9, 10, 11, 12)
    }
    assert "pay table 1" in text
    assert "betting CLOSED" in text
    assert "pending none" in text
    assert re.search(r"All Small\s+34 to 1\s+-\s+COMPLETE", text)
    assert re.search(r"All Tall\s+34 to 1\s+8 10 11 12\s+live", text)
    assert re.search(r"Make 'Em All\s+175 to 1\s+8 10 11 12\s+live", text)


def test_the_board_shows_each_bets_chance_as_one_in_x() -> None:
    view = TableView(table="t2")
    body = json.loads(board(31, [2, 6, 11]))
    # All Small needs 3, 4, 5: 155/1716 (worked by hand in tests/contract/test_payloads.py)
    body["all_small"]["chance"] = "155/1716"
    body["all_tall"]["chance"] = "not a fraction"  # tolerated, shown as nothing
    assert view.apply("lammer/t2/craps/board", json.dumps(body).encode())
    text = frame([view])
    assert re.search(r"All Small\s+34 to 1\s+3 4 5\s+1 in 11\.1\s+live", text)
    assert re.search(r"All Tall\s+34 to 1\s+8 9 10 12\s+live", text)


def test_a_chance_reads_as_the_player_display_writes_it() -> None:
    # issue 29: "2 in 5" for a chance of 2/5 (not "1 in 2.5"), as the web page writes it
    # (static/js/player_text.js chanceText, tests/display/test_signage.py); past reading at
    # a glance, "1 in X" rounded half up (100.25 -> 100.3).
    view = TableView(table="t2")
    body = json.loads(board(31, [2, 6, 11]))
    body["all_small"]["chance"] = "2/5"
    body["all_tall"]["chance"] = "4/401"
    body["make_em_all"]["chance"] = "10/40"
    assert view.apply("lammer/t2/craps/board", json.dumps(body).encode())
    text = frame([view])
    assert re.search(r"All Small\s+34 to 1\s+3 4 5\s+2 in 5\s+live", text)
    assert re.search(r"All Tall\s+34 to 1\s+8 9 10 12\s+1 in 100\.3\s+live", text)
    assert re.search(r"Make 'Em All\s+175 to 1\s+[0-9 ]+\s+1 in 4\s+live", text)


def roll_payload(
    seq: int, roll_id: int, dice: tuple[int, int], status: str, reason: str | None = None
) -> bytes:
    """``craps/roll`` of table t2; the total is unknown where a die is (0)."""
    total = sum(dice) if all(dice) else None
    return payload(
        seq, "t2", roll_id=roll_id, dice=list(dice), total=total, status=status, reason=reason
    )


def test_rolls_show_their_latest_status_and_results_their_reversal() -> None:
    view = TableView(table="t2")
    roll = "lammer/t2/craps/roll"
    # dice-reader-icd.md's example: 5001 eleven counts, 5002 four counts, 5003 a seven
    # resting on chips waits for the stickperson.
    assert view.apply(roll, roll_payload(40, 5001, (6, 5), "counted"))
    assert view.apply(roll, roll_payload(41, 5002, (2, 2), "counted"))
    assert view.apply(roll, roll_payload(42, 5003, (1, 6), "pending", "ON_CHIPS"))
    text = frame([view])
    assert re.search(r"5003\s+1 6\s+7\s+pending\s+ON_CHIPS", text)
    assert re.search(r"5001\s+6 5\s+11\s+counted", text)
    # A later throw waits behind the pending one (dice-reader-icd.md, "What the host must
    # do"); deciding 5003 then updates its row in place, rows staying in throw order.
    assert view.apply(roll, roll_payload(43, 5004, (3, 3), "pending", "SLID"))
    assert view.apply(roll, roll_payload(44, 5003, (1, 6), "counted"))
    rows = [line for line in frame([view]).splitlines() if re.search(r"│ 500\d ", line)]
    assert [row.split()[1] for row in rows] == ["5004", "5003", "5002", "5001"]
    for n, bet_name in enumerate(("all_small", "all_tall", "make_em_all")):
        assert view.apply(
            "lammer/t2/craps/result",
            payload(45 + n, "t2", roll_id=5003, bet=bet_name, outcome="lose", pays=None),
        )
    text = frame([view])
    assert len(lines_with(text, "5003  ")) == 1 + 3  # the roll row and three results
    assert re.search(r"5003\s+1 6\s+7\s+counted", text)
    assert "ON_CHIPS" not in text
    assert "roll 5003  Make 'Em All  LOSE" in text
    # The stickperson voids it under 4-4(c)(6): the settlements are taken back.
    assert view.apply(
        "lammer/t2/craps/reversal",
        payload(48, "t2", roll_id=5003, bet="all_small", outcome="lose"),
    )
    reversed_lines = lines_with(frame([view]), "reversed")
    assert len(reversed_lines) == 1
    assert "All Small" in reversed_lines[0]


def test_a_winning_bet_shows_its_odds() -> None:
    view = TableView(table="t2")
    assert view.apply(
        "lammer/t2/craps/result",
        payload(50, "t2", roll_id=5100, bet="all_tall", outcome="win", pays="34"),
    )
    assert "roll 5100  All Tall  WIN 34 to 1" in frame([view])


def test_the_board_shows_a_pending_roll() -> None:
    view = TableView(table="t2")
    pending = {"roll_id": 5003, "dice": [1, 6], "reason": "ON_CHIPS"}
    assert view.apply("lammer/t2/craps/board", board(31, [4], pending_roll=pending))
    assert "pending roll 5003 1 6 (ON_CHIPS)" in frame([view])


# ---------------------------------------------------------------------------------------
# Bust Bonus


def test_bust_bonus_round_and_a_win_with_three_eights() -> None:
    view = TableView(table="t3")
    assert view.apply(
        "lammer/t3/bust_bonus/state",
        payload(60, "t3", round_id=77, betting_open=True, up_card="8h", dealer_cards=["8h"]),
    )
    text = frame([view])
    assert "round 77" in text
    assert "betting OPEN" in text
    assert "Up card: 8♥" in text
    # sd-bust-bonus.txt: bust with three 8s, off-suit, pays 25 to 1.
    assert view.apply(
        "lammer/t3/bust_bonus/result",
        payload(
            61,
            "t3",
            round_id=77,
            outcome="win",
            up_card="8h",
            dealer_cards=["8h", "8d", "8s"],
            total=24,
            suited=False,
            three_eights=True,
            pays="25",
        ),
    )
    text = frame([view])
    assert "Round 77: WIN dealer busts with 24, off-suit, three 8s  pays 25 to 1" in text
    assert "8♥ 8♦ 8♠" in text


def test_a_flagged_bust_bonus_round_shows_its_reason() -> None:
    view = TableView(table="t3")
    assert view.apply(
        "lammer/t3/bust_bonus/result",
        payload(
            62,
            "t3",
            round_id=78,
            outcome="flagged",
            up_card=None,
            dealer_cards=[],
            total=None,
            suited=False,
            three_eights=False,
            pays=None,
            reason="CARD for round 79 while round 78 is open",
        ),
    )
    text = frame([view], width=140)
    assert "Round 78: FLAGGED" in text
    assert "CARD for round 79 while round 78 is open" in text


# ---------------------------------------------------------------------------------------
# The payloads above are the daemon's, not this display's idea of them


def good_payloads() -> list[tuple[str, bytes]]:
    """One payload of every topic as this file writes them."""
    paytable = [{"hand": hand, "pays": pays} for hand, pays in CSP_3_HANDS]
    no_tables = {"cover_all": None, "bonus_craps": None, "bust_bonus": None}
    return [
        ("info", payload(1, version="0.1.0", contract="1.2", game="CSP", paytables=no_tables)),
        ("state", csp_state()),
        ("cover_all/payouts", payload(7, round_id=812, game="CSP", hands=3, paytable=paytable)),
        ("cover_all/result", settle_812()),
        (
            "craps/board",
            board(31, [4], pending_roll={"roll_id": 5003, "dice": [1, 6], "reason": "ON_CHIPS"}),
        ),
        ("craps/roll", roll_payload(42, 5003, (1, 6), "pending", "ON_CHIPS")),
        ("craps/roll", roll_payload(43, 5004, (0, 3), "pending", "UNREADABLE")),
        ("craps/result", payload(50, roll_id=5100, bet="all_tall", outcome="win", pays="34")),
        ("craps/reversal", payload(47, roll_id=5003, bet="all_small", outcome="lose")),
        (
            "bust_bonus/state",
            payload(
                60,
                round_id=77,
                betting_open=True,
                up_card="8h",
                dealer_cards=["8h"],
                paytable_row="8",
            ),
        ),
        (
            "bust_bonus/result",
            payload(
                61,
                round_id=77,
                outcome="win",
                up_card="8h",
                dealer_cards=["8h", "8d", "8s"],
                total=24,
                suited=False,
                three_eights=True,
                pays="25",
                paytable_row="Bust with three 8s",
                column="off_suit",
            ),
        ),
    ]


@pytest.mark.parametrize(("topic", "body"), good_payloads(), ids=lambda v: str(v)[:20])
def test_the_test_payloads_are_valid_for_the_daemons_models(topic: str, body: bytes) -> None:
    parse_message(topic, body)  # raises if this file drifted from mqtt-api.md as built
    view = TableView(table=json.loads(body)["table"])
    assert view.apply(f"lammer/{view.table}/{topic}", body)
    assert not view.warnings


# ---------------------------------------------------------------------------------------
# seq, bad input, several tables


def test_a_seq_already_seen_is_ignored() -> None:
    view = TableView(table="t2")
    screen = Screen([view])  # the display's feed: contract.feed
    result = payload(70, "t2", roll_id=5200, bet="all_small", outcome="win", pays="34")
    assert screen.receive("lammer/t2/craps/result", result, now=0.0)
    assert not screen.receive("lammer/t2/craps/result", result, now=0.1)  # QoS 1 redelivery
    assert len(lines_with(frame([view]), "roll 5200")) == 1
    # A retained board republished after a reconnect, once a newer one was drawn.
    old, new = board(71, [2]), board(72, [2, 3])
    assert view.apply("lammer/t2/craps/board", old)
    assert view.apply("lammer/t2/craps/board", new)
    assert not view.apply("lammer/t2/craps/board", old)
    assert lammers(frame([view]))[3] == "●"


def test_the_screen_puts_a_table_in_seq_order_and_shows_what_will_not_come() -> None:
    view = TableView(table="t2")
    screen = Screen([view])
    result = {"bet": "all_small", "outcome": "lose", "pays": None}
    topic = "lammer/t2/craps/result"
    assert screen.receive(topic, payload(10, "t2", roll_id=10, prev_seq=None, **result), now=0)
    assert not screen.receive(topic, payload(14, "t2", roll_id=14, prev_seq=12, **result), now=0)
    assert screen.receive(topic, payload(12, "t2", roll_id=12, prev_seq=10, **result), now=0.5)
    assert not screen.receive(topic, payload(20, "t2", roll_id=20, prev_seq=18, **result), now=1)
    now = 1.0
    while not screen.resends:
        now += 0.5
        screen.tick(now)
    asked = screen.resends.popleft()
    assert (asked.topic, asked.from_seq, asked.to_seq) == ("lammer/t2/request/resend", 15, 18)
    while not view.warnings and now < 200:  # the table never answers
        now += 0.5
        screen.tick(now)
    text = frame([view])
    assert "messages lost: seq 15-18 will not come (unanswered)" in text
    rolls = [int(n) for n in re.findall(r"roll (\d+)\s+All Small", text)]
    assert sorted(rolls) == [10, 12, 14, 20]  # 14 after 12, and 20 after the gap


def test_display_options_that_cannot_be_used_end_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--table", "t1", "--once"]
    for argv, said in [
        (["--mqtt-host", "a,,b"], "--mqtt-host: an empty broker"),
        (["--mqtt-password-file", str(tmp_path / "none")], "needs --mqtt-user"),
        (
            ["--mqtt-user", "display", "--mqtt-password-file", str(tmp_path / "none")],
            "No such file",
        ),
        (["--mqtt-ca-file", str(tmp_path / "none")], "--mqtt-ca-file"),
    ]:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        assert run(parser.parse_args(base + argv)) == 2
        err = capsys.readouterr().err
        assert said in err, err
        assert err.count("\n") == 1, err  # one sentence, no traceback


@pytest.mark.parametrize(
    ("topic", "body", "warning"),
    [
        ("state", b"not json {", "state: payload is not UTF-8 JSON"),
        ("state", b"\xff\xfe", "state: payload is not UTF-8 JSON"),
        ("alarms", b"[1, 2]", "alarms: payload is not a JSON object"),
        (
            "craps/roll",
            payload(80, dice=[1, 2], total=3, status="counted"),
            "craps/roll: malformed payload: roll_id: Field required",
        ),
        (
            "craps/roll",
            payload(80, roll_id=1, dice=[1, 9], total=10, status="counted"),
            "dice.1: Input should be less than or equal to 6",
        ),
        (
            "cover_all/payouts",
            payload(
                80, round_id=1, game="CSP", hands=3, paytable=[{"hand": "Flush", "pays": 20.0}]
            ),
            "paytable.0.pays: odds must be a string holding an exact decimal",
        ),
        (
            "bust_bonus/state",
            payload(80, round_id=1, betting_open=False, up_card="1x"),
            "up_card: bad card code '1x'",
        ),
        (
            "craps/result",
            payload(80, "t9", roll_id=1, bet="all_small", outcome="lose"),
            "craps/result: payload names table 't9'",
        ),
        ("dice/temperature", payload(80), "dice/temperature: unknown topic"),
        ("availability", b"maybe", "availability: 'maybe' is neither"),
    ],
)
def test_bad_input_becomes_a_warning_line_and_changes_nothing(
    topic: str, body: bytes, warning: str
) -> None:
    view = csp_round_812()
    before = frame([view], width=200)
    assert view.apply(f"lammer/t1/{topic}", body)
    after = frame([view], width=200)
    warnings = lines_with(after, "! ")
    assert len(warnings) == 1
    assert warning in warnings[0]
    # Everything drawn before is still drawn.
    assert [line for line in after.splitlines() if "! " not in line and line.strip("│ ")] == [
        line for line in before.splitlines() if line.strip("│ ")
    ]


_FIELDS = sorted(
    {name for model, _ in TOPICS.values() for name in model.model_fields}
    | {"hand", "pays", "cards", "position", "code", "connected", "status", "mode", "hit"}
)


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_FIELDS), inner)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 1_000_001)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["As", "QhJhTh8h7h", "20", "1.5", "win", "counted", "t1", TS]),
    _nested,
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(
        st.tuples(
            st.sampled_from([*TOPICS, "availability", "x/y", "response/overturn"]),
            st.binary(max_size=20)
            | st.builds(
                lambda d, seq: json.dumps({"table": "t1", "seq": seq, "ts": TS, **d}).encode(),
                st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=8),
                st.integers(0, 30),
            ),
        ),
        max_size=6,
    )
)
@pytest.mark.heavy
def test_no_payload_crashes_the_display(messages: list[tuple[str, bytes]]) -> None:
    view = TableView(table="t1")
    for topic, body in messages:
        view.apply(f"lammer/t1/{topic}", body)
    frame([view])


def test_several_tables_side_by_side_or_stacked() -> None:
    views = [TableView(table="t1"), TableView(table="t2")]
    csp = route(views, "lammer/t1/state")
    craps = route(views, "lammer/t2/craps/board")
    assert csp is views[0]
    assert craps is views[1]
    assert route(views, "lammer/t3/state") is None
    assert csp.apply("lammer/t1/state", csp_state())
    assert craps.apply("lammer/t2/availability", b"offline")
    side = frame(views, width=160, side_by_side=True)
    assert lines_with(side, "Table t1") == lines_with(side, "Table t2")
    assert re.search(r"● online.*● offline", side) is None  # t1 has no availability yet
    assert re.search(r"Caribbean Stud Poker.*● offline", side)
    stacked = frame(views, width=100)
    assert lines_with(stacked, "Table t1") != lines_with(stacked, "Table t2")


# ---------------------------------------------------------------------------------------
# Against a real Mosquitto


async def run_display(*args: str) -> tuple[int, str]:
    """``lammer display`` as a real subprocess; its exit status and its output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli.main",
        "display",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "TERM": "dumb"},
    )
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_display_once_draws_the_retained_state_from_the_broker(mosquitto: Broker) -> None:
    prefix = f"display-test-{uuid.uuid4().hex[:8]}"
    paytable = [{"hand": hand, "pays": pays} for hand, pays in CSP_3_HANDS]
    retained = [
        ("t1/availability", b"online"),
        ("t1/state", csp_state()),
        ("t1/cover_all/payouts", payload(7, round_id=812, game="CSP", hands=3, paytable=paytable)),
        ("t1/cover_all/result", settle_812()),
        ("t2/availability", b"online"),
        ("t2/craps/board", board(30, [4, 10], betting_open=True)),
    ]
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        for topic, body in retained:
            await client.publish(f"{prefix}/{topic}", body, qos=1, retain=True)
    status, out = await run_display(
        "--host",
        mosquitto.host,
        "--port",
        str(mosquitto.port),
        "--prefix",
        prefix,
        "--table",
        "t1",
        "--table",
        "t2",
        "--layout",
        "stack",
        "--once",
    )
    assert status == 0, out
    assert "connected" in lines_with(out, "broker")[0]
    assert "Table t1" in out
    assert "Table t2" in out
    marked = lines_with(out, "▶")
    assert len(marked) == 1
    assert re.search(r"▶\s+Flush\s+20 to 1", marked[0])
    assert "Q♥ J♥ 10♥ 8♥ 7♥" in out
    assert "betting OPEN" in out
    assert lammers(out.split("Table t2")[1]) == {
        n: ("●" if n in (4, 10) else "·") for n in LAMMER_NUMBERS
    }
    assert "! " not in out  # no warning


async def test_display_tries_the_next_node_of_its_list(mosquitto: Broker) -> None:
    prefix = f"n{uuid.uuid4().hex[:8]}"
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(f"{prefix}/t1/state", csp_state(), qos=1, retain=True)
    dead = f"127.0.0.1:{free_port()}"
    status, out = await run_display(
        "--mqtt-host",
        f"{dead},{mosquitto.host}:{mosquitto.port}",
        "--prefix",
        prefix,
        "--table",
        "t1",
        "--once",
        "--exit-after",
        "20",
    )
    assert status == 0, out
    assert f"broker {mosquitto.host}:{mosquitto.port}: connected" in out
    assert "Caribbean Stud Poker" in out


async def test_display_logs_in_with_its_password_file(auth_broker: AuthBroker) -> None:
    table = f"login-{uuid.uuid4().hex[:8]}"
    async with aiomqtt.Client(
        auth_broker.host,
        auth_broker.port,
        username="daemon",
        password=(auth_broker.credentials / "daemon").read_text().strip(),
    ) as client:
        state = json.loads(csp_state())
        body = json.dumps({**state, "table": table}).encode()
        await client.publish(f"lammer/{table}/state", body, qos=1, retain=True)
    status, out = await run_display(
        "--mqtt-host",
        f"{auth_broker.host}:{auth_broker.port}",
        "--mqtt-user",
        "display",
        "--mqtt-password-file",
        str(auth_broker.credentials / "display"),
        "--table",
        table,
        "--once",
        "--exit-after",
        "3",
    )
    assert status == 0, out
    assert f"broker {auth_broker.host}:{auth_broker.port}: connected" in out
    assert "Caribbean Stud Poker" in out
    wrong = auth_broker.workdir / "wrong-password"
    wrong.write_text("not the password\n")
    status, out = await run_display(
        "--mqtt-host",
        f"{auth_broker.host}:{auth_broker.port}",
        "--mqtt-user",
        "display",
        "--mqtt-password-file",
        str(wrong),
        "--table",
        table,
        "--once",
        "--exit-after",
        "3",
    )
    assert status == 1, out  # the password is what the broker checked: refused
    assert "Caribbean Stud Poker" not in out


@pytest.mark.heavy
async def test_display_once_without_a_broker_says_so_and_fails() -> None:
    status, out = await run_display(
        "--port", str(free_port()), "--table", "t1", "--once", "--exit-after", "1"
    )
    assert status == 1
    assert "unreachable" in out
    assert "Table t1" in out


async def test_the_display_reconnects_and_keeps_what_it_drew(mosquitto_private: Broker) -> None:
    views = [TableView(table="t1", prefix="rc")]
    link = Link(host=mosquitto_private.host, port=mosquitto_private.port)
    changed = asyncio.Event()

    async def until(condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(60):  # a hang guard, not a speed check
            while not condition():
                await changed.wait()
                changed.clear()

    async def publish(topic: str, body: bytes) -> None:
        async with aiomqtt.Client(mosquitto_private.host, mosquitto_private.port) as client:
            await client.publish(f"rc/t1/{topic}", body, qos=1, retain=True)

    task = asyncio.create_task(
        follow(
            views,
            link,
            on_change=changed.set,
            rng=random.Random(5),
            backoff=Backoff(initial=0.05, maximum=0.2),
        )
    )
    try:
        await until(lambda: link.connected)
        await publish("state", csp_state(seq=3))
        await until(lambda: views[0].game == "CSP")
        mosquitto_private.stop()
        await until(lambda: not link.connected)
        assert "unreachable" in link.describe() or "connecting" in link.describe()
        mosquitto_private.start()
        await until(lambda: link.connected)
        await publish("cover_all/result", settle_812(seq=9))
        await until(lambda: views[0].cover_all_result is not None)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    text = frame(views)
    assert "Caribbean Stud Poker" in text  # drawn before the outage, still there
    assert "Round 812: WIN" in text
