"""Scripted tables for the screens' tests: poker rounds whose winner is chosen, the other
hands dealt so that none of them can beat it or qualify (issue 29: the longest texts the
contract allows, on the real daemon and its simulator).

A hand dealt as "junk" has no three cards of a rank, fewer cards of one suit than the
game's shortest flush and no run as long as its shortest straight (``JUNK``), counting the
community cards with it: it is under every row of every Cover All pay table (the lowest is
a Three of a Kind, or a three-card Straight at Three Card Poker). The cards are drawn from
one deck with a seeded generator: the same script every run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

RANKS: Final = "23456789TJQKA"
SUITS: Final = "cdhs"
DECK: Final = tuple(r + s for r in RANKS for s in SUITS)

SHAPE: Final[dict[str, tuple[int, int | None, int]]] = {
    "CSP": (5, 5, 0),
    "FCP": (5, 6, 0),
    "LIR": (3, None, 2),
    "MSP": (2, None, 3),
    "TCP": (3, 3, 0),
    "UTH": (2, 2, 5),
}
"""Cards of a player, of the dealer (``None``: the dealer's hand is not counted) and of the
board, per game (shuffler-icd.md, Games)."""

JUNK: Final[dict[str, tuple[int, int]]] = {
    "CSP": (5, 5),
    "FCP": (4, 4),
    "LIR": (5, 5),
    "MSP": (5, 5),
    "TCP": (3, 3),
    "UTH": (5, 5),
}
"""Per game: the fewest cards of one suit, and the shortest run, a junk hand may not hold
(Four Card Poker: a four-card straight flush; Three Card Poker: a three-card straight)."""

ROYAL: Final = ("As", "Ks", "Qs", "Js", "Ts")
STRAIGHT_FLUSH: Final = ("9h", "8h", "7h", "6h", "5h")


def junk(game: str, cards: Sequence[str]) -> bool:
    """Whether ``cards`` (a hand with the board) can win nothing at ``game``."""
    suited, run = JUNK[game]
    ranks = [RANKS.index(c[0]) for c in cards]
    if any(ranks.count(r) >= 3 for r in ranks):
        return False
    if any(sum(1 for c in cards if c[1] == s) >= suited for s in SUITS):
        return False
    held = set(ranks) | ({-1} if RANKS.index("A") in ranks else set())
    return not any(all(r + k in held for k in range(run)) for r in held)


def deal(
    game: str,
    round_id: int,
    hands: int,
    winner: tuple[str, Sequence[str]] | None = None,
    board: Sequence[str] = (),
) -> str:
    """The simulator's lines of one round of ``hands`` hands: ``winner`` (a position and its
    own cards) holds the hand that wins with ``board``; every other hand is junk (and with
    no winner, no hand qualifies). The dealer holds the last hand where it counts."""
    own, dealer, community = SHAPE[game]
    players = [f"P{i}" for i in range(1, 9)]
    seats = [*players[: hands - 1], "DL"] if dealer is not None else players[:hands]
    if winner is not None and winner[0] not in seats:
        raise ValueError(f"{winner[0]} does not play a round of {hands} hands at {game}")
    rng = random.Random(f"{game}-{round_id}")
    for _ in range(10_000):
        taken = set(winner[1] if winner else ()) | set(board)
        pool = [c for c in DECK if c not in taken]
        rng.shuffle(pool)
        cm = list(board) or [pool.pop() for _ in range(community)]
        dealt: dict[str, list[str]] = {}
        for seat in seats:
            if winner is not None and seat == winner[0]:
                dealt[seat] = list(winner[1])
                continue
            count = dealer if seat == "DL" and dealer is not None else own
            dealt[seat] = [pool.pop() for _ in range(count)]
            if not junk(game, dealt[seat] + cm):
                break
        else:
            lines = [f"HAND,{round_id},{seat},{''.join(c)}" for seat, c in dealt.items()]
            if community:
                lines.append(f"HAND,{round_id},CM,{''.join(cm)}")
            lines += [f"ROUND,{round_id},{hands}", f"SETTLE,{round_id}"]
            return "\n".join(lines) + "\n"
    raise AssertionError(f"no junk deal found for {game} round {round_id}")
