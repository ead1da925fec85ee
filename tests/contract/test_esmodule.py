"""The browser's ES module of the contract (display/web/static/js/contract.js) is generated
from the Python declarations, and no page spells again what it holds."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from contract.esmodule import MODULE, main, module_text, write_module
from contract.topics import Topic

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / MODULE.parent


def exported(text: str) -> dict[str, object]:
    """The module's constants, read back as JSON (each is a JSON value, frozen)."""
    found: dict[str, object] = {}
    pattern = r"export const (\w+) = (?:Object\.freeze\()?(.*?)\)?;\n"
    for name, value in re.findall(pattern, text, flags=re.S):
        found[name] = json.loads(value)
    return found


def test_contract_js_is_up_to_date() -> None:
    on_disk = (ROOT / MODULE).read_text(encoding="utf-8")
    assert on_disk == module_text(), f"{MODULE} is stale: run `make schemas` and commit it"


def test_the_module_holds_the_contracts_words() -> None:
    values = exported(module_text())
    # shuffler-icd.md "Games", sd-bonus-craps.txt, 68 IAC 10-4-4(c): known values.
    assert values["GAMES"] == {
        "CSP": "Caribbean Stud Poker",
        "FCP": "Four Card Poker",
        "LIR": "Let It Ride",
        "MSP": "Mississippi Stud",
        "TCP": "Three Card Poker",
        "UTH": "Ultimate Texas Hold'em",
        "BJ": "Blackjack",
        "CRAPS": "Craps",
    }
    assert values["BETS"] == {
        "all_small": "All Small",
        "all_tall": "All Tall",
        "make_em_all": "Make 'Em All",
    }
    clauses = values["CLAUSES"]
    assert isinstance(clauses, dict)
    assert list(clauses) == [str(n) for n in range(1, 12)]
    assert "chips" in clauses["9"]
    assert values["VOID_CLAUSES"] == ["2", "3", "6"]
    topics = values["TOPICS"]
    assert isinstance(topics, dict)
    assert topics["craps/roll"] == {"retained": False}
    assert topics["craps/board"] == {"retained": True}
    assert values["MAX_ID"] == 999999
    names = values["TOPIC"]
    assert isinstance(names, dict)
    assert names["CRAPS_ROLL"] == "craps/roll"
    assert set(names.values()) == set(topics) | {"availability"}
    assert values["FAMILY_TOPICS"] == {
        "poker": ["cover_all/payouts", "cover_all/result"],
        "BJ": ["bust_bonus/state", "bust_bonus/result"],
        "CRAPS": ["craps/board", "craps/roll", "craps/result", "craps/reversal"],
    }


def test_no_page_spells_the_contracts_words_again() -> None:
    for path in JS.glob("*.js"):
        if path.name == MODULE.name:
            continue
        text = path.read_text(encoding="utf-8")
        for words in ("Caribbean Stud Poker", "Make 'Em All", "dice bowl", "ON_CHIPS"):
            assert words not in text, (path.name, words)


def test_no_page_spells_a_topic() -> None:
    """Topic names come from contract.js only: a page that wrote "craps/roll" itself would
    go on reading the old name after the contract changed it."""
    # Each topic quoted as a JS string: the tails of mqtt-api.md's topics, and the four
    # common topics where a page reads them from a table (`topics.get("state")`).
    tails = re.compile(r"""["'`](cover_all|craps|bust_bonus)/\w+["'`]""")
    common = re.compile(r"""(topics\.(get|has)|topic ===|latest\(\w+|historyOf\(\w+),? ?["'`]""")
    for path in JS.glob("*.js"):
        if path.name == MODULE.name:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("//"):
                continue
            assert not tails.search(line), f"{path.name}:{number}: {line.strip()}"
            assert not common.search(line), f"{path.name}:{number}: {line.strip()}"


PACKAGES = (
    "rules",
    "drivers",
    "daemon",
    "deploy",
    "cli",
    "display",
    "records",
    "bulk",
    "simulators",
)
"""Every package but ``contract`` (which declares the topics) and ``foundation``."""

_TAILS = frozenset(t.value for t in Topic if "/" in t)
_SPELLED = re.compile(
    r"^(request|response)(/|$)|^lammer(-floor)?/|/(request|response)/|^(cover_all|craps|bust_bonus)/"
)


def _spelled_topics(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module (docstrings aside) that spell a topic or a topic's
    level: a game's topic (``craps/roll``), ``request/...``, ``response/...``, a root."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and (node.value in _TAILS or _SPELLED.search(node.value))
    ]


@pytest.mark.heavy  # parses every module of the product: over a second of CPU
def test_no_python_module_spells_a_topic() -> None:
    """Topic names come from ``contract.topics`` only (``Topic``, ``request``,
    ``response``, ``GAME_LEVELS``), in Python as in the pages: a module that wrote
    "craps/roll" itself would go on using the old name after the contract changed it."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            found += [f"{where}:{line}: {text!r}" for line, text in _spelled_topics(path)]
    assert found == []


def test_the_topic_spelling_check_finds_a_spelled_topic(tmp_path: Path) -> None:
    module = tmp_path / "spells.py"
    module.write_text(
        '"""craps/roll in a docstring is prose."""\n'
        'A = "craps/roll"\nB = f"{base}/request/resend"\nC = "response/+"\nD = "state"\n'
    )
    assert sorted(text for _, text in _spelled_topics(module)) == [
        "/request/resend",
        "craps/roll",
        "response/+",
    ]


def test_writing_again_changes_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / MODULE.parent).mkdir(parents=True)
    assert write_module(tmp_path)
    assert not write_module(tmp_path)
    assert main([str(tmp_path)]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["a", "b"]) == 2
