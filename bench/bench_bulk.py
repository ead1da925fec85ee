"""Batch hand evaluation (bulk/evaluator.py) beside the scalar evaluators, in one run.

1. Every one of the 133,784,560 seven-card hands: the batch evaluator over all of them
   materialised beforehand (uint8 arrays, about 0.9 GB, made outside the timing), and
   enumeration plus evaluation streamed chunk by chunk (what the exhaustive test does);
   the scalar ``rules.poker.evaluate_standard7`` and treys 0.1.8 on a random sample
   (Python lists and treys' own ints made beforehand), extrapolated to all hands.
2. Per-hand rates for every size the games use (3-card, best 4 of 4/5/6, 5-card, 7-card)
   on the same random hands: batch, and the scalar evaluator of ``rules.poker``.

Run: ``nice -n 19 .venv/bin/python bench/bench_bulk.py [--sample N] [--skip-all]``.
Prints figures; asserts nothing. Medians of several runs (3 for the all-hands figures).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from treys import Card as TreysCard
from treys import Evaluator as TreysEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, median_rate, median_seconds
from bulk.combos import all_hands
from bulk.evaluator import batch_evaluator
from rules.cards import DECK
from rules.poker import (
    FOUR_CARD,
    STANDARD,
    THREE_CARD,
    Ranking,
    evaluate_four_card,
    evaluate_standard5,
    evaluate_standard7,
    evaluate_three_card,
)

ALL_SEVEN = 133_784_560

SIZES: list[tuple[str, Ranking, int, Callable[[Sequence[int]], int]]] = [
    ("3-card (TCP)", THREE_CARD, 3, evaluate_three_card),
    ("best 4 of 4", FOUR_CARD, 4, evaluate_four_card),
    ("best 4 of 5 (FCP player)", FOUR_CARD, 5, evaluate_four_card),
    ("best 4 of 6 (FCP dealer)", FOUR_CARD, 6, evaluate_four_card),
    ("5-card (CSP, LIR, MSP)", STANDARD, 5, evaluate_standard5),
    ("best 5 of 7 (UTH)", STANDARD, 7, evaluate_standard7),
]


def random_hands(rng: np.random.Generator, count: int, size: int) -> np.ndarray:
    """``count`` hands of ``size`` distinct cards."""
    decks = np.tile(np.arange(52, dtype=np.uint8), (count, 1))
    return np.ascontiguousarray(rng.permuted(decks, axis=1)[:, :size])


def all_seven(sample: int) -> None:
    """Section 1: every seven-card hand."""
    batch = batch_evaluator(STANDARD, 7)
    start = time.perf_counter()
    prepared_hands = [list(all_hands(7))]  # a box, emptied afterwards to free 0.9 GB
    made = time.perf_counter() - start
    assert sum(len(c) for c in prepared_hands[0]) == ALL_SEVEN

    def evaluate_all() -> None:
        for chunk in prepared_hands[0]:
            batch(chunk)

    prepared = median_seconds(evaluate_all, repeats=3)
    prepared_hands.clear()
    gc.collect()

    def stream_all() -> None:
        for chunk in all_hands(7):
            batch(chunk)

    streamed = median_seconds(stream_all, repeats=3)

    rng = np.random.default_rng(7)
    hands = random_hands(rng, sample, 7)
    ours = hands.tolist()
    treys_cards = [TreysCard.new(card.code) for card in DECK]
    theirs = [([treys_cards[i] for i in h[:2]], [treys_cards[i] for i in h[2:]]) for h in ours]

    def run_scalar() -> int:
        for h in ours:
            evaluate_standard7(h)
        return len(ours)

    evaluator = TreysEvaluator()

    def run_treys() -> int:
        evaluate = evaluator.evaluate
        for hand, board in theirs:
            evaluate(hand, board)
        return len(theirs)

    scalar_rate = median_rate(run_scalar, repeats=3)
    treys_rate = median_rate(run_treys, repeats=3)
    print(f"all {ALL_SEVEN:,} seven-card hands (seconds)")
    print(f"  {'batch, hands prepared beforehand':<48}{prepared:>8.2f}")
    print(f"  {'batch, enumeration + evaluation streamed':<48}{streamed:>8.2f}")
    print(f"  {'(enumeration alone, once)':<48}{made:>8.2f}")
    print(f"  {'rules.poker scalar (from a sample of ' + f'{sample:,})':<48}"
          f"{ALL_SEVEN / scalar_rate:>8.1f}")  # fmt: skip
    print(f"  {'treys 0.1.8 (from a sample of ' + f'{sample:,})':<48}"
          f"{ALL_SEVEN / treys_rate:>8.1f}")  # fmt: skip
    speed_up = ALL_SEVEN / scalar_rate / prepared
    print(f"  speed-up of the batch over the scalar evaluator: {speed_up:.0f}x")
    print()


def per_size(count: int, scalar_count: int) -> None:
    """Section 2: hands per second for every size."""
    rng = np.random.default_rng(3)
    print(f"hands per second ({count:,} random hands per size; scalar on {scalar_count:,})")
    print(f"  {'hand':<28}{'batch':>14}{'rules.poker':>14}{'ratio':>8}")
    for name, ranking, size, scalar in SIZES:
        hands = random_hands(rng, count, size)
        lists = hands[:scalar_count].tolist()
        batch = batch_evaluator(ranking, size)

        def run_batch(hands: np.ndarray = hands, batch: Callable[..., object] = batch) -> int:
            batch(hands)
            return len(hands)

        def run_scalar(
            lists: list[list[int]] = lists, scalar: Callable[[Sequence[int]], int] = scalar
        ) -> int:
            for h in lists:
                scalar(h)
            return len(lists)

        ours = median_rate(run_batch)
        theirs = median_rate(run_scalar)
        print(f"  {name:<28}{ours:>14,.0f}{theirs:>14,.0f}{ours / theirs:>7.0f}x")


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sample", type=int, default=1_000_000, help="scalar sample size")
    parser.add_argument("--count", type=int, default=4_000_000, help="hands per size")
    parser.add_argument("--skip-all", action="store_true", help="skip the all-hands section")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"numpy {np.__version__}")
    start = time.perf_counter()
    for _, ranking, size, _ in SIZES:
        batch_evaluator(ranking, size)
    print(f"one-time table builds, every size: {time.perf_counter() - start:.2f} s")
    print()
    if not args.skip_all:
        all_seven(args.sample)
    per_size(args.count, min(args.sample, args.count))


if __name__ == "__main__":
    main()
