"""The Cover All Bonus pay tables: the package data equals the regulation, cell by cell.

The regulation's text (tests/rules/fixtures/sd-cover-all-bonus.txt, a verbatim copy of the
seed) is parsed here on its own, without the package's code, and every cell compared.
"""

from __future__ import annotations

import json
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from rules.errors import HandError, PaytableError
from rules.paytables import (
    COVER_ALL_ROWS,
    ColumnError,
    cover_all_columns,
    cover_all_paytable,
    cover_all_table,
    parse_cover_all,
)
from rules.text import plural
from tests.helpers.paytables import FIXTURE, REGULATION

CELLS = [
    (game, row, hands, cell)
    for game, (columns, rows) in REGULATION.items()
    for row, cells in rows
    for hands, cell in zip(columns, cells, strict=True)
]


def test_fixture_is_the_seed_and_parses_to_six_whole_tables() -> None:
    seed = Path(__file__).parents[3] / "shared" / "seeds" / "sd-cover-all-bonus.txt"
    if seed.exists():  # beside the repo on a developer's machine and in CI
        assert FIXTURE.read_bytes() == seed.read_bytes()
    assert sorted(REGULATION) == ["CSP", "FCP", "LIR", "MSP", "TCP", "UTH"]
    for columns, rows in REGULATION.values():
        assert rows
        assert all(len(cells) == len(columns) for _, cells in rows)
    assert len(CELLS) == 222


@pytest.mark.parametrize(("game", "row", "hands", "cell"), CELLS)
def test_every_cell_equals_the_regulation(game: str, row: str, hands: int, cell: str) -> None:
    pays = {r.hand: r.pays for r in cover_all_paytable(game, hands)}
    assert pays[row] == Decimal(cell)
    assert str(pays[row]) == cell  # written exactly as the regulation writes it ("1.5")


@pytest.mark.parametrize("game", sorted(REGULATION))
def test_rows_and_columns_are_the_regulation_s(game: str) -> None:
    columns, rows = REGULATION[game]
    table = cover_all_table(game)
    assert list(table.columns) == columns
    assert [name for name, _ in rows] == list(table.rows) == list(COVER_ALL_ROWS[game])  # type: ignore[index]
    assert cover_all_columns(game) == tuple(sorted(columns))
    assert [r.hand for r in cover_all_paytable(game, columns[0])] == list(table.rows)


def test_three_card_straight_for_five_hands_stays_exactly_one_and_a_half() -> None:
    [straight] = [r for r in cover_all_paytable("TCP", 5) if r.hand == "Straight"]
    assert straight.pays == Decimal("1.5")
    assert straight.pays.as_tuple() == Decimal("1.5").as_tuple()


def test_spec_example_column_for_three_caribbean_stud_hands() -> None:
    # shuffler-icd.md, "Example: one Caribbean Stud round"
    assert [(r.hand, str(r.pays)) for r in cover_all_paytable("CSP", 3)] == [
        ("Royal Flush", "300"),
        ("Straight Flush", "125"),
        ("Four of a Kind", "40"),
        ("Full House", "30"),
        ("Flush", "20"),
        ("Straight", "17"),
        ("Three of a Kind", "6"),
    ]


@pytest.mark.parametrize(("game", "hands"), [("CSP", 1), ("CSP", 9), ("UTH", 8), ("MSP", 7)])
def test_hands_that_are_not_a_column_raise_a_clear_error(game: str, hands: int) -> None:
    # "1 total hand", never "1 total hands" (issue 20: plurals right everywhere).
    noun = "total hand" if hands == 1 else "total hands"
    with pytest.raises(ColumnError, match=f"no pay-table column for {hands} {noun}:") as info:
        cover_all_paytable(game, hands)
    assert isinstance(info.value, HandError)
    assert isinstance(info.value, PaytableError)
    assert info.value.columns == cover_all_columns(game)
    assert info.value.hands == hands


@pytest.mark.parametrize("game", ["BJ", "csp", "", "Craps"])
def test_unknown_game_raises(game: str) -> None:
    with pytest.raises(HandError, match="no Cover All Bonus for game"):
        cover_all_paytable(game, 3)


# ---------------------------------------------------------------------------------------
# Validation on load: a bad edit of the data fails with a message naming the cell


def shipped() -> Any:
    text = (resources.files("rules") / "data" / "cover_all.json").read_text("utf-8")
    return json.loads(text)


def row_of(data: Any, game: str, hand: str) -> Any:
    return next(r for r in data["games"][game]["rows"] if r["hand"] == hand)


def set_cell(value: object) -> Any:
    data = shipped()
    row_of(data, "TCP", "Straight")["pays"][3] = value
    return data


def swap_rows() -> Any:
    data = shipped()
    rows = data["games"]["UTH"]["rows"]
    rows[2], rows[3] = rows[3], rows[2]
    return data


def rename_row() -> Any:
    data = shipped()
    row_of(data, "FCP", "Four of A Kind (Other)")["hand"] = "Four of a Kind (Other)"
    return data


def drop_cell() -> Any:
    data = shipped()
    row_of(data, "CSP", "Flush")["pays"].pop()
    return data


def raise_lower_row() -> Any:
    data = shipped()
    row_of(data, "MSP", "Straight")["pays"][0] = "11"
    return data


def duplicate_column() -> Any:
    data = shipped()
    data["games"]["LIR"]["columns"][1] = 7
    return data


def ascending_columns() -> Any:
    data = shipped()
    game = data["games"]["UTH"]
    game["columns"].reverse()
    for row in game["rows"]:
        row["pays"].reverse()
    return data


def drop_game() -> Any:
    data = shipped()
    del data["games"]["MSP"]
    return data


def other_odds() -> Any:
    data = shipped()
    data["odds"] = "for 1"
    return data


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (set_cell(1.5), r"TCP, Straight, 5 hands: pays 1\.5 is not a positive exact decimal"),
        (set_cell("1.50"), r"TCP, Straight, 5 hands: pays '1\.50'"),
        (set_cell("0"), r"pays '0' is not a positive"),
        (set_cell("-1"), r"pays '-1'"),
        (set_cell("NaN"), r"pays 'NaN'"),
        (swap_rows(), r"game UTH: rows must be .* in that \(rank\) order"),
        (rename_row(), r"game FCP: rows must be"),
        (drop_cell(), r"game CSP, Flush: expected 7 pays"),
        (raise_lower_row(), r"game MSP, 6 hands: a higher hand pays less than a lower one"),
        (duplicate_column(), r"game LIR: columns must be distinct, most hands first"),
        (ascending_columns(), r"game UTH: columns must be distinct, most hands first"),
        (drop_game(), r"games: expected exactly"),
        (other_odds(), r'odds must be "to 1"'),
    ],
)
def test_bad_data_is_rejected_naming_the_cell(broken: Any, message: str) -> None:
    with pytest.raises(PaytableError, match=message):
        parse_cover_all(json.dumps(broken))


def test_shipped_data_validates_and_not_json_is_rejected() -> None:
    assert parse_cover_all(json.dumps(shipped())) == {g: cover_all_table(g) for g in REGULATION}
    with pytest.raises(PaytableError, match="is not JSON"):
        parse_cover_all("{")


def edit(change: Any) -> Any:
    """The shipped document after ``change(document)``."""
    data = shipped()
    change(data)
    return data


def _set(path: tuple[str | int, ...], value: object) -> Any:
    def change(data: Any) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit(change)


def _add_key(path: tuple[str | int, ...]) -> Any:
    def change(data: Any) -> None:
        node = data
        for key in path:
            node = node[key]
        node["note"] = "x"

    return edit(change)


# The regulation's 6-hand Mississippi Stud column with its Straight raised to 11.
MSP_SIX_HANDS_WITH_STRAIGHT_AT_11 = [
    "11" if row == "Straight" else cells[0] for row, cells in REGULATION["MSP"][1]
]
COLUMNS_MESSAGE = "columns must be total hands 1..9 (8 players and DL), got {}"


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        # The shape of the document and of each game (a mis-edit must not load silently, nor
        # fail with a KeyError or TypeError that names no cell).
        ([], "top level: expected an object with a games object"),
        ({"odds": "to 1", "games": []}, "top level: expected an object with a games object"),
        (
            _set(("odds",), "for 1"),
            'top level: odds must be "to 1" (rule (9): "All pays are TO 1")',
        ),
        (
            _set(("games", "CSP"), []),
            "game CSP: expected an object with exactly title, columns and rows",
        ),
        (
            _add_key(("games", "CSP")),
            "game CSP: expected an object with exactly title, columns and rows",
        ),
        (_set(("games", "TCP", "title"), ""), "game TCP: title must be a non-empty string"),
        (_set(("games", "TCP", "title"), 3), "game TCP: title must be a non-empty string"),
        (_set(("games", "LIR", "columns"), []), "game LIR: " + COLUMNS_MESSAGE.format("[]")),
        (_set(("games", "LIR", "columns"), "7,6"), "game LIR: " + COLUMNS_MESSAGE.format("'7,6'")),
        (
            _set(("games", "LIR", "columns", 6), 0),
            "game LIR: " + COLUMNS_MESSAGE.format("[7, 6, 5, 4, 3, 2, 0]"),
        ),
        (
            _set(("games", "CSP", "columns", 0), 10),
            "game CSP: " + COLUMNS_MESSAGE.format("[10, 7, 6, 5, 4, 3, 2]"),
        ),
        (
            _set(("games", "CSP", "columns", 0), True),
            "game CSP: " + COLUMNS_MESSAGE.format("[True, 7, 6, 5, 4, 3, 2]"),
        ),
        (
            _set(("games", "UTH", "rows"), {}),
            "game UTH: rows must be objects with exactly hand and pays",
        ),
        (
            _add_key(("games", "UTH", "rows", 1)),
            "game UTH: rows must be objects with exactly hand and pays",
        ),
        (
            _set(("games", "UTH", "rows", 1), ["Straight Flush"]),
            "game UTH: rows must be objects with exactly hand and pays",
        ),
        (
            _set(("games", "UTH", "rows", 0, "pays"), "70"),
            "game UTH, Royal Flush: expected 6 pays, one a column",
        ),
        (
            _set(("games", "MSP", "rows", 5, "pays", 0), "11"),
            "game MSP, 6 hands: a higher hand pays less than a lower one:"
            f" {MSP_SIX_HANDS_WITH_STRAIGHT_AT_11}",
        ),
    ],
)
def test_a_mis_edited_document_is_refused_with_the_whole_message(broken: Any, message: str) -> None:
    with pytest.raises(PaytableError) as info:
        parse_cover_all(json.dumps(broken))
    assert str(info.value) == f"cover_all.json, {message}"


def test_nine_hands_and_equal_neighbours_are_a_valid_table() -> None:
    # Rule (4): up to 8 players and the dealer, so a 9-hand column is allowed; a column only
    # must never pay a higher hand less, so two hands may pay the same.
    data = _set(("games", "CSP", "columns", 0), 9)
    row_of(data, "UTH", "Straight Flush")["pays"][0] = "70"
    tables = parse_cover_all(json.dumps(data))
    assert tables["CSP"].column(9)[0] == cover_all_paytable("CSP", 8)[0]
    assert [r.pays for r in tables["UTH"].column(7)[:2]] == [Decimal(70), Decimal(70)]


@pytest.mark.parametrize(
    ("count", "expected"),
    [(0, "0 hands"), (1, "1 hand"), (2, "2 hands"), (1024, "1,024 hands")],
)
def test_counts_are_written_with_the_noun_in_the_right_number(count: int, expected: str) -> None:
    assert plural(count, "hand") == expected


def test_an_irregular_plural_is_given() -> None:
    assert plural(1, "body", "bodies") == "1 body"
    assert plural(2, "body", "bodies") == "2 bodies"
