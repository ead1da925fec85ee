"""The Cover All Bonus par sheet, timed: what ``lammer odds cover-all --json --plot FILE``
computes, with the runtime of each game's exact part and of each column.

Writes ``docs/cover-all-par-sheet.json`` (exactly the command's ``--json``),
``docs/cover-all-house-edge.png`` (its ``--plot``) and prints the runtimes and the
Markdown tables of ``docs/auditors/cover-all-par-sheet.md``.

Run (long: minutes; other people share the cores)::

    nice -n 19 .venv/bin/python bench/bench_par_sheet.py [--rounds R] [--seed S] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.common import machine
from bulk.chart import write_chart
from bulk.cover_all_odds import DEFAULT_ROUNDS, DEFAULT_SEED, ColumnOdds, column_odds, exact_pieces
from bulk.report import column_json, spread_measured
from rules.cover_all import LAYOUTS
from rules.events import POKER_GAMES
from rules.paytables import cover_all_columns


def _spread(c: ColumnOdds) -> str:
    """After a house edge: nothing when exact, "± h" (95 %), "+0/-x" when the simulation
    dealt no remainder round (a one-sided 95 % bound: bulk.cover_all_odds), or that it
    measured no spread (bulk.report.spread_measured)."""
    if c.exact:
        return ""
    if c.edge_drop_95 is not None:
        return f" +0/-{c.edge_drop_95 * 100:.4f}"
    if not spread_measured(c):
        return " (no spread measured)"
    return f" ± {c.half_width * 100:.4f}"


def markdown(columns: list[ColumnOdds]) -> list[str]:
    """One game's table: a row per pay-table row, a column per number of hands."""
    header = ["Highest hand", *(f"{c.hands} hands" for c in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for i, row in enumerate(columns[0].rows):
        cells = [row.hand]
        for c in columns:
            r = c.rows[i]
            cells.append(f"{r.pays} to 1: {r.probability:.7f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        "| no qualifying hand | " + " | ".join(f"{c.no_qualifier:.7f}" for c in columns) + " |"
    )
    lines.append(
        "| **house edge** | "
        + " | ".join(f"**{c.house_edge * 100:.4f} %**" + _spread(c) for c in columns)
        + " |"
    )
    lines.append(
        "| method | "
        + " | ".join("exact" if c.exact else f"simulated, {c.rounds:,} rounds" for c in columns)
        + " |"
    )
    return lines


def main() -> None:
    """Compute, time, write and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs")
    args = parser.parse_args()
    print(f"machine: {machine()}; numpy {np.__version__}")
    print(f"rounds per simulated column {args.rounds:,}, seed {args.seed}")
    results: list[list[ColumnOdds]] = []
    timing: list[str] = []
    tables: list[str] = []
    whole = time.perf_counter()
    for game in POKER_GAMES:
        start = time.perf_counter()
        exact_pieces(game)
        timing.append(f"| {game} | exact q1, q2 | | {time.perf_counter() - start:.1f} |")
        columns = []
        for hands in sorted(cover_all_columns(game), reverse=True):
            start = time.perf_counter()
            column = column_odds(game, hands, rounds=args.rounds, seed=args.seed)
            seconds = time.perf_counter() - start
            columns.append(column)
            what = "exact" if column.exact else f"{column.rounds:,} rounds"
            timing.append(f"| {game} | {hands} hands | {what} | {seconds:.1f} |")
            print(timing[-1], flush=True)
        results.append(columns)
        tables += ["", f"### {LAYOUTS[game].name} ({game})", "", *markdown(columns)]
    total = time.perf_counter() - whole
    args.out.mkdir(exist_ok=True)
    documents = [
        {"game": columns[0].game, "columns": [column_json(c) for c in columns]}
        for columns in results
    ]
    (args.out / "cover-all-par-sheet.json").write_text(json.dumps(documents, indent=2) + "\n")
    write_chart(results, args.out / "cover-all-house-edge.png")
    print()
    print("| game | part | method | seconds |")
    print("|---|---|---|---|")
    print("\n".join(timing))
    print(f"\ntotal {total:.0f} s")
    # A column that dealt no remainder round: its one-sided bound is its width.
    worst = max((c.edge_drop_95 or c.half_width, c.game, c.hands) for cs in results for c in cs)
    print(f"widest 95 % half-width: {worst[0] * 100:.4f} pp ({worst[1]}, {worst[2]} hands)")
    print("\n".join(tables))


if __name__ == "__main__":
    main()
