"""Blackjack totals with soft aces, and the dealer's rule (S17 and H17)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.blackjack import (
    card_value,
    dealer_stands,
    hand_total,
    is_blackjack,
    total_of_values,
)
from rules.cards import DECK, Card, parse_cards


@pytest.mark.parametrize(
    ("cards", "total", "soft"),
    [
        ("As6d", 17, True),  # soft 17
        ("AsAd", 12, True),  # two aces: only one can count 11
        ("AsAd9c", 21, True),
        ("AsAdAhAc", 14, True),
        ("AsAdAhAc3s", 17, True),  # four aces and a 3: soft 17
        ("AsAdAhAc7s", 21, True),
        ("AsAdAhAc8s", 12, False),  # 11 + 3 + 8 = 22: every ace back to 1
        ("As6d8c", 15, False),  # soft 17 hit to a hard 15, not a bust
        ("As6d8cTh", 25, False),
        ("AsAdTc", 12, False),
        ("AsAdTcKh", 22, False),
        ("KsQd", 20, False),
        ("JsTdQc", 30, False),
        ("As", 11, True),
        ("AsKd", 21, True),
        ("9s7d", 16, False),
    ],
)
def test_totals_count_aces_properly(cards: str, total: int, soft: bool) -> None:
    result = hand_total(parse_cards(cards))
    assert (result.total, result.soft) == (total, soft)
    assert result.bust == (total > 21)


def test_every_ten_value_counts_ten_and_ace_counts_one() -> None:
    values = {card.code[0]: card_value(card) for card in DECK}
    assert values == {
        "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9,
        "T": 10, "J": 10, "Q": 10, "K": 10, "A": 1,
    }  # fmt: skip


@given(st.lists(st.sampled_from(DECK), min_size=1, max_size=12))
def test_total_matches_the_best_count_over_every_ace_choice(cards: list[Card]) -> None:
    # Independent definition: the largest total <= 21 over every way of counting the
    # aces as 1 or 11, else the smallest total.
    hand = tuple(cards)
    values = [card_value(card) for card in hand]
    aces = values.count(1)
    options = {sum(values) + 10 * k for k in range(aces + 1)}
    under = [t for t in options if t <= 21]
    best = max(under) if under else min(options)
    result = hand_total(hand)
    assert result.total == best
    assert result.soft == (best != sum(values))
    assert total_of_values(reversed(values)) == result  # order does not matter


def dealer_must_draw(hand: tuple[Card, ...], *, hits_soft_17: bool) -> bool:
    """The dealer's rule as a bust round applies it: two cards always, then ``dealer_stands``."""
    return len(hand) < 2 or not dealer_stands(hand_total(hand), hits_soft_17=hits_soft_17)


@pytest.mark.parametrize(
    ("cards", "s17_draws", "h17_draws"),
    [
        ("As6d", False, True),  # soft 17: the only hand where the rules differ
        ("As3d3c", False, True),  # soft 17 in three cards
        ("AsAdAhAc3s", False, True),
        ("Ts7d", False, False),  # hard 17
        ("As7d", False, False),  # soft 18
        ("Ts6d", True, True),
        ("As5d", True, True),  # soft 16
        ("AsAd", True, True),
        ("TsKd", False, False),
        ("AsKd", False, False),  # blackjack stands
        ("TsKd5c", False, False),  # bust: over
        ("As", True, True),  # the hole card is always dealt
        ("Ts", True, True),
    ],
)
def test_dealer_rule_s17_and_h17(cards: str, s17_draws: bool, h17_draws: bool) -> None:
    hand = parse_cards(cards)
    assert dealer_must_draw(hand, hits_soft_17=False) is s17_draws
    assert dealer_must_draw(hand, hits_soft_17=True) is h17_draws
    if len(hand) >= 2:
        assert dealer_stands(hand_total(hand), hits_soft_17=False) is not s17_draws


def test_blackjack_is_two_cards_of_21() -> None:
    assert is_blackjack(parse_cards("AsQd"))
    assert is_blackjack(parse_cards("TcAh"))
    assert not is_blackjack(parse_cards("As5d5c"))  # 21 in three cards
    assert not is_blackjack(parse_cards("AsAd"))
