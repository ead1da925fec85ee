"""The Cover All Bonus par sheet (bulk/cover_all_odds.py) against independent truth:
textbook hand counts, brute-force pair counts, ``rules.cover_all.resolve_round`` on the
same deals, and plain simulations of the payout."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations, product

import numpy as np
import pytest

from bulk.combos import combinations_array, suit_classes
from bulk.cover_all_odds import (
    CHUNK_ROUNDS,
    ColumnOdds,
    Sample,
    _generator,
    _unseen_remainder_bound,
    column_odds,
    deal_of,
    disjoint_pairs,
    exact_pieces,
    hand_levels,
    shuffled_decks,
    simulate,
    table_levels,
)
from rules.cards import DECK, parse_cards
from rules.cover_all import NoQualifier, Win, resolve_round
from rules.events import POKER_GAMES, PokerGame
from rules.paytables import COVER_ALL_ROWS, ColumnError, cover_all_columns
from rules.paytables import cover_all_table as paytable

# make check leaves these out (make test runs them): the tests share cached enumerations
# (seconds of CPU for whichever test of a worker asks first).
pytestmark = pytest.mark.heavy

C = math.comb


def at_least(counts: list[int], whole: int) -> tuple[Fraction, ...]:
    """Chances of reaching each level from the hands at each exact level (lowest first)."""
    return tuple(Fraction(sum(counts[i:]), whole) for i in range(len(counts)))


# ---------------------------------------------------------------------------------------
# One hand: textbook counts, and the community method against plain enumeration

FIVE_CARD = [54912, 10200, 5108, 3744, 624, 36, 4]  # trips .. royal, of C(52, 5)


@pytest.mark.parametrize("game", ["CSP", "LIR", "MSP"])
def test_one_hand_is_a_five_card_hand_in_the_stud_games(game: PokerGame) -> None:
    """CSP enumerates five-card hands; LIR and MSP condition on the community cards and
    enumerate holdings: the two methods must give the textbook counts."""
    pieces = exact_pieces(game)
    assert pieces.single["player"] == at_least(FIVE_CARD, C(52, 5))


def test_one_uth_hand_is_the_best_five_of_seven() -> None:
    full_house_up = [3473184, 224848, 37260, 4324]  # of C(52, 7): textbook counts
    assert exact_pieces("UTH").single["player"] == at_least(full_house_up, C(52, 7))
    assert exact_pieces("UTH").single["dealer"] == exact_pieces("UTH").single["player"]


def test_one_three_card_hand() -> None:
    straight_up = [720, 52, 44, 4]  # straight, trips, straight flush, A-K-Q suited
    assert exact_pieces("TCP").single["player"] == at_least(straight_up, C(52, 3))


def test_four_card_poker_dealer_holds_six_cards() -> None:
    """Four aces: AAAA plus any card in five, plus any two cards in six."""
    pieces = exact_pieces("FCP")
    assert pieces.single["player"][-1] == Fraction(48, C(52, 5))
    assert pieces.single["dealer"][-1] == Fraction(C(48, 2), C(52, 6))
    # the dealer's sixth card can only help
    for player, dealer in zip(pieces.single["player"], pieces.single["dealer"], strict=True):
        assert dealer > player


# ---------------------------------------------------------------------------------------
# Two hands: inclusion-exclusion against brute force


def brute_pairs(a: list[tuple[int, ...]], b: list[tuple[int, ...]]) -> int:
    return sum(1 for x, y in product(a, b) if not set(x) & set(y))


@pytest.mark.parametrize(("size_a", "size_b"), [(3, 3), (5, 5), (5, 6), (2, 2)])
def test_disjoint_pairs_against_brute_force(size_a: int, size_b: int) -> None:
    rng = np.random.default_rng(size_a * 10 + size_b)
    # crowd the hands into 14 cards so that many pairs share cards
    cards = rng.choice(52, 14, replace=False)

    def pick(size: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        every = list(combinations(sorted(cards.tolist()), size))
        chosen = sorted(rng.choice(len(every), count, replace=False).tolist())
        hands = np.array([every[i] for i in chosen], dtype=np.uint8)
        return hands, rng.integers(1, 4, count).astype(np.int8)

    a, b = pick(size_a, 60), pick(size_b, 80)
    counted = disjoint_pairs(a, b, 3)
    for level in (1, 2, 3):
        left = [tuple(h) for h, lv in zip(*a, strict=True) if lv >= level]
        right = [tuple(h) for h, lv in zip(*b, strict=True) if lv >= level]
        assert counted[level - 1] == brute_pairs(left, right) > 0
    same = disjoint_pairs(a, a, 3)
    assert same[0] == brute_pairs([tuple(h) for h in a[0]], [tuple(h) for h in a[0]])


def test_two_royal_flushes() -> None:
    """Both hands royal: 4 * 3 ordered pairs in CSP; never in LIR or MSP (the community
    cards would have to be in both suits), nor both four aces in FCP."""
    csp = exact_pieces("CSP").pair["player", "player"][-1]
    assert csp == Fraction(4 * 3, C(52, 5) * C(47, 5))
    assert exact_pieces("LIR").pair["player", "player"][-1] == 0
    assert exact_pieces("MSP").pair["player", "player"][-1] == 0
    assert exact_pieces("FCP").pair["player", "dealer"][-1] == 0


def test_two_uth_hands_both_royal_only_with_a_royal_board() -> None:
    """Two hands of seven sharing five board cards both hold a royal flush only when the
    board is one: a royal in another suit than the board's would need five cards of that
    suit from two holdings and at most two board cards."""
    assert exact_pieces("UTH").pair["player", "player"][-1] == Fraction(4, C(52, 5))


# ---------------------------------------------------------------------------------------
# The highest hand is the one rules.cover_all settles on


def positions(deal_cards: list[int], game: PokerGame, hands: int) -> dict[str, list[str]]:
    deal = deal_of(game, hands)
    codes = [DECK[i].code for i in deal_cards]
    out: dict[str, list[str]] = {}
    at = 0
    for p in range(deal.players):
        out[f"P{p + 1}"] = codes[at : at + deal.player_cards]
        at += deal.player_cards
    if deal.dealer:
        out["DL"] = codes[at : at + deal.dealer_cards]
        at += deal.dealer_cards
    if deal.community:
        out["CM"] = codes[at : at + deal.community]
    return out


def settled_level(game: PokerGame, hands: int, cards: list[int]) -> int:
    result = resolve_round(game, hands, positions(cards, game, hands))
    rows = COVER_ALL_ROWS[game]
    if isinstance(result, NoQualifier):
        return 0
    assert isinstance(result, Win), result
    return len(rows) - rows.index(result.category)


@pytest.mark.parametrize("game", POKER_GAMES)
def test_highest_row_is_what_resolve_round_pays(game: PokerGame) -> None:
    rng = np.random.default_rng(POKER_GAMES.index(game))
    for hands in cover_all_columns(game):
        deal = deal_of(game, hands)
        decks = shuffled_decks(rng, 300, deal.cards)
        # rounds with a qualifying hand are what matter: keep them all, and a few others
        levels = table_levels(deal, decks).max(axis=1)
        chosen = np.concatenate([np.flatnonzero(levels > 0), np.arange(20)])
        for i in chosen:
            assert levels[i] == settled_level(game, hands, decks[i].tolist()), (game, hands)


def deck_of(*hands: str) -> list[int]:
    return [card.index for text in hands for card in parse_cards(text)]


@pytest.mark.parametrize(
    ("game", "hands", "cards", "row"),
    [
        # FCP: the pay table ranks a royal flush above four nines, the game the reverse
        ("FCP", 2, deck_of("9s9h9d9c2h", "AsKsQsJs3h4d"), "Royal Flush"),
        # FCP dealer's six cards: four aces
        ("FCP", 2, deck_of("2s3s4s5s7h", "AsAhAdAc9h8d"), "Four Aces"),
        # UTH: the dealer counts; the board plays a royal for everyone
        ("UTH", 2, deck_of("2c3d", "4h5h", "AsKsQsJsTs"), "Royal Flush"),
        # MSP: trips from the community for every player
        ("MSP", 2, deck_of("2c3d", "4h9s", "7s7h7d"), "Three of a Kind"),
        # TCP: A-2-3 is a straight; the dealer's straight flush is the highest hand
        ("TCP", 2, deck_of("Ah2s3d", "4h5h6h"), "Straight Flush"),
    ],
)
def test_hand_built_rounds(game: PokerGame, hands: int, cards: list[int], row: str) -> None:
    deal = deal_of(game, hands)
    level = int(table_levels(deal, np.array([cards], dtype=np.uint8)).max())
    rows = COVER_ALL_ROWS[game]
    assert level == len(rows) - rows.index(row) == settled_level(game, hands, cards)


def test_hand_levels_of_no_qualifier() -> None:
    hand = np.array([deck_of("2c3d5h7s9c")], dtype=np.uint8)
    assert hand_levels("CSP", hand).tolist() == [0]


# ---------------------------------------------------------------------------------------
# Exact columns


def check_exact(column: ColumnOdds) -> None:
    """Fractions in lowest terms that add up, and the house edge they imply."""
    assert column.exact
    assert column.rounds is None
    assert column.std_error is None
    fractions = [row.fraction for row in column.rows]
    assert all(f is not None for f in fractions)
    none = column.no_qualifier_fraction
    assert none is not None
    assert sum(f for f in fractions if f is not None) + none == 1
    back = sum(
        Fraction(row.pays + 1) * row.fraction for row in column.rows if row.fraction is not None
    )
    assert column.house_edge_fraction == 1 - back
    assert column.house_edge == pytest.approx(float(1 - back), abs=1e-15)


@pytest.mark.parametrize(
    ("game", "hands"),
    [("LIR", 1), ("MSP", 1), ("LIR", 2), ("MSP", 2), ("CSP", 2), ("FCP", 2), ("TCP", 2)],
)
def test_exact_columns_add_up(game: PokerGame, hands: int) -> None:
    check_exact(column_odds(game, hands))


def test_one_let_it_ride_hand_by_hand() -> None:
    """One five-card hand, the pay table's 1-hand column: the return by hand, exactly."""
    pays = dict(zip(paytable("LIR").rows, (r[-1] for r in paytable("LIR").pays), strict=True))
    counts = dict(zip(reversed(COVER_ALL_ROWS["LIR"]), FIVE_CARD, strict=True))
    back = sum(Fraction(counts[row]) * Fraction(pays[row] + 1) for row in counts) / C(52, 5)
    column = column_odds("LIR", 1)
    assert column.house_edge_fraction == 1 - back == Fraction(71333, 649740)


# ---------------------------------------------------------------------------------------
# Simulation against the exact columns, and the remainder estimator against a plain one


def binomial_close(p_hat: float, p: float, n: int) -> bool:
    return abs(p_hat - p) <= 4.5 * math.sqrt(max(p * (1 - p), 1 / n) / n) + 1e-12


@pytest.mark.parametrize(
    ("game", "hands", "rounds"),
    [("TCP", 2, 400_000), ("CSP", 2, 300_000), ("FCP", 2, 300_000), ("LIR", 2, 300_000),
     ("MSP", 2, 300_000), ("LIR", 1, 300_000)],
)  # fmt: skip
def test_plain_simulation_agrees_with_exact_columns(
    game: PokerGame, hands: int, rounds: int
) -> None:
    exact = column_odds(game, hands)
    sample = simulate(deal_of(game, hands), rounds, seed=11)
    assert abs((1 - sample.x) - exact.house_edge) <= 4 * sample.x_se
    # each row: the highest-hand frequencies within binomial error of the exact chances
    by_level = list(reversed(exact.rows))
    for level, count in enumerate(sample.highest):
        p = exact.no_qualifier if level == 0 else by_level[level - 1].probability
        assert binomial_close(count / rounds, p, rounds), (game, hands, level)


def test_plain_simulation_agrees_with_exact_uth_two_hands() -> None:
    exact = column_odds("UTH", 2)
    check_exact(exact)
    sample = simulate(deal_of("UTH", 2), 300_000, seed=12)
    assert abs((1 - sample.x) - exact.house_edge) <= 4 * sample.x_se
    assert binomial_close(sample.highest[0] / 300_000, exact.no_qualifier, 300_000)


@pytest.mark.parametrize(
    ("game", "hands"), [("CSP", 3), ("FCP", 4), ("TCP", 5), ("LIR", 3), ("MSP", 4), ("UTH", 3)]
)
def test_remainder_estimator_agrees_with_plain_simulation(game: PokerGame, hands: int) -> None:
    rounds = 200_000
    column = column_odds(game, hands, rounds=rounds, seed=3)
    assert not column.exact
    assert column.std_error is not None
    plain = simulate(deal_of(game, hands), rounds, seed=4)
    combined = math.hypot(column.std_error, plain.x_se)
    assert abs(column.house_edge - (1 - plain.x)) <= 4 * combined
    # the remainder estimator is the more precise one by far
    assert column.std_error < plain.x_se / 3
    by_level = list(reversed(column.rows))
    for level, count in enumerate(plain.highest):
        p = column.no_qualifier if level == 0 else by_level[level - 1].probability
        assert binomial_close(count / rounds, p, rounds), (game, hands, level)


def test_a_seed_reproduces_a_column_and_another_seed_does_not() -> None:
    one = column_odds("CSP", 4, rounds=50_000, seed=1)
    assert column_odds("CSP", 4, rounds=50_000, seed=1) == one
    assert column_odds("CSP", 4, rounds=50_000, seed=2).house_edge != one.house_edge
    assert (one.rounds, one.seed) == (50_000, 1)


# ---------------------------------------------------------------------------------------
# No remainder round dealt: a one-sided bound, not a standard error of 0


def test_remainder_rounds_are_the_rounds_with_three_hands_at_one_level() -> None:
    """Counted again from the same deals: rounds whose third-best hand qualifies."""
    deal = deal_of("TCP", 6)
    rounds = 5_000
    assert rounds <= CHUNK_ROUNDS  # one chunk: the same draws as the simulation's
    levels = table_levels(deal, shuffled_decks(_generator(9, deal), rounds, deal.cards))
    third = np.sort(levels, axis=1)[:, -3]
    sample = simulate(deal, rounds, seed=9)
    assert sample.remainder_rounds == int((third >= 1).sum()) > 0
    assert sample.effective_rounds == rounds


def test_a_column_without_remainder_rounds_gives_a_one_sided_bound() -> None:
    """200 rounds of three Three Card Poker hands (this seed deals no three hands at one
    level): the standard error is 0, which would claim the figure exact; the column gives a
    bound below instead, and a simulation 1,000 times longer lands between the two."""
    few = column_odds("TCP", 3, rounds=200, seed=20261129)
    assert (few.remainder_rounds, few.std_error) == (0, 0.0)
    assert few.edge_drop_95 is not None
    assert few.edge_drop_95 > 0
    many = column_odds("TCP", 3, rounds=200_000, seed=5)
    assert many.remainder_rounds is not None
    assert many.remainder_rounds > 0
    assert many.edge_drop_95 is None
    assert many.std_error is not None
    assert many.std_error > 0
    # The remainder only adds return: the edge shown is an upper bound, the drop a lower one.
    assert few.house_edge - few.edge_drop_95 <= many.house_edge <= few.house_edge
    assert few.house_edge - many.house_edge <= few.edge_drop_95


def test_the_bound_is_the_rule_of_three_or_the_exact_pairs_whichever_is_smaller() -> None:
    """Endless rounds unseen: every level takes the rule of three, so the bound is the most a
    round can add (E(H) at the top row's return) times 3 / n. Two rounds: the exact pairs
    alone, which must still cover the remainder a long simulation measures."""
    deal = deal_of("TCP", 4)
    pieces = exact_pieces("TCP")
    top_back = paytable("TCP").column(4)[0].pays + 1

    def unseen(n: int) -> Sample:
        return Sample(n, (0.0,) * 4, 0.0, 0.0, 0.0, 0.0, remainder_rounds=0, effective_rounds=n)

    many = _unseen_remainder_bound(deal, pieces, unseen(10**12))
    assert many == pytest.approx(float(top_back) * 3 * 3 / 10**12)  # E(4) = 3
    pairs_only = _unseen_remainder_bound(deal, pieces, unseen(2))
    assert pairs_only is not None
    assert pairs_only < float(top_back) * 3 * 3 / 2  # the pairs, not the rule of three
    measured = simulate(deal, 300_000, seed=6)
    assert measured.remainder_rounds
    assert measured.y + 4 * measured.y_se <= pairs_only
    seen = Sample(10, (0.0,) * 4, 0.0, 0.0, 0.0, 0.0, remainder_rounds=1, effective_rounds=10)
    assert _unseen_remainder_bound(deal, pieces, seen) is None


def test_stratified_rounds_cover_every_board() -> None:
    """Community games deal every board class at least twice."""
    column = column_odds("MSP", 3, rounds=2)
    assert column.rounds == 2 * len(suit_classes(3)[0]) == 2 * 1755


def test_columns_the_table_lacks_are_refused() -> None:
    with pytest.raises(ColumnError, match="no pay-table column for 9"):
        deal_of("CSP", 9)
    with pytest.raises(ColumnError):
        column_odds("UTH", 1)


def test_suit_classes_count_known_figures() -> None:
    """169 starting hands, 1,755 flops, 134,459 five-card boards up to suits."""
    for k, classes in ((2, 169), (3, 1755), (5, 134459)):
        boards, weights = suit_classes(k)
        assert (len(boards), int(weights.sum())) == (classes, C(52, k))


def test_combinations_array_is_itertools() -> None:
    assert [tuple(r) for r in combinations_array(9, 4)] == list(combinations(range(9), 4))
