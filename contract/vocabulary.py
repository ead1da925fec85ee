"""The words of the contract that people read, and the versions: one place for every side.

The codes themselves (games, bets, devices, id limits) are ``rules.events``'; here are the
names a screen shows for them, the texts of the regulation's clauses a stickperson reads,
and the installed lammer's version. The terminal display imports them; the browser gets
them from the generated ``display/web/static/js/contract.js`` (``contract.esmodule``).
"""

from __future__ import annotations

import importlib.metadata
from types import MappingProxyType
from typing import Final, get_args

from rules.cover_all import LAYOUTS
from rules.events import POKER_GAMES, CrapsBet, TableGame, VoidClause

GAME_NAMES: Final[MappingProxyType[TableGame, str]] = MappingProxyType(
    {
        **{game: LAYOUTS[game].name for game in POKER_GAMES},
        "BJ": "Blackjack",
        "CRAPS": "Craps",
    }
)
"""Each game a table plays, as people name it (the poker games as shuffler-icd.md "Games")."""

BET_NAMES: Final[MappingProxyType[CrapsBet, str]] = MappingProxyType(
    {"all_small": "All Small", "all_tall": "All Tall", "make_em_all": "Make 'Em All"}
)
"""The Bonus Craps bets as the seed names them (sd-bonus-craps.txt)."""

INVALID_ROLL_CLAUSES: Final[MappingProxyType[int, str]] = MappingProxyType(
    {
        1: "one die comes to rest on top of the other",
        2: "a patron other than the shooter throws the dice",
        3: "the dice do not leave the shooter's hand simultaneously",
        4: "one or both dice come to rest in the dice bowl",
        5: "one or both dice come to rest on the rail",
        6: "the shooter has not placed a pass or don't pass bet",
        7: "the dice are thrown in the wrong direction",
        8: "the dice are slid so that they do not roll or tumble",
        9: "one or both dice rest on chips, not flat on the table",
        10: "no good faith attempt to hit the backboard, thrown short",
        11: "it cannot be determined which face is uppermost",
    }
)
"""68 IAC 10-4-4(c): the rolls the stickperson may declare invalid (the regulation's text,
shortened). The reader reports (1), (4), (5) and (7) to (11) as ``CHECK`` reasons
(``pending_roll.clause``); (2), (3) and (6) it cannot see (``VOID_CLAUSES``)."""

VOID_CLAUSES: Final[tuple[VoidClause, ...]] = get_args(VoidClause)
"""The clauses ``request/void_roll`` declares (the reader cannot see them)."""


def lammer_version() -> str:
    """The installed lammer's version (the package's metadata, as pip installed it):
    ``info``'s ``version``, ``--version``, the web server's."""
    try:
        return importlib.metadata.version("lammer")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "unknown (not installed)"
