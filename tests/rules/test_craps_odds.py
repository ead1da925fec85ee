"""The exact odds of Bonus Craps, checked by another method, by hand, and by simulation."""

from __future__ import annotations

import random
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.craps import apply, board, initial_state
from rules.craps_odds import live_probability, odds_table, probability_before_seven
from rules.errors import ConfigError, RollError
from rules.events import CrapsBet, DiceRolled

SMALL = frozenset({2, 3, 4, 5, 6})
TALL = frozenset({8, 9, 10, 11, 12})
NUMBERS: dict[CrapsBet, frozenset[int]] = {
    "all_small": SMALL,
    "all_tall": TALL,
    "make_em_all": SMALL | TALL,
}

# The seed's pay tables, by hand (test_craps_paytable checks the data against the seed).
SEED_PAYS: dict[int, dict[CrapsBet, Decimal]] = {
    1: {"all_small": Decimal(34), "all_tall": Decimal(34), "make_em_all": Decimal(175)},
    2: {"all_small": Decimal(30), "all_tall": Decimal(30), "make_em_all": Decimal(150)},
}


def ways(total: int) -> int:
    """Ways out of 36 to roll a total, counted from the dice."""
    return sum(1 for a in range(1, 7) for b in range(1, 7) if a + b == total)


def inclusion_exclusion(needed: frozenset[int]) -> Fraction:
    """P(every number of ``needed`` before a seven), a different method from the rules'.

    Embed the rolls in a Poisson process: total x arrives at rate p(x), independently.
    With T the time of the first seven (exponential, rate p7), the chance that x has not
    arrived by T is E[exp(-p(x) T)], so by inclusion-exclusion over the numbers missed,
    P = sum over subsets A of needed of (-1)^|A| * p7 / (p7 + p(A)).
    """
    seven = ways(7)
    total = Fraction(0)
    for size in range(len(needed) + 1):
        for missed in combinations(sorted(needed), size):
            total += (-1) ** size * Fraction(seven, seven + sum(ways(x) for x in missed))
    return total


def percent(value: Fraction) -> Decimal:
    exact = Decimal(value.numerator) / Decimal(value.denominator) * 100
    return exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)


def test_odds_table_reproduces_the_published_house_edges_of_pay_table_1() -> None:
    table = {row.bet: row for row in odds_table(1)}
    # Published: 7.76% for All Small and All Tall at 34 to 1, 7.46% for Make 'Em All at 175.
    assert percent(table["all_small"].house_edge) == Decimal("7.76")
    assert percent(table["all_tall"].house_edge) == Decimal("7.76")
    assert percent(table["make_em_all"].house_edge) == Decimal("7.46")


@pytest.mark.parametrize("paytable", [1, 2])
def test_odds_table_agrees_with_inclusion_exclusion_and_the_pay_table(paytable: int) -> None:
    pays = SEED_PAYS[paytable]
    rows = odds_table(paytable)
    assert [(r.bet, r.name) for r in rows] == [
        ("all_small", "All Small"),
        ("all_tall", "All Tall"),
        ("make_em_all", "Make 'Em All"),
    ]
    for row in rows:
        probability = inclusion_exclusion(NUMBERS[row.bet])
        assert row.probability == probability
        assert row.pays == pays[row.bet]
        # Win: wager back plus pays to 1; lose: the wager. Edge = -(expected value).
        expected_value = probability * Fraction(pays[row.bet]) - (1 - probability)
        assert row.house_edge == -expected_value


def test_pay_table_2_holds_more_than_pay_table_1() -> None:
    for one, two in zip(odds_table(1), odds_table(2), strict=True):
        assert one.probability == two.probability
        assert two.house_edge > one.house_edge > 0


def test_unknown_pay_table_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="pay table 3 does not exist"):
        odds_table(3)


@pytest.mark.parametrize(
    ("bet", "hit", "expected"),
    [
        # Worked by hand from the ways out of 36 (7: 6 ways; 6 and 8: 5; 5 and 9: 4; 2: 1).
        ("all_small", {2, 3, 4, 5}, Fraction(5, 11)),  # needs 6: 5 in 11
        ("all_tall", {8, 9, 10, 11}, Fraction(1, 7)),  # needs 12: 1 in 7
        ("all_small", {3, 4, 5, 6, 9}, Fraction(1, 7)),  # a 9 changes nothing for All Small
        # needs 2 and 12: (1/8)(1/7) + (1/8)(1/7)
        ("make_em_all", {3, 4, 5, 6, 8, 9, 10, 11}, Fraction(1, 28)),
        # needs 5 and 6: (4/15)(5/11) + (5/15)(4/10) = 14/55
        ("all_small", {2, 3, 4}, Fraction(14, 55)),
        ("all_small", SMALL, Fraction(1)),  # complete
        ("make_em_all", SMALL | TALL, Fraction(1)),
    ],
)
def test_live_probability_matches_hand_computation(
    bet: CrapsBet, hit: set[int], expected: Fraction
) -> None:
    assert live_probability(bet, hit) == expected


@settings(max_examples=60, deadline=None)
@given(
    bet=st.sampled_from(list(NUMBERS)),
    hit=st.sets(st.sampled_from(sorted(SMALL | TALL))),
)
def test_live_probability_from_any_partial_state_agrees_with_inclusion_exclusion(
    bet: CrapsBet, hit: set[int]
) -> None:
    probability = live_probability(bet, hit)
    assert probability == inclusion_exclusion(NUMBERS[bet] - hit)
    # One more lammer never hurts the bet.
    for more in NUMBERS[bet] - hit:
        assert live_probability(bet, hit | {more}) > probability


@pytest.mark.parametrize("bad", [7, 1, 13, 0, "6", True])
def test_live_probability_refuses_a_total_that_cannot_be_a_number(bad: object) -> None:
    with pytest.raises(RollError, match="cannot be a number hit"):
        live_probability("all_small", [2, bad])  # type: ignore[list-item]
    with pytest.raises(RollError, match="not a total of 2 to 12 other than 7"):
        probability_before_seven([bad])  # type: ignore[list-item]


def test_live_probability_refuses_an_unknown_bet() -> None:
    with pytest.raises(RollError) as info:
        live_probability("big_red", [])  # type: ignore[arg-type]
    assert str(info.value) == (
        "'big_red' is not a Bonus Craps bet: choose all_small, all_tall, make_em_all"
    )
    with pytest.raises(RollError) as info:
        live_probability("all_small", [7])
    assert str(info.value) == (
        "7 cannot be a number hit: numbers are the totals 2 to 12 other than 7"
        " (a seven ends the series)"
    )


@pytest.mark.parametrize(
    ("needed", "probability"),
    [
        # One way to roll a 2 or a 12, six to roll a seven: 1 in 7 before it.
        ([2], Fraction(1, 7)),
        ([12], Fraction(1, 7)),
        # Three ways to roll a 4.
        ([4], Fraction(3, 9)),
        ([], Fraction(1)),
    ],
)
def test_probability_before_seven_of_single_totals(
    needed: list[int], probability: Fraction
) -> None:
    assert probability_before_seven(needed) == probability


def simulate(rng: random.Random, hit: frozenset[int], series: int) -> dict[CrapsBet, int]:
    """Play ``series`` series from the lammers ``hit``; count how often each bet completes."""
    wins: dict[CrapsBet, int] = dict.fromkeys(NUMBERS, 0)
    for _ in range(series):
        lammers = set(hit)
        while True:
            total = rng.randint(1, 6) + rng.randint(1, 6)
            if total == 7:
                break
            lammers.add(total)
            if lammers >= SMALL | TALL:
                break
        for bet, numbers in NUMBERS.items():
            wins[bet] += numbers <= lammers
    return wins


@pytest.mark.parametrize(
    ("hit", "series"), [(frozenset(), 20_000), (frozenset({2, 3, 4, 10, 11, 12}), 10_000)]
)
def test_probabilities_agree_with_a_seeded_simulation(hit: frozenset[int], series: int) -> None:
    wins = simulate(random.Random(20161205), hit, series)
    for bet, count in wins.items():
        p = float(live_probability(bet, hit))
        sigma = (p * (1 - p) / series) ** 0.5
        # Loose: five standard errors (the exact check is inclusion-exclusion above).
        assert abs(count / series - p) < 5 * sigma + 1 / series, (bet, count, p)


def test_the_board_carries_each_bet_s_live_chance_until_it_completes() -> None:
    # The chance the board shows is the inclusion-exclusion figure of what the bet still
    # needs, counted roll by roll through a series; None once the bet is complete.
    state = initial_state(1)
    dice = {2: (1, 1), 3: (1, 2), 4: (1, 3), 5: (1, 4), 6: (1, 5), 8: (2, 6)}
    hit: set[int] = set()
    for roll_id, total in enumerate((2, 3, 3, 8, 4, 5, 6), start=1):
        state, _ = apply(state, DiceRolled(roll_id=roll_id, dice=dice[total]))
        hit.add(total)
        shown = board(state)
        for bet, numbers in NUMBERS.items():
            needed = numbers - hit
            expected = None if not needed else inclusion_exclusion(frozenset(needed))
            assert shown.bet(bet).chance == expected, (bet, sorted(hit))
    assert board(state).all_small.chance is None
