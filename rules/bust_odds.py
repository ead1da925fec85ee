"""The exact odds of the Bust Bonus wager, by recursion over the shoe, in fractions.

Conventions (the regulation is silent on them; docs/auditors/choices.md lists them):

* The shoe is ``decks`` full decks; only the dealer's cards leave it (the players' cards
  are ignored: the dealer's hand is then an unbiased draw from a full shoe).
* The wager is made before the up card (SDAR 20:18:15:30.16(4)), so a dealer blackjack is
  simply a hand that does not bust: a loss (rule (9)). There is no peek to condition on.
* The dealer takes the up card and the hole card, then draws by the rule (``S17`` stands
  on every 17, ``H17`` hits soft 17), as ``rules.blackjack`` defines it.
* Outcomes per up card partition the hands: a suited bust and an off-suit bust *other
  than* three eights, three eights suited and off-suit (exactly three cards, all eights:
  possible only under an 8 up, and suited only with 3 decks or more), and no bust.

The reduction that makes it fast, and why it is exact
----------------------------------------------------
Only ranks decide totals, and only "is every card so far of one suit" decides the
column. Suits are symmetric, so call the up card's suit ``s``:

* While every card drawn so far is of suit ``s``, the cards gone are exactly those
  ranks in suit ``s``: of blackjack value ``v`` (``m`` ranks: 4 for ten-values, else 1)
  there remain ``decks*m - k_v`` in suit ``s`` and ``3*decks*m`` in the other suits.
* Once a card of another suit is drawn the hand can never be suited again, and from
  then on only the ranks matter: ``4*decks*m - k_v`` of value ``v`` remain.

So the state is the multiset of values drawn (ten counts) plus one bit, instead of the
shoe's full 52-card composition; the probability of every transition is still the exact
count of cards left over the cards left in the shoe. The same states serve every up card,
and there are only a few thousand of them (the dealer stops by 17), so 6 and 8 decks take
well under a second each.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from rules.blackjack import ACE, TEN, dealer_stands, total_of_values
from rules.bust_bonus import EIGHT, THREE_EIGHTS_CARDS
from rules.errors import ConfigError
from rules.paytables import BUST_BONUS, UP_CARD_ROWS, BustPaytable

SUITS_PER_DECK = 4
CARDS_PER_DECK = 52

# Outcome vector positions.
_SUITED, _OFF_SUIT, _THREE_SUITED, _THREE_OFF_SUIT, _NO_BUST = range(5)
_Vector = tuple[Fraction, Fraction, Fraction, Fraction, Fraction]
_ZERO = Fraction(0)


def ranks_of_value(value: int) -> int:
    """How many ranks share a blackjack value: 4 for 10 (``T J Q K``), else 1."""
    return SUITS_PER_DECK if value == TEN else 1


@dataclass(frozen=True, slots=True, kw_only=True)
class UpCardOdds:
    """The outcome probabilities and expected value of one unit under one up card.

    The five outcome probabilities add up to 1; ``ev`` is the expected net win per unit
    wagered given this up card (a loss is -1, a win pays its odds to 1).
    """

    up_card: str
    probability: Fraction
    suited_bust: Fraction
    off_suit_bust: Fraction
    three_eights_suited: Fraction
    three_eights_off_suit: Fraction
    no_bust: Fraction
    ev: Fraction

    @property
    def bust(self) -> Fraction:
        """The dealer busts, however it pays."""
        return 1 - self.no_bust


@dataclass(frozen=True, slots=True, kw_only=True)
class BustOdds:
    """The whole game for one shoe and dealer's rule: per up card, and overall.

    ``ev`` is the expected net win per unit wagered before the up card is known;
    ``house_edge`` is ``-ev``, the theoretical hold per unit wagered.
    """

    decks: int
    hits_soft_17: bool
    up_cards: tuple[UpCardOdds, ...]
    bust: Fraction
    ev: Fraction
    house_edge: Fraction


def odds_table(decks: int, hits_soft_17: bool, paytable: BustPaytable = BUST_BONUS) -> BustOdds:
    """The exact odds of every up card and the house edge; ``ConfigError`` for decks < 1."""
    if isinstance(decks, bool) or not isinstance(decks, int) or decks < 1:
        raise ConfigError(f"a Bust Bonus shoe holds a whole number of decks >= 1, not {decks!r}")
    rows = []
    for value in range(ACE, TEN + 1):
        vector = _up_card_outcomes(decks, hits_soft_17, value)
        row = paytable.rows[value - 1]
        ev = (
            Fraction(row.suited) * vector[_SUITED]
            + Fraction(row.off_suit) * vector[_OFF_SUIT]
            + Fraction(paytable.three_eights.suited) * vector[_THREE_SUITED]
            + Fraction(paytable.three_eights.off_suit) * vector[_THREE_OFF_SUIT]
            - vector[_NO_BUST]
        )
        rows.append(
            UpCardOdds(
                up_card=UP_CARD_ROWS[value - 1],
                # Every value has 4 cards a deck per rank: P(up) = ranks / 13.
                probability=Fraction(ranks_of_value(value), CARDS_PER_DECK // SUITS_PER_DECK),
                suited_bust=vector[_SUITED],
                off_suit_bust=vector[_OFF_SUIT],
                three_eights_suited=vector[_THREE_SUITED],
                three_eights_off_suit=vector[_THREE_OFF_SUIT],
                no_bust=vector[_NO_BUST],
                ev=ev,
            )
        )
    ev = sum((row.probability * row.ev for row in rows), _ZERO)
    return BustOdds(
        decks=decks,
        hits_soft_17=hits_soft_17,
        up_cards=tuple(rows),
        bust=sum((row.probability * row.bust for row in rows), _ZERO),
        ev=ev,
        house_edge=-ev,
    )


def _up_card_outcomes(decks: int, hits_soft_17: bool, up_value: int) -> _Vector:
    drawn = tuple(1 if value == up_value else 0 for value in range(ACE, TEN + 1))
    return _solver(decks, hits_soft_17)(drawn, True)


@lru_cache(maxsize=8)
def _solver(decks: int, hits_soft_17: bool) -> _Solve:
    """One memoised recursion per shoe and rule, shared by every up card."""
    return _Solve(decks, hits_soft_17)


class _Solve:
    """The outcome vector of a dealer hand, given the values drawn and whether suited."""

    def __init__(self, decks: int, hits_soft_17: bool) -> None:
        self.decks = decks
        self.hits_soft_17 = hits_soft_17
        self.memo: dict[tuple[tuple[int, ...], bool], _Vector] = {}

    def __call__(self, drawn: tuple[int, ...], suited: bool) -> _Vector:
        key = (drawn, suited)
        found = self.memo.get(key)
        if found is None:
            found = self._solve(drawn, suited)
            self.memo[key] = found
        return found

    def _solve(self, drawn: tuple[int, ...], suited: bool) -> _Vector:
        cards = sum(drawn)
        total = total_of_values(
            value
            for value, count in zip(range(ACE, TEN + 1), drawn, strict=True)
            for _ in range(count)
        )
        # The hole card is always dealt; the rule applies from two cards on.
        if cards >= 2 and dealer_stands(total, hits_soft_17=self.hits_soft_17):
            return _terminal(drawn, cards, suited, bust=total.bust)
        left = CARDS_PER_DECK * self.decks - cards
        acc = [_ZERO] * 5
        for index, count in enumerate(drawn):
            ranks = ranks_of_value(index + 1)
            after = (*drawn[:index], count + 1, *drawn[index + 1 :])
            branches: tuple[tuple[int, bool], ...]
            if suited:
                # Every card gone is of the up card's suit: see the module docstring.
                branches = (
                    (ranks * self.decks - count, True),
                    ((SUITS_PER_DECK - 1) * ranks * self.decks, False),
                )
            else:
                branches = ((SUITS_PER_DECK * ranks * self.decks - count, False),)
            for ways, still_suited in branches:
                if ways:
                    p = Fraction(ways, left)
                    child = self(after, still_suited)
                    for i in range(5):
                        acc[i] += p * child[i]
        return (acc[0], acc[1], acc[2], acc[3], acc[4])


def _terminal(drawn: tuple[int, ...], cards: int, suited: bool, *, bust: bool) -> _Vector:
    one, zero = Fraction(1), _ZERO
    if not bust:
        return (zero, zero, zero, zero, one)
    # "Bust with three 8s": exactly three cards, all eights (they always bust: 24).
    if cards == THREE_EIGHTS_CARDS and drawn[EIGHT - 1] == THREE_EIGHTS_CARDS:
        return (zero, zero, one, zero, zero) if suited else (zero, zero, zero, one, zero)
    return (one, zero, zero, zero, zero) if suited else (zero, one, zero, zero, zero)
