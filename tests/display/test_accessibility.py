"""Accessibility, measured (issue 22): axe-core (vendored, ``display/web/static/vendor/``,
injected from this server: never fetched from outside) run by Playwright on every page in
every layout. No serious or critical violation of WCAG 2.1 A and AA, and no contrast
failure (AA) at all.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, Page, expect

from tests.display.conftest import MakeTable, WebServer
from tests.helpers.screens import (
    BJ_888_SUITED,
    CRAPS_CHECK,
    UTH_ROYAL_AT_5,
    WAIT,
    audit,
    login,
)

pytestmark = [pytest.mark.browser]
browser_test = pytest.mark.asyncio(loop_scope="session")

VENDOR = Path(__file__).parents[2] / "display" / "web" / "static" / "vendor"


def test_the_vendored_axe_is_the_one_the_readme_names() -> None:
    readme = (VENDOR / "README.md").read_text()
    named = re.search(r"`package/axe\.min\.js` unchanged \(SHA-256 `([0-9a-f]{64})`\)", readme)
    assert named is not None
    assert hashlib.sha256((VENDOR / "axe.min.js").read_bytes()).hexdigest() == named.group(1)
    head = (VENDOR / "axe.min.js").read_text()[:200]
    assert "axe v4.14.1" in head
    assert "4.14.1" in readme
    assert "Mozilla Public License" in (VENDOR / "axe.LICENSE").read_text()


@browser_test
async def test_every_player_page_at_every_size(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    found: list[str] = []
    for game, script, ready in (
        ("UTH", UTH_ROYAL_AT_5, "#pays"),
        ("BJ", BJ_888_SUITED, "#pays"),
        ("CRAPS", CRAPS_CHECK, "#lastroll"),
    ):
        table = make_table(game)
        await table.start(script)
        await page.goto(f"{web.url}/table/{table.table_id}")
        await expect(page.locator(ready)).to_be_visible(timeout=WAIT)
        found += await audit(page, f"/table ({game})")
    assert not found, "\n".join(found)


@browser_test
async def test_the_staff_pages_at_every_size(
    web: WebServer, make_table: MakeTable, context: BrowserContext
) -> None:
    table = make_table("CRAPS")
    await table.start(CRAPS_CHECK)
    await table.wait_topic("craps/board", lambda b: b["pending_roll"] is not None)
    found: list[str] = []
    page = await context.new_page()
    await page.goto(f"{web.url}/stick/{table.table_id}")
    await expect(page.locator("#login")).to_be_visible(timeout=WAIT)
    found += await audit(page, "/stick (login)")
    await login(page, web, table.table_id)
    await expect(page.locator("#valid")).to_be_visible(timeout=WAIT)
    found += await audit(page, "/stick")
    await page.click("#valid")
    await expect(page.locator("#confirm")).to_be_visible()
    found += await audit(page, "/stick (confirm)")
    await page.click("#confirm-no")
    for path in ("/pit", "/pit?view=cards", f"/pit/{table.table_id}"):
        await page.goto(f"{web.url}{path}")
        await expect(page.locator("#main")).not_to_be_empty(timeout=WAIT)
        found += await audit(page, path)
    assert not found, "\n".join(found)
