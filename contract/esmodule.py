"""The browser's share of the contract: one ES module generated from these declarations.

The pages of ``lammer web`` run ES modules as served (no build step), so what they need of
the contract (the topics and which games publish them, the screens' history, the
contract's version, the games' and bets' names, the texts of the clauses a stickperson
reads) is written into ``display/web/static/js/contract.js`` by ``write_module`` (``make
schemas``), and a test fails when the file is stale. No page spells a topic, a game, a bet
or a clause itself, and none reads the daemon's English.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from contract.payloads import CONTRACT_VERSION, TOPICS
from contract.topics import FAMILY_TOPICS, HISTORY, HISTORY_TOPICS, RESULTS, Topic
from contract.vocabulary import BET_NAMES, GAME_NAMES, INVALID_ROLL_CLAUSES, VOID_CLAUSES
from rules.events import MAX_ID, POKER_GAMES

MODULE: Final = Path("display") / "web" / "static" / "js" / "contract.js"
"""Where the module is, relative to the repository."""


def _const(name: str, value: Any, comment: str) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if isinstance(value, dict | list):
        text = f"Object.freeze({text})"
    return f"// {comment}\nexport const {name} = {text};\n"


def module_text() -> str:
    """The text of ``contract.js``."""
    parts = [
        "// Generated from the Python package `contract` by `make schemas`"
        " (python -m contract.esmodule).\n"
        "// Do not edit: tests/contract/test_esmodule.py fails when this file is stale.\n",
        _const("CONTRACT_VERSION", CONTRACT_VERSION, "The MQTT contract (docs/reference/mqtt.md)."),
        _const(
            "TOPICS",
            {topic: {"retained": retained} for topic, (_, retained) in TOPICS.items()},
            "Every JSON topic under a table's base topic, and whether it is retained.",
        ),
        _const(
            "TOPIC",
            {member.name: member.value for member in Topic},
            "Every topic under a table's base topic, by name: a page never spells one.",
        ),
        _const(
            "FAMILY_TOPICS",
            {name: [t.value for t in topics] for name, topics in FAMILY_TOPICS.items()},
            "Each game family's own topics (poker: the games with a Cover All Bonus).",
        ),
        _const(
            "RESULTS",
            [t.value for t in RESULTS],
            "The topics a table's last result is read from, in the order preferred.",
        ),
        _const(
            "HISTORY_TOPICS",
            sorted(t.value for t in HISTORY_TOPICS),
            "The topics whose earlier messages a page keeps, besides the latest.",
        ),
        _const("HISTORY", HISTORY, "Messages kept per table and history topic."),
        _const("GAMES", dict(GAME_NAMES), "Each game a table plays, as people name it."),
        _const("POKER_GAMES", list(POKER_GAMES), "The games with a Cover All Bonus."),
        _const("BETS", dict(BET_NAMES), "The Bonus Craps bets as the seed names them."),
        _const(
            "CLAUSES",
            {str(n): text for n, text in INVALID_ROLL_CLAUSES.items()},
            "68 IAC 10-4-4(c): the rolls the stickperson may declare invalid (shortened).",
        ),
        _const(
            "VOID_CLAUSES",
            [str(n) for n in VOID_CLAUSES],
            "The clauses request/void_roll declares (the reader cannot see them).",
        ),
        _const("MAX_ID", MAX_ID, "Round and roll ids run from 1 to this."),
    ]
    return "\n".join(parts)


def write_module(root: Path) -> bool:
    """Write ``contract.js`` under the repository ``root``; True when it changed."""
    path = root / MODULE
    text = module_text()
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m contract.esmodule [ROOT]``: write ``contract.js``, say whether it changed."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1:
        print("usage: python -m contract.esmodule [REPOSITORY]", file=sys.stderr)
        return 2
    root = Path(args[0] if args else ".")
    print(f"wrote {root / MODULE}" if write_module(root) else f"{MODULE} up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
