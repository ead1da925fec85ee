"""``lammer odds``: the exact odds and house edge of the side bets, for casinos and regulators.

::

    lammer odds bonus-craps [--paytable 1|2] [--json]
    lammer odds bust-bonus [--decks N] [--s17 | --h17] [--json]
    lammer odds cover-all [--game G] [--hands N] [--rounds R] [--seed S] [--json] [--plot FILE]

Bonus Craps prints both pay tables unless ``--paytable`` picks one. Bust Bonus defaults to
6 decks and a dealer who stands on soft 17 (``--s17``), the defaults of a table's
``[bust_bonus]`` configuration; ``--decks`` takes 1 to 8, as the configuration does.

Everything is computed exactly (``rules.craps_odds``, ``rules.bust_odds``): the readable
table shows decimals, then every figure as an exact fraction in lowest terms. ``--json``
writes fractions as ``"n/d"`` strings and decimals as strings, never floats
(mqtt-api.md, "Odds are strings holding an exact decimal").

The Cover All Bonus par sheet is computed by ``bulk`` (numpy), exact where it is tractable
and otherwise simulated with its standard error; its ``--json`` is the issue's schema
(floats beside ``"p/q"`` fractions), described in ``bulk/report.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Any

from rules.errors import RulesError

EXIT_OK = 0
EXIT_USAGE = 2

MIN_DECKS, MAX_DECKS = 1, 8  # as daemon/config.py accepts for [bust_bonus] decks
DEFAULT_DECKS = 6

TABLE_PLACES = 6
"""Decimal places of a probability in the readable table."""

JSON_PLACES = 15
"""Decimal places of every decimal in ``--json`` (the fraction beside it is exact)."""


def add_arguments(  # declarative: a subcommand per side bet
    parser: argparse.ArgumentParser,
) -> None:
    """The command's arguments: one subcommand per side bet."""
    from rules.events import POKER_GAMES

    games = parser.add_subparsers(dest="game", required=True, metavar="GAME")
    craps = games.add_parser(
        "bonus-craps",
        help="All Small, All Tall, Make 'Em All: chance before a seven and house edge",
        description="Exact odds of the Bonus Craps bets (SDAR 20:18:33:12).",
    )
    craps.add_argument(
        "--paytable",
        type=int,
        choices=(1, 2),
        help="only this pay table (default: both)",
    )
    craps.add_argument("--json", action="store_true", help="JSON for machines")
    craps.set_defaults(_odds=_bonus_craps)

    bust = games.add_parser(
        "bust-bonus",
        help="dealer bust odds per up card, suited and three 8s, and house edge",
        description=(
            "Exact odds of the Bust Bonus wager (SDAR 20:18:15:30.16). Only the dealer's "
            "cards leave the shoe; the wager is made before the up card, so a dealer "
            "blackjack loses."
        ),
    )
    bust.add_argument(
        "--decks",
        type=_decks,
        default=DEFAULT_DECKS,
        help=f"decks in the shoe, {MIN_DECKS} to {MAX_DECKS} (default {DEFAULT_DECKS})",
    )
    rule = bust.add_mutually_exclusive_group()
    rule.add_argument(
        "--s17",
        dest="hits_soft_17",
        action="store_false",
        help="the dealer stands on soft 17 (default)",
    )
    rule.add_argument(
        "--h17", dest="hits_soft_17", action="store_true", help="the dealer hits soft 17"
    )
    bust.set_defaults(hits_soft_17=False)
    bust.add_argument("--json", action="store_true", help="JSON for machines")
    bust.set_defaults(_odds=_bust_bonus)

    cover = games.add_parser(
        "cover-all",
        help="Cover All Bonus par sheet: each game, each column, exact or simulated",
        description=(
            "Cover All Bonus odds (SDAR Cover All Bonus rule (9)): for each game and number "
            "of hands, how often the highest hand at the table makes each pay-table row, "
            "and the house edge. Exact with 1 or 2 hands; otherwise a seeded simulation "
            "with its standard error."
        ),
    )
    cover.add_argument("--game", choices=POKER_GAMES, help="one game (default: all six)")
    cover.add_argument(
        "--hands", type=_positive("hands", 1), help="one column: total hands (default: all)"
    )
    cover.add_argument(
        "--rounds",
        type=_positive("rounds", 2),
        default=None,
        help="simulated rounds per column of 3 or more hands (default: the par sheet's)",
    )
    cover.add_argument(
        "--seed",
        type=_positive("seed", 0),
        default=None,
        help="simulation seed (default: the par sheet's)",
    )
    cover.add_argument("--json", action="store_true", help="JSON for machines")
    cover.add_argument("--plot", metavar="FILE", help="also write a PNG chart of the house edge")
    cover.set_defaults(_odds=_cover_all)


def run(args: argparse.Namespace) -> int:
    """Print the odds of ``args.game``; the exit status."""
    try:
        text: str = args._odds(args)
    except RulesError as exc:  # a pay table that does not load, a setting out of range
        print(f"lammer odds: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_OK


def _decks(text: str) -> int:
    try:
        decks = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of decks") from None
    if not MIN_DECKS <= decks <= MAX_DECKS:
        raise argparse.ArgumentTypeError(
            f"a shoe holds {MIN_DECKS} to {MAX_DECKS} decks, not {decks}"
        )
    return decks


def _positive(what: str, least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {what}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{what} must be at least {least}, not {value}")
        return value

    return parse


# ---------------------------------------------------------------------------------------
# Numbers


def fraction_text(value: Fraction) -> str:
    """``"n/d"`` in lowest terms (``Fraction`` always is); ``"n/1"`` for a whole number."""
    return f"{value.numerator}/{value.denominator}"


def decimal_of(value: Fraction, places: int) -> Decimal:
    """``value`` rounded half-even to ``places`` decimal places, computed exactly."""
    quantum = Decimal(1).scaleb(-places)
    with localcontext() as ctx:
        # Enough digits that the division is exact to well beyond ``places``.
        ctx.prec = len(str(abs(value.numerator))) + len(str(value.denominator)) + places + 10
        return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(
            quantum, rounding=ROUND_HALF_EVEN
        )


def percent(value: Fraction, places: int = 4) -> str:
    """``value`` as a percentage, e.g. ``7.7613%``."""
    return f"{_plain(decimal_of(value * 100, places))}%"


def _exact(value: Fraction) -> dict[str, str]:
    return {"fraction": fraction_text(value), "decimal": _plain(decimal_of(value, JSON_PLACES))}


def _plain(value: Decimal) -> str:
    """Positional notation always (``0.000``, never ``0E-15``)."""
    return f"{value:f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell: the first left-aligned, the rest right."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(row) for row in rows)]


# ---------------------------------------------------------------------------------------
# Bonus Craps


def _bonus_craps(args: argparse.Namespace) -> str:
    from rules.craps_odds import odds_table  # imported when used: the other games load less

    paytables = [args.paytable] if args.paytable is not None else [1, 2]
    tables = [(paytable, odds_table(paytable)) for paytable in paytables]
    if args.json:
        payload: dict[str, Any] = {
            "game": "bonus_craps",
            "paytables": [
                {
                    "paytable": paytable,
                    "bets": [
                        {
                            "bet": bet.bet,
                            "name": bet.name,
                            "pays": str(bet.pays),
                            "probability": _exact(bet.probability),
                            "house_edge": _exact(bet.house_edge),
                        }
                        for bet in bets
                    ],
                }
                for paytable, bets in tables
            ],
        }
        return json.dumps(payload, indent=2) + "\n"
    lines: list[str] = []
    for paytable, bets in tables:
        if lines:
            lines.append("")
        lines.append(f"Bonus Craps, pay table {paytable}")
        lines.append("A bet wins when all its numbers are rolled before a seven.")
        lines.append("")
        rows = [
            [
                bet.name,
                f"{bet.pays} to 1",
                fraction_text(bet.probability),
                _plain(decimal_of(bet.probability, TABLE_PLACES)),
                fraction_text(bet.house_edge),
                percent(bet.house_edge),
            ]
            for bet in bets
        ]
        lines += _table(["Bet", "Pays", "P(win)", "", "House edge", ""], rows)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# Bust Bonus

_BUST_COLUMNS = (
    ("suited_bust", "Suited bust"),
    ("off_suit_bust", "Off-suit bust"),
    ("three_eights_suited", "888 suited"),
    ("three_eights_off_suit", "888 off-suit"),
    ("no_bust", "No bust"),
)


def _bust_bonus(args: argparse.Namespace) -> str:  # JSON and text side by side: the same rows
    from rules.bust_odds import odds_table
    from rules.paytables import BUST_BONUS as PAYTABLE

    odds = odds_table(args.decks, args.hits_soft_17)
    up_rows = PAYTABLE.rows[: len(odds.up_cards)]  # the last row is three 8s
    rule = "H17" if odds.hits_soft_17 else "S17"
    if args.json:
        payload: dict[str, Any] = {
            "game": "bust_bonus",
            "decks": odds.decks,
            "dealer": rule,
            "hits_soft_17": odds.hits_soft_17,
            "three_eights_pays": {
                "off_suit": str(PAYTABLE.three_eights.off_suit),
                "suited": str(PAYTABLE.three_eights.suited),
            },
            "up_cards": [
                {
                    "up_card": row.up_card,
                    "pays": {"off_suit": str(pays.off_suit), "suited": str(pays.suited)},
                    "probability": _exact(row.probability),
                    **{key: _exact(getattr(row, key)) for key, _ in _BUST_COLUMNS},
                    "bust": _exact(row.bust),
                    "ev": _exact(row.ev),
                }
                for row, pays in zip(odds.up_cards, up_rows, strict=True)
            ],
            "bust": _exact(odds.bust),
            "ev": _exact(odds.ev),
            "house_edge": _exact(odds.house_edge),
        }
        return json.dumps(payload, indent=2) + "\n"
    stands = "hits soft 17 (H17)" if odds.hits_soft_17 else "stands on soft 17 (S17)"
    deck_word = "deck" if odds.decks == 1 else "decks"
    three = PAYTABLE.three_eights
    lines = [
        f"Bust Bonus, {odds.decks} {deck_word}, dealer {stands}",
        "Only the dealer's cards leave the shoe; the wager is made before the up card, so a",
        "dealer blackjack loses. 888 = bust with three 8s (exactly three cards, all eights),",
        f"paying {three.off_suit} or {three.suited} suited instead of the 8 row. Pays are to 1.",
        "",
    ]
    rows = []
    for row, pays in zip(odds.up_cards, up_rows, strict=True):
        cells = [row.up_card, str(pays.off_suit), str(pays.suited), _short(row.probability)]
        cells += [_short(getattr(row, key)) for key, _ in _BUST_COLUMNS]
        cells.append(_plain(decimal_of(row.ev, TABLE_PLACES)))
        rows.append(cells)
    header = [
        "Up card",
        "Pays",
        "Suited",
        "P(up)",
        *(title for _, title in _BUST_COLUMNS),
        "EV per unit",
    ]
    lines += _table(header, rows)
    lines += [
        "",
        f"P(dealer busts)  {_plain(decimal_of(odds.bust, TABLE_PLACES))}",
        f"EV per unit      {_plain(decimal_of(odds.ev, TABLE_PLACES))}",
        f"House edge       {percent(odds.house_edge)}",
        "",
        "Exact fractions, lowest terms:",
    ]
    for row in odds.up_cards:
        lines.append(f"  up card {row.up_card}")
        for key, title in _BUST_COLUMNS:
            value: Fraction = getattr(row, key)
            if value == 0 and key.startswith("three_eights"):
                continue  # only an 8 up can make three 8s
            lines.append(f"    {title:<14} {fraction_text(value)}")
        lines.append(f"    {'EV per unit':<14} {fraction_text(row.ev)}")
    lines += [
        f"  {'P(dealer busts)':<16} {fraction_text(odds.bust)}",
        f"  {'house edge':<16} {fraction_text(odds.house_edge)}",
    ]
    return "\n".join(lines) + "\n"


def _short(value: Fraction) -> str:
    """A probability for the readable table: ``-`` where it cannot happen."""
    return "-" if value == 0 else _plain(decimal_of(value, TABLE_PLACES))


# ---------------------------------------------------------------------------------------
# Cover All Bonus


def _cover_all(args: argparse.Namespace) -> str:
    from bulk.cover_all_odds import DEFAULT_ROUNDS, DEFAULT_SEED
    from bulk.report import cover_all_report

    return cover_all_report(
        game=args.game,
        hands=args.hands,
        rounds=DEFAULT_ROUNDS if args.rounds is None else args.rounds,
        seed=DEFAULT_SEED if args.seed is None else args.seed,
        as_json=args.json,
        plot=args.plot,
    )
