"""The committed par sheet (docs/) is what the code computes: every exact column equal to a
fresh computation, every simulated column from the default seed and rounds and within the
precision goal, and the Markdown and the chart showing those figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bulk.cover_all_odds import DEFAULT_ROUNDS, DEFAULT_SEED, column_odds
from bulk.report import column_json
from rules.events import POKER_GAMES
from rules.paytables import cover_all_columns

DOCS = Path(__file__).resolve().parents[2] / "docs"
SHEET: list[dict[str, Any]] = json.loads((DOCS / "cover-all-par-sheet.json").read_text())
COLUMNS = [(game["game"], column) for game in SHEET for column in game["columns"]]


def test_every_game_and_column_is_there() -> None:
    assert [game["game"] for game in SHEET] == list(POKER_GAMES)
    for game in SHEET:
        hands = [c["hands"] for c in game["columns"]]
        assert hands == sorted(cover_all_columns(game["game"]), reverse=True)


@pytest.mark.parametrize(
    ("game", "column"),
    [(g, c) for g, c in COLUMNS if c["exact"]],
    ids=lambda v: str(v["hands"]) if isinstance(v, dict) else str(v),
)
def test_exact_columns_are_a_fresh_computation(game: str, column: dict[str, Any]) -> None:
    assert column == column_json(column_odds(game, column["hands"]))
    assert column["hands"] <= 2


@pytest.mark.parametrize(
    ("game", "column"),
    [(g, c) for g, c in COLUMNS if not c["exact"]],
    ids=lambda v: str(v["hands"]) if isinstance(v, dict) else str(v),
)
def test_simulated_columns_meet_the_precision_goal(game: str, column: dict[str, Any]) -> None:
    assert column["seed"] == DEFAULT_SEED
    assert column["rounds"] >= 0.99 * DEFAULT_ROUNDS  # by board: about its share each
    assert column["half_width_95"] == pytest.approx(1.959964 * column["std_error"], rel=1e-6)
    assert column["half_width_95"] <= 0.001  # 0.1 percentage point, the goal
    total = sum(row["probability"] for row in column["rows"]) + column["no_qualifier"]
    assert math.isclose(total, 1.0, abs_tol=1e-12)


def test_the_markdown_shows_every_house_edge() -> None:
    text = (DOCS / "auditors" / "cover-all-par-sheet.md").read_text()
    for _, column in COLUMNS:
        assert f"**{column['house_edge'] * 100:.4f} %**" in text
        if column["exact"]:
            assert column["house_edge_fraction"] in text
    # The chart is shown on the page: its link resolves to the committed PNG.
    assert "](../cover-all-house-edge.png)" in text


def test_the_chart_carries_the_sheets_figures() -> None:
    data = (DOCS / "cover-all-house-edge.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    for game in SHEET:
        cells = ", ".join(
            f"{c['hands']}: {c['house_edge'] * 100:.4f}%{'' if c['exact'] else ' (sim)'}"
            for c in sorted(game["columns"], key=lambda c: c["hands"])
        )
        assert f"{game['game']} {cells}".encode() in data
