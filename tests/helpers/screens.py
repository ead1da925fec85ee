"""The screens' browser tests' tools: dealt rounds, the viewport sizes and their regions,
the staff's words, the accessibility audit, logins."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt
from playwright.async_api import Page, expect

from contract.floor import IntegrityBody
from tests.display.conftest import (
    STICKPERSON,
    AuthBroker,
    WebServer,
)
from tests.integration.harness import LAMMER

WAIT = 15_000  # ms: a bound for failures only, never what is tested


UTH_ROYAL_AT_5 = """\
DECK,OK
HAND,31,P1,AsKs
HAND,31,P2,9h9d
HAND,31,P3,8c7c
HAND,31,P4,4h4d
HAND,31,DL,6d5c
HAND,31,CM,QsJsTs2d3c
ROUND,31,5
SETTLE,31
"""


CRAPS_CHECK = """\
ROLL,201,1,1
ROLL,202,1,2
ROLL,203,2,2
ROLL,204,2,3
CHECK,205,3,3,ON_CHIPS
"""


BJ_888_SUITED = """\
CARD,51,P1,Ts
CARD,51,DL,8h
CARD,51,P1,9s
CARD,51,DL,8h
CARD,51,DL,8h
END,51
"""


async def login(page: Page, web: WebServer, table_id: str) -> None:
    """Open the stickperson terminal and log in as the test's stickperson."""
    await page.goto(f"{web.url}/stick/{table_id}")
    await page.fill("#user", STICKPERSON[0])
    await page.fill("#password", STICKPERSON[1])
    await page.click("#login-button")
    # Argon2id takes its time on purpose, and longer on a loaded machine: a wider bound.
    await expect(page.locator("#who")).to_have_text(
        f"stickperson: {STICKPERSON[0]}", timeout=2 * WAIT
    )


SIZES = {
    "1920x1080": (1920, 1080),
    "1280x800": (1280, 800),
    "1024x768": (1024, 768),
    "1080x1920": (1080, 1920),
}


MEASURE = """(selectors) => selectors.map((sel) => {
    const el = document.querySelector(sel);
    if (!el) return {sel, missing: true};
    const r = el.getBoundingClientRect();
    return {sel, x: r.left, y: r.top, right: r.right, bottom: r.bottom,
            scrollW: el.scrollWidth, clientW: el.clientWidth,
            scrollH: el.scrollHeight, clientH: el.clientHeight,
            clips: getComputedStyle(el).overflow !== "visible",
            fontSize: parseFloat(getComputedStyle(el).fontSize)};
})"""


async def measure(page: Page, selectors: list[str]) -> dict[str, dict[str, Any]]:
    """The boxes of ``selectors`` (each must exist)."""
    boxes: list[dict[str, Any]] = await page.evaluate(MEASURE, selectors)
    missing = [b["sel"] for b in boxes if b.get("missing")]
    assert not missing, f"regions missing: {missing}"
    return {b["sel"]: b for b in boxes}


def check_regions(boxes: dict[str, dict[str, Any]], width: int, height: int) -> None:
    """Inside the viewport, no overlap, nothing cut off (half a pixel of rounding)."""
    eps = 0.5
    for sel, b in boxes.items():
        assert b["x"] >= -eps, f"{sel} starts left of the viewport: {b}"
        assert b["y"] >= -eps, f"{sel} starts above the viewport: {b}"
        assert b["right"] <= width + eps, f"{sel} passes the right edge ({width}): {b}"
        assert b["bottom"] <= height + eps, f"{sel} passes the bottom ({height}): {b}"
        assert b["right"] - b["x"] > 10, f"{sel} is empty: {b}"
        assert b["bottom"] - b["y"] > 10, f"{sel} is empty: {b}"
        if b["clips"]:
            assert b["scrollW"] <= b["clientW"] + 1, f"{sel} cut off at the side: {b}"
            assert b["scrollH"] <= b["clientH"] + 1, f"{sel} cut off at the bottom: {b}"
    items = list(boxes.items())
    for i, (a_sel, a) in enumerate(items):
        for b_sel, b in items[i + 1 :]:
            across = min(a["right"], b["right"]) - max(a["x"], b["x"])
            down = min(a["bottom"], b["bottom"]) - max(a["y"], b["y"])
            assert across <= eps or down <= eps, f"{a_sel} overlaps {b_sel}: {a} {b}"


def inside(inner: dict[str, Any], outer: dict[str, Any]) -> bool:
    """Whether ``inner``'s box is within ``outer``'s."""
    eps = 0.5
    return bool(
        inner["x"] >= outer["x"] - eps
        and inner["y"] >= outer["y"] - eps
        and inner["right"] <= outer["right"] + eps
        and inner["bottom"] <= outer["bottom"] + eps
    )


PLAYER_REGIONS = ["#top", "#region-pays", "#round", "#history"]


STAFF_WORDS = re.compile(r"_|IAC|\.md|\b[A-Z]{2,}\b|\(c\)|[Ii][Cc][Dd]")
"""What only a staff page may say: codes (an underscore, a word in capitals), clauses and
spec file names."""


RUN_AXE = """async () => {
    const result = await axe.run(document, {
        runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
        resultTypes: ["violations"],
    });
    return result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ") + ": " + n.failureSummary)}));
}"""


async def audit(page: Page, where: str) -> list[str]:
    """The serious and critical violations, and any contrast failure, at every size."""
    found: list[str] = []
    if not await page.evaluate("() => typeof axe !== 'undefined'"):
        await page.add_script_tag(url="/static/vendor/axe.min.js")
    for size, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        violations: list[dict[str, Any]] = await page.evaluate(RUN_AXE)
        for v in violations:
            if v["impact"] in ("serious", "critical") or v["id"] == "color-contrast":
                found.append(f"{where} {size}: {v['id']} ({v['impact']}): {v['help']} {v['nodes']}")
    return found


PIT_USER = ("pat", "pit boss password")


def add_pit_user(users: Path) -> None:
    """``lammer web adduser --role pit pat`` on the users file."""
    added = subprocess.run(
        [LAMMER, "web", "adduser", "--role", "pit", PIT_USER[0], "--users", str(users)],
        input=(PIT_USER[1] + "\n").encode(),
        capture_output=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    assert b"added pat (pit)" in added.stdout


def stamp(at: datetime) -> str:
    """``at`` as the floor's payloads write ``ts`` (milliseconds, ``Z``)."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def retainer(topic_of: Callable[[str], str]) -> Callable[[AuthBroker, str, bytes], Awaitable[None]]:
    """``publish(broker, table, payload)``: retain ``payload`` on the table's floor topic
    (``topic_of(table)``) as the user records, as ``lammer records`` and ``lammer
    authenticate`` do; an empty payload clears it."""

    async def publish(broker: AuthBroker, table: str, payload: bytes) -> None:
        password = (broker.credentials / "records").read_text().strip()
        async with aiomqtt.Client(
            broker.host, broker.port, username="records", password=password
        ) as client:
            await client.publish(topic_of(table), payload, qos=1, retain=True)

    return publish


SENTENCE = "cover_all, Royal Flush: 9 hits where 0.60 were expected in 4,210 rounds (all time)"
"""The message of ``integrity``'s alarm."""


def integrity(table: str, *, minutes_ago: int) -> dict[str, Any]:
    """An integrity payload as lammer records publishes it, one alarm raised
    ``minutes_ago`` (checked against the contract here)."""
    now = datetime.now(UTC)
    payload = {
        "table": table,
        "ts": stamp(now),
        "alarms": [
            {
                "bet": "cover_all",
                "row": "Royal Flush",
                "window": "all",
                "observed": 9,
                "expected": "0.60",
                "p_value": "3.1e-13",
                "since": stamp(now - timedelta(minutes=minutes_ago)),
                "side": "high",
                "rounds": 4210,
                "message": SENTENCE,
            }
        ],
    }
    IntegrityBody.model_validate(payload)
    return payload
