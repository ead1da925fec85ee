"""Payload models (contract/payloads.py) and publications (daemon/publications.py) against
mqtt-api.md.

Every body a builder makes is put on the wire as the journal would (``seq`` and ``ts``
added) and checked by tests/spec_mqtt.py, a checker written from the spec's table without
the models, and by the models themselves. Expected values come from the spec and the
seeds, never from the code under test.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contract import payloads
from contract.payloads import InfoBody, Publication
from contract.schemas import parse_message, schemas
from daemon.config import TableSection, load_config
from daemon.core import table_info
from daemon.publications import (
    bust_bonus_state_publication,
    craps_board_publication,
    info_publication,
    outcome_publication,
    state_publications,
)
from rules import bust_bonus, craps
from rules.events import (
    AlarmRaised,
    BustBonusResult,
    CardDrawn,
    CoverAllPayouts,
    CoverAllResult,
    CrapsBetReversed,
    CrapsBetSettled,
    DealerDone,
    DiceRolled,
    HighestHand,
    NoRoll,
    RollCheck,
    RollDecided,
    RollRecorded,
    RoundVoided,
    TableGame,
)
from rules.paytables import cover_all_paytable
from rules.table import Alarm, DeviceState, TableState, initial_state
from rules.table import apply as apply_table
from tests.spec_mqtt import RETAINED, SpecViolation, check_message

TS = "2026-11-29T14:03:07.123Z"


def wire(publication: Publication, *, seq: int = 1, table: str = "t1") -> bytes:
    """The payload as the journal publishes it: the body with table, seq and ts."""
    return json.dumps({"table": table, **publication.body, "seq": seq, "ts": TS}).encode()


def published(outcome: Any, *, table: str = "t1") -> Publication:
    """The publication of an outcome that has one."""
    publication = outcome_publication(outcome, table=table)
    assert publication is not None
    return publication


def by_topic(state: TableState) -> dict[str, Publication]:
    """The state topics of a table, by topic."""
    return {p.topic: p for p in state_publications(state, table="t1")}


def checked(publication: Publication) -> dict[str, Any]:
    """Check a publication against the spec checker and the models; return its body."""
    payload = wire(publication)
    body = check_message(
        f"lammer/t1/{publication.topic}",
        payload,
        base="lammer/t1",
        retained=publication.retained,
    )
    parse_message(publication.topic, payload)
    assert isinstance(body, dict)
    return body


# --- the spec's own example: shuffler-icd.md, one Caribbean Stud round (812) -------------


def test_spec_example_csp_round_812() -> None:
    # "At ROUND the displays get the Caribbean Stud column for 3 total hands (Royal Flush
    # 300, Straight Flush 125, Four of a Kind 40, Full House 30, Flush 20, Straight 17,
    # Three of a Kind 6)."
    payouts = CoverAllPayouts(
        round_id=812, game="CSP", hands=3, paytable=cover_all_paytable("CSP", 3)
    )
    body = checked(published(payouts))
    assert body["round_id"] == 812
    assert body["hands"] == 3
    assert body["paytable"] == [
        {"hand": "Royal Flush", "pays": "300"},
        {"hand": "Straight Flush", "pays": "125"},
        {"hand": "Four of a Kind", "pays": "40"},
        {"hand": "Full House", "pays": "30"},
        {"hand": "Flush", "pays": "20"},
        {"hand": "Straight", "pays": "17"},
        {"hand": "Three of a Kind", "pays": "6"},
    ]
    # "the highest hand is the flush at P3, and every Cover All Bonus wager ... wins 20 to 1"
    result = CoverAllResult(
        round_id=812,
        game="CSP",
        hands=3,
        outcome="win",
        highest=HighestHand(hand="Flush", position="P3", cards=("Qh", "Jh", "Th", "8h", "7h")),
        pays=Decimal(20),
        reason=None,
    )
    body = checked(published(result))
    assert body["outcome"] == "win"
    assert body["highest"] == {
        "hand": "Flush",
        "position": "P3",
        "cards": ["Qh", "Jh", "Th", "8h", "7h"],
        "best": ["Qh", "Jh", "Th", "8h", "7h"],  # a Caribbean Stud hand is its five
        "board": [],
    }
    assert body["pays"] == "20"
    assert body["reason"] is None


def test_a_hold_em_win_names_the_five_that_make_it_and_the_board() -> None:
    result = CoverAllResult(
        round_id=31,
        game="UTH",
        hands=5,
        outcome="win",
        highest=HighestHand(
            hand="Royal Flush", position="P1", cards=("As", "Ks", "Qs", "Js", "Ts", "2d", "3c")
        ),
        pays=Decimal(100),
        reason=None,
    )
    highest = checked(published(result))["highest"]
    assert highest["best"] == ["As", "Ks", "Qs", "Js", "Ts"]
    assert highest["board"] == ["Qs", "Js", "Ts", "2d", "3c"]  # the two before are P1's own


def test_three_card_poker_fractional_odds_are_exact() -> None:
    # sd-cover-all-bonus.txt, Three Card Poker, Straight with 5 total hands: 1.5 to 1.
    pub = published(
        CoverAllPayouts(round_id=1, game="TCP", hands=5, paytable=cover_all_paytable("TCP", 5))
    )
    rows = {row["hand"]: row["pays"] for row in checked(pub)["paytable"]}
    assert rows["Straight"] == "1.5"
    assert b"1.5" in wire(pub)
    assert all(isinstance(pays, str) for pays in rows.values())


# --- every outcome and state topic passes the independent checker ---------------------

OUTCOMES = [
    CoverAllResult(
        round_id=5,
        game="UTH",
        hands=None,
        outcome="flagged",
        highest=None,
        pays=None,
        reason="HAND for P2 already received",
    ),
    CoverAllResult(
        round_id=6,
        game="LIR",
        hands=4,
        outcome="no_qualifier",
        highest=None,
        pays=None,
        reason=None,
    ),
    CoverAllResult(
        round_id=7, game="MSP", hands=2, outcome="void", highest=None, pays=None, reason=None
    ),
    RollRecorded(roll_id=5001, dice=(6, 5), total=11, status="counted", reason=None),
    RollRecorded(roll_id=5003, dice=(0, 6), total=None, status="pending", reason="UNREADABLE"),
    RollRecorded(roll_id=5004, dice=(2, 2), total=4, status="declared_invalid", reason="clause 2"),
    CrapsBetSettled(roll_id=9, bet="all_small", outcome="win", pays=Decimal("34")),
    CrapsBetSettled(roll_id=9, bet="make_em_all", outcome="lose", pays=None),
    CrapsBetReversed(roll_id=9, bet="all_small", outcome="win"),
    BustBonusResult(
        round_id=3,
        outcome="win",
        up_card="8s",
        dealer_cards=("8s", "8h", "8d"),
        total=24,
        suited=False,
        three_eights=True,
        pays=Decimal(25),
        reason=None,
        paytable_row="Bust with three 8s",
        column="off_suit",
    ),
    BustBonusResult(
        round_id=4,
        outcome="void",
        up_card="Kd",
        dealer_cards=("Kd",),
        total=None,
        suited=False,
        three_eights=False,
        pays=None,
        reason=None,
        paytable_row=None,
        column=None,
    ),
]


@pytest.mark.parametrize("outcome", OUTCOMES, ids=lambda o: type(o).__name__)
def test_every_outcome_builds_a_spec_payload(outcome: Any) -> None:
    pub = published(outcome)
    body = checked(pub)
    assert pub.retained == RETAINED[pub.topic]
    assert pub.body["table"] == "t1"
    other = published(outcome, table="t9")
    assert other == Publication(pub.topic, pub.retained, {**pub.body, "table": "t9"})
    assert body["seq"] == 1


def test_reversal_goes_on_the_added_topic() -> None:
    pub = published(CrapsBetReversed(roll_id=9, bet="all_tall", outcome="lose"))
    assert pub.topic == "craps/reversal"
    assert not pub.retained
    assert pub.body == {"table": "t1", "roll_id": 9, "bet": "all_tall", "outcome": "lose"}


def test_alarm_outcomes_are_published_as_the_whole_set() -> None:
    raised = AlarmRaised(code="MODE_MISMATCH", device="shuffler", message="set to UTH")
    assert outcome_publication(raised, table="t1") is None


def test_state_and_alarms() -> None:
    since = datetime(2026, 11, 29, 16, 3, 7, 123456, tzinfo=timezone(timedelta(hours=2)))
    alarm = Alarm(code="JAM", device="shuffler", message="jammed", since=since)
    state = TableState(
        game="CRAPS",
        devices=(
            ("shuffler", DeviceState(connected=True, mode="UTH")),
            ("dice_reader", DeviceState(connected=False, faults=(("COVER_OPEN", ""),))),
        ),
        alarms=(alarm,),
    )
    body = checked(by_topic(state)["state"])
    assert body["devices"] == {
        "shuffler": {"connected": True, "status": "READY", "mode": "UTH"},
        "dice_reader": {"connected": False, "status": "COVER_OPEN"},  # mode: shuffler only
    }
    # UTC with milliseconds and Z, whatever zone the time came in.
    expected_alarm = {
        "code": "JAM",
        "device": "shuffler",
        "message": "jammed",
        "since": "2026-11-29T14:03:07.123Z",
        "stops_payouts": False,  # a jam alone pays on: the shuffler's checks decide
        "acknowledged_by": None,  # mqtt-api.md 1.3: null until acknowledged
        "acknowledged_at": None,
    }
    assert body["alarms"] == [expected_alarm]
    alarms = checked(by_topic(state)["alarms"])
    assert alarms["alarms"] == [expected_alarm]
    quiet = TableState(game="BJ", devices=())
    assert by_topic(quiet)["alarms"].body == {"table": "t1", "alarms": []}
    assert by_topic(quiet)["state"].body["game"] == "BJ"
    naive = Alarm(code="JAM", device=None, message="m", since=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="no time zone"):
        state_publications(TableState(game="BJ", devices=(), alarms=(naive,)), table="t1")


def test_craps_board_from_the_rules_view() -> None:
    # Pay Table 1 of sd-bonus-craps.txt: All Small 34, All Tall 34, Make 'Em All 175.
    state = craps.initial_state(1)
    for roll_id, dice in enumerate([(1, 1), (3, 3), (6, 5)], start=1):
        state, _ = craps.apply(state, DiceRolled(roll_id=roll_id, dice=dice))
    body = checked(craps_board_publication(craps.board(state), table="t1"))
    assert body["paytable"] == 1
    assert body["betting_open"] is False
    assert body["numbers_hit"] == [2, 6, 11]
    # The chance to complete before a seven, worked by hand: needing 3, 4, 5 (2, 3 and 4
    # ways against the seven's 6), the first of them to come decides what is left:
    # P{5} = 4/10, P{4} = 3/9, P{3} = 2/8; P{4,5} = 3/13 P{5} + 4/13 P{4} = 38/195;
    # P{3,5} = 2/12 P{5} + 4/12 P{3} = 3/20; P{3,4} = 2/11 P{4} + 3/11 P{3} = 17/132;
    # P{3,4,5} = 2/15 P{4,5} + 3/15 P{3,5} + 4/15 P{3,4}.
    chance = (
        Fraction(2, 15) * Fraction(38, 195)
        + Fraction(3, 15) * Fraction(3, 20)
        + Fraction(4, 15) * Fraction(17, 132)
    )
    assert body["all_small"] == {
        "pays": "34",
        "hit": [2, 6],
        "remaining": [3, 4, 5],
        "complete": False,
        "chance": f"{chance.numerator}/{chance.denominator}",
    }
    assert body["all_tall"]["pays"] == "34"
    assert body["all_tall"]["hit"] == [11]
    assert body["make_em_all"]["pays"] == "175"
    assert body["pending_roll"] is None
    fresh = checked(craps_board_publication(craps.board(craps.initial_state(2)), table="t1"))
    assert fresh["betting_open"] is True
    assert fresh["make_em_all"]["pays"] == "150"


def test_craps_board_names_the_series_and_since_when_a_check_waits() -> None:
    # Times as the table passes them (the journaled time of each roll event).
    t0 = datetime(2026, 11, 30, 21, 15, 4, 250_000, tzinfo=UTC)
    state = initial_state("CRAPS", at=t0)
    script: list[Any] = [
        DiceRolled(roll_id=11, dice=(2, 2)),
        DiceRolled(roll_id=12, dice=(1, 3)),
        DiceRolled(roll_id=13, dice=(6, 5)),
        RollCheck(roll_id=14, dice=(4, 6), reason="ON_CHIPS"),
        DiceRolled(roll_id=15, dice=(1, 1)),
    ]
    for i, fact in enumerate(script):
        state, _ = apply_table(state, fact, at=t0 + timedelta(seconds=10 * i))
    body = checked(by_topic(state)["craps/board"])
    # The CHECK arrived at t0 + 30 s: written as ts is (mqtt-api.md, Conventions).
    assert body["pending_roll"]["roll_id"] == 14
    assert body["pending_roll"]["since"] == "2026-11-30T21:15:34.250Z"
    assert body["series"] == [
        {"roll_id": 11, "dice": [2, 2], "total": 4, "at": "2026-11-30T21:15:04.250Z",
         "new_number": True, "wins": []},
        {"roll_id": 12, "dice": [1, 3], "total": 4, "at": "2026-11-30T21:15:14.250Z",
         "new_number": False, "wins": []},
        {"roll_id": 13, "dice": [6, 5], "total": 11, "at": "2026-11-30T21:15:24.250Z",
         "new_number": True, "wins": []},
    ]  # fmt: skip
    assert body["series_count"] == 3
    # Decided valid: the CHECK and the roll behind it join the series; no time is pending.
    state, _ = apply_table(
        state,
        RollDecided(roll_id=14, valid=True, operator="stick-1", at=t0 + timedelta(minutes=2)),
        at=t0 + timedelta(minutes=2),
    )
    body = checked(by_topic(state)["craps/board"])
    assert body["pending_roll"] is None
    assert [(r["roll_id"], r["at"]) for r in body["series"][-2:]] == [
        (14, "2026-11-30T21:15:34.250Z"),
        (15, "2026-11-30T21:15:44.250Z"),
    ]
    # A seven ends the series: the board's series is empty, the numbers are down.
    state, _ = apply_table(state, DiceRolled(roll_id=16, dice=(3, 4)), at=t0 + timedelta(hours=1))
    body = checked(by_topic(state)["craps/board"])
    assert (body["series"], body["series_count"], body["numbers_hit"]) == ([], 0, [])


def test_a_long_series_keeps_the_board_bounded() -> None:
    # Far longer than any series (no seven in 2,000 rolls): the newest 50, the whole count.
    state = craps.initial_state(1)
    at = datetime(2026, 11, 30, tzinfo=UTC)
    totals = [2, 3, 4, 5, 6, 8, 9, 10, 11, 12]
    for i in range(2000):
        total = totals[i % len(totals)]
        dice = (1, total - 1) if total <= 7 else (6, total - 6)
        state, _ = craps.apply(state, DiceRolled(roll_id=i + 1, dice=dice), at=at)
    body = checked(craps_board_publication(craps.board(state), table="t1"))
    assert body["series_count"] == 2000
    assert [r["roll_id"] for r in body["series"]] == list(range(1951, 2001))
    # The whole board at its largest, as published: a few KiB, far below what a consumer
    # reads (MAX_PAYLOAD).
    size = len(wire(craps_board_publication(craps.board(state), table="t1")))
    assert size < payloads.MAX_PAYLOAD // 8, size


def test_bust_bonus_state_shows_only_face_up_cards() -> None:
    # shuffler-icd.md: "a blackjack dealer's up card at once, and the hole card and draws
    # at END".
    state = bust_bonus.initial_state(6, False)
    for position, card in [("P1", "9c"), ("DL", "6h"), ("P1", "7d"), ("DL", "Ks")]:
        state, _ = bust_bonus.apply(
            state,
            CardDrawn(round_id=44, position=position, card=card),  # type: ignore[arg-type]
        )
    body = checked(bust_bonus_state_publication(bust_bonus.view(state), table="t1"))
    assert body["up_card"] == "6h"
    assert body["dealer_cards"] == ["6h"]
    assert "Ks" not in json.dumps(body)
    assert body["betting_open"] is False
    state, _ = bust_bonus.apply(state, CardDrawn(round_id=44, position="DL", card="Qs"))
    state, outcomes = bust_bonus.apply(state, DealerDone(round_id=44))
    after = checked(bust_bonus_state_publication(bust_bonus.view(state), table="t1"))
    assert after["dealer_cards"] == ["6h", "Ks", "Qs"]
    (result,) = outcomes
    body = checked(published(result))
    # 6 up, busted with 26, off-suit: the "6" row pays 1 to 1 (sd-bust-bonus.txt).
    assert body["outcome"] == "win"
    assert body["total"] == 26
    assert body["pays"] == "1"
    assert (body["paytable_row"], body["column"]) == ("6", "off_suit")


@pytest.mark.parametrize(
    ("dealer", "row", "column", "pays"),
    [
        # sd-bust-bonus.txt (12): a king up is the "10" row; three 8s suited pay 75.
        (["Kh", "6h", "Th"], "10", "suited", "20"),
        (["8s", "8s", "8s"], "Bust with three 8s", "suited", "75"),
        (["8s", "8d", "8h"], "Bust with three 8s", "off_suit", "25"),
        (["As", "5d", "9c", "Kc"], "Ace", "off_suit", "3"),
        (["Ts", "7d"], "10", None, None),  # 17 stands: lost, the up card's row, no column
    ],
)
def test_bust_bonus_result_names_its_pay_table_cell(
    dealer: list[str], row: str, column: str | None, pays: str | None
) -> None:
    state = bust_bonus.initial_state(6, False)
    for card in dealer:
        state, _ = bust_bonus.apply(state, CardDrawn(round_id=7, position="DL", card=card))
    assert checked(bust_bonus_state_publication(bust_bonus.view(state), table="t1"))[
        "paytable_row"
    ] == (row if row != "Bust with three 8s" else "8")
    _, (result,) = bust_bonus.apply(state, DealerDone(round_id=7))
    body = checked(published(result))
    assert (body["paytable_row"], body["column"], body["pays"]) == (row, column, pays)


def test_void_and_flagged_bust_results_name_no_cell() -> None:
    state = bust_bonus.initial_state(6, False)
    state, _ = bust_bonus.apply(state, CardDrawn(round_id=8, position="DL", card="9h"))
    _, (void,) = bust_bonus.apply(state, RoundVoided(round_id=8))
    body = checked(published(void))
    assert (body["outcome"], body["paytable_row"], body["column"]) == ("void", None, None)
    flagged = checked(published(bust_bonus.flagged_result(9, "review")))
    assert (flagged["paytable_row"], flagged["column"]) == (None, None)
    before = checked(
        bust_bonus_state_publication(
            bust_bonus.view(bust_bonus.initial_state(6, False)), table="t1"
        )
    )
    assert before["paytable_row"] is None


def test_alarms_say_whether_they_stop_payouts() -> None:
    # Cover All Bonus rule (1) and the deck check: no payout while either is active.
    alarms = tuple(
        Alarm(code=code, device="shuffler", message="m", since=datetime.now(UTC))
        for code in ("MODE_MISMATCH", "DECK_FAULT", "DEVICE_FAULT_JAM", "DISCONNECTED")
    )
    body = checked(by_topic(TableState(game="UTH", devices=(), alarms=alarms))["alarms"])
    assert [a["stops_payouts"] for a in body["alarms"]] == [True, True, False, False]


def _info(
    game: TableGame, *, paytable: int = 1, decks: int = 6, h17: bool = False
) -> dict[str, Any]:
    return checked(
        info_publication(
            table=TableSection(id="t1", game=game),
            version="9.9.9",
            craps_paytable=paytable,
            decks=decks,
            dealer_hits_soft_17=h17,
        )
    )


def test_info_carries_the_whole_cover_all_table() -> None:
    body = _info("UTH")
    assert body["version"] == "9.9.9"
    assert body["game"] == "UTH"
    table = body["paytables"]["cover_all"]
    assert body["paytables"]["bonus_craps"] is None
    assert body["paytables"]["bust_bonus"] is None
    # sd-cover-all-bonus.txt, Ultimate Texas Hold'em: columns 7..2 hands; a royal flush
    # pays 100 to 1 at 5 hands, a full house 12 to 1 at 2.
    assert table["columns"] == [7, 6, 5, 4, 3, 2]
    rows = {r["hand"]: dict(zip(table["columns"], r["pays"], strict=True)) for r in table["rows"]}
    assert rows["Royal Flush"][5] == "100"
    assert rows["Full House"][2] == "12"
    assert [r["hand"] for r in table["rows"]] == [
        "Royal Flush",
        "Straight Flush",
        "Four of a Kind",
        "Full House",
    ]


def test_info_for_craps_and_blackjack() -> None:
    craps_info = _info("CRAPS", paytable=2)["paytables"]
    # sd-bonus-craps.txt, Pay Table 2: 30, 30 and 150 to 1.
    assert craps_info["bonus_craps"] == {
        "paytable": 2,
        "pays": {"all_small": "30", "all_tall": "30", "make_em_all": "150"},
    }
    assert craps_info["cover_all"] is None
    bust = _info("BJ", decks=8, h17=True)["paytables"]["bust_bonus"]
    assert (bust["decks"], bust["dealer_hits_soft_17"]) == (8, True)
    assert bust["rows"][0] == {"row": "Ace", "off_suit": "3", "suited": "50"}
    assert bust["rows"][-1] == {"row": "Bust with three 8s", "off_suit": "25", "suited": "75"}


EXAMPLE_CONFIGS = sorted((Path(__file__).resolve().parents[2] / "config").glob("*.toml"))


def test_every_table_key_that_info_declares_reaches_info() -> None:
    # The daemon hands its [table] section to info whole: each key that InfoBody declares
    # too (under the key's serialization alias: [table] id is info's "table") is published
    # as the configuration says it, so the next such key cannot be forgotten in between.
    assert len(EXAMPLE_CONFIGS) >= 3  # bj, craps, uth: each family of games
    for path in EXAMPLE_CONFIGS:
        config = load_config(path)
        section = config.table.model_dump(mode="json")
        shared = {
            field.serialization_alias or name: section[name]
            for name, field in TableSection.model_fields.items()
            if (field.serialization_alias or name) in InfoBody.model_fields
        }
        assert shared["table"] == config.table.id
        assert shared["game"] == config.table.game
        body = table_info(config, "9.9.9", None).body
        assert {key: body[key] for key in shared} == shared
        # Every other key of info is one the daemon computes: none is without a source.
        assert InfoBody.model_fields.keys() - shared.keys() == {
            "version",
            "contract",
            "paytables",
            "software",
        }


# --- the models refuse what the spec forbids -------------------------------------------


def test_flagged_cover_all_result_never_carries_cards() -> None:
    # shuffler-icd.md "Card data is secret until it is face up"; mqtt-api.md "a flagged
    # round as soon as the fault is found, without cards".
    leaky = CoverAllResult(
        round_id=5,
        game="UTH",
        hands=3,
        outcome="flagged",
        highest=HighestHand(hand="Flush", position="P1", cards=("2h", "5h", "9h", "Jh", "Ah")),
        pays=None,
        reason="SETTLE before ROUND",
    )
    with pytest.raises(ValidationError, match="no highest hand"):
        published(leaky)


WIN: dict[str, Any] = {"roll_id": 1, "bet": "all_small", "outcome": "win"}


@pytest.mark.parametrize(
    ("topic", "body", "problem"),
    [
        ("craps/result", {**WIN, "pays": 34.0}, "pays"),
        ("craps/result", {**WIN, "pays": "3.4E+1"}, "pays"),
        ("craps/result", {**WIN, "pays": None}, "pays"),
        ("craps/roll", {"roll_id": 1, "dice": [7, 1], "total": 8, "status": "counted"}, "dice"),
        ("bust_bonus/state", {"round_id": 1, "betting_open": True, "up_card": "10h"}, "up_card"),
        ("cover_all/payouts", {"round_id": 1, "game": "BJ", "hands": 2, "paytable": []}, "game"),
        ("response/void_roll", {"request_id": None, "status": "error", "error": None}, "error"),
    ],
)
def test_models_and_checker_both_refuse(topic: str, body: dict[str, Any], problem: str) -> None:
    payload = json.dumps({"table": "t1", "seq": 3, "ts": TS, **body}).encode()
    with pytest.raises(ValidationError, match=problem):
        parse_message(topic, payload)
    with pytest.raises(SpecViolation):
        check_message(topic, payload)


@pytest.mark.parametrize(
    "envelope",
    [
        {"seq": 3, "ts": "2026-11-29T14:03:07Z"},  # no milliseconds
        {"seq": 3, "ts": "2026-11-29T14:03:07.123+00:00"},  # not Z
        {"seq": 0, "ts": TS},
        {"seq": True, "ts": TS},
        {"ts": TS},
    ],
)
def test_envelope_is_checked(envelope: dict[str, Any]) -> None:
    payload = json.dumps({"table": "t1", "alarms": [], **envelope}).encode()
    with pytest.raises(SpecViolation):
        check_message("alarms", payload)
    with pytest.raises(ValidationError):
        parse_message("alarms", payload)


def test_checker_knows_the_retained_column_and_availability() -> None:
    assert check_message("lammer/t1/availability", b"offline", base="lammer/t1") == "offline"
    with pytest.raises(SpecViolation, match="online or offline"):
        check_message("availability", b'"online"')
    roll = published(RollRecorded(roll_id=1, dice=(1, 2), total=3, status="counted", reason=None))
    with pytest.raises(SpecViolation, match="must not be retained"):
        check_message(roll.topic, wire(roll), retained=True)
    with pytest.raises(SpecViolation, match="not the base topic's table"):
        check_message(
            "lammer/t2/alarms",
            wire(by_topic(initial_state("BJ", at=datetime.now(UTC)))["alarms"]),
            base="lammer/t2",
        )
    with pytest.raises(SpecViolation, match="not a topic"):
        check_message("craps/rolls", b"{}")
    for topic, (_, retained) in payloads.TOPICS.items():
        assert retained == RETAINED.get(topic, False), topic


# --- exact odds ------------------------------------------------------------------------


@given(st.decimals(min_value=0, max_value=10**6, allow_nan=False, allow_infinity=False, places=4))
def test_odds_are_exact_plain_decimal_strings(value: Decimal) -> None:
    text = payloads.format_odds(value)
    assert Decimal(text) == value
    assert "E" not in text.upper()
    assert text == "0" or not text.startswith("0") or text.startswith("0.")
    assert not (("." in text) and text.endswith("0"))
    assert payloads.format_odds(Decimal(text)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("34", "34"),
        ("3.4E+1", "34"),
        ("1.50", "1.5"),
        ("1E+2", "100"),
        ("0.00", "0"),
        ("175", "175"),
    ],
)
def test_odds_examples(value: str, text: str) -> None:
    assert payloads.format_odds(Decimal(value)) == text


@pytest.mark.parametrize("value", ["-1", "NaN", "Infinity"])
def test_odds_refuse_nonsense(value: str) -> None:
    with pytest.raises(ValueError, match="odds"):
        payloads.format_odds(Decimal(value))


# --- JSON Schema for the display teams --------------------------------------------------


def test_schemas_cover_every_topic_and_stay_open_for_additions() -> None:
    every = schemas()
    published = set(RETAINED) | {
        f"response/{n}" for n in ("roll_decision", "void_roll", "overturn")
    }
    assert published <= set(every)
    assert {"request/roll_decision", "request/void_roll", "request/overturn"} <= set(every)
    for topic in published:  # plain JSON, open for the fields the spec lets us add
        assert '"additionalProperties": false' not in json.dumps(every[topic]), topic
    result = every["craps/result"]
    assert set(result["required"]) >= {"table", "seq", "ts", "roll_id", "bet", "outcome"}
    pays = result["properties"]["pays"]["anyOf"]
    assert {"type": "null"} in pays
    assert all(alt.get("type") != "number" for alt in pays)  # never a float
    assert every["state"]["x-retained"] is True
    assert every["craps/roll"]["x-retained"] is False
    # Requests do refuse unknown fields (a misspelt field must not be ignored).
    assert every["request/void_roll"]["additionalProperties"] is False


def test_the_board_carries_the_last_roll_for_screens_that_connect_later() -> None:
    # craps/roll is not retained: the board (retained) says what the last roll was.
    state = initial_state("CRAPS", at=datetime(2026, 11, 30, tzinfo=UTC))
    assert by_topic(state)["craps/board"].body["last_roll"] is None
    steps: list[tuple[Any, dict[str, Any]]] = [
        (DiceRolled(roll_id=4, dice=(2, 3)), {"dice": [2, 3], "total": 5, "status": "counted"}),
        (
            NoRoll(roll_id=5, reason="OFF_TABLE"),
            {"dice": [0, 0], "total": None, "status": "noroll"},
        ),
        (
            RollCheck(roll_id=6, dice=(0, 4), reason="UNREADABLE"),
            {"dice": [0, 4], "total": None, "status": "pending"},
        ),
    ]
    for fact, shown in steps:
        state, _ = apply_table(state, fact, at=datetime(2026, 11, 30, tzinfo=UTC))
        expected = {"roll_id": fact.roll_id, **shown}
        assert checked(by_topic(state)["craps/board"])["last_roll"] == expected
