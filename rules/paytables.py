"""The six Cover All Bonus pay tables (Cover All Bonus rule (9)), as data, validated on load.

The cells live in ``rules/data/cover_all.json``, read once with ``importlib.resources``.
Loading checks everything the rest of lammer relies on, so a bad edit fails at import with
a message that names the game and the cell:

* exactly the six poker games; each with its columns (total hands, rule (4)), distinct,
  from most hands to fewest as the regulation prints them;
* the rows are exactly the hands this package ranks for that game, in rank order
  (``COVER_ALL_ROWS``): the seed's row order is the rank order for the bonus;
* every cell an exact decimal written as the regulation writes it (``"1.5"``, never a
  float), positive, one per column, and falling down each column (a higher hand never pays
  less than a lower one for the same number of hands).

The odds are read "to 1" ("All pays are TO 1").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from itertools import pairwise
from typing import Any, Final

from rules.errors import HandError, PaytableError
from rules.events import POKER_GAMES, PayRow, PokerGame
from rules.poker import poker_game

# Caribbean Stud, Let It Ride and Mississippi Stud pay the same seven rows.
_STUD_ROWS: Final = (
    "Royal Flush",
    "Straight Flush",
    "Four of a Kind",
    "Full House",
    "Flush",
    "Straight",
    "Three of a Kind",
)

COVER_ALL_ROWS: Final[dict[PokerGame, tuple[str, ...]]] = {
    "CSP": _STUD_ROWS,
    # The seed capitalises "A" in this row; names are kept exactly as the seed writes them
    # (mqtt-api.md: "hand names exactly as the rows of the seed pay tables").
    "FCP": (
        "Four Aces",
        "Royal Flush",
        "Four of A Kind (Other)",
        "Straight Flush",
        "Three of a Kind",
    ),
    "LIR": _STUD_ROWS,
    "MSP": _STUD_ROWS,
    "TCP": ("Royal Flush", "Straight Flush", "Three of a Kind", "Straight"),
    "UTH": ("Royal Flush", "Straight Flush", "Four of a Kind", "Full House"),
}
"""Each game's qualifying hands, highest first, named exactly as the seed's rows."""

_DECIMAL = re.compile(r"[1-9][0-9]*(\.[0-9]*[1-9])?|0\.[0-9]*[1-9]")


class ColumnError(HandError, PaytableError):
    """A number of hands that is not a column of the game's pay table.

    Both a ``HandError`` (the round's hands are wrong) and a ``PaytableError`` (the table has
    no such column), so callers may catch either. ``columns`` lists the ones there are.
    """

    def __init__(self, message: str, *, game: str, hands: int, columns: tuple[int, ...]) -> None:
        super().__init__(message)
        self.game = game
        self.hands = hands
        self.columns = columns


@dataclass(frozen=True, slots=True)
class Paytable:
    """One game's pay table: ``columns`` as printed (most hands first), ``rows`` highest first,
    ``pays[row][column]`` the odds to 1."""

    game: PokerGame
    title: str
    columns: tuple[int, ...]
    rows: tuple[str, ...]
    pays: tuple[tuple[Decimal, ...], ...]

    def column(self, hands: int) -> tuple[PayRow, ...]:
        """The rows for ``hands`` total hands, highest first (``ColumnError`` if no column)."""
        try:
            j = self.columns.index(hands)
        except ValueError:
            raise ColumnError(
                f"{self.game} Cover All Bonus has no pay-table column for {hands} total hands:"
                f" its columns are {', '.join(map(str, sorted(self.columns)))}",
                game=self.game,
                hands=hands,
                columns=tuple(sorted(self.columns)),
            ) from None
        return tuple(
            PayRow(hand=row, pays=pays[j]) for row, pays in zip(self.rows, self.pays, strict=True)
        )


def _fail(where: str, problem: str) -> PaytableError:
    return PaytableError(f"cover_all.json, {where}: {problem}")


def _parse_game(game: PokerGame, data: Any) -> Paytable:
    where = f"game {game}"
    if not isinstance(data, dict) or set(data) != {"title", "columns", "rows"}:
        raise _fail(where, "expected an object with exactly title, columns and rows")
    title, columns, rows = data["title"], data["columns"], data["rows"]
    if not isinstance(title, str) or not title:
        raise _fail(where, "title must be a non-empty string")
    if (
        not isinstance(columns, list)
        or not columns
        or not all(type(c) is int and 1 <= c <= 9 for c in columns)
    ):
        raise _fail(where, f"columns must be total hands 1..9 (8 players and DL), got {columns!r}")
    if columns != sorted(set(columns), reverse=True):
        raise _fail(where, f"columns must be distinct, most hands first, got {columns!r}")
    expected = COVER_ALL_ROWS[game]
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and set(r) == {"hand", "pays"} for r in rows
    ):
        raise _fail(where, "rows must be objects with exactly hand and pays")
    names = tuple(r["hand"] for r in rows)
    if names != expected:
        raise _fail(where, f"rows must be {list(expected)} in that (rank) order, got {list(names)}")
    pays: list[tuple[Decimal, ...]] = []
    for row in rows:
        cells = row["pays"]
        if not isinstance(cells, list) or len(cells) != len(columns):
            raise _fail(f"{where}, {row['hand']}", f"expected {len(columns)} pays, one a column")
        parsed = []
        for hands, cell in zip(columns, cells, strict=True):
            if not isinstance(cell, str) or not _DECIMAL.fullmatch(cell):
                raise _fail(
                    f"{where}, {row['hand']}, {hands} hands",
                    f"pays {cell!r} is not a positive exact decimal string such as '20' or '1.5'",
                )
            parsed.append(Decimal(cell))
        pays.append(tuple(parsed))
    for j, hands in enumerate(columns):
        column = [p[j] for p in pays]
        if any(high < low for high, low in pairwise(column)):
            raise _fail(
                f"{where}, {hands} hands",
                f"a higher hand pays less than a lower one: {[str(c) for c in column]}",
            )
    return Paytable(game, title, tuple(columns), names, tuple(pays))


def parse_paytables(text: str) -> dict[PokerGame, Paytable]:
    """Parse and validate the pay-table document (``PaytableError`` naming the bad cell)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PaytableError(f"cover_all.json is not JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("games"), dict):
        raise _fail("top level", "expected an object with a games object")
    if document.get("odds") != "to 1":
        raise _fail("top level", 'odds must be "to 1" (rule (9): "All pays are TO 1")')
    games = document["games"]
    if set(games) != set(POKER_GAMES):
        raise _fail("games", f"expected exactly {list(POKER_GAMES)}, got {sorted(games)}")
    return {game: _parse_game(game, games[game]) for game in POKER_GAMES}


@cache
def paytables() -> dict[PokerGame, Paytable]:
    """All six pay tables, loaded from the package data and validated once."""
    text = (resources.files("rules") / "data" / "cover_all.json").read_text("utf-8")
    return parse_paytables(text)


def paytable(game: str) -> Paytable:
    """The whole pay table of ``game`` (``HandError`` for a game without a Cover All Bonus)."""
    return paytables()[poker_game(game)]


def cover_all_paytable(game: str, hands: int) -> tuple[PayRow, ...]:
    """The pay table for ``hands`` total hands (rule (4)), highest hand first.

    Raises ``HandError`` for an unknown game and ``ColumnError`` (a ``HandError`` and a
    ``PaytableError``) when ``hands`` is not a column of the game's table.
    """
    return paytable(game).column(hands)


def cover_all_columns(game: str) -> tuple[int, ...]:
    """The numbers of total hands the game's table has a column for, fewest first."""
    return tuple(sorted(paytable(game).columns))
