"""``lammer odds``, run as a real subprocess of the installed entry point."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

LAMMER = str(Path(sys.executable).with_name("lammer"))


def lammer(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``lammer odds ARGS`` and capture its output."""
    return subprocess.run(
        [LAMMER, "odds", *args], capture_output=True, text=True, timeout=60, check=False
    )


def no_floats(text: str) -> Any:
    """Parse JSON, failing on any float: odds are strings (mqtt-api.md)."""

    def refuse(number: str) -> None:
        raise AssertionError(f"a JSON float in the output: {number}")

    return json.loads(text, parse_float=refuse)


def exact(cell: dict[str, str]) -> Fraction:
    """A ``{"fraction": "n/d", "decimal": "..."}`` cell: lowest terms, decimal agrees."""
    numerator, denominator = (int(part) for part in cell["fraction"].split("/"))
    assert denominator > 0
    assert math.gcd(numerator, denominator) == 1, cell["fraction"]
    value = Fraction(numerator, denominator)
    decimal = Decimal(cell["decimal"])
    assert "E" not in cell["decimal"]
    places = -decimal.as_tuple().exponent  # type: ignore[operator]
    assert abs(Fraction(decimal) - value) <= Fraction(1, 2 * 10**places)
    return value


def test_bust_bonus_json_is_exact_and_reproduces_published_figures() -> None:
    done = lammer("bust-bonus", "--decks", "6", "--h17", "--json")
    assert done.returncode == 0, done.stderr
    data = no_floats(done.stdout)
    assert (data["game"], data["decks"], data["dealer"]) == ("bust_bonus", 6, "H17")
    rows = {row["up_card"]: row for row in data["up_cards"]}
    assert list(rows) == ["Ace", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
    for row in rows.values():
        parts = [
            exact(row[key])
            for key in (
                "suited_bust",
                "off_suit_bust",
                "three_eights_suited",
                "three_eights_off_suit",
                "no_bust",
            )
        ]
        assert sum(parts) == 1
        assert exact(row["bust"]) == 1 - parts[-1]
    assert sum(exact(row["probability"]) for row in rows.values()) == 1
    assert (rows["Ace"]["pays"], rows["10"]["pays"]) == (
        {"off_suit": "3", "suited": "50"},
        {"off_suit": "2", "suited": "20"},
    )
    # Published 6-deck H17 analysis (S. How, 2013): the 8 up, three 8s included.
    eight = rows["8"]
    assert round(exact(eight["suited_bust"]), 6) == Fraction("0.011133")
    assert round(exact(eight["three_eights_off_suit"]), 6) == Fraction("0.005041")
    assert round(exact(eight["ev"]), 6) == Fraction("-0.048772")
    edge = exact(data["house_edge"])
    assert edge == -exact(data["ev"])
    assert edge == -sum(exact(r["probability"]) * exact(r["ev"]) for r in rows.values())


def test_bust_bonus_defaults_to_six_decks_s17_and_s17_costs_more() -> None:
    default = no_floats(lammer("bust-bonus", "--json").stdout)
    h17 = no_floats(lammer("bust-bonus", "--h17", "--json").stdout)
    assert (default["decks"], default["dealer"], default["hits_soft_17"]) == (6, "S17", False)
    assert exact(default["house_edge"]) > exact(h17["house_edge"])  # H17 busts more


def test_bust_bonus_table_prints_every_exact_fraction() -> None:
    data = no_floats(lammer("bust-bonus", "--decks", "2", "--json").stdout)
    done = lammer("bust-bonus", "--decks", "2")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("Bust Bonus, 2 decks, dealer stands on soft 17 (S17)\n")
    for row in data["up_cards"]:
        assert row["suited_bust"]["fraction"] in text
        assert row["no_bust"]["fraction"] in text
        assert row["ev"]["fraction"] in text
    assert data["house_edge"]["fraction"] in text
    percent = round(exact(data["house_edge"]) * 100, 4)
    assert f"House edge       {Decimal(percent.numerator) / Decimal(percent.denominator)}%" in text


def test_bonus_craps_json_has_both_pay_tables_and_the_published_edges() -> None:
    done = lammer("bonus-craps", "--json")
    assert done.returncode == 0, done.stderr
    data = no_floats(done.stdout)
    tables = {t["paytable"]: {b["bet"]: b for b in t["bets"]} for t in data["paytables"]}
    assert sorted(tables) == [1, 2]
    assert [tables[1][b]["pays"] for b in ("all_small", "all_tall", "make_em_all")] == [
        "34",
        "34",
        "175",
    ]
    assert [tables[2][b]["pays"] for b in ("all_small", "all_tall", "make_em_all")] == [
        "30",
        "30",
        "150",
    ]
    # Published house edges of Pay Table 1: about 7.8% (All Small/Tall) and 7.5% (Make 'Em All).
    assert round(exact(tables[1]["all_small"]["house_edge"]), 3) == Fraction("0.078")
    assert round(exact(tables[1]["make_em_all"]["house_edge"]), 3) == Fraction("0.075")
    for bets in tables.values():
        for bet in bets.values():
            p = exact(bet["probability"])
            assert exact(bet["house_edge"]) == 1 - p * (Fraction(bet["pays"]) + 1)


def test_bonus_craps_one_pay_table_readable() -> None:
    done = lammer("bonus-craps", "--paytable", "2")
    assert done.returncode == 0, done.stderr
    assert "Bonus Craps, pay table 2" in done.stdout
    assert "pay table 1" not in done.stdout
    assert "Make 'Em All  150 to 1" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bust-bonus", "--decks", "0"), "a shoe holds 1 to 8 decks, not 0"),
        (("bust-bonus", "--decks", "9"), "a shoe holds 1 to 8 decks, not 9"),
        (("bust-bonus", "--decks", "six"), "'six' is not a whole number of decks"),
        (("bust-bonus", "--s17", "--h17"), "not allowed with argument --s17"),
        (("bonus-craps", "--paytable", "3"), "invalid choice: 3"),
        (("roulette",), "invalid choice: 'roulette'"),
        ((), "the following arguments are required: GAME"),
    ],
)
def test_bad_arguments_exit_2_with_a_specific_message(args: tuple[str, ...], message: str) -> None:
    done = lammer(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""
