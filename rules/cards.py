"""Cards as the shuffler writes them (shuffler-icd.md, "Cards and positions").

A card is two characters: rank ``2 3 4 5 6 7 8 9 T J Q K A`` then suit ``c d h s``.
A list of cards is written without separators: ``AsKsQsJsTs``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.errors import CardError

RANKS = "23456789TJQKA"
SUITS = "cdhs"


@dataclass(frozen=True, slots=True)
class Card:
    """One playing card. ``rank`` is 2..14 (ace high), ``suit`` one of ``c d h s``."""

    rank: int
    suit: str

    def __post_init__(self) -> None:
        if (
            type(self.rank) is not int
            or not 2 <= self.rank <= 14
            or not isinstance(self.suit, str)
            or len(self.suit) != 1
            or self.suit not in SUITS
        ):
            # The text is built from the fields as given: ``self.code`` would index RANKS
            # with the bad rank (an IndexError, or the wrong card for rank 1 or 0).
            raise CardError(
                f"not a card: rank {self.rank!r}, suit {self.suit!r}",
                text=f"{self.rank!r}{self.suit!r}",
            )

    @property
    def code(self) -> str:
        """The card's two-character code, e.g. ``As``."""
        return RANKS[self.rank - 2] + self.suit

    @property
    def index(self) -> int:
        """0..51, rank-major: 2c=0, 2d=1, ..., As=51."""
        return (self.rank - 2) * 4 + SUITS.index(self.suit)

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"Card({self.code!r})"


def _build_deck() -> tuple[Card, ...]:
    return tuple(Card(rank, suit) for rank in range(2, 15) for suit in SUITS)


DECK: tuple[Card, ...] = _build_deck()
"""The 52 cards of one deck, in ``Card.index`` order."""

_BY_CODE: dict[str, Card] = {card.code: card for card in DECK}


def parse_card(text: str, *, index: int | None = None) -> Card:
    """Parse one card code such as ``Td``. Raises ``CardError`` naming the bad text."""
    card = _BY_CODE.get(text)
    if card is None:
        where = f" at card {index + 1}" if index is not None else ""
        raise CardError(
            f"bad card code {text!r}{where}: expected a rank of {RANKS} then a suit of {SUITS}",
            text=text,
            index=index,
        )
    return card


def parse_cards(text: str) -> tuple[Card, ...]:
    """Parse a list written without separators (``AsKsQsJsTs``).

    Raises ``CardError`` naming the bad code and its place (``index``, 0-based); a list of
    odd length that is good up to its end names the piece left over.
    """
    return _parse_list(text, 0)


def _parse_list(text: str, start: int) -> tuple[Card, ...]:
    """``parse_cards`` for a list whose first card is card ``start`` of a longer hand."""
    cards = tuple(
        parse_card(text[i : i + 2], index=start + i // 2) for i in range(0, len(text) - 1, 2)
    )
    if len(text) % 2:
        index = start + len(cards)
        raise CardError(
            f"card list {text!r} has {len(text)} characters (every card is 2):"
            f" {text[-1]!r} at card {index + 1} is not a whole card",
            text=text[-1],
            index=index,
        )
    return cards


def as_cards(cards: Iterable[str | Card]) -> tuple[Card, ...]:
    """Cards from codes or ``Card`` values (a code may also be a whole list, ``AsKs``).

    Raises ``CardError`` naming the bad item and its place among the cards.
    """
    out: list[Card] = []
    for item in cards:
        if isinstance(item, Card):
            out.append(item)
        elif len(item) == 2:
            out.append(parse_card(item, index=len(out)))
        elif len(item) >= 4 and len(item) % 2 == 0:
            out.extend(_parse_list(item, len(out)))
        else:
            # Neither one code nor a whole list ("T", "10s", ""): the item itself is bad.
            raise CardError(
                f"bad card code {item!r} at card {len(out) + 1}: expected a rank of {RANKS}"
                f" then a suit of {SUITS}",
                text=item,
                index=len(out),
            )
    return tuple(out)


def format_cards(cards: Iterable[Card]) -> str:
    """Write cards as the shuffler does, without separators."""
    return "".join(card.code for card in cards)
