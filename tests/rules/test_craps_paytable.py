"""The Bonus Craps data against the seed, read independently from a verbatim copy of it."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from rules.craps import initial_state
from rules.errors import ConfigError, PaytableError
from rules.events import CrapsBet
from rules.paytables import BET_RULES, BONUS_CRAPS, bonus_craps_odds, parse_bonus_craps

SEED = Path(__file__).parent / "fixtures" / "sd-bonus-craps.txt"
DATA_FILE = Path(__file__).parents[2] / "rules" / "data" / "bonus_craps.json"
SEED_NAMES: dict[CrapsBet, str] = {
    "all_small": "All Small",
    "all_tall": "All Tall",
    "make_em_all": "Make 'Em All",
}


def seed_pay_tables() -> dict[str, tuple[str, str]]:
    """The seed's table: after "Pay Tables:" come the headers, then name, table 1, table 2."""
    text = SEED.read_text(encoding="utf-8")
    after = text.split("Pay Tables:", 1)[1].split("There are three side bets", 1)[0]
    cells = [line.strip() for line in after.splitlines() if line.strip()]
    assert cells[:3] == ["Side Bet", "Pay Table 1", "Pay Table 2"]
    rows = cells[3:]
    assert len(rows) % 3 == 0, rows
    return {rows[i]: (rows[i + 1], rows[i + 2]) for i in range(0, len(rows), 3)}


def seed_numbers() -> dict[str, frozenset[int]]:
    """Each bet's numbers, from the parenthesis after "numbers" in clauses (1), (2), (3)."""
    text = SEED.read_text(encoding="utf-8")
    sections = re.split(r"^\d\. \((\d)\) ", text, flags=re.MULTILINE)
    found: dict[str, frozenset[int]] = {}
    for number, body in zip(sections[1::2], sections[2::2], strict=True):
        group = re.search(r"numbers \(([^)]*)\)", body)
        assert group is not None, number
        found[number] = frozenset(int(n) for n in re.findall(r"\d+", group.group(1)))
    return {"all_small": found["1"], "all_tall": found["2"], "make_em_all": found["3"]}


def test_every_pay_table_cell_matches_the_seed() -> None:
    seed = seed_pay_tables()
    assert set(seed) == {rule.name for rule in BONUS_CRAPS.rules}
    assert sorted(BONUS_CRAPS.paytables) == [1, 2]
    for rule in BONUS_CRAPS.rules:
        table_1, table_2 = seed[rule.name]
        assert BONUS_CRAPS.paytables[1][rule.bet] == Decimal(table_1)
        assert BONUS_CRAPS.paytables[2][rule.bet] == Decimal(table_2)


def test_bet_names_and_numbers_match_the_seed() -> None:
    numbers = seed_numbers()
    for bet, name in SEED_NAMES.items():
        assert BET_RULES[bet].name == name
        assert BET_RULES[bet].numbers == numbers[bet]
    assert numbers["make_em_all"] == numbers["all_small"] | numbers["all_tall"]


@pytest.mark.parametrize("paytable", [0, 3, -1, True, "1", 1.0])
def test_unknown_pay_table_is_a_config_error(paytable: object) -> None:
    with pytest.raises(ConfigError, match=r"pay table .* does not exist: choose 1 or 2"):
        initial_state(paytable)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        bonus_craps_odds(paytable)  # type: ignore[arg-type]


def _data(**changes: object) -> str:
    raw = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    for path, value in changes.items():
        node = raw
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return json.dumps(raw)


def test_shipped_data_parses_to_what_is_loaded() -> None:
    assert parse_bonus_craps(_data()) == BONUS_CRAPS


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"paytables__1__all_small": 34}, r"paytables\.1\.all_small must be a string"),
        ({"paytables__1__all_small": "34.x"}, "is not a decimal"),
        ({"paytables__2__make_em_all": "-5"}, "not a positive amount"),
        ({"paytables__2__make_em_all": "Infinity"}, "not a positive amount"),
        ({"paytables__2__all_tall": None}, r"paytables\.2 must give the odds of exactly"),
        ({"paytables__x": {}}, "'x' is not a pay table number"),
        # str.isdigit() holds for "²", which int() refuses: a crash, not a data error.
        ({"paytables__²": {}}, "'²' is not a pay table number"),
        ({"paytables__0": {}}, "'0' is not a pay table number"),
        # "01" would silently replace pay table 1.
        ({"paytables__01": {}}, "'01' is not a pay table number"),
        ({"bets__all_small__numbers": [2, 3, 7]}, "7 is not a total of 2 to 12 other than 7"),
        ({"bets__all_small__numbers": [2, 2]}, "2 is listed twice"),
        ({"bets__all_tall__numbers": [8, True]}, "True is not a total"),
        ({"bets__all_tall__numbers": []}, "non-empty list"),
        ({"bets__make_em_all": None}, "bets must be an object with exactly"),
        ({"bets__all_small__name": ""}, "needs a name"),
    ],
)
def test_bad_data_names_the_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(PaytableError, match=message):
        parse_bonus_craps(_data(**changes))


def test_data_that_is_not_json_is_a_paytable_error() -> None:
    with pytest.raises(PaytableError, match="not JSON"):
        parse_bonus_craps("{")
    with pytest.raises(PaytableError, match="top level must be an object"):
        parse_bonus_craps("[]")


BETS = "all_small, all_tall, make_em_all"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "the top level must be an object"),
        (_data(paytables={}), "paytables must be a non-empty object"),
        (_data(bets__make_em_all=None), f"bets must be an object with exactly {BETS}"),
        (_data(paytables__2__all_tall=None), f"paytables.2 must give the odds of exactly {BETS}"),
        # A pay table that pays nothing is a mis-edit, not a free bet (SD 20:18:33:12 pays "to 1").
        (
            _data(paytables__1__all_small="0"),
            "paytables.1.all_small: '0' is not a positive amount to 1",
        ),
        (
            _data(bets__all_tall__numbers=[8, 13]),
            "bets.all_tall.numbers: 13 is not a total of 2 to 12 other than 7",
        ),
        (
            _data(bets__all_small__numbers=[1, 2]),
            "bets.all_small.numbers: 1 is not a total of 2 to 12 other than 7",
        ),
    ],
)
def test_bad_data_is_refused_with_the_whole_message(text: str, message: str) -> None:
    with pytest.raises(PaytableError) as info:
        parse_bonus_craps(text)
    assert str(info.value) == f"bonus_craps.json: {message}"


@pytest.mark.parametrize("odds", ["1", "0.5"])
def test_odds_of_one_to_one_or_less_are_still_a_pay_table(odds: str) -> None:
    data = parse_bonus_craps(_data(paytables__2__all_small=odds))
    assert data.paytables[2]["all_small"] == Decimal(odds)
