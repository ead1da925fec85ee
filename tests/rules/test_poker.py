"""Hand evaluators (rules/poker.py): exhaustive counts, an independent brute-force reference,
and properties.

The reference below is written separately from the evaluator: it works on ``(rank, suit)``
pairs with ace 14, ranks every card subset the slow obvious way and compares tuples, so
the two can only agree by both being right.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import combinations, pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.cards import DECK, parse_cards
from rules.errors import HandError
from rules.poker import (
    CATEGORY_SHIFT,
    FOUR_CARD,
    STANDARD,
    THREE_CARD,
    Ranking,
    best_cards,
    build_standard7,
    evaluate,
    evaluate_four_card,
    evaluate_standard5,
    evaluate_three_card,
    evaluator,
    poker_game,
    standard7_built,
)

# ---------------------------------------------------------------------------------------
# The independent reference

Hand = Sequence[tuple[int, str]]  # (rank 2..14, suit)
RefKey = tuple[int, tuple[int, ...]]

STANDARD_ORDER = [
    "High Card",
    "Pair",
    "Two Pair",
    "Three of a Kind",
    "Straight",
    "Flush",
    "Full House",
    "Four of a Kind",
    "Straight Flush",
]
FOUR_CARD_ORDER = [
    "High Card",
    "Pair",
    "Two Pair",
    "Straight",
    "Flush",
    "Three of a Kind",
    "Straight Flush",
    "Four of a Kind",
]
THREE_CARD_ORDER = ["High Card", "Pair", "Flush", "Straight", "Three of a Kind", "Straight Flush"]


def ref_straight(ranks: list[int]) -> int | None:
    """High card of a straight using every one of these ranks (ace low only in the wheel)."""
    values = sorted(set(ranks))
    if len(values) != len(ranks):
        return None
    if values == list(range(values[0], values[0] + len(values))):
        return values[-1]
    low = [1 if r == 14 else r for r in values]
    if sorted(low) == list(range(1, len(values) + 1)):
        return len(values)
    return None


def ref_exact(hand: Hand, order: list[str]) -> tuple[str, RefKey]:
    """Name and comparable key of exactly ``len(hand)`` cards, in the given ranking."""
    ranks = [r for r, _ in hand]
    suited = len({s for _, s in hand}) == 1
    counts = Counter(ranks)
    # ranks by how many, then by rank: the tie-break order of every poker ranking
    grouped = sorted(ranks, key=lambda r: (counts[r], r), reverse=True)
    distinct: list[int] = []
    for r in grouped:
        if r not in distinct:
            distinct.append(r)
    shape = sorted(counts.values(), reverse=True)
    high = ref_straight(ranks)
    if high is not None and suited:
        name, tie = "Straight Flush", [high]
    elif shape[0] == 4:
        name, tie = "Four of a Kind", distinct
    elif shape[:2] == [3, 2]:
        name, tie = "Full House", distinct
    elif suited:
        name, tie = "Flush", distinct
    elif high is not None:
        name, tie = "Straight", [high]
    elif shape[0] == 3:
        name, tie = "Three of a Kind", distinct
    elif shape[:2] == [2, 2]:
        name, tie = "Two Pair", distinct
    elif shape[0] == 2:
        name, tie = "Pair", distinct
    else:
        name, tie = "High Card", distinct
    return name, (order.index(name), tuple(tie))


def fine_name(name: str, key: RefKey, ranking: Ranking) -> str:
    """The evaluator's names for the top hand of a category: royal flush, four aces."""
    if name == "Straight Flush" and key[1] == (14,):
        return "Royal Flush"
    if name == "Four of a Kind" and key[1][0] == 14 and ranking is FOUR_CARD:
        return "Four Aces"
    return name


def reference(ranking: Ranking, codes: Sequence[str]) -> tuple[str, RefKey]:
    """Best hand of ``ranking.hand_size`` cards among ``codes``, by trying every subset."""
    order = {STANDARD: STANDARD_ORDER, FOUR_CARD: FOUR_CARD_ORDER, THREE_CARD: THREE_CARD_ORDER}
    cards = [(c.rank, c.suit) for c in parse_cards("".join(codes))]
    best = max(
        (ref_exact(sub, order[ranking]) for sub in combinations(cards, ranking.hand_size)),
        key=lambda named: named[1],
    )
    return fine_name(best[0], best[1], ranking), best[1]


def indexes(codes: Sequence[str]) -> tuple[int, ...]:
    return tuple(card.index for card in parse_cards("".join(codes)))


def ours(ranking: Ranking, codes: Sequence[str]) -> tuple[str, int]:
    value = evaluate(ranking, indexes(codes))
    return ranking.category(value), value


def assert_same_order(ranking: Ranking, hands: Sequence[Sequence[str]]) -> None:
    """Same names, and the evaluator orders the hands exactly as the reference does."""
    rows = []
    for codes in hands:
        name, value = ours(ranking, codes)
        ref_name, ref_key = reference(ranking, codes)
        assert name == ref_name, codes
        rows.append((ref_key, value, codes))
    rows.sort(key=lambda row: row[0])
    for (key_a, value_a, a), (key_b, value_b, b) in pairwise(rows):
        assert (key_a == key_b) == (value_a == value_b), (a, b)
        assert value_a <= value_b, (a, b)


CODES = [card.code for card in DECK]


def hands_of(size: int) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(CODES), min_size=size, max_size=size, unique=True)


def split(text: str) -> list[str]:
    return [c.code for c in parse_cards(text.replace(" ", ""))]


# ---------------------------------------------------------------------------------------
# Exhaustive: every hand of 3, 4 and 5 cards, counted by category


def count_all(
    size: int, evaluate_one: Callable[[Sequence[int]], int], ranking: Ranking
) -> tuple[Counter[str], Counter[str]]:
    """Hands per category, and distinct values (equivalence classes) per category."""
    values = Counter(map(evaluate_one, combinations(range(52), size)))
    hands: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    for value, n in values.items():
        hands[ranking.category(value)] += n
        classes[ranking.category(value)] += 1
    return hands, classes


@pytest.mark.exhaustive
def test_every_five_card_hand_counts_as_the_textbook() -> None:
    hands, classes = count_all(5, evaluate_standard5, STANDARD)
    # 2,598,960 hands; 7,462 distinct hand values (the classes a tie-break can tell apart)
    assert hands == {
        "Royal Flush": 4,
        "Straight Flush": 36,
        "Four of a Kind": 624,
        "Full House": 3_744,
        "Flush": 5_108,
        "Straight": 10_200,
        "Three of a Kind": 54_912,
        "Two Pair": 123_552,
        "Pair": 1_098_240,
        "High Card": 1_302_540,
    }
    assert classes == {
        "Royal Flush": 1,
        "Straight Flush": 9,
        "Four of a Kind": 156,
        "Full House": 156,
        "Flush": 1_277,
        "Straight": 10,
        "Three of a Kind": 858,
        "Two Pair": 858,
        "Pair": 2_860,
        "High Card": 1_277,
    }


@pytest.mark.exhaustive
def test_every_three_card_hand_counts_as_the_textbook() -> None:
    hands, classes = count_all(3, evaluate_three_card, THREE_CARD)
    assert hands == {
        "Royal Flush": 4,  # 48 straight flushes in all, 4 of them royal (A-K-Q suited)
        "Straight Flush": 44,
        "Three of a Kind": 52,
        "Straight": 720,
        "Flush": 1_096,
        "Pair": 3_744,
        "High Card": 16_440,
    }
    assert sum(hands.values()) == 22_100
    # 12 straights (A-2-3 .. A-K-Q), 274 = C(13,3) - 12 flushes, 13 * 12 pairs
    assert classes == {
        "Royal Flush": 1,
        "Straight Flush": 11,
        "Three of a Kind": 13,
        "Straight": 12,
        "Flush": 274,
        "Pair": 156,
        "High Card": 274,
    }


@pytest.mark.exhaustive
def test_every_four_card_hand_counts_as_the_textbook() -> None:
    hands, classes = count_all(4, evaluate_four_card, FOUR_CARD)
    assert hands == {
        "Four Aces": 1,
        "Four of a Kind": 12,
        "Royal Flush": 4,  # 44 straight flushes (A-2-3-4 .. A-K-Q-J, 11 runs x 4 suits)
        "Straight Flush": 40,
        "Three of a Kind": 2_496,
        "Flush": 2_816,
        "Straight": 2_772,
        "Two Pair": 2_808,
        "Pair": 82_368,
        "High Card": 177_408,
    }
    assert sum(hands.values()) == 270_725
    assert classes == {
        "Four Aces": 1,
        "Four of a Kind": 12,
        "Royal Flush": 1,
        "Straight Flush": 10,
        "Three of a Kind": 156,
        "Flush": 704,
        "Straight": 11,
        "Two Pair": 78,
        "Pair": 858,
        "High Card": 704,
    }


# ---------------------------------------------------------------------------------------
# Against the reference: best 5 of 7, best 4 of 5 and 6, and exact hands

NASTY_SEVEN = [
    "As 2d 3h 4c 5s Kd Kh",  # wheel beside a pair
    "As 2s 3s 4s 5s 6d 7h",  # steel wheel, and a 7-high straight that must not win
    "Ah 2h 3h 4h 5h 6h Kd",  # six hearts: the 6-high straight flush, not the wheel
    "9c 9d 9h 5s 5c 5d 2h",  # two trips: nines full of fives
    "Kc Kd Kh Ks 7c 7d 7h",  # quads with trips: the kicker is the seven
    "Ah Kh Qh Jh 9h Th 8d",  # flush and straight together: royal flush
    "Qh Jh 9h 8h 2h Th Kd",  # Q-high straight flush beside a K-high straight
    "2c 3d 4h 5s 6c 7d 8h",  # 8-high straight among seven in a row
    "Ac Ad Kc Kd Qc Qd Jh",  # three pairs: aces and kings, queen kicker
    "Ts Js Qs Ks 9d 8d 2c",  # king-high straight, no flush
    "Ac Kc Qc Jc 9c 8d 8h",  # flush beats the pair of eights
    "5h 5d 5c 5s Ah Kh Qh",  # four fives with an ace kicker
    "7c 7d 7h 8s 8c 2d 2h",  # full house, the better pair kept
]
NASTY_FOUR = [
    "As Ks Qs Js Ah Ad",  # dealer six: royal flush vs trip aces
    "Ac Ad Ah As Kc Kd",  # four aces
    "2c 2d 2h 2s Ah Kh",  # four of a kind beats everything but four aces
    "As 2s 3s 4s 5d 6d",  # A-2-3-4 straight flush
    "7c 7d 7h 8c 9c Tc",  # trip sevens, but 7-8-9-T of clubs is a straight flush
    "Tc Jc Qc Kc 9d",  # straight flush K high among five
    "2c 3c 4c 5c 5d",  # 5-high straight flush beside a pair
    "Ah 2d 3c 4s Kd",  # A-2-3-4 straight
    "9c 9d 8c 8d 7h 7s",  # two pair: nines and eights
]


@pytest.mark.parametrize("text", NASTY_SEVEN)
def test_best_five_of_seven_hand_crafted(text: str) -> None:
    codes = split(text)
    assert ours(STANDARD, codes)[0] == reference(STANDARD, codes)[0]


def test_hand_crafted_sevens_order_as_the_reference() -> None:
    assert_same_order(STANDARD, [split(t) for t in NASTY_SEVEN])


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("As 2s 3s 4s 5s 6d 7h", "Straight Flush"),
        ("Ah 2h 3h 4h 5h 6h Kd", "Straight Flush"),
        ("9c 9d 9h 5s 5c 5d 2h", "Full House"),
        ("Kc Kd Kh Ks 7c 7d 7h", "Four of a Kind"),
        ("Ah Kh Qh Jh 9h Th 8d", "Royal Flush"),
        ("Ac Ad Kc Kd Qc Qd Jh", "Two Pair"),
        ("As 2d 3h 4c 5s Kd Kh", "Straight"),
    ],
)
def test_seven_card_names(text: str, name: str) -> None:
    assert ours(STANDARD, split(text))[0] == name


def test_seven_card_tie_breaks_the_textbook_way() -> None:
    def value(text: str) -> int:
        return evaluate(STANDARD, indexes(split(text)))

    # the wheel is the lowest straight; a 6-high straight beats it
    assert value("As 2d 3h 4c 5s Kd Qh") < value("6s 2d 3h 4c 5s Kd Qh")
    # three pairs: the third pair's rank is the kicker, it beats a lower single
    assert value("Ac Ad Kc Kd Qc Qd 2h") > value("Ac Ad Kc Kd Jc 9d 2h")
    # the same five best cards are the same hand, whatever else is in the seven
    assert value("Ac Ad Ah Kc Kd 2s 3s") == value("As Ad Ah Ks Kd 4c 5c")


@given(hands_of(7))
def test_best_five_of_seven_agrees_with_reference(codes: list[str]) -> None:
    assert ours(STANDARD, codes)[0] == reference(STANDARD, codes)[0]


def test_best_five_of_seven_orders_a_sample_as_the_reference() -> None:
    rng = random.Random(20260615)
    assert_same_order(STANDARD, [rng.sample(CODES, 7) for _ in range(1500)])


@pytest.mark.parametrize("text", NASTY_FOUR)
def test_best_four_hand_crafted(text: str) -> None:
    codes = split(text)
    assert ours(FOUR_CARD, codes)[0] == reference(FOUR_CARD, codes)[0]


@pytest.mark.parametrize("size", [4, 5, 6])
def test_best_four_of_n_orders_a_sample_as_the_reference(size: int) -> None:
    rng = random.Random(size)
    sample = [rng.sample(CODES, size) for _ in range(1500)] + [
        split(t) for t in NASTY_FOUR if len(split(t)) == size
    ]
    assert_same_order(FOUR_CARD, sample)


@given(st.one_of(hands_of(5), hands_of(6)))
def test_best_four_agrees_with_reference(codes: list[str]) -> None:
    assert ours(FOUR_CARD, codes)[0] == reference(FOUR_CARD, codes)[0]


def test_exact_five_and_three_order_samples_as_the_reference() -> None:
    rng = random.Random(5)
    assert_same_order(STANDARD, [rng.sample(CODES, 5) for _ in range(2000)])
    assert_same_order(THREE_CARD, [rng.sample(CODES, 3) for _ in range(2000)])


# ---------------------------------------------------------------------------------------
# The games' own rankings (docs/auditors/choices.md)


def test_four_card_poker_ranks_quads_over_straight_flush_trips_over_flush_over_straight() -> None:
    def name_value(text: str) -> tuple[str, int]:
        return ours(FOUR_CARD, split(text))

    order = [
        "2c 3d 4h 9s",  # high card
        "2c 2d 4h 9s",  # pair
        "2c 2d 4h 4s",  # two pair
        "2c 3d 4h 5s",  # straight
        "2c 3c 4c 9c",  # flush
        "2c 2d 2h 9s",  # three of a kind
        "2c 3c 4c 5c",  # straight flush
        "Ac Kc Qc Jc",  # royal flush (A-K-Q-J of one suit)
        "2c 2d 2h 2s",  # four of a kind
        "Ac Ad Ah As",  # four aces
    ]
    named = [name_value(t) for t in order]
    assert [n for n, _ in named] == list(FOUR_CARD.categories)
    assert [v for _, v in named] == sorted(v for _, v in named)


def test_three_card_poker_ranks_straight_over_flush_and_a23_is_a_straight() -> None:
    order = ["2c 5d 9h", "2c 2d 9h", "2c 5c 9c", "Ac 2d 3h", "Ac Kd Qh", "9c 9d 9h", "2c 3c 4c"]
    values = [ours(THREE_CARD, split(t)) for t in order]
    assert [n for n, _ in values] == [
        "High Card",
        "Pair",
        "Flush",
        "Straight",
        "Straight",
        "Three of a Kind",
        "Straight Flush",
    ]
    assert [v for _, v in values] == sorted(v for _, v in values)
    assert ours(THREE_CARD, split("As Ks Qs"))[0] == "Royal Flush"
    assert ours(THREE_CARD, split("Ah 2h 3h"))[0] == "Straight Flush"
    assert ours(THREE_CARD, split("Ah 2h 3h"))[1] < ours(THREE_CARD, split("2h 3h 4h"))[1]


# ---------------------------------------------------------------------------------------
# Properties


@pytest.mark.heavy
@given(hands_of(7), st.randoms(use_true_random=False))
def test_order_of_the_cards_changes_nothing(codes: list[str], rng: random.Random) -> None:
    for ranking, size in ((STANDARD, 7), (STANDARD, 5), (FOUR_CARD, 6), (THREE_CARD, 3)):
        hand = codes[:size]
        shuffled = hand[:]
        rng.shuffle(shuffled)
        assert ours(ranking, hand) == ours(ranking, shuffled)


@given(hands_of(7), st.permutations("cdhs"))
def test_relabelling_the_suits_changes_nothing(codes: list[str], suits: list[str]) -> None:
    relabel = dict(zip("cdhs", suits, strict=True))
    renamed = [c[0] + relabel[c[1]] for c in codes]
    for ranking, size in ((STANDARD, 7), (STANDARD, 5), (FOUR_CARD, 5), (THREE_CARD, 3)):
        assert ours(ranking, codes[:size]) == ours(ranking, renamed[:size])


@given(hands_of(7), hands_of(7))
def test_order_is_total_and_agrees_with_categories(a: list[str], b: list[str]) -> None:
    for ranking, size in ((STANDARD, 7), (FOUR_CARD, 6), (THREE_CARD, 3)):
        (name_a, va), (name_b, vb) = ours(ranking, a[:size]), ours(ranking, b[:size])
        ia, ib = ranking.categories.index(name_a), ranking.categories.index(name_b)
        if ia != ib:
            assert (va > vb) == (ia > ib)
        assert (va < vb) + (va == vb) + (va > vb) == 1


@given(hands_of(7))
def test_best_cards_make_the_hand(codes: list[str]) -> None:
    for ranking, size in ((STANDARD, 7), (FOUR_CARD, 6)):
        hand = indexes(codes[:size])
        best = best_cards(ranking, hand)
        assert len(best) == ranking.hand_size
        assert set(best) <= set(hand)
        assert evaluate(ranking, best) == evaluate(ranking, hand)


def test_no_evaluator_for_other_sizes_and_no_other_game() -> None:
    with pytest.raises(HandError, match="no five-card poker evaluator for 6 cards"):
        evaluator(STANDARD, 6)
    with pytest.raises(HandError, match="'BJ'"):
        poker_game("BJ")


def test_refusals_name_the_games_and_hands_there_are() -> None:
    with pytest.raises(HandError) as refused:
        poker_game("BJ")
    assert str(refused.value) == (
        "no Cover All Bonus for game 'BJ': it is offered with CSP, FCP, LIR, MSP, TCP, UTH"
    )
    with pytest.raises(HandError) as refused:
        THREE_CARD.index("Full House")
    assert str(refused.value) == "Three Card Poker ranking has no hand 'Full House'"
    assert [poker_game(g) for g in ("CSP", "UTH")] == ["CSP", "UTH"]
    assert FOUR_CARD.index("Four Aces") == len(FOUR_CARD.categories) - 1


def test_once_built_the_seven_card_table_says_so() -> None:
    build_standard7()
    assert standard7_built()


def packed(ranking: Ranking, category: str, ranks: Sequence[int]) -> int:
    """A value as the module docstring lays it out: the category index above
    ``CATEGORY_SHIFT``, then five tie-break ranks (2 = 0 .. ace = 12) of four bits each, most
    significant first, the ranks a hand does not use at 0."""
    value = ranking.categories.index(category)
    for slot in range(5):
        value = value << 4 | (ranks[slot] - 2 if slot < len(ranks) else 0)
    assert value >> CATEGORY_SHIFT == ranking.categories.index(category)
    return value


@pytest.mark.parametrize(
    ("ranking", "text", "category", "ranks"),
    [
        # The wheel's high card is the top of the run below the ace: 5, 4 and 3.
        (STANDARD, "As 2d 3h 4c 5s", "Straight", [5]),
        (STANDARD, "Ah 2h 3h 4h 5h", "Straight Flush", [5]),
        (STANDARD, "6s 2d 3h 4c 5s", "Straight", [6]),
        (FOUR_CARD, "Ah 2d 3c 4s", "Straight", [4]),
        (FOUR_CARD, "As 2s 3s 4s", "Straight Flush", [4]),
        (THREE_CARD, "Ac 2d 3h", "Straight", [3]),
        (THREE_CARD, "Ac 2c 3c", "Straight Flush", [3]),
        # Fewer than five tie-break ranks: the rest are 0.
        (STANDARD, "Kc Kd Kh Ks 7c", "Four of a Kind", [13, 7]),
        (STANDARD, "9c 9d 9h 5s 5c", "Full House", [9, 5]),
        (FOUR_CARD, "2c 2d 2h 2s", "Four of a Kind", [2]),
        (THREE_CARD, "9c 9d 4h", "Pair", [9, 4]),
        (STANDARD, "Ac Kc Qc Jc 9c", "Flush", [14, 13, 12, 11, 9]),
    ],
)
def test_a_value_holds_the_category_then_the_tie_break_ranks(
    ranking: Ranking, text: str, category: str, ranks: list[int]
) -> None:
    assert evaluate(ranking, indexes(split(text))) == packed(ranking, category, ranks)
