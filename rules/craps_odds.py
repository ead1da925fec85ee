"""The exact odds of Bonus Craps: each bet's chance of completing before a seven.

Only the numbers a bet still needs and the seven matter; every other total just rolls
again. From a set ``S`` of numbers still needed, the next roll that matters is the seven
with probability ``p7 / (p7 + p(S))`` (the bet loses) or a number ``x`` of ``S`` with
probability ``p(x) / (p7 + p(S))`` (it then needs ``S - {x}``), so

    P(S) = sum over x in S of  p(x) / (p7 + p(S)) * P(S - {x}),    P({}) = 1,

a recursion over subsets, memoised (2^10 of them for Make 'Em All), in exact fractions.
No simulation. The house edge per unit wagered is ``1 - P * (pays + 1)``: a win returns
the wager and ``pays`` to 1 (20:18:33:12 "Pay Tables"); a seven loses the wager.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cache
from typing import Final

from rules.errors import RollError
from rules.events import CrapsBet
from rules.paytables import BET_RULES, CRAPS_BETS, SEVEN, bonus_craps_odds

WAYS: Final[dict[int, int]] = {
    total: sum(1 for a in range(1, 7) for b in range(1, 7) if a + b == total)
    for total in range(2, 13)
}
"""Of the 36 equally likely rolls of two fair dice, how many make each total."""


@cache
def _complete(needed: frozenset[int]) -> Fraction:
    if not needed:
        return Fraction(1)
    # In ways out of 36; the 36 cancels, so the recursion stays in small integers.
    relevant = WAYS[SEVEN] + sum(WAYS[x] for x in needed)
    return sum((Fraction(WAYS[x], relevant) * _complete(needed - {x}) for x in needed), Fraction(0))


def probability_before_seven(needed: Iterable[int]) -> Fraction:
    """The chance of rolling every total in ``needed`` before a seven (in any order)."""
    numbers = frozenset(needed)
    for total in numbers:
        if type(total) is not int or not 2 <= total <= 12 or total == SEVEN:
            raise RollError(f"{total!r} is not a total of 2 to 12 other than 7")
    return _complete(numbers)


def live_probability(bet: CrapsBet, hit: Iterable[int]) -> Fraction:
    """The chance that ``bet`` completes before a seven, given the numbers already ``hit``.

    ``hit`` may hold any totals of the series (the board's ``numbers_hit``); those of other
    bets change nothing. A complete bet has probability 1. ``RollError`` for a 7 or a total
    that two dice cannot make; ``ConfigError``-free: any ``CrapsBet`` is known.
    """
    seen = frozenset(hit)
    for total in seen:
        if type(total) is not int or not 2 <= total <= 12 or total == SEVEN:
            raise RollError(
                f"{total!r} cannot be a number hit: numbers are the totals 2 to 12 other than "
                "7 (a seven ends the series)"
            )
    if bet not in BET_RULES:
        raise RollError(f"{bet!r} is not a Bonus Craps bet: choose {', '.join(CRAPS_BETS)}")
    return _complete(BET_RULES[bet].numbers - seen)


@dataclass(frozen=True, slots=True, kw_only=True)
class BetOdds:
    """One bet under one pay table: its chance from a fresh series, its pay and its edge."""

    bet: CrapsBet
    name: str
    probability: Fraction
    pays: Decimal
    """To 1, as the pay table writes it."""
    house_edge: Fraction
    """Expected loss per unit wagered: ``1 - probability * (pays + 1)``."""


def odds_table(paytable: int) -> tuple[BetOdds, ...]:
    """The odds of every bet under a pay table, in the seed's order.

    ``ConfigError`` for a pay table the data does not hold.
    """
    pays = bonus_craps_odds(paytable)
    out: list[BetOdds] = []
    for bet in CRAPS_BETS:
        probability = _complete(BET_RULES[bet].numbers)
        win = pays[bet]
        out.append(
            BetOdds(
                bet=bet,
                name=BET_RULES[bet].name,
                probability=probability,
                pays=win,
                # Fraction(Decimal) is exact: the edge is a fraction in lowest terms.
                house_edge=1 - probability * (Fraction(win) + 1),
            )
        )
    return tuple(out)
