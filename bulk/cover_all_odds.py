"""The Cover All Bonus par sheet: for each game and each column of its pay table, how often
the highest hand at the table makes each row, and the house edge.

What is counted (Cover All Bonus rules (3), (4), (6); shuffler-icd.md "Games"): the hands of
one round are dealt from one 52-card deck, as the game deals them (``rules.cover_all
.LAYOUTS``): a player's own cards plus the community cards in Let It Ride, Mississippi Stud
and Ultimate Texas Hold'em, the dealer's hand counted in Caribbean Stud, Four Card Poker,
Three Card Poker and Ultimate Texas Hold'em only. The bet pays on the highest hand's row,
the row read by ``rules.cover_all.cover_all_row`` from the game's own ranking, so the
return depends only on the highest *row* at the table: which hand holds it (the ranking
within a row, the position) never changes what is paid.

The method. Number the rows 1 (lowest) to R (highest), level 0 for a hand that makes none.
For a threshold ``r`` let ``m`` be the number of hands at the table at level ``r`` or
higher. Then for every ``m >= 0``::

    1{m >= 1} = m - C(m, 2) + E(m),   E(m) = (m - 1)(m - 2) / 2 if m >= 1, else 0

(``E`` is 0 for m = 0, 1, 2). Taking expectations over the deal, with ``P`` player hands
and ``D`` (0 or 1) dealer hands::

    Q_r = P(highest >= r) = P q1P + D q1D - C(P, 2) q2PP - P D q2PD + E[E(m)]

where ``q1`` is the chance that one hand of a kind reaches ``r`` and ``q2`` that two given
hands both do. ``q1`` and ``q2`` are computed *exactly* (below); with one or two hands at
the table ``E(m)`` is always 0, so those columns are exact fractions. With three hands or
more only ``E(m)`` is simulated: it is non-zero only when three or more hands reach the
threshold, so the simulated part, and its standard error, are small (measured: a plain simulation
of the payout needs 15 to 7,000 times more rounds for the same precision). With community
cards the simulation is also stratified by board (``simulate_by_board``).

When no simulated round had three hands at one level, every ``E(m)`` drawn was 0 and so is
the standard error: it says nothing then. The column carries instead a one-sided 95 % bound
(``edge_drop_95``): the remainder only adds return, so the house edge is at most the figure
shown, and it is at least that figure less ``sum_r e_r min(E(H) 3 / n, pairs_r (H - 2) / H)``
for ``H`` hands. ``3 / n`` is the rule of three: an event not seen in n independent rounds
has a chance below 3 / n at 95 % (were it higher, not seeing it would have a chance below
``e**-3``); ``E(m) <= E(H)``, so ``E[E(m_r)] <= E(H) P(m_r >= 3)``. And ``pairs_r =
E[C(m_r, 2)]``, the exact ``C(P, 2) q2PP + P D q2PD``, with ``E(m) <= C(m, 2) (H - 2) / H``
for every ``m <= H``: a bound that needs no simulation. The smaller of the two is the most
any distribution of ``m_r`` within both constraints allows (all its mass at ``m = H``).

Exact ``q1``: every hand enumerated (3 to 6 cards), or, with community cards, every board
up to a renaming of the suits (``combos.suit_classes``) with every holding of its remaining
cards. Exact ``q2`` for two disjoint hands from sets A and B (the hands reaching ``r``), by
inclusion-exclusion over the cards they share::

    #{(a, b) : a in A, b in B, a and b disjoint} = sum over card sets T of
        (-1)^|T| N_A(T) N_B(T),   N_X(T) = #{x in X : T is a subset of x}

with ``N`` counted for every T at once by ``np.bincount`` of the subsets' colexicographic
ranks; with community cards the same holds for the own cards, board by board.

The row of each hand is read by ``rules.cover_all.cover_all_row`` from the value of the
batch evaluator (``bulk.evaluator``, equal to ``rules.poker``'s on every hand), so the
highest hand is chosen exactly as ``rules.cover_all.resolve_round`` settles a round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from functools import cache
from itertools import combinations, pairwise
from math import comb, sqrt
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray

from bulk.combos import all_hands, colex_rank, combinations_array, suit_classes
from bulk.evaluator import Cards, batch_evaluator
from rules.cover_all import LAYOUTS, cover_all_row
from rules.events import POKER_GAMES, PokerGame
from rules.paytables import COVER_ALL_ROWS, cover_all_columns, cover_all_paytable
from rules.poker import CATEGORY_SHIFT, RANKINGS, poker_game

DEFAULT_SEED: Final = 20261129
"""The seed of the par sheet's simulation (any integer reproduces its own figures)."""

DEFAULT_ROUNDS: Final = 10_000_000
"""Simulated rounds per column with three hands or more."""

CHUNK_ROUNDS: Final = 1 << 15
"""Rounds dealt at a time; part of what a seed reproduces."""

Kind = Literal["player", "dealer"]
Progress = Callable[[str, int, int], None]
"""``progress(label, done, total)``: how far a long step has come."""


def _quiet(label: str, done: int, total: int) -> None:
    """The default progress: none."""


# ---------------------------------------------------------------------------------------
# Rows as levels


@cache
def level_table(game: PokerGame) -> NDArray[np.int8]:
    """Category index -> level: 0 for no row, 1 for the lowest row .. R for the highest,
    read from ``rules.cover_all.cover_all_row`` (the settlement's own reading)."""
    rows = COVER_ALL_ROWS[game]
    ranking = RANKINGS[game]
    table = np.zeros(len(ranking.categories), dtype=np.int8)
    for category in range(len(ranking.categories)):
        row = cover_all_row(game, category << CATEGORY_SHIFT)
        table[category] = 0 if row is None else len(rows) - rows.index(row)
    return table


def hand_levels(game: PokerGame, hands: Cards) -> NDArray[np.int8]:
    """The level of each whole hand (a row of cards: own cards then community cards)."""
    values = batch_evaluator(RANKINGS[game], hands.shape[1])(hands)
    levels: NDArray[np.int8] = level_table(game)[values >> CATEGORY_SHIFT]
    return levels


# ---------------------------------------------------------------------------------------
# The deal


@dataclass(frozen=True, slots=True)
class Deal:
    """How ``hands`` hands of ``game`` are dealt: ``players`` player hands, ``dealer``
    (0 or 1) dealer hand counted, each with its own cards, and the community cards."""

    game: PokerGame
    hands: int
    players: int
    dealer: int
    player_cards: int
    dealer_cards: int
    community: int

    @property
    def cards(self) -> int:
        """Cards dealt in one round."""
        return self.players * self.player_cards + self.dealer * self.dealer_cards + self.community


def deal_of(game: str, hands: int) -> Deal:
    """The deal of one column (``rules.paytables.ColumnError`` if there is no such column)."""
    g = poker_game(game)
    cover_all_paytable(g, hands)  # raises ColumnError for a column the table lacks
    layout = LAYOUTS[g]
    dealer = int(layout.dealer_cards is not None)
    return Deal(
        game=g,
        hands=hands,
        players=hands - dealer,
        dealer=dealer,
        player_cards=layout.player_cards,
        dealer_cards=layout.dealer_cards or 0,
        community=layout.community_cards,
    )


def whole_hands(deal: Deal, deck: NDArray[np.uint8]) -> list[Cards]:
    """Each counted hand of rounds dealt from shuffled decks (one deck a row): the players
    P1.. first, then the dealer; each hand its own cards then the community cards."""
    community = deck[:, deal.cards - deal.community : deal.cards]
    out = []
    for p in range(deal.players):
        own = deck[:, p * deal.player_cards : (p + 1) * deal.player_cards]
        out.append(np.hstack([own, community]))
    if deal.dealer:
        start = deal.players * deal.player_cards
        out.append(np.hstack([deck[:, start : start + deal.dealer_cards], community]))
    return out


# ---------------------------------------------------------------------------------------
# Exact pieces: q1 and q2 per threshold


@dataclass(frozen=True, slots=True)
class Pieces:
    """Exact chances per level ``r`` (index r - 1): one hand of a kind reaches ``r``
    (``single``), two given hands both do (``pair``, keyed by their kinds)."""

    game: PokerGame
    single: dict[Kind, tuple[Fraction, ...]]
    pair: dict[tuple[Kind, Kind], tuple[Fraction, ...]]


def _subset_counts(
    hands: Cards, levels: NDArray[np.int8], size: int, top: int
) -> NDArray[np.int64]:
    """N(T) for every ``size``-card set T and level r: hands at level >= r that hold T,
    shape ``(C(52, size), top)``."""
    width = comb(52, size)
    counts = np.zeros((width, top), dtype=np.int64)
    for cols in combinations(range(hands.shape[1]), size):
        ranks = colex_rank(hands[:, list(cols)]) if size else np.zeros(len(hands), np.int64)
        counts += np.bincount(ranks * top + (levels - 1), minlength=width * top).reshape(width, top)
    # at level >= r: add up from the top level down
    return np.cumsum(counts[:, ::-1], axis=1)[:, ::-1]


def disjoint_pairs(
    a: tuple[Cards, NDArray[np.int8]], b: tuple[Cards, NDArray[np.int8]], top: int
) -> list[int]:
    """Ordered pairs of disjoint hands (x from a, y from b) both at level >= r, per level r.

    ``a`` and ``b`` are ``(hands, levels)``: distinct increasing rows of cards and each
    row's level (1..top; hands below level 1 never count). Inclusion-exclusion over the
    cards the two hands share (see the module docstring).
    """
    total = np.zeros(top, dtype=object)
    for size in range(min(a[0].shape[1], b[0].shape[1]) + 1):
        na = _subset_counts(a[0], a[1], size, top)
        nb = na if b is a else _subset_counts(b[0], b[1], size, top)
        sign = -1 if size % 2 else 1
        total += sign * np.array([int(x) for x in (na * nb).sum(axis=0)], dtype=object)
    return [int(x) for x in total]


def _plain_pieces(game: PokerGame, progress: Progress) -> Pieces:
    """CSP, FCP, TCP: no community cards, hands enumerated."""
    layout = LAYOUTS[game]
    top = len(COVER_ALL_ROWS[game])
    sizes: dict[Kind, int] = {"player": layout.player_cards, "dealer": layout.dealer_cards or 0}
    qualifying: dict[Kind, tuple[Cards, NDArray[np.int8]]] = {}
    single: dict[Kind, tuple[Fraction, ...]] = {}
    for kind, size in sizes.items():
        if kind == "dealer" and size == sizes["player"]:
            qualifying[kind] = qualifying["player"]
            single[kind] = single["player"]
            continue
        keep_hands, keep_levels = [], []
        counts = np.zeros(top + 1, dtype=np.int64)
        total = comb(52, size)
        done = 0
        for chunk in all_hands(size):
            levels = hand_levels(game, chunk)
            counts += np.bincount(levels, minlength=top + 1)
            good = levels > 0
            keep_hands.append(chunk[good])
            keep_levels.append(levels[good])
            done += len(chunk)
            progress(f"{game}: every {size}-card hand", done, total)
        qualifying[kind] = (np.vstack(keep_hands), np.concatenate(keep_levels))
        single[kind] = tuple(Fraction(int(counts[r:].sum()), total) for r in range(1, top + 1))
    pair: dict[tuple[Kind, Kind], tuple[Fraction, ...]] = {}
    for kinds in (("player", "player"), ("player", "dealer")):
        progress(f"{game}: pairs of hands", 0, 1)
        x, y = (sizes[k] for k in kinds)
        pairs = disjoint_pairs(qualifying[kinds[0]], qualifying[kinds[1]], top)
        whole = comb(52, x) * comb(52 - x, y)
        pair[kinds] = tuple(Fraction(n, whole) for n in pairs)
        progress(f"{game}: pairs of hands", 1, 1)
    return Pieces(game, single, pair)


BOARDS_PER_STEP: Final = 1024


def _community_pieces(game: PokerGame, progress: Progress) -> Pieces:
    """LIR, MSP, UTH: every board up to suits, every holding of the cards left.

    Player and dealer hands (UTH) are dealt alike, so one kind covers both.
    """
    layout = LAYOUTS[game]
    top = len(COVER_ALL_ROWS[game])
    board_size, own = layout.community_cards, layout.player_cards
    left = 52 - board_size
    boards, weights = suit_classes(board_size)
    local = combinations_array(left, own)  # holdings, as indexes into the cards left
    holdings = len(local)
    subsets = {
        size: np.stack(
            [colex_rank(local[:, list(cols)], left) for cols in combinations(range(own), size)],
            axis=1,
        )
        for size in range(1, own)
    }
    singles = np.zeros(top, dtype=object)
    pairs = np.zeros(top, dtype=object)
    for start in range(0, len(boards), BOARDS_PER_STEP):
        board = boards[start : start + BOARDS_PER_STEP]
        weight = weights[start : start + BOARDS_PER_STEP]
        n = len(board)
        free = np.ones((n, 52), dtype=bool)
        np.put_along_axis(free, board.astype(np.intp), False, axis=1)
        rest = np.nonzero(free)[1].reshape(n, left).astype(np.uint8)
        hands = np.concatenate(
            [rest[:, local], np.broadcast_to(board[:, None, :], (n, holdings, board_size))],
            axis=2,
        ).reshape(n * holdings, own + board_size)
        levels = hand_levels(game, hands).reshape(n, holdings)
        # at[b, r - 1]: holdings of board b at level >= r
        at = np.stack([(levels >= r).sum(axis=1) for r in range(1, top + 1)], axis=1)
        # sum over T of (-1)^|T| N(T)^2: T empty gives at^2, T a whole holding gives at
        square = at.astype(np.int64) ** 2 + (-1) ** own * at
        b_idx, m_idx = np.nonzero(levels)
        lv = levels[b_idx, m_idx].astype(np.int64) - 1
        for size, ranks in subsets.items():
            width = comb(left, size)
            keys = ((b_idx[:, None] * top + lv[:, None]) * width + ranks[m_idx]).ravel()
            n_t = np.bincount(keys, minlength=n * top * width).reshape(n, top, width)
            n_t = np.cumsum(n_t[:, ::-1], axis=1)[:, ::-1]
            square += (-1) ** size * (n_t.astype(np.int64) ** 2).sum(axis=2)
        for r in range(top):
            singles[r] += int((weight * at[:, r]).sum())
            pairs[r] += sum(int(w) * int(s) for w, s in zip(weight, square[:, r], strict=True))
        progress(f"{game}: every board and holding", start + n, len(boards))
    hands_total = comb(52, board_size) * comb(left, own)
    pair_total = hands_total * comb(left - own, own)
    single = tuple(Fraction(int(x), hands_total) for x in singles)
    pair = tuple(Fraction(int(x), pair_total) for x in pairs)
    return Pieces(
        game,
        {"player": single, "dealer": single},
        {("player", "player"): pair, ("player", "dealer"): pair},
    )


_PIECES: dict[PokerGame, Pieces] = {}


def exact_pieces(game: str, progress: Progress = _quiet) -> Pieces:
    """The exact ``q1`` and ``q2`` of ``game`` (computed once per process)."""
    g = poker_game(game)
    if g not in _PIECES:
        compute = _community_pieces if LAYOUTS[g].community_cards else _plain_pieces
        _PIECES[g] = compute(g, progress)
    return _PIECES[g]


# ---------------------------------------------------------------------------------------
# A column


@dataclass(frozen=True, slots=True, kw_only=True)
class RowOdds:
    """One pay-table row: how often the highest hand makes it. ``fraction`` when exact."""

    hand: str
    pays: Decimal
    probability: float
    fraction: Fraction | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnOdds:
    """One column of the par sheet (``hands`` total hands).

    Exact columns carry fractions (``house_edge_fraction``, each row's ``fraction``) and no
    rounds; simulated ones the rounds, the seed and the standard error of the house edge.
    ``house_edge`` is 1 minus the expected return per unit wagered (a win returns the odds
    and the wager, a loss nothing).
    """

    game: PokerGame
    hands: int
    exact: bool
    rounds: int | None
    seed: int | None
    rows: tuple[RowOdds, ...]
    no_qualifier: float
    no_qualifier_fraction: Fraction | None
    house_edge: float
    house_edge_fraction: Fraction | None
    std_error: float | None
    rounds_asked: int | None = None
    """The rounds asked for (``--rounds``); ``rounds`` differs from it when the simulation is
    stratified by board: each board class gets its share of them, rounded, and at least 2."""
    strata: int | None = None
    """The board classes of a stratified simulation, else None."""
    remainder_rounds: int | None = None
    """Simulated rounds in which three hands or more reached one level (the only rounds the
    simulation adds to the exact part); None when exact."""
    edge_drop_95: float | None = None
    """When no such round was dealt (``remainder_rounds`` 0, so ``std_error`` 0, which says
    nothing): how far below ``house_edge`` the house edge may be, a one-sided 95 % bound (rule
    of three; the module docstring says how). None otherwise."""

    @property
    def half_width(self) -> float:
        """Half-width of the 95 % confidence interval of the house edge (0 when exact)."""
        return 0.0 if self.std_error is None else 1.959963984540054 * self.std_error


def _returns(deal: Deal) -> tuple[list[Decimal], list[Decimal]]:
    """Per level 1..R: what a unit wager returns when the highest hand is at that level,
    and ``e_r``, the increase over the level below (so the return is sum e_r 1{level >= r})."""
    rows = cover_all_paytable(deal.game, deal.hands)  # highest first
    back = [row.pays + 1 for row in reversed(rows)]
    steps = [back[0], *(b - a for a, b in pairwise(back))]
    return back, steps


def _exact_q(deal: Deal, pieces: Pieces) -> list[Fraction]:
    """Q_r less E[E(m)]: the inclusion-exclusion terms of the first two orders."""
    p, d = deal.players, deal.dealer
    return [
        p * pieces.single["player"][r]
        + d * pieces.single["dealer"][r]
        - comb(p, 2) * pieces.pair["player", "player"][r]
        - p * d * pieces.pair["player", "dealer"][r]
        for r in range(len(COVER_ALL_ROWS[deal.game]))
    ]


def _column(
    deal: Deal,
    q: Sequence[float | Fraction],
    *,
    exact: bool,
    rounds: int | None,
    seed: int | None,
    std_error: float | None,
) -> ColumnOdds:
    rows = cover_all_paytable(deal.game, deal.hands)
    top = len(rows)
    q_up = [*q, 0]
    best = [q_up[r] - q_up[r + 1] for r in range(top)]  # level r + 1 exactly
    back, _ = _returns(deal)
    none = 1 - q[0]
    edge_fraction: Fraction | None = None
    none_fraction: Fraction | None = None
    fractions: list[Fraction | None] = [None] * top
    if exact:
        fractions = [Fraction(x) for x in best]
        ret = sum((Fraction(b) * Fraction(x) for b, x in zip(back, best, strict=True)), Fraction(0))
        edge_fraction, none_fraction = 1 - ret, Fraction(none)
        edge = float(edge_fraction)
    else:
        edge = 1 - sum(float(b) * float(x) for b, x in zip(back, best, strict=True))
    return ColumnOdds(
        game=deal.game,
        hands=deal.hands,
        exact=exact,
        rounds=rounds,
        seed=seed,
        rows=tuple(
            RowOdds(
                hand=row.hand,
                pays=row.pays,
                probability=float(best[top - 1 - i]),
                fraction=fractions[top - 1 - i],
            )
            for i, row in enumerate(rows)
        ),
        no_qualifier=float(none),
        no_qualifier_fraction=none_fraction,
        house_edge=float(edge),
        house_edge_fraction=edge_fraction,
        std_error=std_error,
    )


def _generator(seed: int, deal: Deal) -> np.random.Generator:
    """One stream per (seed, game, column), so a column's figures do not depend on which
    other columns are computed."""
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([seed, POKER_GAMES.index(deal.game), deal.hands]))
    )


def shuffled_decks(rng: np.random.Generator, rounds: int, cards: int) -> NDArray[np.uint8]:
    """The first ``cards`` cards of ``rounds`` independently shuffled decks."""
    decks = np.tile(np.arange(52, dtype=np.uint8), (rounds, 1))
    return rng.permuted(decks, axis=1)[:, :cards]


def table_levels(deal: Deal, deck: NDArray[np.uint8]) -> NDArray[np.int8]:
    """The level of every counted hand of each round: shape ``(rounds, hands)``."""
    return np.stack([hand_levels(deal.game, h) for h in whole_hands(deal, deck)], axis=1)


@dataclass(frozen=True, slots=True)
class Sample:
    """Estimates from simulated rounds: the mean of ``E(m_r)`` per level (``remainder``),
    of the remainder's return ``y`` and of the plain payout ``x`` (what a unit wager
    returns), each mean with its standard error; ``highest`` counts the rounds by the
    level of their highest hand (0: none qualifies; plain simulation only, else empty)."""

    rounds: int
    remainder: tuple[float, ...]
    y: float
    y_se: float
    x: float
    x_se: float
    highest: tuple[int, ...] = ()
    strata: int | None = None
    """Board classes dealt (a simulation stratified by board), else None."""
    remainder_rounds: int | None = None
    """Rounds in which three hands or more reached one level (``E(m_r)`` above 0)."""
    effective_rounds: float | None = None
    """The ``n`` of the rule of three: the rounds, or with strata the fewest rounds dealt per
    unit of probability (``min k_s / p_s``), so that ``sum k_s pi_s >= n * P(remainder)``."""


def _figures(
    deal: Deal, deck: NDArray[np.uint8]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.int8]]:
    """Per round: ``E(m_r)`` per level, the remainder's return ``y``, the payout ``x`` and
    the highest level."""
    top = len(COVER_ALL_ROWS[deal.game])
    back, steps = _returns(deal)
    levels = table_levels(deal, deck)
    m = np.stack([(levels >= r).sum(axis=1) for r in range(1, top + 1)], axis=1)
    e = np.where(m >= 1, (m - 1) * (m - 2) // 2, 0).astype(np.int64)
    y = e @ np.array([float(s) for s in steps])
    x = np.array([0.0, *(float(b) for b in back)])[levels.max(axis=1)]
    return e, y, x, levels.max(axis=1)


def _mean_se(total: float, squares: float, n: int) -> tuple[float, float]:
    mean = total / n
    variance = max(squares / n - mean * mean, 0.0) * n / (n - 1)
    return mean, sqrt(variance / n)


def simulate(deal: Deal, rounds: int, seed: int, progress: Progress = _quiet) -> Sample:
    """Deal ``rounds`` rounds of ``deal`` from freshly shuffled decks (seeded)."""
    if rounds < 2:
        raise ValueError(f"a simulation needs at least 2 rounds, not {rounds}")
    rng = _generator(seed, deal)
    top = len(COVER_ALL_ROWS[deal.game])
    remainder = np.zeros(top)
    highest = np.zeros(top + 1, dtype=np.int64)
    y = y2 = x = x2 = 0.0
    done = events = 0
    while done < rounds:
        n = min(CHUNK_ROUNDS, rounds - done)
        e, yr, xr, best = _figures(deal, shuffled_decks(rng, n, deal.cards))
        highest += np.bincount(best, minlength=top + 1)
        remainder += e.sum(axis=0)
        events += int(e.any(axis=1).sum())
        y += float(yr.sum())
        y2 += float((yr * yr).sum())
        x += float(xr.sum())
        x2 += float((xr * xr).sum())
        done += n
        progress(f"{deal.game}, {deal.hands} hands: simulating", done, rounds)
    return Sample(
        rounds,
        tuple(float(v) / rounds for v in remainder),
        *_mean_se(y, y2, rounds),
        *_mean_se(x, x2, rounds),
        tuple(int(v) for v in highest),
        remainder_rounds=events,
        effective_rounds=float(rounds),
    )


BOARDS_PER_BATCH: Final = 4096


def simulate_by_board(deal: Deal, rounds: int, seed: int, progress: Progress = _quiet) -> Sample:
    """Stratified by the community cards: every board (up to suits) is dealt, each about
    ``rounds`` times its share of all boards (at least twice), the holdings drawn at random
    from the cards left; each board's mean is weighted by its exact probability.

    Why: with shared community cards the hands rise and fall together (trips on the board
    give every hand trips), so most of a plain simulation's variance is *which* board
    came; here that part is exact and only the holdings are random.
    """
    if rounds < 2:
        raise ValueError(f"a simulation needs at least 2 rounds, not {rounds}")
    rng = _generator(seed, deal)
    top = len(COVER_ALL_ROWS[deal.game])
    boards, weights = suit_classes(deal.community)
    whole = int(weights.sum())
    share = weights / whole
    repeats = np.maximum(2, np.rint(rounds * share)).astype(np.int64)
    own = deal.cards - deal.community
    left = 52 - deal.community
    remainder = np.zeros(top)
    y = y_var = x = x_var = 0.0
    done, total, events = 0, int(repeats.sum()), 0
    for start in range(0, len(boards), BOARDS_PER_BATCH):
        board = boards[start : start + BOARDS_PER_BATCH]
        k = repeats[start : start + BOARDS_PER_BATCH]
        p = share[start : start + BOARDS_PER_BATCH]
        n = len(board)
        free = np.ones((n, 52), dtype=bool)
        np.put_along_axis(free, board.astype(np.intp), False, axis=1)
        rest = np.nonzero(free)[1].reshape(n, left).astype(np.uint8)
        stratum = np.repeat(np.arange(n), k)
        holdings = rng.permuted(rest[stratum], axis=1)[:, :own]
        e, yr, xr, _ = _figures(deal, np.hstack([holdings, board[stratum]]))
        events += int(e.any(axis=1).sum())
        for r in range(top):
            remainder[r] += float((p * np.bincount(stratum, e[:, r], n) / k).sum())
        for values, add in ((yr, "y"), (xr, "x")):
            sums = np.bincount(stratum, values, n)
            squares = np.bincount(stratum, values * values, n)
            mean = sums / k
            var = np.maximum(squares / k - mean * mean, 0.0) * k / (k - 1)
            if add == "y":
                y += float((p * mean).sum())
                y_var += float((p * p * var / k).sum())
            else:
                x += float((p * mean).sum())
                x_var += float((p * p * var / k).sum())
        done += int(k.sum())
        progress(f"{deal.game}, {deal.hands} hands: simulating", done, total)
    return Sample(
        total,
        tuple(float(v) for v in remainder),
        y,
        sqrt(y_var),
        x,
        sqrt(x_var),
        strata=len(boards),
        remainder_rounds=events,
        effective_rounds=float((repeats / share).min()),
    )


def column_odds(
    game: str,
    hands: int,
    *,
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    progress: Progress = _quiet,
) -> ColumnOdds:
    """The par sheet of one column: exact with one or two hands, else exact to the second
    order of inclusion-exclusion plus a seeded simulation of the rest."""
    deal = deal_of(game, hands)
    pieces = exact_pieces(deal.game, progress)
    q = _exact_q(deal, pieces)
    if deal.hands <= 2:
        return _column(deal, q, exact=True, rounds=None, seed=None, std_error=None)
    run = simulate_by_board if deal.community else simulate
    sample = run(deal, rounds, seed, progress)
    estimated = [float(qr) + e for qr, e in zip(q, sample.remainder, strict=True)]
    column = _column(
        deal,
        estimated,
        exact=False,
        rounds=sample.rounds,
        seed=seed,
        std_error=sample.y_se,
    )
    return replace(
        column,
        rounds_asked=rounds,
        strata=sample.strata,
        remainder_rounds=sample.remainder_rounds,
        edge_drop_95=_unseen_remainder_bound(deal, pieces, sample),
    )


RULE_OF_THREE: Final = 3.0
"""``-ln(0.05)``, rounded up: an event not seen in ``n`` independent rounds has a chance
below ``3 / n`` at 95 % confidence (one-sided)."""


def _unseen_remainder_bound(deal: Deal, pieces: Pieces, sample: Sample) -> float | None:
    """A one-sided 95 % bound on the return the simulation would have added, when it dealt
    no round with a remainder (None when it dealt some: its standard error then holds).

    ``E[E(m_r)]`` is at most ``E(H) * 3 / n`` (the rule of three: no remainder round in
    ``n``) and ``E[C(m_r, 2)] * (H - 2) / H`` (exact: the pairs of hands that reach ``r``).
    """
    if sample.remainder_rounds != 0 or sample.effective_rounds is None:
        return None
    _, steps = _returns(deal)
    p, d = deal.players, deal.dealer
    h = deal.hands
    most = (h - 1) * (h - 2) // 2  # E(m) at m = every hand
    unseen = most * RULE_OF_THREE / sample.effective_rounds
    bound = 0.0
    for r, step in enumerate(steps):
        pairs = (
            comb(p, 2) * pieces.pair["player", "player"][r]
            + p * d * pieces.pair["player", "dealer"][r]
        )
        bound += float(step) * min(unseen, float(pairs * Fraction(h - 2, h)))
    return bound


def game_odds(
    game: str,
    *,
    hands: int | None = None,
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    progress: Progress = _quiet,
) -> list[ColumnOdds]:
    """Every column of ``game`` (most hands first, as the regulation prints them), or only
    ``hands``."""
    columns = [hands] if hands is not None else sorted(cover_all_columns(game), reverse=True)
    return [column_odds(game, n, rounds=rounds, seed=seed, progress=progress) for n in columns]
