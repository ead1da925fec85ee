"""Hand evaluation speed (docs/developers/benchmarks.md "Hand evaluation", goal: 7-card at
least 2x treys): 5-card and 7-card evaluations per second beside treys in the same run, and
the time to resolve a whole Cover All round.

Both evaluators get the same random hands, each in its own card form made beforehand
(ours: ints 0..51; treys: its packed ints, already split into its ``(hand, board)``
arguments), so only evaluation is timed. "classify" is the
public entry point from card codes, with its checks (count, duplicates, codes). A round is
``resolve_round`` on the largest column of each game (8 hands at CSP and TCP), checks
included; "poker_round" is the state machine taking the same round frame by frame
(``HAND`` each position, ``ROUND``, ``SETTLE``).

Run: ``.venv/bin/python bench/bench_poker.py [hands]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from treys import Card as TreysCard
from treys import Evaluator as TreysEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, median_rate, median_seconds
from rules import poker, poker_round
from rules.cards import DECK
from rules.cover_all import LAYOUTS, classify, resolve_round
from rules.events import (
    POKER_GAMES,
    POSITIONS,
    HandDealt,
    PokerGame,
    Position,
    RoundDealt,
    RoundSettled,
)
from rules.paytables import cover_all_columns


def random_hands(count: int, size: int, rng: random.Random) -> list[list[int]]:
    """``count`` hands of ``size`` distinct cards, as ``Card.index`` ints."""
    return [rng.sample(range(52), size) for _ in range(count)]


Deal = tuple[int, dict[str, list[str]]]
POSITION: dict[str, Position] = {p: p for p in POSITIONS}


def full_round(game: PokerGame, rng: random.Random) -> Deal:
    """A random deal of the game's largest column: the most hands its pay table knows."""
    layout = LAYOUTS[game]
    hands = max(cover_all_columns(game))
    players = hands - (layout.dealer_cards is not None)
    deck = [card.code for card in DECK]
    rng.shuffle(deck)
    cards: dict[str, list[str]] = {}
    for position in POSITIONS[:players]:
        cards[position] = [deck.pop() for _ in range(layout.player_cards)]
    if layout.dealer_cards is not None:
        cards["DL"] = [deck.pop() for _ in range(layout.dealer_cards)]
    if layout.community_cards:
        cards["CM"] = [deck.pop() for _ in range(layout.community_cards)]
    return hands, cards


def main() -> None:  # noqa: C901  a benchmark's script printing its table
    """Print the figures."""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = random.Random(2)
    codes = [card.code for card in DECK]
    treys_cards = [TreysCard.new(code) for code in codes]
    treys = TreysEvaluator()

    start = time.perf_counter()
    poker.evaluate_standard7([0, 5, 10, 15, 20, 25, 30])  # builds the 7-card table once
    build_ms = (time.perf_counter() - start) * 1000

    print(f"machine: {machine()}")
    print(f"hands per run: {count:,}; figures are medians of 5 runs")
    print(f"one-time 7-card table build: {build_ms:.0f} ms")
    print()
    print(f"{'evaluations per second':<34}{'lammer':>12}{'treys':>12}{'ratio':>8}")
    for size in (5, 7):
        hands = random_hands(count, size, rng)
        ours_eval = poker.evaluate_standard5 if size == 5 else poker.evaluate_standard7
        # treys takes (hand, board): split each hand here, outside the timed loop
        theirs = [([treys_cards[i] for i in h[:2]], [treys_cards[i] for i in h[2:]]) for h in hands]
        hand_codes = [[codes[i] for i in h] for h in hands]
        game = "CSP" if size == 5 else "UTH"

        def run_ours(
            hands: list[list[int]] = hands,
            evaluate: Callable[[Sequence[int]], int] = ours_eval,
        ) -> int:
            for h in hands:
                evaluate(h)
            return len(hands)

        def run_treys(theirs: list[tuple[list[int], list[int]]] = theirs) -> int:
            evaluate = treys.evaluate
            for hand, board in theirs:
                evaluate(hand, board)
            return len(theirs)

        def run_classify(hand_codes: list[list[str]] = hand_codes, game: str = game) -> int:
            for h in hand_codes:
                classify(game, h)
            return len(hand_codes)

        ours_rate = median_rate(run_ours)
        treys_rate = median_rate(run_treys)
        classify_rate = median_rate(run_classify)
        print(
            f"{f'{size}-card evaluate':<34}{ours_rate:>12,.0f}{treys_rate:>12,.0f}"
            f"{ours_rate / treys_rate:>7.1f}x"
        )
        print(f"{f'{size}-card classify({game!r}, codes)':<34}{classify_rate:>12,.0f}")
    print()
    print(f"{'resolve a whole round':<34}{'hands':>6}{'resolve_round':>16}{'poker_round':>14}")
    for game in POKER_GAMES:
        rounds = [full_round(game, rng) for _ in range(200)]

        def run_resolve(rounds: list[Deal] = rounds, game: PokerGame = game) -> None:
            for hands, cards in rounds:
                resolve_round(game, hands, cards)

        frames: list[list[poker_round.PokerFact]] = [
            [
                *(
                    HandDealt(round_id=i + 1, position=POSITION[p], cards=tuple(c))
                    for p, c in cards.items()
                ),
                RoundDealt(round_id=i + 1, hands=hands),
                RoundSettled(round_id=i + 1),
            ]
            for i, (hands, cards) in enumerate(rounds)
        ]

        def run_machine(
            frames: list[list[poker_round.PokerFact]] = frames, game: PokerGame = game
        ) -> None:
            state = poker_round.initial_state(game)
            for round_frames in frames:
                for fact in round_frames:
                    state, _ = poker_round.apply(state, fact)

        resolve_us = median_seconds(run_resolve) / len(rounds) * 1e6
        machine_us = median_seconds(run_machine) / len(rounds) * 1e6
        print(f"{game:<34}{rounds[0][0]:>6}{resolve_us:>13.0f} us{machine_us:>11.0f} us")


if __name__ == "__main__":
    main()
