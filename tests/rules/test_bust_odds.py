"""The exact Bust Bonus odds: identities, closed forms, published figures, a simulation."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction
from functools import cache

import pytest

from rules.bust_odds import BustOdds, odds_table
from rules.cards import DECK, Card
from rules.errors import ConfigError
from rules.paytables import BUST_BONUS
from tests.helpers.paytables import SEED_ROWS, dealt_hand, seed_pays

# make check leaves these out (make test runs them): the tests share the cached exact odds of
# every shoe (seconds of CPU for whichever test of a worker asks first).
pytestmark = pytest.mark.heavy

CONFIGS = [(1, False), (1, True), (6, False), (6, True), (8, True)]


@pytest.mark.parametrize(("decks", "h17"), CONFIGS)
def test_outcomes_partition_and_ev_follows_the_seed(decks: int, h17: bool) -> None:
    table = odds_table(decks, h17)
    assert [row.up_card for row in table.up_cards] == list(SEED_ROWS)[:10]
    assert sum(row.probability for row in table.up_cards) == 1
    three_off, three_suited = SEED_ROWS["Bust with three 8s"]
    for row in table.up_cards:
        parts = (
            row.suited_bust,
            row.off_suit_bust,
            row.three_eights_suited,
            row.three_eights_off_suit,
            row.no_bust,
        )
        assert sum(parts) == 1, row.up_card
        assert all(0 <= p <= 1 for p in parts)
        if row.up_card != "8":
            assert row.three_eights_suited == row.three_eights_off_suit == 0
        off, suited = SEED_ROWS[row.up_card]
        assert row.ev == (
            Fraction(suited) * row.suited_bust
            + Fraction(off) * row.off_suit_bust
            + Fraction(three_suited) * row.three_eights_suited
            + Fraction(three_off) * row.three_eights_off_suit
            - row.no_bust
        )
    assert table.ev == sum(row.probability * row.ev for row in table.up_cards)
    assert table.house_edge == -table.ev > 0
    assert table.bust == sum(row.probability * row.bust for row in table.up_cards)


@pytest.mark.parametrize("decks", [1, 2, 3, 6])
def test_three_eights_match_the_closed_form(decks: int) -> None:
    # 8 up, then an 8 (16: the dealer must draw under either rule), then an 8.
    n = 52 * decks
    both = Fraction((4 * decks - 1) * (4 * decks - 2), (n - 1) * (n - 2))
    suited = Fraction((decks - 1) * (decks - 2), (n - 1) * (n - 2))
    eight = odds_table(decks, False).up_cards[7]
    assert eight.up_card == "8"
    assert eight.three_eights_suited == suited
    assert eight.three_eights_off_suit == both - suited
    if decks < 3:
        assert suited == 0  # fewer than three of each eight in the shoe


@cache
def bust_by_ranks(decks: int, h17: bool, up: int) -> Fraction:
    """P(bust | up card value) by a second, rank-only recursion written independently."""

    def total(values: tuple[int, ...]) -> tuple[int, bool]:
        hard = sum(values)
        soft = 1 in values and hard + 10 <= 21
        return (hard + 10 if soft else hard), soft

    @cache
    def go(values: tuple[int, ...]) -> Fraction:
        t, soft = total(values)
        if len(values) >= 2 and (t > 17 or (t == 17 and not (h17 and soft))):
            return Fraction(int(t > 21))
        left = 52 * decks - len(values)
        result = Fraction(0)
        for v in range(1, 11):
            copies = 4 * decks * (4 if v == 10 else 1) - values.count(v)
            if copies:
                result += Fraction(copies, left) * go(tuple(sorted((*values, v))))
        return result

    return go((up,))


@pytest.mark.parametrize(("decks", "h17"), [(1, False), (6, True)])
def test_suit_reduction_keeps_the_rank_marginal_exact(decks: int, h17: bool) -> None:
    table = odds_table(decks, h17)
    for value, row in enumerate(table.up_cards, start=1):
        assert row.bust == bust_by_ranks(decks, h17, value), row.up_card


# Published 6-deck H17 analysis of this pay table (S. How, "Bust Bonus BJ Side Bet",
# 2013): suited bust, off-suit bust, no bust, return, for the up cards where the bet is
# made before the up card as here (its Ace and Ten rows assume a peek, so differ).
PUBLISHED_6D_H17 = {
    "2": ("0.008751", "0.347909", "0.643339", "-0.076644"),
    "3": ("0.011524", "0.365435", "0.623042", "-0.084754"),
    "4": ("0.014574", "0.383896", "0.601530", "-0.071892"),
    "5": ("0.017883", "0.401749", "0.580368", "-0.089206"),
    "6": ("0.020844", "0.418415", "0.560741", "-0.079793"),
    "7": ("0.011716", "0.250219", "0.738064", "-0.061881"),
    "8": ("0.011133", "0.227312", "0.756307", "-0.048772"),  # plus 888: 0.000207, 0.005041
    "9": ("0.011602", "0.217640", "0.770758", "-0.103441"),
}


def test_reproduces_published_six_deck_h17_figures() -> None:
    def six(p: Fraction) -> Decimal:
        return (Decimal(p.numerator) / Decimal(p.denominator)).quantize(Decimal("0.000001"))

    rows = {row.up_card: row for row in odds_table(6, True).up_cards}
    for up, figures in PUBLISHED_6D_H17.items():
        row = rows[up]
        got = (six(row.suited_bust), six(row.off_suit_bust), six(row.no_bust), six(row.ev))
        assert got == tuple(Decimal(f) for f in figures), up
    assert six(rows["8"].three_eights_suited) == Decimal("0.000207")
    assert six(rows["8"].three_eights_off_suit) == Decimal("0.005041")


def test_hitting_soft_17_busts_more_and_only_under_small_up_cards() -> None:
    s17, h17 = odds_table(6, False), odds_table(6, True)
    assert h17.bust > s17.bust
    assert h17.house_edge < s17.house_edge
    for a, b in zip(s17.up_cards, h17.up_cards, strict=True):
        # Only A..6 up can reach a soft 17.
        if a.up_card in {"7", "8", "9", "10"}:
            assert a == b
        else:
            assert b.bust > a.bust


# True is an int to Python; "decks: true" in a configuration is a mistake, not one deck.
@pytest.mark.parametrize("decks", [0, -6, True, 1.5])
def test_fewer_than_one_deck_is_a_config_error(decks: int) -> None:
    with pytest.raises(ConfigError, match="decks"):
        odds_table(decks, False)


# ---------------------------------------------------------------------------------------
# An independent simulation: real cards from a full shoe, the dealer's rule written out in
# the tests, payouts read from the seed text.


def simulate(
    decks: int, h17: bool, hands: int, seed: int
) -> list[tuple[str, Decimal | None, bool]]:
    """``hands`` dealer hands from a full shoe each: (up-card row, pays, suited)."""
    rng = random.Random(seed)
    shoe: list[Card] = list(DECK) * decks
    n = len(shoe)
    out = []
    for _ in range(hands):
        # A lazy partial Fisher-Yates shuffle: each draw is uniform over the cards left.
        drawn: list[Card] = []
        for i in range(17):
            j = rng.randrange(i, n)
            shoe[i], shoe[j] = shoe[j], shoe[i]
            drawn.append(shoe[i])
        hand = dealt_hand(drawn, h17)
        up = {14: "Ace", 11: "10", 12: "10", 13: "10"}.get(hand[0].rank, str(hand[0].rank))
        out.append((up, seed_pays(hand), len({c.suit for c in hand}) == 1))
    return out


def within(observed: int, trials: int, p: Fraction, sigmas: float = 5.0) -> bool:
    """``observed`` successes of ``trials`` agree with probability ``p`` to ``sigmas``."""
    expected = float(p) * trials
    sd = math.sqrt(trials * float(p) * (1 - float(p)))
    return abs(observed - expected) <= sigmas * sd + 1


@pytest.mark.parametrize(("decks", "h17", "seed"), [(1, False, 2024), (6, True, 7)])
def test_agrees_with_an_independent_simulation(decks: int, h17: bool, seed: int) -> None:
    hands = 60_000
    sample = simulate(decks, h17, hands, seed)
    table: BustOdds = odds_table(decks, h17)
    # Per up card: how often the dealer busts.
    for row in table.up_cards:
        mine = [s for s in sample if s[0] == row.up_card]
        busts = sum(1 for s in mine if s[1] is not None)
        assert within(busts, len(mine), row.bust), row.up_card
    # Overall: suited busts (three eights included), and the return with its exact spread.
    suited = sum(1 for s in sample if s[1] is not None and s[2])
    p_suited = sum(
        (r.probability * (r.suited_bust + r.three_eights_suited) for r in table.up_cards),
        Fraction(0),
    )
    assert within(suited, hands, p_suited)
    mean = sum((Fraction(s[1]) if s[1] is not None else Fraction(-1) for s in sample), Fraction(0))
    second = sum(
        r.probability
        * (
            Fraction(BUST_BONUS.rows[i].suited) ** 2 * r.suited_bust
            + Fraction(BUST_BONUS.rows[i].off_suit) ** 2 * r.off_suit_bust
            + Fraction(BUST_BONUS.three_eights.suited) ** 2 * r.three_eights_suited
            + Fraction(BUST_BONUS.three_eights.off_suit) ** 2 * r.three_eights_off_suit
            + r.no_bust
        )
        for i, r in enumerate(table.up_cards)
    )
    sd = math.sqrt(float(second - table.ev**2) / hands)
    assert abs(float(mean / hands - table.ev)) <= 5 * sd
