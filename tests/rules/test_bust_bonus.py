"""Bust Bonus (SDAR 20:18:15:30.16): the pay table as data, settlement, and the round machine.

Expected odds come from the seed itself (``fixtures/sd-bust-bonus.txt``, a verbatim copy),
parsed here independently of ``rules/data/bust_bonus.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import bust_bonus
from rules.bust_bonus import (
    BustBonusState,
    BustBonusView,
    apply,
    initial_state,
    open_round_id,
    view,
)
from rules.cards import DECK, Card, parse_cards
from rules.errors import ConfigError, PaytableError
from rules.events import (
    LATE_FRAME,
    AlarmRaised,
    BustBonusResult,
    CardDrawn,
    DealerDone,
    Outcome,
    Position,
    RoundVoided,
)
from rules.paytables import BUST_BONUS, parse_bust_bonus
from tests.helpers.paytables import SEED_ROWS, dealt_hand, seed_pays


def play(
    state: BustBonusState,
    round_id: int,
    dealer: str,
    *,
    players: str = "",
    end: bool = True,
) -> tuple[BustBonusState, list[Outcome]]:
    """One round: the players' cards at P1, then the dealer's in order, then ``END``."""
    out: list[Outcome] = []
    facts: list[CardDrawn | DealerDone] = [
        CardDrawn(round_id=round_id, position="P1", card=c.code) for c in parse_cards(players)
    ]
    facts += [CardDrawn(round_id=round_id, position="DL", card=c.code) for c in parse_cards(dealer)]
    if end:
        facts.append(DealerDone(round_id=round_id))
    for fact in facts:
        state, outcomes = apply(state, fact)
        out.extend(outcomes)
    return state, out


def result_of(outcomes: list[Outcome]) -> BustBonusResult:
    """The single result of a round."""
    assert len(outcomes) == 1, outcomes
    result = outcomes[0]
    assert isinstance(result, BustBonusResult)
    return result


# ---------------------------------------------------------------------------------------
# The pay table as data


def test_data_matches_every_cell_of_the_seed() -> None:
    assert [row.row for row in BUST_BONUS.rows] == list(SEED_ROWS)
    for row in BUST_BONUS.rows:
        assert (row.off_suit, row.suited) == SEED_ROWS[row.row], row.row
    assert len(SEED_ROWS) == 11


def test_data_file_holds_odds_as_strings() -> None:
    text = resources.files("rules").joinpath("data/bust_bonus.json").read_text(encoding="utf-8")
    for row in json.loads(text)["rows"]:
        assert isinstance(row["off_suit"], str)
        assert isinstance(row["suited"], str)


def _rows_json(**change: object) -> str:
    rows: list[dict[str, object]] = [
        {"row": name, "off_suit": str(off), "suited": str(suited)}
        for name, (off, suited) in SEED_ROWS.items()
    ]
    rows[0].update(change)
    return json.dumps({"rows": rows})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{", "not JSON"),
        ("[]", '"rows" list'),
        (json.dumps({"rows": []}), "expected exactly"),
        (_rows_json(row="Deuce"), "expected exactly"),
        (_rows_json(suited=50.0), "decimal string"),
        (_rows_json(suited="fifty"), "not a decimal"),
        (_rows_json(off_suit="0"), "positive"),
        (_rows_json(off_suit="NaN"), "positive"),
    ],
)
def test_bad_paytable_data_is_refused_with_a_specific_error(text: str, match: str) -> None:
    with pytest.raises(PaytableError, match=match):
        parse_bust_bonus(text)


def _not_an_object_row() -> str:
    rows = json.loads(_rows_json())["rows"]
    rows[1] = "2"
    return json.dumps({"rows": rows})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", 'Bust Bonus pay table: expected an object with a "rows" list'),
        (
            _rows_json(suited="fifty"),
            "Bust Bonus pay table, row 'Ace', column 'suited': 'fifty' is not a decimal",
        ),
        (
            _not_an_object_row(),
            "Bust Bonus pay table rows are ['Ace', None, '3', '4', '5', '6', '7', '8', '9', '10',"
            " 'Bust with three 8s']: expected exactly ['Ace', '2', '3', '4', '5', '6', '7', '8',"
            " '9', '10', 'Bust with three 8s']",
        ),
    ],
)
def test_bad_paytable_data_is_refused_with_the_whole_message(text: str, message: str) -> None:
    with pytest.raises(PaytableError) as info:
        parse_bust_bonus(text)
    assert str(info.value) == message


def test_good_paytable_data_loads() -> None:
    table = parse_bust_bonus(_rows_json(suited="60"))
    assert table.rows[0].suited == Decimal(60)
    assert table.three_eights.row == "Bust with three 8s"


# ---------------------------------------------------------------------------------------
# Settlement: every row of the pay table, both columns

# One busting dealer hand per row, all spades; the off-suit hand changes the last card to
# hearts. Each is a legal S17 and H17 hand.
ROW_HANDS = {
    "Ace": "As5sTsJs",  # soft 16, hard 16, 26
    "2": "2sTsJs",
    "3": "3sTsJs",
    "4": "4sTsJs",
    "5": "5sTsJs",
    "6": "6sTsJs",
    "7": "7s5sTs",
    "8": "8s4sTs",
    "9": "9s3sTs",
    "10": "Ts2sQs",
    "Bust with three 8s": "8s8s8s",
}


@pytest.mark.parametrize("row", list(SEED_ROWS))
@pytest.mark.parametrize("suited", [True, False], ids=["suited", "off-suit"])
@pytest.mark.parametrize("h17", [False, True], ids=["S17", "H17"])
def test_every_row_pays_as_the_seed(row: str, suited: bool, h17: bool) -> None:
    hand = ROW_HANDS[row] if suited else ROW_HANDS[row][:-1] + "h"
    _, outcomes = play(initial_state(6, h17), 7, hand)
    result = result_of(outcomes)
    off, suit = SEED_ROWS[row]
    assert result.outcome == "win"
    assert result.pays == (suit if suited else off)
    assert result.suited is suited
    assert result.three_eights is (row == "Bust with three 8s")
    assert result.up_card == hand[:2]
    assert result.dealer_cards == tuple(c.code for c in parse_cards(hand))
    assert result.total is not None
    assert result.total > 21


@pytest.mark.parametrize("up", ["Jd", "Qc", "Kh", "Ts"])
def test_every_ten_value_up_card_pays_the_10_row(up: str) -> None:
    _, outcomes = play(initial_state(6, False), 1, up + "2c" + "Ks")
    assert result_of(outcomes).pays == SEED_ROWS["10"][0]


def test_three_eights_pays_instead_of_an_eight_up_off_suit_bust() -> None:
    state = initial_state(6, False)
    state, three = play(state, 1, "8h8d8c")
    _, other = play(state, 2, "8h5d9c")  # 22 with an 8 up, off-suit: the 8 row
    assert result_of(three).pays == SEED_ROWS["Bust with three 8s"][0] == Decimal(25)
    assert result_of(other).pays == SEED_ROWS["8"][0] == Decimal(2)
    assert result_of(other).three_eights is False


def test_suited_three_eights_needs_three_decks_and_pays_75() -> None:
    _, outcomes = play(initial_state(3, True), 1, "8h8h8h")
    assert result_of(outcomes).pays == Decimal(75)
    # Two decks hold only two 8h: the third is a card the shoe cannot have.
    _, outcomes = play(initial_state(2, True), 1, "8h8h8h")
    flagged = result_of(outcomes)
    assert flagged.outcome == "flagged"
    assert flagged.pays is None
    assert flagged.reason is not None
    assert "8h appears more than 2 time(s)" in flagged.reason


def test_eights_beyond_three_cards_are_not_three_eights() -> None:
    # 8 up, then 2 and 6 make 16, then an 8: 24, a bust of four cards with three eights.
    _, outcomes = play(initial_state(6, False), 1, "8s2s6s8s")
    result = result_of(outcomes)
    assert result.three_eights is False
    assert result.pays == SEED_ROWS["8"][1]


@pytest.mark.parametrize(
    ("hand", "total"),
    [
        ("AsKd", 21),  # blackjack loses every Bust Bonus wager (rule (9))
        ("Ts7d", 17),
        ("As6d", 17),  # soft 17 under S17
        ("AsAdAhAc3s", 17),  # four aces and a 3: soft 17
        ("AsAd9c", 21),  # soft 21
        ("2s2d2h2cAs", 19),  # five cards: hard 8, then an ace makes soft 19
        ("AsAdAhAcAsAdAh", 17),  # seven aces: soft 17
    ],
)
def test_a_dealer_who_does_not_bust_loses(hand: str, total: int) -> None:
    _, outcomes = play(initial_state(6, False), 3, hand)
    result = result_of(outcomes)
    assert (result.outcome, result.pays, result.total) == ("lose", None, total)
    assert result.suited is False


@pytest.mark.parametrize(
    ("hand", "total", "row"),
    [
        ("AsAdTcKh", 22, "Ace"),  # two aces, soft 12 -> hard 12 -> 22
        ("As6d8cTh", 25, "Ace"),  # soft 17 under H17 hits; hard 15; bust
        ("AsAd4c9hKs", 25, "Ace"),  # soft 16, hard 15, bust
        ("6sAd9cTh", 26, "6"),  # soft 17 hit under H17
    ],
)
def test_soft_and_multi_ace_hands_bust_as_counted(hand: str, total: int, row: str) -> None:
    _, outcomes = play(initial_state(6, True), 3, hand)
    result = result_of(outcomes)
    assert (result.outcome, result.total) == ("win", total)
    assert result.pays == SEED_ROWS[row][0]


# ---------------------------------------------------------------------------------------
# The dealer's rule: S17 vs H17 on soft 17, and hands that break it


def test_soft_17_stands_under_s17_and_is_flagged_under_h17() -> None:
    _, s17 = play(initial_state(6, False), 1, "As6d")
    _, h17 = play(initial_state(6, True), 1, "As6d")
    assert result_of(s17).outcome == "lose"
    flagged = result_of(h17)
    assert flagged.outcome == "flagged"
    assert flagged.pays is None
    assert flagged.reason == "the dealer's hand ends on soft 17, where the rule (H17) draws"


def test_drawing_on_soft_17_is_flagged_under_s17_and_settles_under_h17() -> None:
    _, s17 = play(initial_state(6, False), 1, "As6d8cTh")
    _, h17 = play(initial_state(6, True), 1, "As6d8cTh")
    flagged = result_of(s17)
    assert flagged.outcome == "flagged"
    assert flagged.reason == "the dealer drew 8c on soft 17, where the rule (S17) stands"
    assert flagged.dealer_cards == ("As", "6d", "8c", "Th")  # kept in full for review
    assert result_of(h17).outcome == "win"


@pytest.mark.parametrize(
    ("hand", "reason"),
    [
        ("Ts6d", "the dealer's hand ends on hard 16, where the rule (S17) draws"),
        ("Ts", "the dealer's hand ends on hard 10 with one card, where the rule (S17) draws"),
        ("Ts8d5c", "the dealer drew 5c on hard 18, where the rule (S17) stands"),
        ("TsKd5c2h", "the dealer drew 5c on hard 20, where the rule (S17) stands"),
    ],
)
def test_a_hand_that_breaks_the_rule_is_flagged_not_settled(hand: str, reason: str) -> None:
    _, outcomes = play(initial_state(6, False), 4, hand)
    result = result_of(outcomes)
    assert result.outcome == "flagged"
    assert result.pays is None
    assert result.reason is not None
    assert result.reason.startswith(reason)


def test_end_without_a_dealer_card_is_flagged() -> None:
    _, outcomes = play(initial_state(6, False), 4, "", players="AsKd")
    result = result_of(outcomes)
    assert (result.outcome, result.reason, result.up_card) == (
        "flagged",
        "END with no dealer card",
        None,
    )


# ---------------------------------------------------------------------------------------
# Card counts across every position


def test_a_card_more_times_than_decks_flags_the_round_even_across_positions() -> None:
    # One deck: Ks at P1 and again as the dealer's hole card.
    _, outcomes = play(initial_state(1, False), 9, "5sKs8d", players="KsQh")
    result = result_of(outcomes)
    assert result.outcome == "flagged"
    assert result.reason == "Ks appears more than 1 time(s) in the round: the shoe holds 1 deck"


def test_a_card_up_to_decks_times_is_fine() -> None:
    _, outcomes = play(initial_state(2, False), 9, "5sKs8d", players="KsQh")
    assert result_of(outcomes).outcome == "win"


def test_bad_card_code_and_community_position_flag_without_crashing() -> None:
    state = initial_state(6, False)
    state, out = apply(state, CardDrawn(round_id=5, position="DL", card="Zz"))
    assert out == ()
    state, out = apply(state, CardDrawn(round_id=5, position="CM", card="Kd"))
    state, out = apply(state, DealerDone(round_id=5))
    result = result_of(list(out))
    assert result.outcome == "flagged"
    assert result.reason == (
        "CARD at DL: bad card code 'Zz'; CARD at CM: blackjack has no community cards"
    )
    assert result.total is None


def test_a_flagged_round_leaves_its_problems_behind() -> None:
    state, outcomes = play(initial_state(1, False), 9, "5sKs8d", players="KsQh")
    assert result_of(outcomes).outcome == "flagged"
    _, outcomes = play(state, 10, "6hKd9s")
    result = result_of(outcomes)
    assert (result.outcome, result.reason) == ("win", None)


def test_each_round_counts_its_own_cards() -> None:
    # One deck, shuffled between rounds: the same cards again in the next round are fine.
    state, outcomes = play(initial_state(1, False), 9, "5sKs8d", players="QhJc")
    assert result_of(outcomes).outcome == "win"
    _, outcomes = play(state, 10, "5sKs8d", players="QhJc")
    result = result_of(outcomes)
    assert (result.outcome, result.reason) == ("win", None)


def test_a_card_beyond_a_multi_deck_shoe_names_the_decks() -> None:
    _, outcomes = play(initial_state(2, False), 9, "5sKs8d", players="KsKs")
    assert result_of(outcomes).reason == (
        "Ks appears more than 2 time(s) in the round: the shoe holds 2 decks"
    )


# ---------------------------------------------------------------------------------------
# The round machine: betting, secrecy, order


def test_betting_closes_at_the_up_card_and_only_face_up_cards_show() -> None:
    state = initial_state(6, False)
    assert view(state) == BustBonusView(
        round_id=None, betting_open=True, up_card=None, dealer_cards=()
    )
    state, _ = apply(state, CardDrawn(round_id=3, position="P1", card="9c"))
    assert open_round_id(state) == 3
    assert view(state).betting_open is True  # players' cards do not close betting
    state, _ = apply(state, CardDrawn(round_id=3, position="DL", card="6h"))
    assert view(state) == BustBonusView(
        round_id=3, betting_open=False, up_card="6h", dealer_cards=("6h",)
    )
    state, _ = apply(state, CardDrawn(round_id=3, position="DL", card="Kd"))  # hole card
    state, _ = apply(state, CardDrawn(round_id=3, position="DL", card="9s"))
    assert view(state).dealer_cards == ("6h",)  # hole card and draw stay secret
    state, out = apply(state, DealerDone(round_id=3))
    assert open_round_id(state) is None
    assert view(state) == BustBonusView(
        round_id=3, betting_open=True, up_card="6h", dealer_cards=("6h", "Kd", "9s")
    )
    assert result_of(list(out)).pays == SEED_ROWS["6"][0]


def test_void_pays_nothing_and_keeps_the_hole_card_secret() -> None:
    state, _ = play(initial_state(6, False), 8, "6hKd", end=False)
    state, out = apply(state, RoundVoided(round_id=8))
    result = result_of(list(out))
    assert (result.outcome, result.pays, result.total) == ("void", None, None)
    assert (result.up_card, result.dealer_cards) == ("6h", ("6h",))
    assert (result.suited, result.three_eights, result.reason) == (False, False, None)
    assert view(state).dealer_cards == ("6h",)
    assert open_round_id(state) is None


def late_frame(arrived: str) -> tuple[Outcome, ...]:
    """The outcomes of a late frame: the alarm saying what arrived, and no second result
    (shuffler-icd.md "What the host must check")."""
    message = f"{arrived}: its result stands; the frame is kept in the journal for review"
    return (AlarmRaised(code=LATE_FRAME, device="shuffler", message=message),)


@pytest.mark.parametrize(
    ("fact", "arrived"),
    [
        (CardDrawn(round_id=1, position="DL", card="5c"), "CARD at DL for round 1"),
        (DealerDone(round_id=1), "END for round 1"),
        (RoundVoided(round_id=1), "VOID for round 1"),
    ],
)
def test_frames_for_a_settled_round_raise_the_late_frame_alarm_and_change_nothing(
    fact: CardDrawn | DealerDone | RoundVoided, arrived: str
) -> None:
    state, _ = play(initial_state(6, False), 1, "Ts7d")
    after, out = apply(state, fact)
    assert after == state
    assert out == late_frame(f"{arrived} arrived after the round ended")  # no card named


def test_a_late_frame_for_a_void_round_publishes_no_second_result() -> None:
    state, _ = play(initial_state(6, False), 3, "6h", end=False)
    state, (void_result,) = apply(state, RoundVoided(round_id=3))
    assert isinstance(void_result, BustBonusResult)
    assert void_result.outcome == "void"
    after, out = apply(state, DealerDone(round_id=3))
    assert after == state
    assert out == late_frame("END for round 3 arrived after the round was voided")


def not_open(frame: str, round_id: int, where: str) -> tuple[Outcome, ...]:
    """The outcomes of END or VOID for a round that is not open: an alarm, no result
    under its id (it would replace the result a round of that id already has)."""
    message = (
        f"{frame} for round {round_id}, which is not open ({where}): no result is published "
        "for it; the frame is kept in the journal for review"
    )
    return (AlarmRaised(code=LATE_FRAME, device="shuffler", message=message),)


@pytest.mark.parametrize(
    ("fact", "frame"), [(DealerDone(round_id=2), "END"), (RoundVoided(round_id=2), "VOID")]
)
def test_frames_for_an_unopened_round_publish_nothing_and_change_nothing(
    fact: DealerDone | RoundVoided, frame: str
) -> None:
    state, _ = play(initial_state(6, False), 1, "Ts7d")
    after, out = apply(state, fact)
    assert after == state
    assert out == not_open(frame, 2, "no round is open")


def test_end_for_another_round_leaves_the_open_round_alone() -> None:
    state, _ = play(initial_state(6, False), 4, "6hKd", end=False)
    after, out = apply(state, DealerDone(round_id=9))
    assert after == state
    assert out == not_open("END", 9, "round 4 is open")
    state, _ = apply(after, CardDrawn(round_id=4, position="DL", card="9s"))
    _, out = apply(state, DealerDone(round_id=4))
    assert result_of(list(out)).outcome == "win"


def test_void_before_the_up_card_shows_no_card() -> None:
    state, _ = play(initial_state(6, False), 8, "", players="9c", end=False)
    _, out = apply(state, RoundVoided(round_id=8))
    result = result_of(list(out))
    assert (result.outcome, result.up_card, result.dealer_cards) == ("void", None, ())


def test_a_flagged_result_shows_no_card_and_pays_nothing() -> None:
    assert bust_bonus.flagged_result(7, "the shoe was replaced") == BustBonusResult(
        round_id=7,
        outcome="flagged",
        up_card=None,
        dealer_cards=(),
        total=None,
        suited=False,
        three_eights=False,
        pays=None,
        reason="the shoe was replaced",
        paytable_row=None,
        column=None,
    )


def test_only_the_rounds_that_closed_are_closed() -> None:
    state, _ = play(initial_state(6, False), 2, "Ts7d")
    state, _ = play(state, 3, "6hKd", end=False)
    assert bust_bonus.is_closed(state, 2)
    assert not bust_bonus.is_closed(state, 3)  # open
    assert not bust_bonus.is_closed(state, 4)


def test_a_new_round_while_one_is_open_flags_the_interrupted_round() -> None:
    state, _ = play(initial_state(6, False), 4, "6hKd", end=False)
    state, out = apply(state, CardDrawn(round_id=5, position="DL", card="Tc"))
    result = result_of(list(out))
    assert result.round_id == 4
    assert result.outcome == "flagged"
    assert result.reason == "round 4 never ended: a CARD for round 5 arrived first"
    assert result.dealer_cards == ("6h",)  # the hole card Kd never shows
    assert open_round_id(state) == 5
    assert view(state).up_card == "Tc"
    # Round 4 is closed now: a late frame for it finds its flag standing.
    _, late = apply(state, DealerDone(round_id=4))
    assert late == late_frame("END for round 4 arrived after the round was interrupted")


def test_interrupted_round_does_not_publish_reasons_that_name_hidden_cards() -> None:
    state, _ = play(initial_state(1, False), 4, "6hKdKd", end=False)  # Kd twice: a problem
    _, out = apply(state, CardDrawn(round_id=5, position="DL", card="Tc"))
    reason = result_of(list(out)).reason
    assert reason == (
        "round 4 never ended: a CARD for round 5 arrived first"
        " (1 more problem(s) found; see the journal)"
    )


def test_card_after_end_changes_nothing_and_publishes_no_second_result() -> None:
    state, _ = play(initial_state(6, False), 2, "Ts7d")
    after, out = apply(state, CardDrawn(round_id=2, position="P3", card="4c"))
    assert after == state
    assert out == late_frame("CARD at P3 for round 2 arrived after the round ended")


def test_after_the_shoe_says_hello_a_closed_round_id_opens_a_new_round() -> None:
    # shuffler-icd.md: a HELLO ends the memory of closed round ids (the counter may restart).
    state, _ = play(initial_state(6, False), 1, "Ts7d")
    state = bust_bonus.forget_closed(state)
    state, out = play(state, 1, "6hKd9s")
    assert result_of(out).outcome == "win"


def test_a_round_id_closed_long_ago_may_open_again() -> None:
    # The shoe's counter wraps and a replaced shoe starts again: only recent ids are closed.
    state = initial_state(6, False)
    for round_id in range(1, bust_bonus.CLOSED_MEMORY + 2):
        state, _ = play(state, round_id, "Ts7d")
    state, out = play(state, 1, "Ts7d")
    assert result_of(out).outcome == "lose"


@pytest.mark.parametrize("decks", [0, -1, True])
def test_fewer_than_one_deck_is_a_config_error(decks: int) -> None:
    with pytest.raises(ConfigError, match="decks"):
        initial_state(decks, False)


# ---------------------------------------------------------------------------------------
# Properties over any legal dealer hand

PLAYER_POSITIONS: tuple[Position, ...] = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8")


# 17 cards always finish a dealer hand (17 aces are a hard 17). 24 decks: no count flag.
runs = st.lists(st.sampled_from(DECK), min_size=17, max_size=17)


@given(run=runs, h17=st.booleans(), data=st.data())
def test_any_legal_hand_settles_as_the_seed_says(
    run: list[Card], h17: bool, data: st.DataObject
) -> None:
    hand = dealt_hand(run, h17)
    # Players' cards interleaved anywhere change nothing.
    extra = data.draw(
        st.lists(st.tuples(st.sampled_from(PLAYER_POSITIONS), st.sampled_from(DECK)), max_size=8)
    )
    facts: list[CardDrawn] = [CardDrawn(round_id=77, position="DL", card=c.code) for c in hand]
    for position, card in extra:
        at = data.draw(st.integers(0, len(facts)))
        facts.insert(at, CardDrawn(round_id=77, position=position, card=card.code))
    state = initial_state(24, h17)
    for fact in facts:
        state, out = apply(state, fact)
        assert out == ()
    state, out = apply(state, DealerDone(round_id=77))
    result = result_of(list(out))
    expected = seed_pays(hand)
    assert result.pays == expected
    assert result.outcome == ("win" if expected is not None else "lose")
    assert result.dealer_cards == tuple(c.code for c in hand)
    assert bust_bonus.bust_pays(hand) == expected


@given(run=runs, h17=st.booleans(), suits=st.permutations("cdhs"))
def test_relabelling_suits_changes_nothing(run: list[Card], h17: bool, suits: list[str]) -> None:
    hand = dealt_hand(run, h17)
    relabel = dict(zip("cdhs", suits, strict=True))
    other = tuple(Card(c.rank, relabel[c.suit]) for c in hand)
    _, a = play(initial_state(24, h17), 1, "".join(c.code for c in hand))
    _, b = play(initial_state(24, h17), 1, "".join(c.code for c in other))
    ra, rb = result_of(a), result_of(b)
    assert (ra.outcome, ra.pays, ra.total, ra.suited, ra.three_eights) == (
        rb.outcome,
        rb.pays,
        rb.total,
        rb.suited,
        rb.three_eights,
    )


# ---------------------------------------------------------------------------------------
# The pay-table cell: the result names the row and column that pay (rule (12))


def seed_cell(cards: Sequence[Card]) -> tuple[str, str | None]:
    """The seed's row of a dealer hand and the column that pays (None when it loses),
    written out here from rule (12), independently of the code under test."""
    values = [1 if c.rank == 14 else min(c.rank, 10) for c in cards]
    if len(cards) == 3 and all(c.rank == 8 for c in cards):
        row = "Bust with three 8s"
    else:
        row = {1: "Ace", 10: "10"}.get(values[0], str(values[0]))
    if sum(values) <= 21:
        return row, None
    return row, "suited" if len({c.suit for c in cards}) == 1 else "off_suit"


@pytest.mark.parametrize("row", list(SEED_ROWS))
@pytest.mark.parametrize("suited", [True, False], ids=["suited", "off-suit"])
def test_a_win_names_the_row_and_column_that_pay(row: str, suited: bool) -> None:
    hand = ROW_HANDS[row] if suited else ROW_HANDS[row][:-1] + "h"
    result = result_of(play(initial_state(6, False), 7, hand)[1])
    column = "suited" if suited else "off_suit"
    assert (result.paytable_row, result.column) == (row, column)
    # The cell named is the cell that paid.
    assert result.pays == SEED_ROWS[row][1 if suited else 0]


@pytest.mark.parametrize("up", ["Jd", "Qc", "Kh", "Ts"])
def test_a_ten_value_up_card_names_the_10_row_also_when_the_dealer_stands(up: str) -> None:
    won = result_of(play(initial_state(6, False), 1, up + "2c" + "Ks")[1])
    lost = result_of(play(initial_state(6, False), 2, up + "8c")[1])
    assert (won.paytable_row, won.column) == ("10", "off_suit")
    assert (lost.outcome, lost.paytable_row, lost.column) == ("lose", "10", None)


def test_void_and_flagged_results_name_no_cell() -> None:
    state, _ = play(initial_state(6, False), 1, "9h", end=False)
    _, out = apply(state, RoundVoided(round_id=1))
    void = result_of(list(out))
    # Two decks hold two 8h: the third flags the round, which pays from no row.
    flagged = result_of(play(initial_state(2, False), 2, "8h8h8h")[1])
    assert (void.outcome, void.paytable_row, void.column) == ("void", None, None)
    assert (flagged.outcome, flagged.paytable_row, flagged.column) == ("flagged", None, None)


def test_the_view_names_the_up_card_s_row_once_it_is_face_up() -> None:
    state = initial_state(6, False)
    assert view(state).paytable_row is None
    state, _ = apply(state, CardDrawn(round_id=3, position="P1", card="8s"))
    assert view(state).paytable_row is None  # a player's card is no up card
    state, _ = apply(state, CardDrawn(round_id=3, position="DL", card="Kd"))
    assert view(state).paytable_row == "10"
    state, _ = apply(state, CardDrawn(round_id=4, position="DL", card="Zz"))
    assert view(state).paytable_row is None  # not a card: the round is flagged


@given(run=runs, h17=st.booleans())
def test_any_legal_hand_names_the_seed_s_cell(run: list[Card], h17: bool) -> None:
    hand = dealt_hand(run, h17)
    result = result_of(play(initial_state(24, h17), 5, "".join(c.code for c in hand))[1])
    row, column = seed_cell(hand)
    assert (result.paytable_row, result.column) == (row, column)
    if column is not None:
        assert result.pays == SEED_ROWS[row][1 if column == "suited" else 0]
