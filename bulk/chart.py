"""The par sheet's chart: house edge against the number of hands, one line per game (PNG).

matplotlib draws it, without pyplot (a ``Figure`` rendered by the Agg canvas: no display,
no global state, safe in a service or a test). The PNG carries the figures as text
(``Title``, ``Description``, ``Software``), so a reader can check a chart against the sheet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bulk.cover_all_odds import ColumnOdds
from rules.cover_all import LAYOUTS
from rules.errors import RulesError

TITLE = "Cover All Bonus: house edge by number of hands"


class ChartError(RulesError):
    """The chart could not be drawn or written (no matplotlib, a path that cannot be
    written). A ``RulesError``, so ``lammer odds`` reports it as it reports a bad setting."""


def describe(games: Sequence[Sequence[ColumnOdds]]) -> str:
    """One line per game: its house edge per number of hands (the chart's data as text)."""
    lines = []
    for columns in games:
        cells = ", ".join(
            f"{c.hands}: {c.house_edge * 100:.4f}%{'' if c.exact else ' (sim)'}"
            for c in sorted(columns, key=lambda c: c.hands)
        )
        lines.append(f"{columns[0].game} {cells}")
    return "\n".join(lines)


def write_chart(  # one figure drawn in order
    games: Sequence[Sequence[ColumnOdds]],
    path: str | Path,
) -> None:
    """Draw the house edge of each game's columns and write a PNG to ``path``.

    Exact columns are filled markers, simulated ones open markers with their 95 %
    confidence interval as error bars.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # an optional dependency: pip install 'lammer[plot]'
        raise ChartError(
            "--plot needs matplotlib (pip install 'lammer[plot]' or the dev extra)"
        ) from exc
    figure = Figure(figsize=(10, 5), dpi=120, layout="constrained")
    axes = figure.add_subplot()
    for columns in games:
        ordered = sorted(columns, key=lambda c: c.hands)
        game = ordered[0].game
        hands = [c.hands for c in ordered]
        edges = [c.house_edge * 100 for c in ordered]
        (line,) = axes.plot(hands, edges, label=f"{game} ({LAYOUTS[game].name})", linewidth=1.8)
        colour = line.get_color()
        exact = [c for c in ordered if c.exact]
        simulated = [c for c in ordered if not c.exact]
        axes.plot(
            [c.hands for c in exact],
            [c.house_edge * 100 for c in exact],
            "o",
            color=colour,
            markersize=6,
        )
        axes.errorbar(
            [c.hands for c in simulated],
            [c.house_edge * 100 for c in simulated],
            # Below, above: a column that dealt no remainder round has only a one-sided bound.
            yerr=[
                [
                    (c.half_width if c.edge_drop_95 is None else c.edge_drop_95) * 100
                    for c in simulated
                ],
                [(c.half_width if c.edge_drop_95 is None else 0.0) * 100 for c in simulated],
            ],
            fmt="o",
            color=colour,
            markerfacecolor="white",
            markersize=6,
            capsize=3,
        )
    axes.set_title(TITLE)
    axes.set_xlabel("total hands in the round (the pay-table column)")
    axes.set_ylabel("house edge (%)")
    axes.set_xticks(range(1, 9))  # the columns: 1 to 8 hands
    axes.grid(True, alpha=0.3)
    axes.legend(
        fontsize="small",
        title="filled: exact\nopen: simulated (95 % CI)",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),  # beside the axes: the lines cross the whole plot
    )
    try:
        figure.savefig(
            path,
            format="png",
            metadata={"Title": TITLE, "Description": describe(games), "Software": "lammer"},
        )
    except OSError as exc:
        raise ChartError(f"cannot write the chart to {str(path)!r}: {exc.strerror}") from exc
