"""Hand evaluation for the six Cover All Bonus games (shuffler-icd.md, "Games").

Three rankings cover the six games:

* ``STANDARD``: five-card poker. Caribbean Stud, Let It Ride and Mississippi Stud hands are
  exactly five cards; an Ultimate Texas Hold'em hand is the best five of seven.
* ``FOUR_CARD``: Four Card Poker, the best four of five (players) or six (dealer). Four of a
  kind ranks above a straight flush, three of a kind above a flush, a flush above a straight
  (the game's own ranking; docs/auditors/choices.md); A-K-Q-J of one suit is its royal flush, four
  aces its top hand.
* ``THREE_CARD``: Three Card Poker. Straight flush, three of a kind, straight, flush, pair;
  A-K-Q suited is its royal flush.

Aces are high, and also low in exactly one straight per ranking: A-2-3-4-5, A-2-3-4 and
A-2-3, each the lowest straight of its size (the usual house rule; the specs are silent).

Cards are ints here, ``rules.cards.Card.index`` (0..51, rank-major), so ``i >> 2`` is the
rank (0 = deuce .. 12 = ace) and ``i & 3`` the suit. A hand's *value* is an int: higher is
better under its game's ranking and equal values are equal hands. ``value >> CATEGORY_SHIFT``
indexes the ranking's ``categories`` (lowest first); the low bits hold the tie-break ranks,
four bits each, most significant first.

Speed comes from tables built once: a card's key adds ``1 << 3 * rank`` (above bit 16) and
``1 << 4 * suit`` (below), so the sum of a hand's keys holds its rank multiset (the table
key) and its suit counts (a flush test with one add and one mask). Best-of-seven needs no
subsets: the non-flush value of a multiset of seven ranks is the best of its six-rank
sub-multisets, and so on down to five, filled in once by that recurrence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations, combinations_with_replacement
from typing import Final

from rules.errors import HandError
from rules.events import POKER_GAMES, PokerGame


def poker_game(game: str) -> PokerGame:
    """``game`` as a poker game code (``HandError`` for anything else, ``BJ`` included)."""
    for known in POKER_GAMES:
        if game == known:
            return known
    raise HandError(
        f"no Cover All Bonus for game {game!r}: it is offered with {', '.join(POKER_GAMES)}"
    )


CATEGORY_SHIFT: Final = 20
"""``value >> CATEGORY_SHIFT`` is a hand's category index (five tie-break ranks below)."""

ACE: Final = 12
_SUIT_BITS: Final = 16
_CARD_KEY: Final[tuple[int, ...]] = tuple(
    (1 << (3 * (i >> 2) + _SUIT_BITS)) | (1 << (4 * (i & 3))) for i in range(52)
)
# Adding 8 - n to each suit nibble sets its top bit exactly when that suit holds n cards
# (nibbles never carry: at most 7 cards of a suit).
_FLUSH5: Final = 0x3333
_FLUSH4: Final = 0x4444
_FLUSH3: Final = 0x5555
_TOP_BITS: Final = 0x8888


def _pack(category: int, ranks: Sequence[int]) -> int:
    """A value: the category, then up to five tie-break ranks, most significant first."""
    value = category
    for i in range(5):
        value = (value << 4) | (ranks[i] if i < len(ranks) else 0)
    return value


def _groups(ranks: Sequence[int]) -> list[tuple[int, int]]:
    """``(count, rank)`` pairs, the most cards first, then the higher rank."""
    counts: dict[int, int] = {}
    for r in ranks:
        counts[r] = counts.get(r, 0) + 1
    return sorted(((n, r) for r, n in counts.items()), reverse=True)


def _straight_high(distinct: Sequence[int]) -> int | None:
    """The high rank of a straight made by these distinct ranks (all of them), else None.

    The wheel (ace low) is the lowest straight of its size: its high card is the top of the
    run below the ace (5 for A-2-3-4-5, 4 for A-2-3-4, 3 for A-2-3).
    """
    ordered = sorted(distinct, reverse=True)
    n = len(ordered)
    if ordered[0] - ordered[-1] == n - 1:
        return ordered[0]
    if ordered[0] == ACE and ordered[1] == n - 2 and ordered[-1] == 0:
        return n - 2
    return None


@dataclass(frozen=True, slots=True, eq=False)
class Ranking:
    """One game's hand ranking: its category names (lowest first) and hand size.

    Compared by identity (there are three, made once), which keeps it a cheap dict key.
    """

    name: str
    categories: tuple[str, ...]
    hand_size: int

    def category(self, value: int) -> str:
        """The category name of a value of this ranking."""
        return self.categories[value >> CATEGORY_SHIFT]

    def index(self, name: str) -> int:
        """The category index of ``name`` (``HandError`` if the ranking has no such hand)."""
        try:
            return self.categories.index(name)
        except ValueError:
            raise HandError(f"{self.name} ranking has no hand {name!r}") from None


STANDARD: Final = Ranking(
    "five-card poker",
    (
        "High Card",
        "Pair",
        "Two Pair",
        "Three of a Kind",
        "Straight",
        "Flush",
        "Full House",
        "Four of a Kind",
        "Straight Flush",
        "Royal Flush",
    ),
    5,
)
"""Five-card poker (CSP, LIR, MSP; UTH best five of seven)."""

FOUR_CARD: Final = Ranking(
    "Four Card Poker",
    (
        "High Card",
        "Pair",
        "Two Pair",
        "Straight",
        "Flush",
        "Three of a Kind",
        "Straight Flush",
        "Royal Flush",
        "Four of a Kind",
        "Four Aces",
    ),
    4,
)
"""Four Card Poker: four of a kind over straight flush, trips over flush over straight."""

THREE_CARD: Final = Ranking(
    "Three Card Poker",
    (
        "High Card",
        "Pair",
        "Flush",
        "Straight",
        "Three of a Kind",
        "Straight Flush",
        "Royal Flush",
    ),
    3,
)
"""Three Card Poker: straight flush, three of a kind, straight, flush, pair."""

RANKINGS: Final[dict[PokerGame, Ranking]] = {
    "CSP": STANDARD,
    "FCP": FOUR_CARD,
    "LIR": STANDARD,
    "MSP": STANDARD,
    "TCP": THREE_CARD,
    "UTH": STANDARD,
}
"""Each poker game's ranking."""


# ---------------------------------------------------------------------------------------
# Values of exact-size hands from their ranks (used to build the tables)


def _standard_value(ranks: Sequence[int], suited: bool) -> int:
    cat = STANDARD.index
    groups = _groups(ranks)
    shape = tuple(n for n, _ in groups)
    order = [r for _, r in groups]
    if shape == (1, 1, 1, 1, 1):
        high = _straight_high(order)
        if high is not None:
            if suited:
                return _pack(cat("Royal Flush" if high == ACE else "Straight Flush"), [high])
            return _pack(cat("Straight"), [high])
        return _pack(cat("Flush" if suited else "High Card"), order)
    name = {
        (4, 1): "Four of a Kind",
        (3, 2): "Full House",
        (3, 1, 1): "Three of a Kind",
        (2, 2, 1): "Two Pair",
        (2, 1, 1, 1): "Pair",
    }[shape]
    return _pack(cat(name), order)


def _four_card_value(ranks: Sequence[int], suited: bool) -> int:
    cat = FOUR_CARD.index
    groups = _groups(ranks)
    shape = tuple(n for n, _ in groups)
    order = [r for _, r in groups]
    if shape == (1, 1, 1, 1):
        high = _straight_high(order)
        if high is not None:
            if suited:
                return _pack(cat("Royal Flush" if high == ACE else "Straight Flush"), [high])
            return _pack(cat("Straight"), [high])
        return _pack(cat("Flush" if suited else "High Card"), order)
    if shape == (4,):
        return _pack(cat("Four Aces" if order[0] == ACE else "Four of a Kind"), order)
    name = {(3, 1): "Three of a Kind", (2, 2): "Two Pair", (2, 1, 1): "Pair"}[shape]
    return _pack(cat(name), order)


def _three_card_value(ranks: Sequence[int], suited: bool) -> int:
    cat = THREE_CARD.index
    groups = _groups(ranks)
    shape = tuple(n for n, _ in groups)
    order = [r for _, r in groups]
    if shape == (1, 1, 1):
        high = _straight_high(order)
        if high is not None:
            if suited:
                return _pack(cat("Royal Flush" if high == ACE else "Straight Flush"), [high])
            return _pack(cat("Straight"), [high])
        return _pack(cat("Flush" if suited else "High Card"), order)
    name = {(3,): "Three of a Kind", (2, 1): "Pair"}[shape]
    return _pack(cat(name), order)


def _rank_key(ranks: Sequence[int]) -> int:
    return sum(1 << (3 * r) for r in ranks)


def _multisets(size: int) -> Iterator[tuple[int, ...]]:
    """Every multiset of ``size`` ranks that one deck can hold (at most four of a rank)."""
    for ranks in combinations_with_replacement(range(13), size):
        if all(ranks.count(r) <= 4 for r in set(ranks)):
            yield ranks


def _table(size: int, value: Callable[[Sequence[int], bool], int]) -> dict[int, int]:
    return {_rank_key(m): value(m, False) for m in _multisets(size)}


def _flush_table(size: int, value: Callable[[Sequence[int], bool], int]) -> dict[int, int]:
    """Suited values by rank key, for ``size`` cards of one suit."""
    return {_rank_key(ranks): value(ranks, True) for ranks in combinations(range(13), size)}


def _best_of_more(
    table: dict[int, int], multisets: Callable[[int], Iterator[Sequence[int]]], sizes: Sequence[int]
) -> dict[int, int]:
    """Extend ``table`` to larger ``sizes``: a multiset's value is the best of those one rank
    smaller (so, by induction, the best of its sub-multisets of the table's size)."""
    out: dict[int, int] = {}
    below = table
    for size in sizes:
        level: dict[int, int] = {}
        for m in multisets(size):
            key = _rank_key(m)
            level[key] = max(below[key - (1 << (3 * r))] for r in set(m))
        out.update(level)
        below = level
    return out


def _distinct(size: int) -> Iterator[tuple[int, ...]]:
    return combinations(range(13), size)


_STD5: Final = _table(5, _standard_value)
_STD_FLUSH: Final = _flush_table(5, _standard_value)
_STD_FLUSH.update(_best_of_more(_STD_FLUSH, _distinct, (6, 7)))
_FOUR: Final = _table(4, _four_card_value)
_FOUR_FLUSH: Final = _flush_table(4, _four_card_value)
_THREE: Final = _table(3, _three_card_value)
_THREE_FLUSH: Final = _flush_table(3, _three_card_value)
_STD7: dict[int, int] = {}


def _standard7_table() -> dict[int, int]:
    """Non-flush values of seven ranks, the best of their five-rank sub-multisets.

    Built once, by ``build_standard7`` (the daemon's start calls it, through
    ``rules.table.warm_up``, for an Ultimate Texas Hold'em table) or else on first use: a
    fifth to half a second, which a table that never deals Ultimate Texas Hold'em never
    pays, and which a first round must not pay either (link-layer.md: ACK within 250 ms).
    """
    if not _STD7:
        _STD7.update(_best_of_more(_STD5, _multisets, (6, 7)))
    return _STD7


def build_standard7() -> None:
    """Build the seven-card table now, if it is not built yet (``evaluate_standard7``)."""
    _standard7_table()


def standard7_built() -> bool:
    """Whether the seven-card table is built: ``evaluate_standard7`` only looks values up."""
    return bool(_STD7)


# ---------------------------------------------------------------------------------------
# Evaluators (cards as ints 0..51, already checked: right count, no duplicates)


def evaluate_standard5(cards: Sequence[int]) -> int:
    """Value of exactly five cards under five-card poker."""
    a, b, c, d, e = cards
    k = _CARD_KEY[a] + _CARD_KEY[b] + _CARD_KEY[c] + _CARD_KEY[d] + _CARD_KEY[e]
    if (k + _FLUSH5) & _TOP_BITS:
        return _STD_FLUSH[k >> _SUIT_BITS]
    return _STD5[k >> _SUIT_BITS]


def evaluate_standard7(cards: Sequence[int]) -> int:
    """Value of the best five of exactly seven cards under five-card poker."""
    key = _CARD_KEY
    a, b, c, d, e, f, g = cards
    k = key[a] + key[b] + key[c] + key[d] + key[e] + key[f] + key[g]
    value = (_STD7 or _standard7_table())[k >> _SUIT_BITS]
    flush = (k + _FLUSH5) & _TOP_BITS
    if flush:
        # One suit holds five or more: its best five is a flush or better, which beats every
        # non-flush hand those seven cards make except four of a kind or a full house.
        suit = (flush.bit_length() - 4) >> 2
        suited = sum(key[x] for x in cards if x & 3 == suit)
        value = max(value, _STD_FLUSH[suited >> _SUIT_BITS])
    return value


def evaluate_four_card(cards: Sequence[int]) -> int:
    """Value of the best four of four to six cards under Four Card Poker."""
    key = _CARD_KEY
    best = -1
    for a, b, c, d in combinations(cards, 4):
        k = key[a] + key[b] + key[c] + key[d]
        table = _FOUR_FLUSH if (k + _FLUSH4) & _TOP_BITS else _FOUR
        value = table[k >> _SUIT_BITS]
        if value > best:
            best = value
    return best


def evaluate_three_card(cards: Sequence[int]) -> int:
    """Value of exactly three cards under Three Card Poker."""
    a, b, c = cards
    k = _CARD_KEY[a] + _CARD_KEY[b] + _CARD_KEY[c]
    if (k + _FLUSH3) & _TOP_BITS:
        return _THREE_FLUSH[k >> _SUIT_BITS]
    return _THREE[k >> _SUIT_BITS]


_EVALUATORS: Final[dict[tuple[Ranking, int], Callable[[Sequence[int]], int]]] = {
    (STANDARD, 5): evaluate_standard5,
    (STANDARD, 7): evaluate_standard7,
    (FOUR_CARD, 4): evaluate_four_card,
    (FOUR_CARD, 5): evaluate_four_card,
    (FOUR_CARD, 6): evaluate_four_card,
    (THREE_CARD, 3): evaluate_three_card,
}


def evaluator(ranking: Ranking, count: int) -> Callable[[Sequence[int]], int]:
    """The evaluator for ``count`` cards under ``ranking`` (``HandError`` if there is none)."""
    try:
        return _EVALUATORS[ranking, count]
    except KeyError:
        raise HandError(f"no {ranking.name} evaluator for {count} cards") from None


def evaluate(ranking: Ranking, cards: Sequence[int]) -> int:
    """The value of the best hand ``cards`` make under ``ranking``."""
    return evaluator(ranking, len(cards))(cards)


def best_cards(ranking: Ranking, cards: Sequence[int]) -> tuple[int, ...]:
    """The cards that make the hand: the first best ``hand_size`` of them, in the given order."""
    size = ranking.hand_size
    if len(cards) == size:
        return tuple(cards)
    return max(combinations(cards, size), key=evaluator(ranking, size))
