"""Every alarm code the rules can raise is declared once, with its clearing condition, in
``rules.alarms``; and nothing is declared there that the rules never raise.

The codes are found in the rules' source, where alarms are made: ``_raise(state, CODE, ...)``,
``Alarm(code=CODE, ...)`` and ``AlarmRaised(code=CODE, ...)``. A code written any other way
(an expression this test cannot read) fails the test, so a new alarm cannot slip past it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from rules.alarms import ALARMS, DEVICE_FAULT_PREFIX, PAYOUT_ALARMS, alarm_kind

RULES = Path(__file__).resolve().parents[2] / "rules"
MAKERS = {"_raise": 1, "Alarm": "code", "AlarmRaised": "code"}
"""Where an alarm is made: the position or keyword of its code."""


def code_argument(call: ast.Call) -> ast.expr | None:
    """The expression that gives the alarm's code in ``call``, if ``call`` makes one."""
    name = call.func.id if isinstance(call.func, ast.Name) else None
    where = MAKERS.get(name or "")
    if isinstance(where, int):
        return call.args[where] if len(call.args) > where else None
    if isinstance(where, str):
        return next((k.value for k in call.keywords if k.arg == where), None)
    return None


def resolve(expr: ast.expr, module: str, params: set[str]) -> str | None:
    """The code ``expr`` stands for; None for a code passed through: a parameter of the
    function that makes the alarm (``_raise``'s own ``code``) or ``outcome.code``."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name) and expr.id in params:
        return None  # the maker's caller names the code, and is scanned in turn
    if isinstance(expr, ast.Name):
        value = getattr(importlib.import_module(module), expr.id)
        assert isinstance(value, str), f"{module}: {expr.id} is not a code"
        return value
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        assert expr.func.id == "_fault_code", ast.unparse(expr)
        return f"{DEVICE_FAULT_PREFIX}<code>"
    # A game's AlarmRaised handed on by the table: its code was read where it was made.
    assert isinstance(expr, ast.Attribute), f"{module}: cannot tell which alarm {expr} is"
    assert ast.unparse(expr) == "outcome.code", f"{module}: which alarm is {ast.unparse(expr)}?"
    return None


def raised_codes() -> dict[str, list[str]]:
    """Every code the rules make an alarm with, and where."""
    found: dict[str, list[str]] = {}

    def visit(node: ast.AST, module: str, where: str, params: set[str]) -> None:
        if isinstance(node, ast.FunctionDef):
            params = params | {a.arg for a in node.args.args + node.args.kwonlyargs}
        if isinstance(node, ast.Call) and (expr := code_argument(node)) is not None:
            code = resolve(expr, module, params)
            if code is not None:
                found.setdefault(code, []).append(f"{where}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, module, where, params)

    for path in sorted(RULES.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        visit(tree, f"rules.{path.stem}", path.name, set())
    return found


def test_every_code_the_rules_raise_is_declared_with_its_clearing_condition() -> None:
    found = raised_codes()
    # The scan sees the alarms of the devices, the games and the host alike.
    assert {"DISCONNECTED", "LATE_FRAME", "JOURNAL_FAULT", "ROLL_BACKLOG"} <= found.keys()
    declared = {kind.code for kind in ALARMS}
    assert found.keys() - declared == set(), "raised but not declared in rules/alarms.py"
    assert declared - found.keys() == set(), "declared in rules/alarms.py but never raised"
    for kind in ALARMS:
        assert kind.raised.strip(), kind.code
        assert kind.cleared.strip(), kind.code
    assert len(declared) == len(ALARMS)


def test_payout_alarms_are_the_declared_ones_that_stop_payouts() -> None:
    assert {"MODE_MISMATCH", "DECK_FAULT", "SOFTWARE"} == PAYOUT_ALARMS


def test_a_device_fault_code_is_its_family() -> None:
    kind = alarm_kind("DEVICE_FAULT_JAM")
    assert kind is not None
    assert kind.code == "DEVICE_FAULT_<code>"
    assert alarm_kind("DEVICE_FAULT_OTHER") is not kind
    assert alarm_kind("NOT_AN_ALARM") is None
