"""The exact par sheets the records compare with, per game, bet and pay-table row.

* Bust Bonus (``rules.bust_odds``) and Bonus Craps (``rules.craps_odds``): exact fractions,
  computed by the rules (``lammer odds bust-bonus``, ``lammer odds bonus-craps``).
* Cover All Bonus: exact fractions with 1 and 2 hands, simulated estimates with 3 hands or
  more, as ``lammer odds cover-all`` wrote them in ``docs/cover-all-par-sheet.json``
  (``bulk``: 10^7 seeded rounds a column). The package carries a copy of that file
  (``records/data``; a test fails when it differs from ``docs/``). A simulated probability
  ``p`` of ``R`` rounds has the standard error ``sqrt(p (1 - p) / R)``, which
  ``records.integrity`` counts against the table, never for it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib import resources
from typing import Any, Final

from rules.bust_odds import odds_table as bust_odds_table
from rules.craps_odds import odds_table as craps_odds_table
from rules.events import CrapsBet
from rules.paytables import THREE_EIGHTS_ROW, UP_CARD_ROWS

PAR_SHEET: Final = "cover-all-par-sheet.json"

SUITED: Final = "suited"
OFF_SUIT: Final = "off_suit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Chance:
    """A per-round probability: exact (``exact`` set, ``std_error`` 0), or simulated.

    ``estimate`` is the float value used by the statistics (an exact fraction rounded to the
    nearest double); ``std_error`` the simulation's standard error.
    """

    estimate: float
    std_error: float
    exact: Fraction | None

    @classmethod
    def of(cls, value: Fraction) -> Chance:
        """An exact probability."""
        return cls(estimate=float(value), std_error=0.0, exact=value)


def simulated(p: float, rounds: int) -> Chance:
    """A probability estimated as ``p`` from ``rounds`` simulated rounds, with its standard
    error ``sqrt(p (1 - p) / rounds)``, floored at what a row seen 3 times would have (the
    rule of three: a row seen rarely or never, ``p`` of 0, is not known to be impossible;
    a standard error of 0 would make its first honest hit look impossible)."""
    floor = min(3 / rounds, 0.5)
    variance = max(p * (1 - p), floor * (1 - floor)) / rounds
    return Chance(estimate=p, std_error=math.sqrt(variance), exact=None)


@cache
def _cover_all() -> dict[str, dict[int, dict[str, Chance]]]:
    raw: list[dict[str, Any]] = json.loads(
        resources.files("records.data").joinpath(PAR_SHEET).read_text()
    )
    out: dict[str, dict[int, dict[str, Chance]]] = {}
    for game in raw:
        columns: dict[int, dict[str, Chance]] = {}
        for column in game["columns"]:
            rows: dict[str, Chance] = {}
            for row in column["rows"]:
                if row["probability_fraction"] is not None:
                    rows[row["hand"]] = Chance.of(Fraction(row["probability_fraction"]))
                else:
                    rows[row["hand"]] = simulated(float(row["probability"]), int(column["rounds"]))
            columns[int(column["hands"])] = rows
        out[str(game["game"])] = columns
    return out


def cover_all_rows(game: str) -> tuple[str, ...]:
    """The paying rows of ``game``'s Cover All Bonus, highest first (``KeyError`` if none)."""
    columns = _cover_all()[game]
    return tuple(next(iter(columns.values())))


def cover_all_columns(game: str) -> tuple[int, ...]:
    """The numbers of hands the par sheet has a column for."""
    return tuple(sorted(_cover_all()[game]))


def cover_all_chance(game: str, hands: int, row: str) -> Chance:
    """The chance that the highest hand of a round of ``hands`` hands is ``row``."""
    return _cover_all()[game][hands][row]


def bust_cells() -> tuple[tuple[str, str], ...]:
    """Every paying cell of the Bust Bonus table: (pay-table row, column)."""
    rows = (*UP_CARD_ROWS, THREE_EIGHTS_ROW)
    return tuple((row, column) for row in rows for column in (SUITED, OFF_SUIT))


@cache
def bust_cell_chances(decks: int, hits_soft_17: bool) -> dict[tuple[str, str], Fraction]:
    """The chance of each paying cell per round, before the up card is known (exact).

    The three-8s cells pay instead of the 8 row's (``rules.bust_odds``), so the cells
    partition the busts.
    """
    odds = bust_odds_table(decks, hits_soft_17)
    out: dict[tuple[str, str], Fraction] = {}
    for row in odds.up_cards:
        out[(row.up_card, SUITED)] = row.probability * row.suited_bust
        out[(row.up_card, OFF_SUIT)] = row.probability * row.off_suit_bust
    eight = next(row for row in odds.up_cards if row.up_card == "8")
    out[(THREE_EIGHTS_ROW, SUITED)] = eight.probability * eight.three_eights_suited
    out[(THREE_EIGHTS_ROW, OFF_SUIT)] = eight.probability * eight.three_eights_off_suit
    return out


@cache
def bust_rates(decks: int, hits_soft_17: bool) -> dict[str, Fraction]:
    """The dealer's chance to bust given each up card (pay-table row name), exact."""
    return {row.up_card: row.bust for row in bust_odds_table(decks, hits_soft_17).up_cards}


def craps_bet_chance(bet: CrapsBet) -> Fraction:
    """The chance that a Bonus Craps bet completes before a seven (either pay table)."""
    return next(odds.probability for odds in craps_odds_table(1) if odds.bet == bet)


DICE_CELL: Final = Fraction(1, 36)
"""Each of the 36 ordered outcomes of two fair dice."""

FACE: Final = Fraction(1, 6)
"""Each face of one fair die."""
