"""The Cover All Bonus: ``classify`` for each game, and ``resolve_round`` for whole rounds.

Every pay-table cell is also paid end to end here: a round whose highest hand makes that
row, with that many hands, must pay the odds parsed from the regulation's own text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from itertools import combinations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rules.cards import DECK, parse_cards
from rules.cover_all import (
    LAYOUTS,
    Flagged,
    NoQualifier,
    Win,
    check_hand,
    classify,
    cover_all_row,
    hand_value,
    read_hand,
    resolve_round,
)
from rules.errors import CardError, HandError
from rules.events import POKER_GAMES, PokerGame
from rules.paytables import COVER_ALL_ROWS, cover_all_columns
from rules.poker import RANKINGS, evaluate_four_card, evaluator
from tests.helpers.paytables import REGULATION

CARD_CODE = re.compile(r"(?<![A-Za-z])[2-9TJQKA][cdhs](?![a-z])")  # a code, not in a word


def split(text: str) -> list[str]:
    return [c.code for c in parse_cards(text.replace(" ", ""))]


def indexes(codes: Sequence[str]) -> tuple[int, ...]:
    return tuple(c.index for c in parse_cards("".join(codes)))


# ---------------------------------------------------------------------------------------
# classify: one hand, every row of every game, and what falls just short

STANDARD_ROWS = {
    "Royal Flush": "As Ks Qs Js Ts",
    "Straight Flush": "9h 8h 7h 6h 5h",
    "Four of a Kind": "7c 7d 7h 7s 2d",
    "Full House": "Kc Kd Kh 2s 2c",
    "Flush": "Ac 9c 7c 5c 2c",
    "Straight": "5c 4d 3h 2s Ac",
    "Three of a Kind": "Qc Qd Qh 9s 3c",
}
UTH_ROWS = {  # own two first, then the five community cards
    "Royal Flush": "As Ks Qs Js Ts 4d 2c",
    "Straight Flush": "9h 8h 7h 6h 5h 2c 3d",
    "Four of a Kind": "7c 7d 7h 7s 2d 9c 4h",
    "Full House": "Kc Kd Kh 2s 2c 9d 4h",
}
FCP_ROWS = {
    "Four Aces": "As Ad Ah Ac 2c",
    "Royal Flush": "As Ks Qs Js 2d",
    "Four of A Kind (Other)": "2s 2d 2h 2c 3c",
    "Straight Flush": "9h 8h 7h 6h 2c",
    "Three of a Kind": "9h 9d 9c 5s 2c",
}
TCP_ROWS = {
    "Royal Flush": "As Ks Qs",
    "Straight Flush": "9h 8h 7h",
    "Three of a Kind": "9h 9d 9c",
    "Straight": "Ah 2d 3c",
}
ROW_HANDS: dict[PokerGame, dict[str, str]] = {
    "CSP": STANDARD_ROWS,
    "LIR": STANDARD_ROWS,
    "MSP": STANDARD_ROWS,
    "UTH": UTH_ROWS,
    "FCP": FCP_ROWS,
    "TCP": TCP_ROWS,
}
ROW_CASES = [(game, row, text) for game, rows in ROW_HANDS.items() for row, text in rows.items()]


def test_row_hands_cover_every_row_of_every_game() -> None:
    for game, rows in ROW_HANDS.items():
        assert tuple(rows) == COVER_ALL_ROWS[game]


@pytest.mark.parametrize(("game", "row", "text"), ROW_CASES)
def test_classify_names_every_row_as_the_seed(game: str, row: str, text: str) -> None:
    assert classify(game, split(text)) == row
    assert classify(game, text.replace(" ", "")) == row  # one string without separators


@pytest.mark.parametrize(
    ("game", "text", "expected"),
    [
        ("CSP", "Ac Ad Kh Ks 2c", None),  # two pair pays nothing
        ("LIR", "Ac Ad 7h 5s 2c", None),
        ("MSP", "Ac Kd Qh Js 9c", None),
        ("UTH", "Ah 9h 7h 5h 2h Kc Qd", None),  # a flush is below UTH's table
        ("UTH", "9c 9d 9h 5s 5c 2d 3h", "Full House"),  # two trips in seven cards
        ("UTH", "Kc Kd Kh Ks 7c 7d 7h", "Four of a Kind"),  # quads with trips
        ("UTH", "As 2d 3h 4c 5s 6s 7s", None),  # a straight is below UTH's table
        ("UTH", "2s 3s 4s 5d 6d As Kh", None),  # a straight and four spades
        ("UTH", "Ah Kh Qh Jh 9h Th 8d", "Royal Flush"),  # flush and straight together
        ("UTH", "Qh Jh 9h 8h 2h Th Kd", "Straight Flush"),
        ("FCP", "Ac 9c 7c 5c 2d", None),  # a four-card flush is below FCP's table
        ("FCP", "9h 8d 7c 6s 2c", None),
        ("FCP", "As Ks Qs Js Ad Ah", "Royal Flush"),  # dealer's six: royal over trip aces
        ("FCP", "Ac Ad Ah As Kc Kd", "Four Aces"),
        ("FCP", "Kc Kd Kh Ks Ac Qs", "Four of A Kind (Other)"),
        ("FCP", "As 2s 3s 4s 9d", "Straight Flush"),  # A-2-3-4
        ("TCP", "Ah 9h 2h", None),  # a flush is below TCP's table
        ("TCP", "Ah Ad 2h", None),
        ("TCP", "Ah 2h 3h", "Straight Flush"),  # A-2-3 suited
        ("TCP", "Qh Kd Ac", "Straight"),
        ("CSP", "As 2d 3h 4c 5s", "Straight"),  # the wheel
        ("CSP", "Qs Ks As 2d 3h", None),  # no wrap-around straight
    ],
)
def test_classify_edges(game: str, text: str, expected: str | None) -> None:
    assert classify(game, split(text)) == expected


@pytest.mark.parametrize(
    ("game", "text", "message"),
    [
        ("CSP", "As Ks Qs Js", "a Caribbean Stud Poker hand has 5 cards, got 4"),
        ("LIR", "As Ks Qs", "a Let It Ride hand has 5 cards, got 3"),
        ("UTH", "As Ks Qs Js Ts", "an Ultimate Texas Hold'em hand has 7 cards, got 5"),
        ("FCP", "As Ks Qs Js Ts 9s 8s", "a Four Card Poker hand has 5 or 6 cards, got 7"),
        ("TCP", "As Ks", "a Three Card Poker hand has 3 cards, got 2"),
        ("CSP", "As Ks Qs Js As", "card As appears twice in one Caribbean Stud Poker hand"),
        ("BJ", "As Ks Qs Js Ts", "no Cover All Bonus for game 'BJ'"),
    ],
)
def test_classify_rejects_impossible_hands(game: str, text: str, message: str) -> None:
    with pytest.raises(HandError, match=message):
        classify(game, split(text))


def test_classify_names_a_bad_card_code_and_where() -> None:
    with pytest.raises(CardError, match="'Zz' at card 3") as info:
        classify("TCP", ["As", "Ks", "Zz"])
    assert info.value.text == "Zz"
    assert info.value.index == 2


# ---------------------------------------------------------------------------------------
# resolve_round: the spec's example, ties, and the highest hand


def test_spec_example_caribbean_stud_round_812_pays_the_flush_20_to_1() -> None:
    # shuffler-icd.md, "Example: one Caribbean Stud round"
    result = resolve_round("CSP", 3, {"P1": "9c9d5h5s2c", "P3": "QhJhTh8h7h", "DL": "AcKd4s3h3c"})
    assert result == Win(
        game="CSP",
        hands=3,
        category="Flush",
        position="P3",
        cards=("Qh", "Jh", "Th", "8h", "7h"),
        best=("Qh", "Jh", "Th", "8h", "7h"),
        odds=Decimal("20"),
    )


def test_higher_hand_of_the_same_row_wins_whatever_the_position() -> None:
    result = resolve_round("CSP", 3, {"P1": "Ah9h7h5h2h", "P2": "Ad9d7d5d3d", "DL": "2c3c4s9s8d"})
    assert isinstance(result, Win)
    assert (result.category, result.position) == ("Flush", "P2")


def test_equal_hands_go_to_the_lower_position_and_players_before_the_dealer() -> None:
    cards = {"DL": "AhKhQh9h7h", "P5": "AdKdQd9d7d", "P3": "AcKcQc9c7c", "P8": "2s3c4d6s8h"}
    result = resolve_round("CSP", 4, cards)
    assert isinstance(result, Win)
    assert result.position == "P3"
    result = resolve_round("CSP", 2, {"DL": "AhKhQh9h7h", "P8": "AdKdQd9d7d"})
    assert isinstance(result, Win)
    assert result.position == "P8"


def test_a_board_that_plays_ties_every_hand_and_p1_wins() -> None:
    cards = {"P2": "2c3d", "P1": "4h5h", "DL": "2d3c", "CM": "AsKsQsJsTs"}
    result = resolve_round("UTH", 3, cards)
    assert isinstance(result, Win)
    assert (result.category, result.position, result.odds) == ("Royal Flush", "P1", Decimal(150))
    assert result.cards == ("4h", "5h", "As", "Ks", "Qs", "Js", "Ts")
    assert result.best == ("As", "Ks", "Qs", "Js", "Ts")


def test_four_card_poker_royal_flush_outranks_four_nines_for_the_bonus() -> None:
    # The game ranks quads above a straight flush, but the bonus ranks by the seed's rows:
    # Four Aces, Royal Flush, Four of A Kind (Other) (Cover All Bonus rule (9)).
    cards = {"P1": "9c9d9h9s2c", "P2": "AsKsQsJs3d", "DL": "5c5d4h6s7d8h"}
    result = resolve_round("FCP", 3, cards)
    assert isinstance(result, Win)
    assert (result.category, result.position, result.odds) == ("Royal Flush", "P2", Decimal(100))
    assert result.best == ("As", "Ks", "Qs", "Js")
    # one deck cannot hold four aces and a royal flush; four aces beat any other four
    result = resolve_round("FCP", 3, {"P1": "9c9d9h9s2c", "P2": "AcAdAhAs3c", "DL": cards["DL"]})
    assert isinstance(result, Win)
    assert (result.category, result.position) == ("Four Aces", "P2")


def test_dealer_hand_counts_and_can_win() -> None:
    result = resolve_round("TCP", 2, {"P4": "2c5d9h", "DL": "9c9d9s"})
    assert isinstance(result, Win)
    assert (result.category, result.position, result.odds) == ("Three of a Kind", "DL", Decimal(50))


def test_no_qualifier_names_the_highest_hand_in_the_game_s_ranking() -> None:
    result = resolve_round("CSP", 3, {"P1": "9c9d5h5s2c", "P2": "AcAd4s3h7c", "DL": "KcQd8s3d2h"})
    assert result == NoQualifier(
        game="CSP",
        hands=3,
        hand="Two Pair",
        position="P1",
        cards=("9c", "9d", "5h", "5s", "2c"),
        best=("9c", "9d", "5h", "5s", "2c"),
    )


def test_community_cards_join_each_hand() -> None:
    result = resolve_round("MSP", 2, {"P1": "Ah2c", "P2": "7d7s", "CM": "7c9h4s"})
    assert isinstance(result, Win)
    assert (result.category, result.position, result.odds) == ("Three of a Kind", "P2", Decimal(10))
    assert result.cards == ("7d", "7s", "7c", "9h", "4s")
    result = resolve_round("LIR", 1, {"P6": "AhKh2c", "CM": "QhJh"})
    assert isinstance(result, NoQualifier)
    assert (result.hand, result.position) == ("High Card", "P6")


# ---------------------------------------------------------------------------------------
# resolve_round: every check of shuffler-icd.md "What the host must check" about cards


@pytest.mark.parametrize(
    ("game", "hands", "cards", "reason"),
    [
        ("CSP", 2, {"P1": "AsKsQsJsTs", "DL": "As2c3c4c5d"}, "DL and P1 hold the same card"),
        ("CSP", 2, {"P1": "AsKsQsJsAs", "DL": "2c3c4c5d7h"}, "P1 holds the same card twice"),
        ("CSP", 2, {"P1": "AsKsQsJs", "DL": "2c3c4c5d7h"}, "P1 was dealt 4 cards; Caribbean"),
        ("CSP", 2, {"P1": "AsKsQsJsTs", "DL": "2c3c4c5d"}, "DL was dealt 4 cards;"),
        ("UTH", 2, {"P1": "AsKs", "DL": "2c3c", "CM": "4d5d6d7d"}, "CM was dealt 4 cards;"),
        ("FCP", 2, {"P1": "AsKsQsJsTs", "DL": "2c3c4c5d7h"}, "DL was dealt 5 cards; Four Card"),
        (
            "LIR",
            1,
            {"P1": "AsKsQs", "DL": "2c3c4c", "CM": "5d6d"},
            "Let It Ride has no dealer hand",
        ),
        ("CSP", 2, {"P1": "AsKsQsJsTs", "DL": "2c3c4c5d7h", "CM": "8d9d"}, "no community cards"),
        ("CSP", 2, {"P9": "AsKsQsJsTs", "DL": "2c3c4c5d7h"}, "unknown position 'P9'"),
        ("CSP", 1, {"DL": "2c3c4c5d7h"}, "no player hand was dealt"),
        ("CSP", 1, {"P1": "AsKsQsJsTs"}, r"the dealer's hand \(DL\) was not dealt"),
        ("UTH", 2, {"P1": "AsKs", "DL": "2c3c"}, r"the community cards \(CM\) were not dealt"),
        (
            "CSP",
            3,
            {"P1": "AsKsQsJsTs", "DL": "2c3c4c5d7h"},
            r"reports 3 hands but 2 were dealt \(P1, DL\)",
        ),
        ("LIR", 2, {"P1": "AsKsQs", "CM": "5d6d"}, r"reports 2 hands but 1 was dealt \(P1\)"),
        ("CSP", 2, {"P1": "AsKsQsJsZz", "DL": "2c3c4c5d7h"}, "P1 was dealt something that is"),
        ("TCP", 1, {"P1": "AsKsQs"}, r"dealer's hand \(DL\) was not dealt"),
    ],
)
def test_bad_rounds_are_flagged_with_a_reason_and_no_card(
    game: str, hands: int, cards: Mapping[str, str], reason: str
) -> None:
    result = resolve_round(game, hands, cards)
    assert isinstance(result, Flagged)
    assert re.search(reason, result.reason)
    assert not CARD_CODE.search(result.reason), result.reason  # cards may be face down


@pytest.mark.parametrize(
    ("game", "hands", "cards", "reason"),
    [
        ("CSP", 1, {"DL": "2c3c4c5d7h"}, "no player hand was dealt"),
        (
            "CSP",
            2,
            {"P9": "AsKsQsJsTs", "DL": "2c3c4c5d7h"},
            "unknown position 'P9': positions are P1, P2, P3, P4, P5, P6, P7, P8, DL, CM",
        ),
        (
            "CSP",
            2,
            {"P1": "AsKsQsJsTs", "DL": "2c3c4c5d7h", "CM": "8d9d"},
            "CM was dealt, but Caribbean Stud Poker has no community cards",
        ),
        (
            "CSP",
            2,
            {"P1": "AsKsQsJsZz", "DL": "2c3c4c5d7h"},
            "P1 was dealt something that is not a card code (card 5)",
        ),
        (
            "CSP",
            2,
            {"P1": "AsKsQsJs", "DL": "2c3c4c5d7h"},
            "P1 was dealt 4 cards; Caribbean Stud Poker deals 5 to each player",
        ),
        (
            "CSP",
            2,
            {"P1": "AsKsQsJsTs", "DL": "2c3c4c5d"},
            "DL was dealt 4 cards; Caribbean Stud Poker deals 5 to the dealer",
        ),
        (
            "UTH",
            2,
            {"P1": "AsKs", "DL": "2c3c", "CM": "4d5d6d7d"},
            "CM was dealt 4 cards; Ultimate Texas Hold'em deals 5 to the community",
        ),
    ],
)
def test_a_flag_reason_reads_in_full(
    game: str, hands: int, cards: Mapping[str, str], reason: str
) -> None:
    # The reason is what the floor supervisor reads (mqtt-api.md publishes it as it is).
    result = resolve_round(game, hands, cards)
    assert isinstance(result, Flagged)
    assert result.reason == reason


def test_a_hand_is_checked_against_every_good_earlier_position() -> None:
    # check_hand skips an earlier position whose cards are not codes (it was judged when it
    # came) and still compares the hand with the positions after it.
    earlier = {"P1": ["Zz", "Ks", "Qs"], "P2": ["As", "Kd", "Qd"]}
    reason = check_hand("TCP", "P3", ["Ah", "As", "2c"], earlier)
    assert reason == "P3 and P2 hold the same card (one deck)"


@pytest.mark.parametrize("position", ["P9", "XX", ""])
def test_a_layout_deals_nothing_to_a_position_that_is_not_one(position: str) -> None:
    assert LAYOUTS["CSP"].cards_for(position) is None
    assert LAYOUTS["CSP"].cards_for("P8") == 5


def test_a_card_given_twice_is_named_wherever_it_is() -> None:
    with pytest.raises(HandError, match="card Ks appears twice in one Three Card Poker hand"):
        classify("TCP", ["2c", "Ks", "Ks"])


def test_hands_not_a_column_is_flagged() -> None:
    # nine hands at Caribbean Stud (eight players and the dealer): the table stops at 8
    deck = [c.code for c in DECK]
    cards = {f"P{i}": "".join(deck[5 * i - 5 : 5 * i]) for i in range(1, 9)}
    cards["DL"] = "".join(deck[40:45])
    result = resolve_round("CSP", 9, cards)
    assert isinstance(result, Flagged)
    assert "no pay-table column for 9 total hands: its columns are 2, 3, 4, 5, 6, 7, 8" in (
        result.reason
    )
    result = resolve_round("LIR", 0, {"CM": "2c3c"})
    assert isinstance(result, Flagged)


def test_unknown_game_raises() -> None:
    with pytest.raises(HandError, match="no Cover All Bonus for game 'BJ'"):
        resolve_round("BJ", 2, {})


# ---------------------------------------------------------------------------------------
# Every pay-table cell, paid end to end


def positions_for(game: PokerGame, hands: int) -> list[str]:
    if LAYOUTS[game].dealer_cards is None:
        return [f"P{i}" for i in range(1, hands + 1)]
    return [f"P{i}" for i in range(1, hands)] + ["DL"]


def junk_round(game: PokerGame, hands: int, own: list[str], community: list[str]) -> dict[str, str]:
    """P1 holds ``own``; every other hand is chosen so that it makes no row at all."""
    layout = LAYOUTS[game]
    used = set(own) | set(community)
    cards = {"P1": "".join(own)}
    if community:
        cards["CM"] = "".join(community)
    for position in positions_for(game, hands)[1:]:
        size = layout.dealer_cards if position == "DL" else layout.player_cards
        assert size is not None
        free = [c.code for c in DECK if c.code not in used]
        hand = next(
            list(h) for h in combinations(free, size) if classify(game, [*h, *community]) is None
        )
        used |= set(hand)
        cards[position] = "".join(hand)
    return cards


CELL_CASES = [
    (game, row, hands, cell)
    for game, (columns, rows) in REGULATION.items()
    for row, cells in rows
    for hands, cell in zip(columns, cells, strict=True)
]


@pytest.mark.parametrize(("game", "row", "hands", "cell"), CELL_CASES)
def test_every_cell_is_paid_end_to_end(game: PokerGame, row: str, hands: int, cell: str) -> None:
    layout = LAYOUTS[game]
    codes = split(ROW_HANDS[game][row])
    own, community = codes[: len(codes) - layout.community_cards], []
    if layout.community_cards:
        own, community = codes[: layout.player_cards], codes[layout.player_cards :]
    result = resolve_round(game, hands, junk_round(game, hands, own, community))
    assert isinstance(result, Win), result
    assert (result.category, result.position, result.hands) == (row, "P1", hands)
    assert result.odds == Decimal(cell)


# ---------------------------------------------------------------------------------------
# Properties over random deals


def deal(game: PokerGame, players: int, rng: random.Random) -> dict[str, list[str]]:
    layout = LAYOUTS[game]
    deck = [c.code for c in DECK]
    rng.shuffle(deck)
    cards: dict[str, list[str]] = {}
    for i in range(1, players + 1):
        cards[f"P{i}"] = [deck.pop() for _ in range(layout.player_cards)]
    if layout.dealer_cards is not None:
        cards["DL"] = [deck.pop() for _ in range(layout.dealer_cards)]
    if layout.community_cards:
        cards["CM"] = [deck.pop() for _ in range(layout.community_cards)]
    return cards


@st.composite
def rounds(draw: st.DrawFn) -> tuple[PokerGame, int, dict[str, list[str]]]:
    game = draw(st.sampled_from(POKER_GAMES))
    columns = cover_all_columns(game)
    dealer = LAYOUTS[game].dealer_cards is not None
    hands = draw(st.sampled_from(columns))
    rng = draw(st.randoms(use_true_random=False))
    return game, hands, deal(game, hands - dealer, rng)


def row_rank(game: PokerGame, row: str | None) -> int:
    rows = COVER_ALL_ROWS[game]
    return len(rows) - rows.index(row) if row is not None else 0


@pytest.mark.heavy
@given(rounds(), st.randoms(use_true_random=False))
def test_the_highest_hand_pays_and_order_changes_nothing(
    dealt: tuple[PokerGame, int, dict[str, list[str]]], rng: random.Random
) -> None:
    game, hands, cards = dealt
    result = resolve_round(game, hands, cards)
    assert isinstance(result, Win | NoQualifier)
    row = result.category if isinstance(result, Win) else None
    assert classify(game, result.cards) == row
    community = cards.get("CM", [])
    for position, own in cards.items():
        if position != "CM":
            assert row_rank(game, classify(game, own + community)) <= row_rank(game, row)
    if isinstance(result, Win):
        columns, rows = REGULATION[game]
        assert result.odds == Decimal(dict(rows)[result.category][columns.index(hands)])
    shuffled: dict[str, Sequence[str]] = {}
    for position in rng.sample(list(cards), len(cards)):
        shuffled[position] = rng.sample(cards[position], len(cards[position]))
    again = resolve_round(game, hands, shuffled)
    assert isinstance(again, Win | NoQualifier)
    assert type(again) is type(result)
    assert again.position == result.position
    assert hand_value(game, again.cards) == hand_value(game, result.cards)


@given(st.lists(st.sampled_from([c.code for c in DECK]), min_size=5, max_size=6, unique=True))
@example(["As", "Ks", "Qs", "Js", "Ah", "Ad"])
@example(["Kc", "Kd", "Kh", "Ks", "Qs", "Js"])
@example(["As", "Ks", "Qs", "Js", "Kd", "Kh"])
@example(["Ac", "Ad", "Ah", "As", "Ks", "Qs"])
def test_four_card_row_is_the_best_row_of_any_four(codes: list[str]) -> None:
    # The bonus ranks Royal Flush above Four of A Kind (Other), the game the other way round;
    # the best four by the game still make the best row, as one deck cannot hold both in six.
    rows = COVER_ALL_ROWS["FCP"]
    best_row = max(
        (cover_all_row("FCP", evaluate_four_card(sub)) for sub in combinations(indexes(codes), 4)),
        key=lambda row: len(rows) - rows.index(row) if row is not None else 0,
    )
    assert classify("FCP", codes) == best_row


# -- the hand as a player reads it ---------------------------------------------------------


@pytest.mark.parametrize(
    ("game", "cards", "best", "board"),
    [
        # Ultimate Texas Hold'em: 2 own + 5 board; the royal uses both hole cards.
        ("UTH", "AsKs QsJsTs2d3c", "AsKsQsJsTs", "QsJsTs2d3c"),
        # The steel wheel beats the ace-high flush the same seven make.
        ("UTH", "2h3h AhKh4h5h9c", "2h3hAh4h5h", "AhKh4h5h9c"),
        # Playing the board: no hole card makes the hand.
        ("UTH", "2c3d AsKsQsJsTs", "AsKsQsJsTs", "AsKsQsJsTs"),
        ("MSP", "AsAd AhKcTs", "AsAdAhKcTs", "AhKcTs"),
        ("LIR", "9h9c2s 9d9s", "9h9c2s9d9s", "9d9s"),
        ("CSP", "AsKsQsJsTs", "AsKsQsJsTs", ""),
        # Four Card Poker: the best four of the dealer's six.
        ("FCP", "AsAdAhAcTs2c", "AsAdAhAc", ""),
        ("TCP", "QhKhAh", "QhKhAh", ""),
    ],
)
def test_read_hand_names_the_cards_that_make_it_and_the_board(
    game: str, cards: str, best: str, board: str
) -> None:
    got_best, got_board = read_hand(game, split(cards.replace(" ", "")))
    assert "".join(got_best) == best
    assert "".join(got_board) == board


@given(st.permutations(range(52)))
def test_read_hand_best_five_are_worth_the_whole_seven(order: list[int]) -> None:
    # Independent check: the game's own evaluator gives the five chosen the value of all
    # seven (rules.poker ranks the seven by their best five); every chosen card is dealt.
    cards = [DECK[i].code for i in order[:7]]
    best, board = read_hand("UTH", cards)
    ranking = RANKINGS["UTH"]
    index = {c.code: c.index for c in DECK}
    seven = evaluator(ranking, 7)(tuple(index[c] for c in cards))
    five = evaluator(ranking, 5)(tuple(index[c] for c in best))
    assert five == seven
    assert len(best) == 5
    assert set(best) <= set(cards)
    assert list(board) == cards[2:]
    assert [c for c in cards if c in best] == list(best)  # in the order dealt
