"""Every k-card hand as an array, ranks of card subsets, and suit-symmetry classes.

Hands are rows of ``rules.cards.Card.index`` ints in increasing order. ``colex_rank`` numbers
the k-subsets of ``range(n)`` densely (0 .. C(n, k) - 1), so a count per subset is one
``np.bincount``. ``suit_classes`` groups boards that differ only by a renaming of the
suits: every ranking here is the same under such a renaming, so one board of each class,
weighted by the class size, stands for all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from math import comb

import numpy as np
from numpy.typing import NDArray

Hands = NDArray[np.uint8]


@cache
def _combos(n: int, k: int) -> Hands:
    if k == 0:
        return np.zeros((1, 0), dtype=np.uint8)
    parts = []
    for first in range(n - k + 1):
        rest = _combos(n - first - 1, k - 1) + np.uint8(first + 1)
        head = np.full((rest.shape[0], 1), first, dtype=np.uint8)
        parts.append(np.hstack([head, rest]))
    out = np.vstack(parts)
    out.flags.writeable = False
    return out


def combinations_array(n: int, k: int) -> Hands:
    """Every k-subset of ``range(n)`` (n <= 52), one increasing row each, in lexicographic
    order (as ``itertools.combinations``). Read-only and cached: copy before changing."""
    if not 0 <= k <= n <= 52:
        raise ValueError(f"no {k}-subsets of {n} cards")
    return _combos(n, k)


def all_hands(k: int, *, cards: int = 52) -> Iterator[Hands]:
    """Every k-card hand of ``cards`` cards in lexicographic order, in chunks (one per
    first two cards, so a chunk holds at most C(cards - 2, k - 2) hands)."""
    if k < 2:
        yield combinations_array(cards, k)
        return
    for a in range(cards - k + 1):
        for b in range(a + 1, cards - k + 2):
            rest = combinations_array(cards - b - 1, k - 2) + np.uint8(b + 1)
            head = np.empty((rest.shape[0], 2), dtype=np.uint8)
            head[:, 0] = a
            head[:, 1] = b
            yield np.hstack([head, rest])


@cache
def _binomials(n: int, k: int) -> NDArray[np.int64]:
    return np.array([[comb(c, j) for j in range(1, k + 1)] for c in range(n)], dtype=np.int64)


def colex_rank(subsets: NDArray[np.integer], n: int = 52) -> NDArray[np.int64]:
    """Dense index of each increasing row of k elements of ``range(n)``: 0 .. C(n, k) - 1.

    The colexicographic rank sum of C(c_j, j + 1) over the row's elements c_0 < c_1 < ...
    is a bijection between k-subsets and those integers.
    """
    k = subsets.shape[-1]
    if k == 0:
        return np.zeros(subsets.shape[:-1], dtype=np.int64)
    table = _binomials(n, k)
    out = np.zeros(subsets.shape[:-1], dtype=np.int64)
    for j in range(k):
        out += table[subsets[..., j].astype(np.intp), j]
    return out


def suit_masks(hands: NDArray[np.integer]) -> NDArray[np.int64]:
    """Each hand's four 13-bit rank masks, one per suit: shape ``(n, 4)``."""
    ranks = (hands >> 2).astype(np.int64)
    suits = hands & 3
    out = np.zeros((hands.shape[0], 4), dtype=np.int64)
    for s in range(4):
        out[:, s] = np.bitwise_or.reduce(np.where(suits == s, 1 << ranks, 0), axis=1)
    return out


def suit_classes(k: int) -> tuple[Hands, NDArray[np.int64]]:
    """One k-card board per class of boards equal up to renaming the suits, with the number
    of boards in its class (the weights add up to C(52, k)).

    A renaming of the suits permutes a board's four rank masks, so the masks sorted are the
    same for the whole class and differ between classes.
    """
    boards = combinations_array(52, k)
    masks = np.sort(suit_masks(boards), axis=1)
    key = masks[:, 0] | masks[:, 1] << 13 | masks[:, 2] << 26 | masks[:, 3] << 39
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    return boards[first], counts.astype(np.int64)
