"""Errors of the rules core.

One base for the layer; builtins mixed in where they fit, so callers may catch either::

    RulesError(Exception)
    ├── CardError(RulesError, ValueError)       a card code that is not a card
    ├── HandError(RulesError, ValueError)       a hand that cannot be: wrong count, duplicate card
    ├── PaytableError(RulesError, ValueError)   pay-table data that does not validate
    ├── ConfigError(RulesError, ValueError)     a rules setting out of range (pay table, decks)
    ├── RollError(RulesError, ValueError)       a dice fact that cannot be (die, roll id, reason)
    └── DecisionError(RulesError, ValueError)   an illegal stickperson decision; nothing changed

Each carries structured attributes besides its message, so the daemon can log and
answer requests without parsing text.
"""

from __future__ import annotations


class RulesError(Exception):
    """Base of every error raised by the rules core."""


class CardError(RulesError, ValueError):
    """A card code that is not a card (``text`` is the bad text, ``index`` where it was)."""

    def __init__(self, message: str, *, text: str, index: int | None = None) -> None:
        super().__init__(message)
        self.text = text
        self.index = index


class HandError(RulesError, ValueError):
    """A hand that cannot be: wrong number of cards, a duplicate card, an unknown game."""


class PaytableError(RulesError, ValueError):
    """Pay-table data that does not validate (checked when the data is loaded)."""


class ConfigError(RulesError, ValueError):
    """A rules setting out of range: an unknown pay table, a number of decks, a game."""


class RollError(RulesError, ValueError):
    """A dice fact that cannot be: a die or roll id out of range, an unknown reason.

    The codec refuses these before they reach the rules; this guards the rules' own
    contract. ``roll_id`` is the id the fact carried.
    """

    def __init__(self, message: str, *, roll_id: int | None = None) -> None:
        super().__init__(message)
        self.roll_id = roll_id


class DecisionError(RulesError, ValueError):
    """An illegal decision (unknown roll, roll not pending, too late to void). Changes nothing."""

    def __init__(self, message: str, *, roll_id: int | None = None) -> None:
        super().__init__(message)
        self.roll_id = roll_id
