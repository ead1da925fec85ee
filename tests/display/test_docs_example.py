"""The browser subscriber the integrators' page shows (docs/integrators/subscribing.md)
runs as it is written in a page of a real ``lammer web``: it logs a table's retained state
from the picture, then a live message, as relayed from a real Mosquitto."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import aiomqtt
import pytest
from playwright.async_api import ConsoleMessage, Page

from tests.display.conftest import AuthBroker, WebServer
from tests.helpers.screens import WAIT

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrators" / "subscribing.md"


def example() -> str:
    """The page's JavaScript block, as a reader copies it."""
    text = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```javascript\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) == 1
    return str(blocks[0])


def roll(table: str, seq: int, prev: int | None) -> bytes:
    return json.dumps(
        {
            "table": table,
            "seq": seq,
            "prev_seq": prev,
            "ts": "2026-12-01T20:31:07.412Z",
            "roll_id": seq,
            "dice": [3, 4],
            "total": 7,
            "status": "counted",
            "reason": None,
        }
    ).encode()


async def test_the_documented_browser_subscriber_logs_the_tables_messages(
    web: WebServer, auth_broker: AuthBroker, page: Page
) -> None:
    table = f"doc-{uuid.uuid4().hex[:8]}"  # no other test's retained state under it
    base = f"lammer/{table}"

    def logs(topic: str) -> Callable[[ConsoleMessage], bool]:
        return lambda m: m.type == "log" and m.text.startswith(f"{table} {topic} ")

    password = (auth_broker.credentials / "daemon").read_text().strip()
    async with aiomqtt.Client(
        auth_broker.host, auth_broker.port, username="daemon", password=password
    ) as daemon:
        await daemon.publish(f"{base}/craps/roll", roll(table, 5, 3), qos=1)
        await page.goto(f"{web.url}/pit")
        # As a reader pastes it, for this test's table (the page's CSP allows no inline
        # script: evaluated as the browser's console would). Roll 5 comes in the picture
        # (the server keeps the last rolls) or live, once.
        async with page.expect_console_message(logs("craps/roll"), timeout=WAIT) as got:
            await page.evaluate(f"() => {{ {example().replace('craps1', table)} }}")
        first = await got.value
        async with page.expect_console_message(logs("craps/roll"), timeout=WAIT) as got:
            await daemon.publish(f"{base}/craps/roll", roll(table, 7, 5), qos=1)
        then = await got.value
    # The payloads as published, objects in the page, once each and in order.
    assert (await first.args[2].json_value())["seq"] == 5
    assert (await then.args[2].json_value())["seq"] == 7
