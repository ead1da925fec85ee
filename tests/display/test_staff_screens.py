"""The staff's pages fit their screens (issue 29), measured in Debian's Chromium against
``lammer web``, the real daemons, their simulators and Mosquitto.

The stickperson's terminal at 1024x768, 1280x800 and 1920x1080: the page never scrolls
sideways, and every decision (Valid, Invalid, Void, Overturn), the CHECK's wait and the
count of rolls behind it are in view without scrolling, uncovered (the footer included:
``document.elementFromPoint`` at each one's middle is itself), every control at least
48x48 CSS px. The pit: the tables that need someone first by default (alarms, then
offline, then the oldest CHECK), a CHECK's wait always whole, sort controls at least
24 px tall (axe-core's ``target-size``, WCAG 2.5.8). The reports: words, not codes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from playwright.async_api import Page, expect

from bench.pit_load import floor, publish_floor
from tests.display.conftest import AuthBroker, MakeTable, WebServer, shoot, start_web, stop_web
from tests.helpers.screens import SIZES, WAIT, login

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

IN_VIEW = """(selectors) => selectors.map((sel) => {
    const el = document.querySelector(sel);
    if (!el) return {sel, missing: true};
    const r = el.getBoundingClientRect();
    const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
    return {sel, left: r.left, top: r.top, right: r.right, bottom: r.bottom,
            width: r.width, height: r.height,
            wide: el.scrollWidth > el.clientWidth + 1,
            covered: !(hit && (el.contains(hit) || hit.contains(el))),
            coveredBy: hit ? (hit.id || hit.className || hit.tagName) : null};
})"""

TARGETS = """() => [...document.querySelectorAll(
    ".stick button, .stick select, .stick input, .stick summary, dialog button, #logout")]
    .filter((e) => e.getClientRects().length)
    .map((e) => ({id: e.id || e.textContent, w: e.getBoundingClientRect().width,
                  h: e.getBoundingClientRect().height}))"""

DECISIONS = ["#valid", "#invalid", "#void", "#overturn"]
WAITING = ["#pending-since", "#queue-count", "#lastroll"]


async def in_view(page: Page, selectors: list[str], width: int, height: int) -> list[str]:
    """What of ``selectors`` is missing, out of the viewport, too wide or covered."""
    boxes: list[dict[str, Any]] = await page.evaluate(IN_VIEW, selectors)
    problems = []
    for b in boxes:
        if b.get("missing"):
            problems.append(f"{b['sel']} missing")
            continue
        if b["left"] < -0.5 or b["top"] < -0.5 or b["right"] > width + 0.5:
            problems.append(f"{b['sel']} out of view: {b}")
        if b["bottom"] > height + 0.5:
            problems.append(f"{b['sel']} below the fold: {b}")
        if b["wide"]:
            problems.append(f"{b['sel']} cut at the side: {b}")
        if b["covered"]:
            problems.append(f"{b['sel']} covered by {b['coveredBy']}")
    return problems


async def test_the_stick_terminal_fits_its_screen_with_every_decision_in_view(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("CRAPS")
    # A CHECK with a hundred rolls behind it: the longest queue line the page writes.
    script = "ROLL,499,2,3\nCHECK,500,3,3,ON_CHIPS\n" + "".join(
        f"ROLL,{501 + i},{1 + i % 2},{2 + i % 3}\n" for i in range(100)
    )
    await table.start(script)
    await table.wait_topic("craps/board", lambda b: b["waiting_count"] == 100)
    await page.set_viewport_size({"width": 1024, "height": 768})
    await login(page, web, table.table_id)
    await expect(page.locator("#queue")).to_have_attribute("data-count", "100", timeout=WAIT)
    for size in ("1024x768", "1280x800", "1920x1080"):
        width, height = SIZES[size]
        await page.set_viewport_size({"width": width, "height": height})
        await page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r(null)))")
        scroll = await page.evaluate("() => document.documentElement.scrollWidth")
        assert scroll <= width, f"{size}: the page scrolls sideways ({scroll} px wide)"
        problems = await in_view(page, DECISIONS + WAITING, width, height)
        assert not problems, f"{size}:\n" + "\n".join(problems)
        small = [t for t in await page.evaluate(TARGETS) if t["w"] < 48 or t["h"] < 48]
        assert not small, f"{size}: controls under 48x48 CSS px: {small}"
        await shoot(page, f"stick-queue-{size}")
    # The clause's words beside its select (a select cuts what does not fit it).
    await expect(page.locator("#clause-words")).to_have_text(
        "a patron other than the shooter throws the dice"
    )
    await page.select_option("#clause", "6")
    await expect(page.locator("#clause-words")).to_have_text(
        "the shooter has not placed a pass or don't pass bet"
    )


ROWS = """() => [...document.querySelectorAll("#pit-list .row:not(.head)")].map((r) => {
    const check = r.querySelector(".c-check");
    return {table: r.dataset.table, check: check.textContent,
            checkCut: check.scrollWidth > check.clientWidth,
            bottom: r.getBoundingClientRect().bottom};
})"""

TARGET_SIZE = """async () => {
    const result = await axe.run(document, {
        runOnly: {type: "rule", values: ["target-size"]}, resultTypes: ["violations"]});
    return result.violations.flatMap((v) => v.nodes.map((n) => ({
        target: n.target.join(" "), summary: n.failureSummary,
        rowLink: Boolean(document.querySelector(n.target.join(" "))
            && document.querySelector(n.target.join(" ")).matches(".pit-list .c-table a")),
    })));
}"""


async def test_the_pit_puts_what_needs_someone_first_with_each_check_s_wait_whole(
    tmp_path: Path, page: Page
) -> None:
    broker = AuthBroker(tmp_path / "broker")
    broker.workdir.mkdir()
    broker.start()
    web = None
    try:
        sims = floor(200)
        password = (broker.credentials / "daemon").read_text().strip()
        async with aiomqtt.Client(
            broker.host, broker.port, username="daemon", password=password
        ) as client:
            await publish_floor(client, "lammer", sims)
        web = start_web(tmp_path, broker)
        await page.set_viewport_size({"width": 1920, "height": 1080})
        await page.goto(f"{web.url}/pit")
        await expect(page.locator("#pit-list .row:not(.head)")).to_have_count(200, timeout=WAIT)
        rows = await page.evaluate(ROWS)

        # By default, what needs someone first: the tables with an alarm (the oldest
        # first), then those offline, then those with a CHECK waiting (the oldest first),
        # then the rest by id.
        alarmed = sorted(
            (s for s in sims if s.alarmed and s.game != "CRAPS"), key=lambda s: (s.since, s.table)
        )
        offline = {s.table for s in sims if s.offline} - {s.table for s in alarmed}
        checks = sorted(
            (s for s in sims if s.game == "CRAPS" and not s.offline),
            key=lambda s: (s.check_since, s.table),
        )
        named = {s.table for s in alarmed} | offline | {s.table for s in checks}
        rest = sorted(s.table for s in sims if s.table not in named)
        order = [r["table"] for r in rows]
        a, o, c = len(alarmed), len(offline), len(checks)
        assert order[:a] == [s.table for s in alarmed]
        assert set(order[a : a + o]) == offline
        assert order[a + o : a + o + c] == [s.table for s in checks]
        assert order[a + o + c :] == rest
        await expect(page.locator("#sort-attention")).to_have_attribute("aria-pressed", "true")
        # Every row on the one screen, the ones that need someone included.
        lowest = max(r["bottom"] for r in rows)
        assert lowest <= 1080, f"a row below the screen: {lowest}"

        # A CHECK's wait first, never cut: "3 min · roll 1".
        waits = [r for r in rows if r["check"]]
        assert len(waits) == sum(1 for s in sims if s.game == "CRAPS")
        for r in waits:
            assert re.fullmatch(r"\d+ (s|min) · roll 1", r["check"]), r
            assert not r["checkCut"], f"the CHECK cell is cut: {r}"

        # The sort controls are 24 px tall: axe-core's target-size finds only the rows'
        # table links (a row is 15 px: 200 on one screen), each of which the cards view
        # gives at full size (WCAG 2.5.8's "equivalent" exception), where it finds none.
        heights = await page.locator("button.sort").evaluate_all(
            "els => els.filter((e) => e.getClientRects().length)"
            ".map((e) => e.getBoundingClientRect().height)"
        )
        assert heights
        assert min(heights) >= 24, heights
        await page.add_script_tag(url="/static/vendor/axe.min.js")
        found = await page.evaluate(TARGET_SIZE)
        assert [f for f in found if not f["rowLink"]] == []
        await page.goto(f"{web.url}/pit?view=cards")
        await expect(page.locator(".tablecard")).to_have_count(200, timeout=WAIT)
        for s in sims:
            await expect(page.locator(f'.tablecard a[href="/pit/{s.table}"]')).to_have_count(1)
        await page.add_script_tag(url="/static/vendor/axe.min.js")
        assert await page.evaluate(TARGET_SIZE) == []

        # The README's ?sort=alarms&dir=desc: the alarmed tables first (newest first), the
        # others after them whichever the direction.
        await page.goto(f"{web.url}/pit?sort=alarms&dir=desc")
        await expect(page.locator("#pit-list .row:not(.head)")).to_have_count(200, timeout=WAIT)
        newest = [r["table"] for r in await page.evaluate(ROWS)][:a]
        assert newest == [
            s.table for s in sorted(alarmed, key=lambda s: (-s.since.timestamp(), s.table))
        ]
    finally:
        if web is not None:
            stop_web(web)
        broker.stop()
