"""SOFTWARE alarms on the pit (issue 33): ``lammer authenticate`` retains a table's software
status on ``lammer-floor/software/<table>``; ``lammer web`` reads it as the ``display`` user
and the pit draws a ``SOFTWARE`` alarm on a table that is not ``approved``, with the first
component that differs, until it is approved again. A real daemon, Mosquitto with the
users' ACL (broker-config's grants), the session's ``lammer web`` and Debian's Chromium.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.async_api import Page, expect

from contract.floor import SoftwareBody, software_topic
from tests.display.conftest import AuthBroker, MakeTable, WebServer
from tests.helpers.screens import UTH_ROYAL_AT_5, WAIT, retainer, stamp

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]


def status(table: str, state: str, differs: str | None = None) -> bytes:
    """A payload as lammer authenticate publishes it (checked against the contract here)."""
    now = datetime.now(UTC)
    payload: dict[str, Any] = {
        "table": table,
        "ts": stamp(now),
        "status": state,
        "version": "0.1.0",
        "manifest": "lammer-0.1.0.json" if state == "approved" else None,
        "differs": differs,
        "message": f"software {state}" if differs is None else f"{differs} differs",
    }
    SoftwareBody.model_validate(payload)
    return json.dumps(payload).encode()


publish = retainer(software_topic)
"""Retain a payload on the table's software topic as the user records."""


async def test_a_table_whose_software_is_not_approved_shows_software_on_the_pit(
    auth_broker: AuthBroker, web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("UTH")
    await table.start(UTH_ROYAL_AT_5)
    tid = table.table_id
    try:
        await page.goto(f"{web.url}/pit?view=cards")
        card = page.locator(f'.tablecard[data-table="{tid}"]')
        await expect(card).to_be_visible(timeout=WAIT)
        await publish(auth_broker, tid, status(tid, "approved"))
        await publish(auth_broker, tid, status(tid, "unknown", "rules/data/cover_all.json"))
        alarm = card.locator('[data-code="SOFTWARE"]')
        await expect(alarm).to_contain_text("SOFTWARE", timeout=WAIT)
        await expect(alarm).to_contain_text("rules/data/cover_all.json")
        await expect(card).to_have_class("tablecard alarmed")
        # The table's own page, opened after: the server's picture holds it.
        await page.goto(f"{web.url}/pit/{tid}")
        now = page.locator('#now [data-code="SOFTWARE"]')
        await expect(now).to_contain_text("rules/data/cover_all.json", timeout=WAIT)
        # Silent is not approved either; approved clears it.
        await publish(auth_broker, tid, status(tid, "silent"))
        await expect(now).to_contain_text("software silent", timeout=WAIT)
        await publish(auth_broker, tid, status(tid, "approved"))
        await expect(now).to_have_count(0, timeout=WAIT)
    finally:
        await publish(auth_broker, tid, b"")
