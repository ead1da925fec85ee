"""The Cover All Bonus: which hand a holding makes, and what a whole round pays.

Cover All Bonus rule (3): the bet wins if the highest hand at the table (the dealer's
included in Caribbean Stud, Four Card Poker, Three Card Poker and Ultimate Texas Hold'em)
is a qualifying hand of the game's pay table; rule (6): only the highest qualifying hand
pays; rule (4): the odds depend on the number of hands in the round.

"Highest" is the pay table's row order first (rule (9): the seed's row order is the rank
order for the bonus, so in Four Card Poker a royal flush outranks four kings although the
game itself ranks quads higher), then the game's full ranking with kickers, then the lower
position (P1 before P8, players before DL).

Before anything pays, the round is checked as shuffler-icd.md "What the host must check"
asks: every card valid, no card twice (one deck), card counts per position as the game
deals them, positions unique and belonging to the game, hand positions equal to ``hands``
and ``hands`` a column of the pay table. A round that fails is ``Flagged`` with a reason a
floor supervisor understands; the reason never names a card (the cards may still be face
down, shuffler-icd.md "Card data is secret until it is face up").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, get_args

from rules.cards import DECK, as_cards, parse_cards
from rules.errors import CardError, HandError
from rules.events import POSITIONS, HandPosition, PokerGame, Position
from rules.paytables import COVER_ALL_ROWS, ColumnError, cover_all_paytable, cover_all_table
from rules.poker import RANKINGS, best_cards, evaluator, poker_game

# ---------------------------------------------------------------------------------------
# The games' deals (shuffler-icd.md, "Games")


@dataclass(frozen=True, slots=True)
class Layout:
    """How a game deals: cards per player, per dealer (None: no dealer hand), community."""

    name: str
    player_cards: int
    dealer_cards: int | None
    community_cards: int

    @property
    def hand_sizes(self) -> tuple[int, ...]:
        """Every card count a whole hand of this game can have (own cards plus community)."""
        sizes = {self.player_cards + self.community_cards}
        if self.dealer_cards is not None:
            sizes.add(self.dealer_cards + self.community_cards)
        return tuple(sorted(sizes))

    def cards_for(self, position: str) -> int | None:
        """Cards the game deals to ``position``, or None if it deals that position nothing."""
        if position == "DL":
            return self.dealer_cards
        if position == "CM":
            return self.community_cards or None
        return self.player_cards if position in PLAYER_POSITIONS else None


LAYOUTS: Final[dict[PokerGame, Layout]] = {
    "CSP": Layout("Caribbean Stud Poker", 5, 5, 0),
    "FCP": Layout("Four Card Poker", 5, 6, 0),
    "LIR": Layout("Let It Ride", 3, None, 2),
    "MSP": Layout("Mississippi Stud", 2, None, 3),
    "TCP": Layout("Three Card Poker", 3, 3, 0),
    "UTH": Layout("Ultimate Texas Hold'em", 2, 2, 5),
}
"""Each poker game's deal, from the table in shuffler-icd.md "Games"."""
_HAND_SIZES: Final = {game: layout.hand_sizes for game, layout in LAYOUTS.items()}

PLAYER_POSITIONS: Final[tuple[Position, ...]] = POSITIONS[:8]
HAND_POSITIONS: Final[tuple[HandPosition, ...]] = get_args(HandPosition)
"""Positions that are hands, in tie-break order: P1 before P8, players before DL."""
_POSITION: Final[dict[str, Position]] = {p: p for p in POSITIONS}


# ---------------------------------------------------------------------------------------
# One hand


def cover_all_row(game: PokerGame, value: int) -> str | None:
    """The highest pay-table row a hand of this value makes, named as the seed does, or None."""
    name = RANKINGS[game].category(value)
    if game == "FCP" and name == "Four of a Kind":
        name = "Four of A Kind (Other)"  # the seed's row: every four of a kind but aces
    return name if name in COVER_ALL_ROWS[game] else None


def cover_all_rank(game: PokerGame, value: int) -> tuple[int, int]:
    """Sort key for "the highest hand at the table": pay-table row first, then the game's
    ranking. Non-qualifying hands rank below every row, among themselves by the game."""
    row = cover_all_row(game, value)
    rows = COVER_ALL_ROWS[game]
    return (len(rows) - rows.index(row) if row is not None else 0, value)


_INDEX: Final[dict[str, int]] = {card.code: card.index for card in DECK}


def _indexes(cards: Sequence[str] | str) -> tuple[int, ...]:
    if not isinstance(cards, str):
        try:
            return tuple(_INDEX[code] for code in cards)  # the usual case: a code each
        except KeyError:
            pass  # a list, or a bad code: let the card parser say which and where
    parsed = parse_cards(cards) if isinstance(cards, str) else as_cards(cards)
    return tuple(card.index for card in parsed)


def hand_value(game: str, cards: Sequence[str] | str) -> int:
    """The game's value of one whole hand (see ``classify`` for what counts as one)."""
    g = poker_game(game)
    layout = LAYOUTS[g]
    idx = _indexes(cards)
    if len(idx) not in _HAND_SIZES[g]:
        sizes = " or ".join(map(str, layout.hand_sizes))
        article = "an" if layout.name[0] in "AEIOU" else "a"
        raise HandError(f"{article} {layout.name} hand has {sizes} cards, got {len(idx)}")
    if len(set(idx)) != len(idx):
        dup = next(i for n, i in enumerate(idx) if i in idx[:n])
        raise HandError(f"card {DECK[dup]} appears twice in one {layout.name} hand (one deck)")
    return evaluator(RANKINGS[g], len(idx))(idx)


def classify(game: str, cards: Sequence[str]) -> str | None:
    """The Cover All category of one hand: the pay-table row name exactly as the seed writes
    it, or None if the hand makes no row.

    ``cards`` are every card of the hand, community cards included: CSP 5, LIR 3 + 2 = 5,
    MSP 2 + 3 = 5, UTH 2 + 5 = 7 (best five), FCP 5 or 6 (best four), TCP 3. Card codes as in
    shuffler-icd.md; a single string without separators (``"AsKsQsJsTs"``) works too.
    Raises ``CardError`` for a bad code and ``HandError`` for an unknown game, a wrong card
    count or a card given twice.
    """
    return cover_all_row(poker_game(game), hand_value(game, cards))


def read_hand(game: str, cards: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A whole hand as a player reads it: ``(best, board)``. ``cards`` as ``classify``
    takes them (the position's own, then the community cards); ``best`` the cards that make
    the hand (five; Four Card Poker four, Three Card Poker three), in the order of
    ``cards``; ``board`` the community cards among them (Ultimate Texas Hold'em 5,
    Mississippi Stud 3, Let It Ride 2; none in the other games)."""
    g = poker_game(game)
    idx = _indexes(cards)
    hand_value(g, cards)  # the same checks and errors as classify
    chosen = set(best_cards(RANKINGS[g], idx))
    codes = tuple(DECK[i].code for i in idx)
    community = LAYOUTS[g].community_cards
    best = tuple(code for i, code in zip(idx, codes, strict=True) if i in chosen)
    return best, codes[len(codes) - community :] if community else ()


# ---------------------------------------------------------------------------------------
# One round


@dataclass(frozen=True, slots=True, kw_only=True)
class Win:
    """The highest hand qualifies: every Cover All Bonus wager wins ``odds`` to 1.

    ``cards`` is every card of the hand (the position's own, then the community cards), so
    ``classify(game, cards) == category``; ``best`` the five, four or three that make it.
    """

    game: PokerGame
    hands: int
    category: str
    position: HandPosition
    cards: tuple[str, ...]
    best: tuple[str, ...]
    odds: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class NoQualifier:
    """The highest hand makes no row of the pay table: the wagers lose.

    ``hand`` names it in the game's ranking (``"Two Pair"``); cards as in ``Win``.
    """

    game: PokerGame
    hands: int
    hand: str
    position: HandPosition
    cards: tuple[str, ...]
    best: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Flagged:
    """The round's content is wrong: nothing pays automatically; ``reason`` says why.

    The reason never names a card.
    """

    game: PokerGame
    hands: int
    reason: str


Resolution = Win | NoQualifier | Flagged
"""What ``resolve_round`` answers."""


def check_hand(
    game: PokerGame, position: str, cards: Sequence[str], earlier: Mapping[str, Sequence[str]]
) -> str | None:
    """Check one position's cards against the game and the positions ``earlier`` received.

    Returns None when it is good, else a reason a floor supervisor understands (naming
    positions, never cards).
    """
    layout = LAYOUTS[game]
    if position not in _POSITION:
        return f"unknown position {position!r}: positions are {', '.join(POSITIONS)}"
    if position in earlier:
        return f"{position} was dealt twice in one round (positions are unique)"
    wanted = layout.cards_for(position)
    if wanted is None:
        what = "no dealer hand" if position == "DL" else "no community cards"
        return f"{position} was dealt, but {layout.name} has {what}"
    try:
        dealt = _indexes(cards)
    except CardError as exc:
        where = f" (card {exc.index + 1})" if exc.index is not None else ""
        return f"{position} was dealt something that is not a card code{where}"
    if len(dealt) != wanted:
        whom = {"DL": "the dealer", "CM": "the community"}.get(position, "each player")
        return f"{position} was dealt {len(dealt)} cards; {layout.name} deals {wanted} to {whom}"
    if len(set(dealt)) != len(dealt):
        return f"{position} holds the same card twice (one deck)"
    for other, other_cards in earlier.items():
        try:
            if set(dealt) & set(_indexes(other_cards)):
                return f"{position} and {other} hold the same card (one deck)"
        except CardError:
            continue  # the earlier position was judged when it came
    return None


def check_deal(game: PokerGame, hands: int, positions: Sequence[str]) -> str | None:
    """Check the round at ``ROUND``: every position the game needs, ``hands`` equal to the
    hand positions (players and DL, not CM), and ``hands`` a column of the pay table."""
    layout = LAYOUTS[game]
    players = [p for p in positions if p in PLAYER_POSITIONS]
    if not players:
        return "no player hand was dealt"
    if layout.dealer_cards is not None and "DL" not in positions:
        return f"the dealer's hand (DL) was not dealt; {layout.name} deals one"
    if layout.community_cards and "CM" not in positions:
        return f"the community cards (CM) were not dealt; {layout.name} deals them"
    dealt = [p for p in HAND_POSITIONS if p in positions]
    if hands != len(dealt):
        were = "was" if len(dealt) == 1 else "were"
        return (
            f"the shuffler reports {hands} hands but {len(dealt)} {were} dealt ({', '.join(dealt)})"
        )
    try:
        cover_all_paytable(game, hands)
    except ColumnError as exc:
        return str(exc)
    return None


def resolve_round(
    game: str, hands: int, cards_by_position: Mapping[str, Sequence[str]]
) -> Resolution:
    """Check a whole round and say what the Cover All Bonus pays.

    ``cards_by_position`` maps P1..P8, DL and CM to that position's own cards (codes, or one
    string without separators). Raises ``HandError`` only for a game without a Cover All
    Bonus; everything wrong with the round itself is a ``Flagged`` result.
    """
    g = poker_game(game)
    earlier: dict[str, Sequence[str]] = {}
    for position, cards in cards_by_position.items():
        reason = check_hand(g, position, cards, earlier)
        if reason is not None:
            return Flagged(game=g, hands=hands, reason=reason)
        earlier[position] = cards
    reason = check_deal(g, hands, list(cards_by_position))
    if reason is not None:
        return Flagged(game=g, hands=hands, reason=reason)

    ranking = RANKINGS[g]
    community = _indexes(cards_by_position["CM"]) if "CM" in cards_by_position else ()
    top: tuple[tuple[int, int], HandPosition, tuple[int, ...]] | None = None
    for position in HAND_POSITIONS:  # tie-break order: a later equal hand never replaces
        if position in cards_by_position:
            hand = _indexes(cards_by_position[position]) + community
            key = cover_all_rank(g, evaluator(ranking, len(hand))(hand))
            if top is None or key > top[0]:
                top = (key, position, hand)
    if top is None:  # not reached: check_deal demands a player's hand
        return Flagged(game=g, hands=hands, reason="no player hand was dealt")
    (_, value), position, hand = top
    codes = tuple(DECK[i].code for i in hand)
    best = tuple(DECK[i].code for i in best_cards(ranking, hand))
    row = cover_all_row(g, value)
    if row is None:
        return NoQualifier(
            game=g,
            hands=hands,
            hand=ranking.category(value),
            position=position,
            cards=codes,
            best=best,
        )
    table = cover_all_table(g)
    odds = table.pays[table.rows.index(row)][table.columns.index(hands)]
    return Win(
        game=g,
        hands=hands,
        category=row,
        position=position,
        cards=codes,
        best=best,
        odds=odds,
    )
