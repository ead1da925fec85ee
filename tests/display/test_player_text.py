"""The player's register (issue 22): ``static/js/player_text.js`` is the one place where
the contract's codes become what a player reads. Every code the contract has is enumerated
here from the Python side (the outcome and status literals of ``contract.payloads``, the
alarms that stop payouts in ``rules.table``) and each must have plain words: not empty, not
the code, no underscore, no spec reference. Run in Chromium, on the module as served.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from playwright.async_api import Page

from contract.payloads import (
    BustBonusResultBody,
    CoverAllResultBody,
    CrapsResultBody,
    CrapsReversalBody,
    CrapsRollBody,
    LastRollModel,
)
from rules.alarms import PAYOUT_ALARMS
from tests.display.conftest import WebServer
from tests.helpers.screens import STAFF_WORDS

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]


def literals(model: Any, name: str) -> set[str]:
    """The values of a ``Literal`` field of a contract model."""
    annotation = model.model_fields[name].annotation
    values = {str(v) for v in get_args(annotation)}
    assert values, f"{model.__name__}.{name} is not a Literal"
    return values


OUTCOMES = (
    literals(CoverAllResultBody, "outcome")
    | literals(BustBonusResultBody, "outcome")
    | literals(CrapsResultBody, "outcome")
    | literals(CrapsReversalBody, "outcome")
)
ROLL_STATUSES = literals(CrapsRollBody, "status") | literals(LastRollModel, "status")

TEXTS = """async ([outcomes, statuses, alarms]) => {
    const m = await import("/static/js/player_text.js");
    return {
        outcomes: Object.fromEntries(outcomes.map((o) => [o, m.outcomeText(o)])),
        rolls: Object.fromEntries(statuses.map((s) => [s, m.rollText({status: s, total: 7})])),
        alarms: Object.fromEntries(
            alarms.map((c) => [c, m.alarmText({code: c, stops_payouts: true})])),
        quiet: m.alarmText({code: "LINK_ERRORS", stops_payouts: false}),
        closed: m.CLOSED,
        seats: ["P1", "P8", "DL"].map(m.seat),
    };
}"""


def plain(text: str, code: str) -> None:
    """A player's words: something, not the code, nothing only staff reads."""
    assert text, f"no player text for {code}"
    assert text != code
    assert not STAFF_WORDS.search(text), f"{code}: {text!r} is staff text"


async def test_every_code_of_the_contract_has_plain_player_words(
    web: WebServer, page: Page
) -> None:
    await page.goto(f"{web.url}/table/no-such-table")
    texts = await page.evaluate(
        TEXTS, [sorted(OUTCOMES), sorted(ROLL_STATUSES), sorted(PAYOUT_ALARMS)]
    )
    assert set(texts["outcomes"]) == OUTCOMES
    for code, text in texts["outcomes"].items():
        plain(text, code)
    assert texts["outcomes"]["no_qualifier"] == "No qualifying hand"
    assert texts["outcomes"]["void"] == "Round void"
    for code, text in texts["rolls"].items():
        plain(text, code)
    assert texts["rolls"]["counted"] == "7"  # a counted roll reads as its total
    for code, text in texts["alarms"].items():
        plain(text, code)
        assert text == "Payouts paused: please wait for the dealer"
    assert texts["quiet"] is None  # other alarms are the pit's, not the player's
    for code, text in texts["closed"].items():
        plain(text, code)
    assert texts["seats"] == ["Seat 1", "Seat 8", "Dealer's hand"]
