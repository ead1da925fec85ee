"""INTEGRITY alarms on the pit (issue 23): ``lammer records`` retains a table's on
``lammer-floor/integrity/<table>``; ``lammer web`` reads it as the ``display`` user and the
pit draws it on that table, in the list, on the cards and on ``/pit/<id>``, with its sentence
and its age, until the retained topic is cleared. A real daemon, Mosquitto with the users'
ACL, the session's ``lammer web`` and Debian's Chromium.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.async_api import Page, expect

from contract.floor import integrity_topic
from tests.display.conftest import AuthBroker, MakeTable, WebServer, shoot
from tests.helpers.screens import (
    SENTENCE,
    UTH_ROYAL_AT_5,
    WAIT,
    audit,
    integrity,
    retainer,
)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

AGE = r"[789] min"
"""An alarm published 7 minutes old, seen up to 2.5 minutes later (the page rounds)."""


publish = retainer(integrity_topic)
"""Retain a payload on the table's integrity topic as the user records."""


async def test_an_integrity_alarm_is_drawn_on_its_table_until_cleared(
    auth_broker: AuthBroker, web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("UTH")
    await table.start(UTH_ROYAL_AT_5)
    tid = table.table_id
    other = make_table("UTH")
    await other.start(UTH_ROYAL_AT_5)
    assert web.health()["integrity"] is True  # the display user may read the topic
    dropped = web.health()["dropped"].get("wrong_table", 0)
    try:
        await page.goto(f"{web.url}/pit?view=cards")
        card = page.locator(f'.tablecard[data-table="{tid}"]')
        await expect(card).to_be_visible(timeout=WAIT)
        # Another table's alarm sent on this table's topic is refused, never drawn (sent
        # first: once the next is drawn, the server has read this one too).
        await publish(
            auth_broker, other.table_id, json.dumps(integrity(tid, minutes_ago=1)).encode()
        )
        await publish(auth_broker, tid, json.dumps(integrity(tid, minutes_ago=7)).encode())
        alarm = card.locator('[data-code="INTEGRITY"]')
        await expect(alarm).to_have_text(
            f"\u26a0 INTEGRITY: {SENTENCE} \u2014 for 7 min", timeout=WAIT
        )
        await expect(alarm).to_have_attribute("data-row", "Royal Flush")
        await expect(card).to_have_class("tablecard alarmed")
        await shoot(page, "pit-integrity")
        found = await audit(page, "/pit?view=cards (integrity)")
        assert not found, "\n".join(found)
        await page.set_viewport_size({"width": 1920, "height": 1080})
        await expect(
            page.locator(f'.tablecard[data-table="{other.table_id}"] [data-code="INTEGRITY"]')
        ).to_have_count(0)
        assert web.health()["dropped"].get("wrong_table", 0) == dropped + 1

        # The list: the alarms column and the filter by code.
        await page.goto(f"{web.url}/pit?alarm=INTEGRITY")
        row = page.locator(f'#pit-list .row[data-table="{tid}"]')
        # Its age is rounded to the minute and grows while the test runs (by a minute or
        # two on a loaded machine); another alarm of the table's (a CLOCK_JUMP when the
        # machine's clock is stepped) may share the cell.
        await expect(row.locator(".c-alarms")).to_contain_text(
            re.compile(rf"INTEGRITY {AGE} Royal Flush \u2014 {re.escape(SENTENCE)}"), timeout=WAIT
        )
        await expect(row.locator(".c-alarms")).to_have_attribute(
            "title", re.compile(rf"INTEGRITY: {re.escape(SENTENCE)} \u2014 for {AGE}")
        )
        await expect(page.locator("#pit-list .row:not(.head)")).to_have_count(1)

        # The table's own page, opened after the alarm: the server's picture holds it.
        await page.goto(f"{web.url}/pit/{tid}")
        now = page.locator('#now [data-code="INTEGRITY"]')
        await expect(now).to_have_text(
            re.compile(rf"^INTEGRITY: {re.escape(SENTENCE)} \u2014 for {AGE}$"), timeout=WAIT
        )

        # Cleared when the retained topic is: the page drops it as it happens.
        await publish(auth_broker, tid, b"")
        await expect(now).to_have_count(0, timeout=WAIT)
        await expect(page.locator("#now")).to_contain_text("none")
        await page.goto(f"{web.url}/pit?view=cards")
        await expect(card).to_be_visible(timeout=WAIT)
        await expect(card.locator('[data-code="INTEGRITY"]')).to_have_count(0)
        # An empty list clears as well.
        await publish(auth_broker, tid, json.dumps(integrity(tid, minutes_ago=2)).encode())
        await expect(card.locator('[data-code="INTEGRITY"]')).to_contain_text(
            "for 2 min", timeout=WAIT
        )
        cleared = {**integrity(tid, minutes_ago=2), "alarms": []}
        await publish(auth_broker, tid, json.dumps(cleared).encode())
        await expect(card.locator('[data-code="INTEGRITY"]')).to_have_count(0, timeout=WAIT)
    finally:
        for t in (tid, other.table_id):
            await publish(auth_broker, t, b"")
