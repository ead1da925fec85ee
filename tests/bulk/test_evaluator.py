"""The batch evaluator equals ``rules.poker``'s scalar evaluator: on every 3-, 4-, 5- and
7-card hand, on random best-4-of-6 hands, and it reproduces the textbook counts."""

from __future__ import annotations

import multiprocessing
import os
import struct
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bulk.combos import all_hands, combinations_array
from bulk.evaluator import EvaluatorError, batch_evaluator
from rules.poker import (
    CATEGORY_SHIFT,
    FOUR_CARD,
    STANDARD,
    THREE_CARD,
    Ranking,
    evaluate_four_card,
    evaluate_standard5,
    evaluate_standard7,
    evaluate_three_card,
)

Scalar = Callable[[Sequence[int]], int]


def scalar_values(scalar: Scalar, hands: np.ndarray) -> np.ndarray:
    """The scalar evaluator on every row, as an array. Each row reaches it as a tuple of
    Python ints, unpacked from the array's bytes in C: ``hands.tolist()`` cost twice the
    evaluator itself (0.87 against 0.39 µs a 7-card hand), two thirds of the 7-card test."""
    rows = np.ascontiguousarray(hands, dtype=np.uint8)
    if not np.array_equal(rows, hands):
        raise ValueError("cards must be integers 0..51")
    row = struct.Struct(f"{rows.shape[1]}B")
    return np.fromiter(
        map(scalar, row.iter_unpack(rows.tobytes())), dtype=np.int32, count=len(rows)
    )


def assert_same(ranking: Ranking, scalar: Scalar, hands: np.ndarray) -> np.ndarray:
    """Batch equals scalar on every row; returns the values."""
    batch = batch_evaluator(ranking, hands.shape[1])(hands)
    expected = scalar_values(scalar, hands)
    wrong = np.flatnonzero(batch != expected)
    assert wrong.size == 0, f"{wrong.size} hands differ, first {hands[wrong[0]].tolist()}"
    return batch


def categories(ranking: Ranking, values: np.ndarray) -> Counter[str]:
    """How many hands of each category."""
    counts = np.bincount(values >> CATEGORY_SHIFT, minlength=len(ranking.categories))
    return Counter({name: int(n) for name, n in zip(ranking.categories, counts, strict=True)})


@pytest.mark.exhaustive
def test_every_three_card_hand() -> None:
    values = assert_same(THREE_CARD, evaluate_three_card, combinations_array(52, 3))
    assert categories(THREE_CARD, values) == {
        "Royal Flush": 4,
        "Straight Flush": 44,
        "Three of a Kind": 52,
        "Straight": 720,
        "Flush": 1096,
        "Pair": 3744,
        "High Card": 16440,
    }


@pytest.mark.exhaustive
def test_every_four_card_hand() -> None:
    values = assert_same(FOUR_CARD, evaluate_four_card, combinations_array(52, 4))
    assert len(values) == 270725
    counts = categories(FOUR_CARD, values)
    assert (counts["Four Aces"], counts["Four of a Kind"], counts["Royal Flush"]) == (1, 12, 4)


@pytest.mark.exhaustive
def test_every_five_card_hand_standard_and_best_four_of_five() -> None:
    hands = np.vstack(list(all_hands(5)))
    assert len(hands) == 2598960
    values = assert_same(STANDARD, evaluate_standard5, hands)
    assert categories(STANDARD, values) == {
        "Royal Flush": 4,
        "Straight Flush": 36,
        "Four of a Kind": 624,
        "Full House": 3744,
        "Flush": 5108,
        "Straight": 10200,
        "Three of a Kind": 54912,
        "Two Pair": 123552,
        "Pair": 1098240,
        "High Card": 1302540,
    }
    four = assert_same(FOUR_CARD, evaluate_four_card, hands)
    assert categories(FOUR_CARD, four)["Four Aces"] == 48  # AAAA and any fifth card


@pytest.mark.heavy
def test_random_best_four_of_six_hands() -> None:
    rng = np.random.default_rng(6)
    hands = rng.permuted(np.tile(np.arange(52, dtype=np.uint8), (200_000, 1)), axis=1)[:, :6]
    values = assert_same(FOUR_CARD, evaluate_four_card, hands)
    # the rare top hands are there too, so the comparison reaches them
    assert categories(FOUR_CARD, values)["Four of a Kind"] > 0


def test_best_four_of_six_when_a_flush_and_quads_compete() -> None:
    cases = [
        "AsKsQsJsAhAd",  # royal flush in spades beside three aces
        "KsKhKdKcAsQs",  # four kings
        "2s3s4s5s5h5d",  # straight flush beats three fives
        "As2s3s4sAhAd",  # A-2-3-4 suited: the lowest straight flush
    ]
    from rules.cards import parse_cards

    hands = np.array([[c.index for c in parse_cards(text)] for text in cases], dtype=np.uint8)
    assert_same(FOUR_CARD, evaluate_four_card, hands)


def _seven_card_hands_from(first: int) -> tuple[int, list[int], list[int] | None]:
    """Every 7-card hand whose lowest card is ``first``, batch against scalar: the category
    counts, how many hands, and the first hand that differs (None when none does). Runs in
    a worker process."""
    batch = batch_evaluator(STANDARD, 7)
    counts = np.zeros(len(STANDARD.categories), dtype=np.int64)
    total = 0
    for second in range(first + 1, 47):
        rest = combinations_array(51 - second, 5) + np.uint8(second + 1)
        chunk = np.empty((rest.shape[0], 7), dtype=np.uint8)
        chunk[:, 0] = first
        chunk[:, 1] = second
        chunk[:, 2:] = rest
        values = batch(chunk)
        expected = scalar_values(evaluate_standard7, chunk)
        if not np.array_equal(values, expected):
            return total, counts.tolist(), chunk[np.flatnonzero(values != expected)[0]].tolist()
        counts += np.bincount(values >> CATEGORY_SHIFT, minlength=len(counts))
        total += len(chunk)
    return total, counts.tolist(), None


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.timeout(1800)  # about 70 s beside the quiet suite (67 s of CPU); longer on busy cores
def test_every_seven_card_hand() -> None:
    """All 133,784,560 hands against the scalar evaluator, split by lowest card over one
    process per core (the scalar evaluator is pure Python: about 55 s on one core here)."""
    counts = np.zeros(len(STANDARD.categories), dtype=np.int64)
    total = 0
    workers = len(os.sched_getaffinity(0))
    # fork: spawn would leave multiprocessing's resource tracker (and its pipe) running.
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        # Lowest card first: the largest pieces start first, the small ones fill in.
        for n, part, wrong in pool.imap_unordered(_seven_card_hands_from, range(46)):
            if wrong is not None:
                pytest.fail(f"7-card hand {wrong} differs")
            counts += np.array(part, dtype=np.int64)
            total += n
    assert total == 133784560
    assert dict(zip(STANDARD.categories, counts.tolist(), strict=True)) == {
        "Royal Flush": 4324,
        "Straight Flush": 37260,
        "Four of a Kind": 224848,
        "Full House": 3473184,
        "Flush": 4047644,
        "Straight": 6180020,
        "Three of a Kind": 6461620,
        "Two Pair": 31433400,
        "Pair": 58627800,
        "High Card": 23294460,
    }


@pytest.mark.heavy
def test_random_seven_card_hands() -> None:
    """A fast sample of the slow exhaustive test, for every run while working."""
    rng = np.random.default_rng(7)
    hands = rng.permuted(np.tile(np.arange(52, dtype=np.uint8), (100_000, 1)), axis=1)[:, :7]
    assert_same(STANDARD, evaluate_standard7, hands)


@pytest.mark.heavy
@settings(max_examples=200, deadline=None)
@given(
    st.permutations(range(52)).map(lambda p: p[:7]),
    st.permutations(range(4)),
)
def test_order_and_suits_change_nothing(hand: list[int], suits: list[int]) -> None:
    batch = batch_evaluator(STANDARD, 7)
    relabelled = [(c & ~3) | suits[c & 3] for c in reversed(hand)]
    values = batch(np.array([hand, relabelled], dtype=np.uint8))
    assert values[0] == values[1] == evaluate_standard7(hand)


@pytest.mark.parametrize(
    ("ranking", "size", "cards", "message"),
    [
        (STANDARD, 5, np.zeros((3, 4), dtype=np.uint8), "expected an (n, 5) array"),
        (STANDARD, 5, np.array([[0, 1, 2, 3, 52]]), "cards must be integers 0..51"),
        (STANDARD, 5, np.array([[0, 1, 2, 3, -1]]), "cards must be integers 0..51"),
        (STANDARD, 5, np.zeros((1, 5), dtype=float), "cards must be integers 0..51, got dtype"),
        (THREE_CARD, 3, np.zeros(3, dtype=np.uint8), "expected an (n, 3) array"),
    ],
)
def test_bad_batches_are_refused(
    ranking: Ranking, size: int, cards: np.ndarray, message: str
) -> None:
    with pytest.raises(EvaluatorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        batch_evaluator(ranking, size)(cards)


@pytest.mark.parametrize(("ranking", "size"), [(STANDARD, 6), (THREE_CARD, 5), (FOUR_CARD, 7)])
def test_no_evaluator_for_sizes_no_game_deals(ranking: Ranking, size: int) -> None:
    with pytest.raises(EvaluatorError, match=f"for {size} cards"):
        batch_evaluator(ranking, size)


def test_an_empty_batch_gives_no_values() -> None:
    assert batch_evaluator(STANDARD, 5)(np.zeros((0, 5), dtype=np.uint8)).shape == (0,)
