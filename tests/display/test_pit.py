"""The pit for a floor (issue 22): 200 simulated tables (``bench/pit_load.py``: retained
states published as daemons would, no daemon running) in the list view on one 1920x1080
screen, sortable; an offline table shows no stale device state; ``/pit/<id>`` with the
table's results. A broker and a ``lammer web`` of this test's own, so the count is exact.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import aiomqtt
import pytest
from playwright.async_api import Page, expect

from bench.pit_load import floor, publish_floor
from tests.display.conftest import AuthBroker, shoot, start_web, stop_web
from tests.display.test_browser import WAIT

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

ROWS = """() => [...document.querySelectorAll("#pit-list .row:not(.head)")].map((r) => {
    const b = r.getBoundingClientRect();
    return {table: r.dataset.table, x: b.left, y: b.top, right: b.right, bottom: b.bottom,
            cells: [...r.children].map((c) => c.textContent)};
})"""


async def test_two_hundred_tables_in_the_list_view_on_one_screen(
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
        rows = page.locator("#pit-list .row:not(.head)")
        await expect(rows).to_have_count(200, timeout=WAIT)
        await expect(page.locator("#seen")).to_have_attribute("data-tables", "200")
        drawn = await page.evaluate(ROWS)
        assert sorted(r["table"] for r in drawn) == sorted(s.table for s in sims)
        # Every row on the one screen: inside the viewport, none over another.
        for r in drawn:
            assert r["x"] >= 0, r
            assert r["right"] <= 1920, r
            assert r["y"] >= 0, r
            assert r["bottom"] <= 1080, f"row below the screen: {r}"
        columns: dict[float, list[tuple[float, float]]] = {}
        for r in drawn:
            columns.setdefault(r["x"], []).append((r["y"], r["bottom"]))
        assert len(columns) == 3  # three columns side by side
        for spans in columns.values():
            spans.sort()
            for (_, above), (below, _) in itertools.pairwise(spans):
                assert above <= below + 0.5, f"rows overlap: {spans}"
        lefts = sorted(columns)
        widths = {r["x"]: r["right"] for r in drawn}
        for a, b in itertools.pairwise(lefts):
            assert widths[a] <= b + 0.5, "columns overlap"
        by_id = {r["table"]: r["cells"] for r in drawn}
        # Offline: since when (the server heard it), and nothing of its devices.
        offline = next(s for s in sims if s.offline)
        assert by_id[offline.table][3].startswith("offline since ")
        alarmed = next(s for s in sims if s.alarmed and s.game != "CRAPS")
        assert by_id[alarmed.table][5].startswith("MODE_MISMATCH 7 min")
        dice = next(s for s in sims if s.game == "CRAPS" and not s.offline)
        assert by_id[dice.table][6].startswith("roll 1")  # the pending CHECK
        await shoot(page, "pit-200-1920x1080")

        # Sorted by alarms (oldest first): the alarmed tables come first.
        await page.click('button.sort[data-sort="alarms"]')
        assert "sort=alarms" in page.url
        first = await page.evaluate(ROWS)
        n_alarmed = sum(1 for s in sims if s.alarmed and s.game != "CRAPS")
        assert all(r["cells"][5] for r in first[:n_alarmed])
        assert not any(r["cells"][5] for r in first[n_alarmed:])

        # The card view of the offline table: no stale "connected, READY".
        await page.goto(f"{web.url}/pit?view=cards&alarm=*")
        card = page.locator(f'.tablecard[data-table="{offline.table}"]')
        await expect(card.locator(".devices")).to_have_text("unknown while closed", timeout=WAIT)

        # The table's own page: its result.
        await page.goto(f"{web.url}/pit/{alarmed.table}")
        await expect(page.locator("#results tr")).to_have_count(1, timeout=WAIT)
        await expect(page.locator('#now [data-code="MODE_MISMATCH"]')).to_be_visible()
    finally:
        if web is not None:
            stop_web(web)
        broker.stop()
