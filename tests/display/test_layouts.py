"""Every page at every kiosk shape (issue 22): 1920x1080 and 1280x800 landscape, 1024x768,
1080x1920 portrait, in Debian's Chromium against ``lammer web``, the real daemon, its
simulator on a pty and Mosquitto.

What is asserted comes from the DOM: each named region's bounding box lies inside the
viewport, no two overlap, none has content cut off (its scroll size is its client size),
the lit column and the winning cell are inside the viewport, and the largest pay figure is
at least 8 % of the viewport's shorter side. A screenshot of each is written (``shoot``:
``$LAMMER_SCREENSHOTS``; ``docs/screens/`` keeps them, made small).
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from playwright.async_api import BrowserContext, Page, expect

from tests.display.conftest import MakeTable, WebServer, shoot
from tests.helpers.screens import (
    BJ_888_SUITED,
    CRAPS_CHECK,
    PLAYER_REGIONS,
    SIZES,
    STAFF_WORDS,
    UTH_ROYAL_AT_5,
    WAIT,
    check_regions,
    inside,
    login,
    measure,
)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]


async def check_player(page: Page, name: str, marks: list[str], pays: str = "#pays") -> None:
    """The player page at each size: its regions; ``marks`` (the lit column, row, cell)
    inside the viewport and the pay table; the pays figure ``pays`` at least 8 % of the
    shorter side."""
    for size, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        await page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r(null)))")
        boxes = await measure(page, PLAYER_REGIONS)
        check_regions(boxes, width, height)
        found = await measure(page, [*marks, pays])
        view = {"x": 0, "y": 0, "right": width, "bottom": height}
        for sel in marks:
            assert inside(found[sel], view), f"{size}: {sel} out of view: {found[sel]}"
            assert inside(found[sel], boxes["#region-pays"]), f"{size}: {sel} outside the pay table"
        assert inside(found[pays], view), f"{size}: {pays} cut off: {found[pays]}"
        floor = 0.08 * min(width, height)
        assert found[pays]["fontSize"] >= floor, (
            f"{size}: {pays} at {found[pays]['fontSize']} px, under 8 % ({floor:.0f} px)"
        )
    # (The pictures of every game at every size are tests/display/test_signage.py's.)
    # Two registers: what a player reads has no code, reason or spec reference.
    said = await page.evaluate(
        "() => ['#main', '#banner', '#overlay'].map((s) => document.querySelector(s).innerText)"
    )
    for text in said:
        assert not STAFF_WORDS.search(text), f"staff text on the player page: {text!r}"


async def test_uth_royal_flush_at_every_size_lit_cell_in_view(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("UTH")
    await table.start(UTH_ROYAL_AT_5)
    await page.goto(f"{web.url}/table/{table.table_id}")
    await expect(page.locator("#paytable td.hit")).to_have_text("100 to 1", timeout=WAIT)
    await check_player(page, "table-uth", ["#paytable th.lit", "#paytable td.hit"])


async def test_bust_bonus_at_every_size(web: WebServer, make_table: MakeTable, page: Page) -> None:
    table = make_table("BJ")
    await table.start(BJ_888_SUITED)
    await page.goto(f"{web.url}/table/{table.table_id}")
    await expect(page.locator("#paytable td.hit")).to_have_text("75 to 1", timeout=WAIT)
    await check_player(page, "table-bust-bonus", ["#paytable tr.lit", "#paytable td.hit"])


async def test_craps_and_stick_at_every_size(
    web: WebServer, make_table: MakeTable, context: BrowserContext
) -> None:
    table = make_table("CRAPS")
    await table.start(CRAPS_CHECK)
    await table.wait_topic("craps/board", lambda b: b["pending_roll"] is not None)
    player = await context.new_page()
    await player.goto(f"{web.url}/table/{table.table_id}")
    last = player.locator("#lastroll")
    await expect(last).to_have_attribute("data-status", "pending", timeout=WAIT)
    five = '#numbers [data-number="5"]'
    await check_player(player, "table-craps", [five], '[data-bet="make_em_all"] .odds')

    stick = await context.new_page()
    await login(stick, web, table.table_id)
    await expect(stick.locator("#valid")).to_be_visible(timeout=WAIT)
    for size, (width, height) in SIZES.items():
        await stick.set_viewport_size({"width": width, "height": height})
        boxes = await measure(stick, ["#pending", "#latest"])
        if size in ("1920x1080", "1280x800"):
            # The decision and its buttons, Void and Overturn, without scrolling.
            check_regions(boxes, width, height)
            controls = await measure(stick, ["#valid", "#invalid", "#void", "#overturn"])
            for sel, b in controls.items():
                assert b["bottom"] <= height, f"{size}: {sel} below the fold: {b}"
        await shoot(stick, f"stick-{size}")


async def test_pit_at_every_size(web: WebServer, make_table: MakeTable, page: Page) -> None:
    table = make_table("UTH")
    await table.start(UTH_ROYAL_AT_5)
    await page.goto(f"{web.url}/pit")
    await expect(page.locator(f'[data-table="{table.table_id}"]')).to_be_visible(timeout=WAIT)
    await expect(page.locator(f'[data-table="{table.table_id}"] .last')).to_contain_text(
        "Royal Flush"
    )
    # The longest login the users file allows (64 characters, both roles), as a pit user
    # logged in by another test of the session's page would show it: the worst case.
    await page.evaluate(
        "() => { document.getElementById('who').textContent = 'p'.repeat(64) + ' (pit, stick)'; }"
    )
    for size, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        # The session's server sees every test's tables: the first row drawn is measured.
        boxes = await measure(page, ["#top", "#filters", "#pit-list .row:not(.head)"])
        check_regions(boxes, width, height)
        # The filters wrap rather than push the login and the reports' link out of view.
        view = {"x": 0, "y": 0, "right": width, "bottom": height}
        for sel, box in (await measure(page, ["#login-open", "#reports-link"])).items():
            assert inside(box, view), f"{size}: {sel} out of view: {box}"
            assert inside(box, boxes["#filters"]), f"{size}: {sel} outside the filters: {box}"
        await shoot(page, f"pit-{size}")


TOUCH_TARGETS = """() => [...document.querySelectorAll(
    ".stick button, .stick select, .stick input, .stick summary, dialog button, #logout")]
    .filter((e) => e.getClientRects().length)
    .map((e) => ({id: e.id || e.textContent, w: e.getBoundingClientRect().width,
                  h: e.getBoundingClientRect().height}))"""


async def test_a_hundred_rolls_behind_a_check_show_their_count_on_the_stick(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("CRAPS")
    # A CHECK, then 100 rolls (no seven: they all wait, in order).
    script = "CHECK,500,3,3,ON_CHIPS\n" + "".join(
        f"ROLL,{501 + i},{1 + i % 2},{2 + i % 3}\n" for i in range(100)
    )
    await table.start(script)
    board = await table.wait_topic("craps/board", lambda b: b["waiting_count"] == 100)
    await page.set_viewport_size({"width": 1280, "height": 800})
    await login(page, web, table.table_id)
    queue = page.locator("#queue")
    await expect(queue).to_have_attribute("data-count", "100", timeout=WAIT)
    await expect(page.locator("#queue-count")).to_contain_text("100 rolls wait behind it")
    await expect(page.locator("#queue-count")).to_contain_text("rolls 501, 502, 503")
    await expect(page.locator("#queue-count")).to_contain_text("and 80 more")
    # Since when roll 500 waits: the board's pending_roll.since (its own craps/roll message
    # is older than the last 50 the server keeps), with its age.
    at = datetime.fromisoformat(board["pending_roll"]["since"]).astimezone().strftime("%H:%M")
    await expect(page.locator("#pending-since")).to_have_text(
        re.compile(rf"^Roll 500 is waiting since {at} \(\d+ (s|min)\)\.$")
    )
    # The latest roll is named by its number.
    await expect(page.locator("#lastroll .roll-id")).to_have_text("Roll 600")
    # The decision, Void and Overturn in view without scrolling; every control 48x48.
    for sel in ("#valid", "#invalid", "#void", "#overturn"):
        box = await page.locator(sel).bounding_box()
        assert box is not None
        assert box["y"] + box["height"] <= 800, f"{sel} below the fold: {box}"
    await page.click("#valid")
    await expect(page.locator("#confirm")).to_be_visible()
    small = [t for t in await page.evaluate(TOUCH_TARGETS) if t["w"] < 48 or t["h"] < 48]
    assert not small, f"controls under 48x48 CSS px: {small}"
    await shoot(page, "stick-queue-1280x800")
    await page.click("#confirm-no")
