"""A report's chart per table: each paying row's hits against the par sheet (PNG).

Per table over the report's gaming days: for each bet and row, the expected hits (a line)
with the band an honest table stays in 95 % of the time (the 2.5 % and 97.5 % quantiles
of the binomial with the row's mean chance per round, exact sums), and the observed hits
(points); log scale, since rows run from thousands of hits to a handful. matplotlib draws
it without pyplot (a ``Figure`` on the Agg canvas), as ``bulk/chart.py`` does; the PNG
carries its figures as text (``Description``), so a reader can check the picture.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from records.errors import ReportError
from records.reports import Report


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One row on a table's chart."""

    label: str
    observed: int
    expected: float
    low: int
    high: int


def binomial_quantile(n: int, p: float, q: float) -> int:
    """The smallest k with P(Bin(n, p) <= k) >= q, by exact summation from 0."""
    if p <= 0 or n == 0:
        return 0
    if p >= 1:
        return n
    total = 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    for k in range(n + 1):
        total += math.exp(
            base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
        )
        if total >= q:
            return k
    return n


def points(report: Report) -> dict[str, list[Point]]:
    """Each table's rows over the whole report: hits, expected, and the 95 % band."""
    sums: dict[str, dict[tuple[str, str], list[float]]] = defaultdict(dict)
    for day in report.days:
        for bet in day.bets:
            for row in bet.rows:
                if row.expected is None:
                    continue
                cell = sums[day.table].setdefault((bet.bet, row.row), [0, 0.0, 0])
                cell[0] += row.hits
                cell[1] += (
                    float(row.expected) if isinstance(row.expected, Fraction) else row.expected
                )
                cell[2] += bet.rounds
    out: dict[str, list[Point]] = {}
    for table, cells in sums.items():
        out[table] = []
        for (bet_name, row_name), (hits, expected, rounds) in cells.items():
            n = int(rounds)
            p = expected / n if n else 0.0
            out[table].append(
                Point(
                    label=f"{bet_name}: {row_name}",
                    observed=int(hits),
                    expected=expected,
                    low=binomial_quantile(n, p, 0.025),
                    high=binomial_quantile(n, p, 0.975),
                )
            )
    return out


def write_charts(report: Report, folder: Path) -> list[Path]:
    """One PNG per table in ``folder`` (``<table>.png``); the paths written."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # an optional dependency: pip install 'lammer[plot]'
        raise ReportError("--plot needs matplotlib (pip install 'lammer[plot]')") from exc
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"--plot {folder}: {exc.strerror or exc}") from exc
    written = []
    for table, rows in sorted(points(report).items()):
        figure = Figure(
            figsize=(10, max(3.0, 0.35 * len(rows) + 1.5)), dpi=110, layout="constrained"
        )
        axes = figure.add_subplot()
        ys = list(range(len(rows)))
        for y, point in zip(ys, rows, strict=True):
            band = [max(point.low, 0.5), max(point.high, 0.5)]
            axes.plot(band, [y, y], color="#9ab", linewidth=6, solid_capstyle="butt")
            axes.plot([max(point.expected, 0.5)], [y], marker="|", color="#234", markersize=14)
            off = not point.low <= point.observed <= point.high
            axes.plot([max(point.observed, 0.5)], [y], marker="o", color="#c22" if off else "#172")
        axes.set_yticks(ys, [p.label for p in rows])
        axes.set_xscale("log")
        axes.invert_yaxis()
        axes.set_xlabel("hits (log scale; 0 drawn at 0.5)")
        axes.set_title(
            f"{table}, gaming days {report.first} to {report.last}\n"
            "hits (dots; red outside the band) against the par sheet (tick: expected; band: 95 %)",
            fontsize=10,
        )
        description = "\n".join(
            f"{p.label}: {p.observed} hits, {p.expected:.2f} expected, 95 % band {p.low}-{p.high}"
            for p in rows
        )
        path = folder / f"{table}.png"
        try:
            figure.savefig(
                path,
                metadata={"Title": table, "Description": description, "Software": "lammer records"},
            )
        except OSError as exc:
            raise ReportError(f"--plot {path}: {exc.strerror or exc}") from exc
        written.append(path)
    return written
