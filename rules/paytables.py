"""The pay tables of the three games, as data, each loaded and validated once at import.

The cells live in ``rules/data/``, read with ``importlib.resources`` (package data: the pay
tables are configuration, not I/O at play). Loading checks everything the rest of lammer
relies on, so a bad edit fails at import with a ``PaytableError`` that names the file and
the cell. Odds are exact decimals written as strings (``"1.5"``, never a JSON number, which
would pass through a float), read "to 1".

* **Cover All Bonus** (rule (9)), ``cover_all.json`` -> ``COVER_ALL``: exactly the six poker
  games; each with its columns (total hands, rule (4)), distinct, from most hands to fewest
  as the regulation prints them; the rows are exactly the hands this package ranks for that
  game, in rank order (``COVER_ALL_ROWS``: the seed's row order is the rank order for the
  bonus); every cell positive, one per column, and falling down each column (a higher hand
  never pays less than a lower one for the same number of hands).
* **Bonus Craps** (SD 20:18:33:12), ``bonus_craps.json`` -> ``BONUS_CRAPS``: the three bets
  (``BET_RULES``: name, clause, the totals each needs before a seven) and the numbered pay
  tables, each giving every bet's odds.
* **Bust Bonus** (SDAR 20:18:15:30.16(12)), ``bust_bonus.json`` -> ``BUST_BONUS``: one row
  per up card (Ace, 2..9, 10) and "Bust with three 8s", each with off-suit and suited odds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from importlib import resources
from itertools import pairwise
from types import MappingProxyType
from typing import Any, Final, get_args

from rules.blackjack import card_value
from rules.cards import Card
from rules.errors import ConfigError, HandError, PaytableError
from rules.events import POKER_GAMES, CrapsBet, PayRow, PokerGame
from rules.poker import poker_game
from rules.text import plural


def _read(name: str) -> str:
    return resources.files("rules").joinpath("data", name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------
# Cover All Bonus (Cover All Bonus rule (9))

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
class CoverAllPaytable:
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
                f"{self.game} Cover All Bonus has no pay-table column for "
                f"{plural(hands, 'total hand')}:"
                f" its columns are {', '.join(map(str, sorted(self.columns)))}",
                game=self.game,
                hands=hands,
                columns=tuple(sorted(self.columns)),
            ) from None
        return tuple(
            PayRow(hand=row, pays=pays[j]) for row, pays in zip(self.rows, self.pays, strict=True)
        )


def _cover_all_fail(where: str, problem: str) -> PaytableError:
    return PaytableError(f"cover_all.json, {where}: {problem}")


def _parse_cover_all_game(game: PokerGame, data: Any) -> CoverAllPaytable:  # noqa: C901  a pay table file checked field by field, one raise each
    where = f"game {game}"
    if not isinstance(data, dict) or set(data) != {"title", "columns", "rows"}:
        raise _cover_all_fail(where, "expected an object with exactly title, columns and rows")
    title, columns, rows = data["title"], data["columns"], data["rows"]
    if not isinstance(title, str) or not title:
        raise _cover_all_fail(where, "title must be a non-empty string")
    if (
        not isinstance(columns, list)
        or not columns
        or not all(type(c) is int and 1 <= c <= 9 for c in columns)
    ):
        raise _cover_all_fail(
            where, f"columns must be total hands 1..9 (8 players and DL), got {columns!r}"
        )
    if columns != sorted(set(columns), reverse=True):
        raise _cover_all_fail(where, f"columns must be distinct, most hands first, got {columns!r}")
    expected = COVER_ALL_ROWS[game]
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and set(r) == {"hand", "pays"} for r in rows
    ):
        raise _cover_all_fail(where, "rows must be objects with exactly hand and pays")
    names = tuple(r["hand"] for r in rows)
    if names != expected:
        raise _cover_all_fail(
            where, f"rows must be {list(expected)} in that (rank) order, got {list(names)}"
        )
    pays: list[tuple[Decimal, ...]] = []
    for row in rows:
        cells = row["pays"]
        if not isinstance(cells, list) or len(cells) != len(columns):
            raise _cover_all_fail(
                f"{where}, {row['hand']}", f"expected {len(columns)} pays, one a column"
            )
        parsed = []
        for hands, cell in zip(columns, cells, strict=True):
            if not isinstance(cell, str) or not _DECIMAL.fullmatch(cell):
                raise _cover_all_fail(
                    f"{where}, {row['hand']}, {hands} hands",
                    f"pays {cell!r} is not a positive exact decimal string such as '20' or '1.5'",
                )
            parsed.append(Decimal(cell))
        pays.append(tuple(parsed))
    for j, hands in enumerate(columns):
        column = [p[j] for p in pays]
        if any(high < low for high, low in pairwise(column)):
            raise _cover_all_fail(
                f"{where}, {hands} hands",
                f"a higher hand pays less than a lower one: {[str(c) for c in column]}",
            )
    return CoverAllPaytable(game, title, tuple(columns), names, tuple(pays))


def parse_cover_all(text: str) -> dict[PokerGame, CoverAllPaytable]:
    """Parse and validate the pay-table document (``PaytableError`` naming the bad cell)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PaytableError(f"cover_all.json is not JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("games"), dict):
        raise _cover_all_fail("top level", "expected an object with a games object")
    if document.get("odds") != "to 1":
        raise _cover_all_fail("top level", 'odds must be "to 1" (rule (9): "All pays are TO 1")')
    games = document["games"]
    if set(games) != set(POKER_GAMES):
        raise _cover_all_fail("games", f"expected exactly {list(POKER_GAMES)}, got {sorted(games)}")
    return {game: _parse_cover_all_game(game, games[game]) for game in POKER_GAMES}


COVER_ALL: Final[Mapping[PokerGame, CoverAllPaytable]] = MappingProxyType(
    parse_cover_all(_read("cover_all.json"))
)
"""The six Cover All Bonus pay tables lammer pays, by game."""


def cover_all_table(game: str) -> CoverAllPaytable:
    """The whole pay table of ``game`` (``HandError`` for a game without a Cover All Bonus)."""
    return COVER_ALL[poker_game(game)]


def cover_all_paytable(game: str, hands: int) -> tuple[PayRow, ...]:
    """The pay table for ``hands`` total hands (rule (4)), highest hand first.

    Raises ``HandError`` for an unknown game and ``ColumnError`` (a ``HandError`` and a
    ``PaytableError``) when ``hands`` is not a column of the game's table.
    """
    return cover_all_table(game).column(hands)


def cover_all_columns(game: str) -> tuple[int, ...]:
    """The numbers of total hands the game's table has a column for, fewest first."""
    return tuple(sorted(cover_all_table(game).columns))


# ---------------------------------------------------------------------------------------
# Bonus Craps (SD 20:18:33:12)

SEVEN: Final = 7
"""The total that loses every incomplete bet and begins a new series (20:18:33:12(1)(b)), so
no bet needs it."""

CRAPS_BETS: Final[tuple[CrapsBet, ...]] = get_args(CrapsBet)
"""The three side bets in the seed's order: All Small, All Tall, Make 'Em All."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BetRule:
    """One side bet as the seed defines it: the numbers to roll before a seven."""

    bet: CrapsBet
    name: str
    clause: str
    numbers: frozenset[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class BonusCrapsData:
    """The validated contents of ``bonus_craps.json``: bet rules and the pay tables."""

    rules: tuple[BetRule, ...]
    paytables: Mapping[int, Mapping[CrapsBet, Decimal]]


def _craps_fail(message: str) -> PaytableError:
    return PaytableError(f"bonus_craps.json: {message}")


def _numbers(bet: str, value: object) -> frozenset[int]:
    if not isinstance(value, list) or not value:
        raise _craps_fail(f"bets.{bet}.numbers must be a non-empty list of totals")
    out: set[int] = set()
    for item in value:
        # bool is an int to Python; a total of true is a data error all the same.
        if type(item) is not int or not 2 <= item <= 12 or item == SEVEN:
            raise _craps_fail(
                f"bets.{bet}.numbers: {item!r} is not a total of 2 to 12 other than 7"
            )
        if item in out:
            raise _craps_fail(f"bets.{bet}.numbers: {item} is listed twice")
        out.add(item)
    return frozenset(out)


def _craps_odds(where: str, value: object) -> Decimal:
    # Odds are strings holding an exact decimal (mqtt-api.md "Conventions"): a JSON number
    # would pass through float on the way in.
    if not isinstance(value, str):
        raise _craps_fail(f"{where} must be a string holding an exact decimal, not {value!r}")
    try:
        odds = Decimal(value)
    except InvalidOperation:
        raise _craps_fail(f"{where}: {value!r} is not a decimal") from None
    if not odds.is_finite() or odds <= 0:
        raise _craps_fail(f"{where}: {value!r} is not a positive amount to 1")
    return odds


def parse_bonus_craps(text: str) -> BonusCrapsData:
    """Validate the text of ``bonus_craps.json``; ``PaytableError`` names the bad field."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _craps_fail(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise _craps_fail("the top level must be an object")
    bets, tables = raw.get("bets"), raw.get("paytables")
    if not isinstance(bets, dict) or set(bets) != set(CRAPS_BETS):
        raise _craps_fail(f"bets must be an object with exactly {', '.join(CRAPS_BETS)}")
    rules: list[BetRule] = []
    for bet in CRAPS_BETS:
        spec = bets[bet]
        if not isinstance(spec, dict):
            raise _craps_fail(f"bets.{bet} must be an object")
        name, clause = spec.get("name"), spec.get("clause")
        if not isinstance(name, str) or not name or not isinstance(clause, str):
            raise _craps_fail(f"bets.{bet} needs a name and a clause (strings)")
        rules.append(
            BetRule(bet=bet, name=name, clause=clause, numbers=_numbers(bet, spec.get("numbers")))
        )
    if not isinstance(tables, dict) or not tables:
        raise _craps_fail("paytables must be a non-empty object")
    paytables: dict[int, Mapping[CrapsBet, Decimal]] = {}
    for key, row in tables.items():
        # Plain ASCII digits, no leading zero: str.isdigit() also holds for "²", which
        # int() refuses, and "01" would silently replace pay table 1.
        if not (key.isascii() and key.isdigit() and key[0] != "0"):
            raise _craps_fail(f"paytables: {key!r} is not a pay table number")
        if not isinstance(row, dict) or set(row) != set(CRAPS_BETS):
            raise _craps_fail(
                f"paytables.{key} must give the odds of exactly {', '.join(CRAPS_BETS)}"
            )
        paytables[int(key)] = MappingProxyType(
            {bet: _craps_odds(f"paytables.{key}.{bet}", row[bet]) for bet in CRAPS_BETS}
        )
    return BonusCrapsData(rules=tuple(rules), paytables=MappingProxyType(paytables))


BONUS_CRAPS: Final = parse_bonus_craps(_read("bonus_craps.json"))
"""The Bonus Craps bet rules and pay tables lammer runs."""

BET_RULES: Final[Mapping[CrapsBet, BetRule]] = MappingProxyType(
    {r.bet: r for r in BONUS_CRAPS.rules}
)
"""Each Bonus Craps bet's rule, by bet."""


def bonus_craps_odds(paytable: int) -> Mapping[CrapsBet, Decimal]:
    """The odds (to 1) of each bet under a pay table; ``ConfigError`` for an unknown one."""
    # bool is an int; "paytable: true" in a configuration is a mistake, not pay table 1.
    if type(paytable) is not int or paytable not in BONUS_CRAPS.paytables:
        known = " or ".join(str(k) for k in sorted(BONUS_CRAPS.paytables))
        raise ConfigError(f"Bonus Craps pay table {paytable!r} does not exist: choose {known}")
    return BONUS_CRAPS.paytables[paytable]


# ---------------------------------------------------------------------------------------
# Bust Bonus (SDAR 20:18:15:30.16(12))

UP_CARD_ROWS: Final[tuple[str, ...]] = ("Ace", "2", "3", "4", "5", "6", "7", "8", "9", "10")
"""The up-card rows as the seed writes them; index ``value - 1`` for blackjack value 1..10."""

THREE_EIGHTS_ROW: Final = "Bust with three 8s"
"""The row that pays "instead of" the up card's row for exactly three eights."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BustPayRow:
    """One row of the Bust Bonus pay table: its name as the seed writes it, odds to 1."""

    row: str
    off_suit: Decimal
    suited: Decimal

    def pays(self, *, suited: bool) -> Decimal:
        """The odds of this row for a suited or off-suit bust."""
        return self.suited if suited else self.off_suit


@dataclass(frozen=True, slots=True, kw_only=True)
class BustPaytable:
    """The pay table: one row per up card (Ace, 2..9, 10), then "Bust with three 8s"."""

    rows: tuple[BustPayRow, ...]

    def up_card_row(self, up_card: Card) -> BustPayRow:
        """The row of ``up_card``: ``Ace``, ``2``..``9``, or ``10`` for any ten-value card."""
        return self.rows[card_value(up_card) - 1]

    @property
    def three_eights(self) -> BustPayRow:
        """The "Bust with three 8s" row."""
        return self.rows[len(UP_CARD_ROWS)]


def parse_bust_bonus(text: str) -> BustPaytable:
    """Parse and validate pay-table JSON; ``PaytableError`` says exactly what is wrong.

    Odds are strings holding exact decimals (never JSON numbers: no float ever touches
    money), every row of the seed appears once in the seed's order, and every odds is
    a positive decimal.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PaytableError(f"Bust Bonus pay table is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise PaytableError('Bust Bonus pay table: expected an object with a "rows" list')
    expected = (*UP_CARD_ROWS, THREE_EIGHTS_ROW)
    rows = data["rows"]
    names = [row.get("row") if isinstance(row, dict) else None for row in rows]
    if tuple(names) != expected:
        raise PaytableError(
            f"Bust Bonus pay table rows are {names}: expected exactly {list(expected)}"
        )
    return BustPaytable(
        rows=tuple(
            BustPayRow(
                row=row["row"],
                off_suit=_bust_odds(row, "off_suit"),
                suited=_bust_odds(row, "suited"),
            )
            for row in rows
        )
    )


def _bust_odds(row: dict[str, object], column: str) -> Decimal:
    value = row.get(column)
    where = f"Bust Bonus pay table, row {row['row']!r}, column {column!r}"
    if not isinstance(value, str):
        raise PaytableError(f'{where}: odds must be a decimal string such as "25", not {value!r}')
    try:
        odds = Decimal(value)
    except InvalidOperation as exc:
        raise PaytableError(f"{where}: {value!r} is not a decimal") from exc
    if not odds.is_finite() or odds <= 0:
        raise PaytableError(f"{where}: odds must be positive, not {value!r}")
    return odds


BUST_BONUS: Final = parse_bust_bonus(_read("bust_bonus.json"))
"""The Bust Bonus pay table of SDAR 20:18:15:30.16(12)."""
