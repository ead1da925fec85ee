"""``lammer odds cover-all``: the par sheet as text or JSON, a progress bar, the chart.

``cli/odds.py`` only wires the arguments to ``cover_all_report``.

JSON (one object per game, a list when no game was chosen)::

    {"game": G, "columns": [{"hands": N, "exact": bool, "rounds": int|null,
      "house_edge": float, "house_edge_fraction": "p/q"|null, "std_error": float|null,
      "rows": [{"hand": name, "pays": "decimal string", "probability": float}, ...]}]}

with these additions: per column ``seed`` (null when exact), ``half_width_95`` (the 95 %
confidence half-width of the house edge, 0 when exact, null when ``edge_drop_95`` replaces
it or when the simulation measured no spread: ``spread_measured``), ``remainder_rounds``
and ``edge_drop_95`` (simulated columns only: the rounds with three hands or more at one
level and, when there were none, so that the standard error of 0 says nothing, a
one-sided 95 % bound on how far below ``house_edge`` the house edge may be, else null:
``bulk.cover_all_odds``), ``no_qualifier`` and
``no_qualifier_fraction`` (the chance that no hand makes a row), ``rounds_asked`` (the
``--rounds`` asked for; a simulation stratified by board deals each board class its share,
rounded, at least 2, so ``rounds`` may differ: the text says so) and ``board_classes``
(the strata of such a simulation, else null; both on simulated columns only), and per
row ``probability_fraction`` ("p/q" in lowest terms when exact, else null).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from bulk.cover_all_odds import DEFAULT_ROUNDS, DEFAULT_SEED, ColumnOdds, Progress, game_odds
from rules.cover_all import LAYOUTS
from rules.events import POKER_GAMES, PokerGame
from rules.paytables import ColumnError, cover_all_columns
from rules.poker import poker_game
from rules.text import plural


def _fraction(value: Fraction | None) -> str | None:
    return None if value is None else f"{value.numerator}/{value.denominator}"


def column_json(column: ColumnOdds) -> dict[str, Any]:
    """One column as the issue's JSON object (with the additions in the module docstring)."""
    return {
        "hands": column.hands,
        "exact": column.exact,
        "rounds": column.rounds,
        "seed": column.seed,
        "house_edge": column.house_edge,
        "house_edge_fraction": _fraction(column.house_edge_fraction),
        "std_error": column.std_error,
        "half_width_95": column.half_width if spread_measured(column) else None,
        "no_qualifier": column.no_qualifier,
        "no_qualifier_fraction": _fraction(column.no_qualifier_fraction),
        # A simulated column only: what was asked and the strata (exact columns have neither).
        **(
            {}
            if column.exact
            else {
                "rounds_asked": column.rounds_asked,
                "board_classes": column.strata,
                "remainder_rounds": column.remainder_rounds,
                "edge_drop_95": column.edge_drop_95,
            }
        ),
        "rows": [
            {
                "hand": row.hand,
                "pays": str(row.pays),
                "probability": row.probability,
                "probability_fraction": _fraction(row.fraction),
            }
            for row in column.rows
        ],
    }


def _who(game: PokerGame) -> str:
    layout = LAYOUTS[game]
    counted = "players and the dealer" if layout.dealer_cards is not None else "players only"
    return f"{layout.name} ({game}), {counted} counted"


def game_text(columns: Sequence[ColumnOdds]) -> list[str]:
    """The readable par sheet of one game: a summary, then each column's rows."""
    game = columns[0].game
    lines = [f"Cover All Bonus, {_who(game)}", ""]
    lines.append(f"{'hands':>5}  {'house edge':>11}  {'95 % CI':>13}  method")
    for c in columns:
        if c.exact:
            method = f"exact: {_fraction(c.house_edge_fraction)}"
        else:
            method = f"simulated: {c.rounds:,} rounds, seed {c.seed}{_why_rounds(c)}"
        lines.append(f"{c.hands:>5}  {c.house_edge * 100:>9.4f} %  {ci_text(c):>13}  {method}")
    if any(not c.exact and c.edge_drop_95 is None and not spread_measured(c) for c in columns):
        lines += [
            "  (n/a: every board class dealt gave the same remainder in each of its rounds, so",
            "  the simulation has no spread to measure its error by; deal more --rounds.)",
        ]
    if any(c.edge_drop_95 is not None for c in columns):
        lines += [
            "  (+0/-x: no simulated round had three hands at one level, so there is no standard",
            "  error to give; the house edge is at most the figure, and at 95 % (one-sided, the",
            "  rule of three: unseen in n rounds, a chance below 3/n) at least x below it.)",
        ]
    for c in columns:
        lines += ["", f"{plural(c.hands, 'hand')}: the highest hand at the table makes"]
        for row in c.rows:
            exact = f"  {_fraction(row.fraction)}" if row.fraction is not None else ""
            lines.append(
                f"  {row.hand:<24} {str(row.pays) + ' to 1':>11}  {row.probability:.8f}{exact}"
            )
        none = c.no_qualifier_fraction
        exact = f"  {_fraction(none)}" if none is not None else ""
        lines.append(f"  {'no qualifying hand':<24} {'loses':>11}  {c.no_qualifier:.8f}{exact}")
    return lines


def ci_text(column: ColumnOdds) -> str:
    """A column's 95 % confidence: "exact", "± h %", or "+0/-x %", the one-sided bound when
    the simulation dealt no round that adds to the exact part."""
    if column.exact:
        return "exact"
    if column.edge_drop_95 is not None:
        return f"+0/-{column.edge_drop_95 * 100:.4f} %"
    if not spread_measured(column):
        return "n/a"
    return f"± {column.half_width * 100:.4f} %"


def spread_measured(column: ColumnOdds) -> bool:
    """Whether a column's half-width means something: exact, or simulated with a standard
    error above 0. A simulation stratified by board whose every class gave the same
    remainder in each of its rounds (two rounds a class, a trips board making every hand
    trips) has a standard error of 0 that measures nothing; one that dealt no remainder
    round at all has ``edge_drop_95`` instead."""
    return column.exact or (column.edge_drop_95 is None and bool(column.std_error))


class _Bar:
    """A rich progress bar on stderr, shown only on a terminal and only once the work has
    taken more than a second (short runs stay quiet)."""

    def __init__(self) -> None:
        from rich.console import Console

        self._console = Console(stderr=True)
        self._start = time.monotonic()
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self._console.is_terminal:
            return
        if self._progress is None:
            if time.monotonic() - self._start < 1.0:
                return
            from rich.progress import Progress

            self._progress = Progress(console=self._console, transient=True)
            self._progress.start()
        if label not in self._tasks:
            self._tasks[label] = self._progress.add_task(label, total=total)
        self._progress.update(self._tasks[label], completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def cover_all_report(
    *,
    game: str | None = None,
    hands: int | None = None,
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    as_json: bool = False,
    plot: str | None = None,
    progress: Progress | None = None,
) -> str:
    """The text (or JSON) of ``lammer odds cover-all``; writes the chart when ``plot``.

    ``hands`` without ``game`` takes that column of every game that has one
    (``ColumnError`` if none has).
    """
    games: tuple[PokerGame, ...] = POKER_GAMES if game is None else (poker_game(game),)
    if hands is not None and game is None:
        games = tuple(g for g in games if hands in cover_all_columns(g))
        if not games:
            raise ColumnError(
                f"no Cover All Bonus pay table has a column for {plural(hands, 'total hand')}",
                game="any",
                hands=hands,
                columns=tuple(range(1, 9)),
            )
    bar = _Bar() if progress is None else None
    report: Callable[[str, int, int], None] = progress or bar or (lambda *_: None)
    try:
        results = [
            game_odds(g, hands=hands, rounds=rounds, seed=seed, progress=report) for g in games
        ]
    finally:
        if bar is not None:
            bar.close()
    if plot is not None:
        from bulk.chart import write_chart

        write_chart(results, plot)
    if as_json:
        documents = [
            {"game": columns[0].game, "columns": [column_json(c) for c in columns]}
            for columns in results
        ]
        return json.dumps(documents[0] if game is not None else documents, indent=2) + "\n"
    lines: list[str] = []
    for columns in results:
        if lines:
            lines.append("")
        lines += game_text(columns)
    lines += [
        "",
        "Pays are to 1 on the highest hand at the table only (Cover All Bonus rule (6)).",
        "Columns of 1 or 2 hands are exact (fractions in lowest terms); with 3 or more, the",
        "first two orders of inclusion-exclusion over the hands are exact and the rest is",
        "simulated (docs/auditors/cover-all-par-sheet.md says how).",
    ]
    return "\n".join(lines) + "\n"


def _why_rounds(column: ColumnOdds) -> str:
    """Why a stratified column dealt other than ``--rounds`` rounds (empty when it did not)."""
    if column.rounds_asked is None or column.rounds == column.rounds_asked:
        return ""
    strata = "" if column.strata is None else f" over {column.strata:,} board classes"
    asked = column.rounds_asked
    return f" ({asked:,} asked, shared{strata} by their chance, rounded, at least 2 each)"
