"""Blackjack hands: card values, totals with soft aces, and the dealer's rule.

Standard blackjack procedures (SDAR 20:18:15:30.16(7), (11): the dealer's hand "is played
out according to the house rules"): a ten-value card (``T J Q K``) counts 10, an ace 1 or
11, every other card its rank. A total is *soft* when an ace is counted as 11 in it; the
best total counts one ace as 11 whenever that does not take the hand over 21 (two aces
as 11 would be 22, so at most one ever is). A hand over 21 is *bust*.

The dealer draws until the total is 17 or more; where the house rule is to hit soft 17
(``H17``) the dealer also draws on a soft 17. Under ``S17`` the dealer stands on every 17.
The dealer always holds at least two cards (the up card and the hole card,
shuffler-icd.md ``CARD``) before the rule is applied.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.cards import Card

BLACKJACK = 21
DEALER_STANDS_ON = 17

ACE = 1
"""The blackjack value of an ace when counted low."""

TEN = 10
"""The blackjack value of ``T J Q K``."""


def card_value(card: Card) -> int:
    """The card's blackjack value counting an ace as 1: 1..10 (``T J Q K`` are all 10)."""
    if card.rank == 14:
        return ACE
    return min(card.rank, TEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class HandTotal:
    """The best total of a hand and whether an ace is counted 11 in it (``soft``)."""

    total: int
    soft: bool

    @property
    def bust(self) -> bool:
        """Over 21 (SDAR 20:18:15:30.16(5): "the dealer's blackjack hand busts")."""
        return self.total > BLACKJACK


def total_of_values(values: Iterable[int]) -> HandTotal:
    """The best total of blackjack values (ace = 1): one ace becomes 11 if that stays <= 21."""
    hard = 0
    has_ace = False
    for value in values:
        hard += value
        has_ace = has_ace or value == ACE
    if has_ace and hard + 10 <= BLACKJACK:
        return HandTotal(total=hard + 10, soft=True)
    return HandTotal(total=hard, soft=False)


def hand_total(cards: Iterable[Card]) -> HandTotal:
    """The best total of ``cards``, soft aces counted properly (``A A 9`` is soft 21)."""
    return total_of_values(card_value(card) for card in cards)


def is_blackjack(cards: Iterable[Card]) -> bool:
    """Exactly two cards totalling 21: an ace and a ten-value card."""
    hand = tuple(cards)
    return len(hand) == 2 and hand_total(hand).total == BLACKJACK


def dealer_stands(total: HandTotal, *, hits_soft_17: bool) -> bool:
    """Whether the dealer's rule says stand on ``total`` (a bust hand is over: it stands).

    17 or more stands, except a soft 17 where the house hits soft 17.
    """
    if total.total < DEALER_STANDS_ON:
        return False
    return not (hits_soft_17 and total.soft and total.total == DEALER_STANDS_ON)
