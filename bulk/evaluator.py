"""Batch hand evaluation: the values of ``rules.poker``, for millions of hands at once.

A batch is an ``(n, size)`` array of cards as ``rules.cards.Card.index`` (0..51,
rank-major: ``c >> 2`` the rank, ``c & 3`` the suit), one hand a row, distinct cards in each
row (as ``rules.poker``'s evaluators, this does not check for duplicates). The answer is an
``int32`` array of hand values *equal* to ``rules.poker.evaluate(ranking, row)`` for every
row (``tests/bulk/test_evaluator.py`` proves it on every 3-, 4-, 5- and 7-card hand, and on
random 6-card hands), so ``value >> rules.poker.CATEGORY_SHIFT`` is the category and
``rules.cover_all`` reads rows from it unchanged.

How (the idea of Kenneth Shackleton's SKPokerEval, in numpy): every card has one ``uint32``
key, ``RANK_KEYS[rank] + (SUIT_KEYS[suit] << 23)``. The rank keys are chosen so that the
sums of any multiset of up to seven ranks (at most four of a rank) are all different and
below 2**23, the suit keys so that the sums of up to seven suits tell the suit counts
apart. One gather per card and one add per card give a key whose low 23 bits index a table
of non-flush values (the best hand of that rank multiset), and whose top 9 bits index a
table saying which suit, if any, holds a flush. Only the few hands with a flush (3 % of
seven-card hands) then build their suit's 13-bit rank mask and look up the best suited
hand. Best-of-n needs no subsets: the tables are filled with the best hand of each
multiset, from ``rules.poker`` itself, once (about a second for the seven-card table).

Why the maximum is right: a suited set of ranks is worth at least the same ranks off-suit
(a straight becomes a straight flush, high cards a flush), and the non-flush value of a
multiset is reached by any cards of those ranks, so the best hand is the larger of the
non-flush value and the best suited hand of the flush suit.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import combinations, combinations_with_replacement, product
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rules.poker import FOUR_CARD, STANDARD, THREE_CARD, Ranking, evaluate

RANK_KEYS: Final[tuple[int, ...]] = (
    0,
    1,
    5,
    22,
    98,
    453,
    2031,
    8698,
    22854,
    83661,
    262349,
    636345,
    1479181,
)
"""Per rank (deuce first): every multiset of up to 7 ranks has its own sum, below 2**23."""

SUIT_KEYS: Final[tuple[int, ...]] = (0, 1, 8, 57)
"""Per suit (c d h s): every way of splitting up to 7 cards among suits has its own sum."""

SUIT_SHIFT: Final = 23
_RANK_BITS: Final = (1 << SUIT_SHIFT) - 1
_CHUNK: Final = 1 << 15  # rows per step: the working arrays stay in the CPU's cache

SIZES: Final[dict[Ranking, tuple[int, ...]]] = {
    STANDARD: (5, 7),
    FOUR_CARD: (4, 5, 6),
    THREE_CARD: (3,),
}
"""The hand sizes each ranking is evaluated for: CSP/LIR/MSP 5, UTH 7, FCP 4 to 6, TCP 3."""

Cards = NDArray[np.uint8]
"""A batch of hands: ``(n, size)`` card indexes."""
Values = NDArray[np.int32]
"""One ``rules.poker`` value per hand."""


class EvaluatorError(ValueError):
    """A batch that is not hands of the evaluator's size and of cards 0..51."""


def _multisets(size: int) -> list[tuple[int, ...]]:
    return [
        m
        for m in combinations_with_replacement(range(13), size)
        if all(m.count(r) <= 4 for r in set(m))
    ]


def _off_suit(ranks: Sequence[int]) -> list[int]:
    """Cards of these (sorted) ranks with no suit holding more than two of them.

    Card j gets suit j mod 4: cards of one rank are consecutive, so they get different
    suits, and seven cards spread 2-2-2-1, so no flush of three or more (three-card
    hands spread 1-1-1, four-card 1-1-1-1).
    """
    return [4 * r + j % 4 for j, r in enumerate(ranks)]


class BatchEvaluator:
    """Values of ``size``-card hands under ``ranking``, equal to ``rules.poker``'s.

    Build one with ``batch_evaluator`` (cached); call it on an ``(n, size)`` array.
    """

    def __init__(self, ranking: Ranking, size: int) -> None:
        if size not in SIZES.get(ranking, ()):
            raise EvaluatorError(f"no {ranking.name} batch evaluator for {size} cards")
        self.ranking = ranking
        self.size = size
        flush = ranking.hand_size  # cards of one suit that make a flush
        self._card_key = np.array(
            [RANK_KEYS[c >> 2] + (SUIT_KEYS[c & 3] << SUIT_SHIFT) for c in range(52)],
            dtype=np.uint32,
        )
        multisets = _multisets(size)
        sums = [sum(RANK_KEYS[r] for r in m) for m in multisets]
        self._nonflush = np.zeros(max(sums) + 1, dtype=np.int32)
        for m, s in zip(multisets, sums, strict=True):
            self._nonflush[s] = evaluate(ranking, _off_suit(m))
        # The suit that holds a flush, by the suit part of the key (-1: none).
        self._flush_suit = np.full(1 << (32 - SUIT_SHIFT), -1, dtype=np.int8)
        for counts in product(range(size + 1), repeat=4):
            if sum(counts) == size:
                suit_sum = sum(n * k for n, k in zip(counts, SUIT_KEYS, strict=True))
                full = [s for s, n in enumerate(counts) if n >= flush]
                if full:  # at most one: 2 * flush > size for every size evaluated
                    self._flush_suit[suit_sum] = full[0]
        # The best suited hand by the suit's 13-bit rank mask.
        self._flush = np.zeros(1 << 13, dtype=np.int32)
        for mask in range(1 << 13):
            ranks = [r for r in range(13) if mask >> r & 1]
            if flush <= len(ranks) <= size:
                self._flush[mask] = max(
                    evaluate(ranking, [4 * r for r in subset])  # all clubs: suited
                    for subset in combinations(ranks, flush)
                )

    def __call__(self, cards: ArrayLike) -> Values:
        """The value of each row of ``cards`` (``EvaluatorError`` for a bad shape or card)."""
        batch = np.asarray(cards)
        if batch.ndim != 2 or batch.shape[1] != self.size:
            raise EvaluatorError(
                f"expected an (n, {self.size}) array of {self.size}-card hands,"
                f" got shape {batch.shape}"
            )
        if not np.issubdtype(batch.dtype, np.integer):
            raise EvaluatorError(f"cards must be integers 0..51, got dtype {batch.dtype}")
        if batch.size and (batch.min() < 0 or batch.max() > 51):
            raise EvaluatorError("cards must be integers 0..51 (rules.cards.Card.index)")
        out = np.empty(batch.shape[0], dtype=np.int32)
        for start in range(0, batch.shape[0], _CHUNK):
            stop = min(start + _CHUNK, batch.shape[0])
            out[start:stop] = self._chunk(batch[start:stop])
        return out

    def _chunk(self, block: NDArray[np.integer]) -> Values:
        card_key = self._card_key
        key = card_key[block[:, 0]]
        for j in range(1, self.size):
            key += card_key[block[:, j]]
        values: Values = self._nonflush[key & _RANK_BITS]
        suit = self._flush_suit[key >> SUIT_SHIFT]
        flushed = np.flatnonzero(suit >= 0)
        if flushed.size:
            hands = block[flushed].astype(np.int32)
            in_suit = (hands & 3) == suit[flushed, None]
            mask = np.bitwise_or.reduce(np.where(in_suit, 1 << (hands >> 2), 0), axis=1)
            values[flushed] = np.maximum(values[flushed], self._flush[mask])
        return values


@cache
def batch_evaluator(ranking: Ranking, size: int) -> BatchEvaluator:
    """The (cached) batch evaluator for ``size``-card hands under ``ranking``."""
    return BatchEvaluator(ranking, size)
