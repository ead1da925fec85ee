"""The player display's history and attract view (issue 22), in Chromium against the real
daemon, its simulator on a pty, Mosquitto and ``lammer web``.

History comes from the web server's bounded memory (display/web/store.py keeps the last 50
messages of each result topic and sends them with the picture on connect): a page opened
or reloaded after the rounds draws the same history as a page that watched them.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.display.conftest import (
    AuthBroker,
    MakeTable,
    WebServer,
    shoot,
    start_web,
    stop_web,
)
from tests.helpers.screens import (
    PLAYER_REGIONS,
    SIZES,
    UTH_ROYAL_AT_5,
    WAIT,
    check_regions,
    inside,
    measure,
)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

ROUNDS = list(range(101, 113))
"""Twelve rounds: the page shows the last as the current one and the ten before it."""


def uth_rounds(rounds: list[int]) -> str:
    """One Ultimate Texas Hold'em round per id, two players and the dealer (3 hands): a royal flush
    for an even id (it pays), no qualifying hand for an odd one."""
    lines = ["DECK,OK"]
    for r in rounds:
        if r % 2 == 0:
            lines += [f"HAND,{r},P1,AsKs", f"HAND,{r},P2,9h9d", f"HAND,{r},DL,6d5c"]
            lines += [f"HAND,{r},CM,QsJsTs2d3c"]
        else:
            lines += [f"HAND,{r},P1,2s7d", f"HAND,{r},P2,3h8c", f"HAND,{r},DL,6c7c"]
            lines += [f"HAND,{r},CM,9sJdKc4h5s"]
        lines += [f"ROUND,{r},3", f"SETTLE,{r}"]
    return "\n".join(lines) + "\n"


HISTORY_ROWS = """() => [...document.querySelectorAll("#history-table tbody tr")]
    .map((tr) => [...tr.children].map((td) => td.textContent))"""


async def test_history_holds_the_last_ten_in_order_after_twelve_rounds(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("UTH")
    await page.goto(f"{web.url}/table/{table.table_id}")
    await table.start(uth_rounds(ROUNDS))
    await table.wait_topic("cover_all/result", lambda b: b["round_id"] == ROUNDS[-1])
    # What the table published, in its order: the truth the page is checked against.
    published = [b["round_id"] for b in table.recorder.bodies("cover_all/result")]
    assert published == ROUNDS

    await expect(page.locator("#round h2")).to_have_text(f"Round {ROUNDS[-1]}", timeout=WAIT)
    rows = page.locator("#history-table tbody tr")
    await expect(rows).to_have_count(10, timeout=WAIT)
    watched = await page.evaluate(HISTORY_ROWS)
    # Newest first: the ten rounds before the current one.
    assert [r[0] for r in watched] == [f"Round {n}" for n in reversed(ROUNDS[1:-1])]
    for cells in watched:
        n = int(cells[0].split()[1])
        if n % 2 == 0:
            assert cells[2:] == ["Royal Flush", "3 hands", "150 to 1", "Seat 1"], cells
        else:
            assert cells[2:] == ["No qualifying hand", "3 hands", "", ""], cells

    # A page opened now (the server's memory) draws the same history.
    await page.reload()
    await expect(rows).to_have_count(10, timeout=WAIT)
    assert await page.evaluate(HISTORY_ROWS) == watched


async def test_attract_view_after_the_idle_time_then_play_ends_it(
    tmp_path: Path, auth_broker: AuthBroker, make_table: MakeTable, page: Page
) -> None:
    # 20 s: the page must be open and showing the round before the idle time is up (a
    # loaded machine has taken over 10 s for the start, the load and the first draw).
    own = start_web(tmp_path, auth_broker, "--attract-seconds", "20")
    try:
        table = make_table("UTH")
        await table.start(UTH_ROYAL_AT_5)
        await page.set_viewport_size({"width": 1080, "height": 1920})
        await page.goto(f"{own.url}/table/{table.table_id}")
        await expect(page.locator("#pays")).to_have_text("100 to 1", timeout=WAIT)
        await expect(page.locator("body")).not_to_have_class("player attract")
        # No round for 20 s (the result's ts): the pay table large, the bet, the pitch.
        await expect(page.locator("body")).to_have_class("player attract", timeout=60_000)
        await expect(page.locator("#attract")).to_contain_text("Cover All Bonus")
        await expect(page.locator("#attract")).to_contain_text(
            "Pays on the highest hand at the table"
        )
        await expect(page.locator("#round")).to_have_count(0)
        boxes = await measure(page, ["#top", "#attract", "#region-pays"])
        check_regions(boxes, 1080, 1920)
        # A new round ends it.
        await table.start_sim(uth_rounds([32]))
        await expect(page.locator("#round h2")).to_have_text("Round 32", timeout=WAIT)
        await expect(page.locator("body")).to_have_class("player")
        check_regions(await measure(page, PLAYER_REGIONS), 1080, 1920)
    finally:
        stop_web(own)


SERIES_ROWS = """() => [...document.querySelectorAll("#history-table tbody tr")]
    .map((tr) => [tr.dataset.roll || "", ...[...tr.children].map((td) => td.textContent)])"""


def hhmm(ts: str) -> str:
    """A ``ts`` as the page writes a time: hh:mm in the browser's (this machine's) zone."""
    return datetime.fromisoformat(ts).astimezone().strftime("%H:%M")


async def test_craps_history_is_the_shooter_s_series_and_a_seven_starts_a_new_one(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("CRAPS")
    await page.goto(f"{web.url}/table/{table.table_id}")
    # A no-roll never counts, so it is not in the series; the three rolls before it are.
    await table.start("ROLL,301,2,2\nROLL,302,1,3\nROLL,303,5,6\nNOROLL,304,OFF_TABLE\n")
    board = await table.wait_topic(
        "craps/board", lambda b: (b["last_roll"] or {}).get("roll_id") == 304
    )
    at = {r["roll_id"]: hhmm(r["at"]) for r in board["series"]}
    caption = page.locator("#history-table caption")
    await expect(caption).to_have_text("This series: 3 rolls", timeout=WAIT)
    # Newest first: the rolls that counted, the no-roll not among them; the first 4 and
    # the 11 lit their numbers, the second 4 did not.
    assert await page.evaluate(SERIES_ROWS) == [
        ["303", "Roll 303", at[303], "5 + 6", "11", "New number"],
        ["302", "Roll 302", at[302], "1 + 3", "4", ""],
        ["301", "Roll 301", at[301], "2 + 2", "4", "New number"],
    ]
    # A seven ends the series: the history starts again, empty.
    await table.start_sim("ROLL,305,3,4\n")
    await expect(caption).to_have_text("This series", timeout=WAIT)
    await expect(page.locator("#history-table tbody tr")).to_have_text(
        ["No roll yet in this series"]
    )
    await expect(page.locator("#lastroll")).to_have_attribute("data-roll", "305")
    # The next series: its rolls alone; All Small completed on its last number.
    await table.start_sim("ROLL,306,1,1\nROLL,307,1,2\nROLL,308,2,2\nROLL,309,2,3\nROLL,310,3,3\n")
    await expect(caption).to_have_text("This series: 5 rolls", timeout=WAIT)
    rows = await page.evaluate(SERIES_ROWS)
    assert [r[0] for r in rows] == ["310", "309", "308", "307", "306"]
    assert rows[0][4:] == ["6", "All Small wins"]
    assert await page.locator("#history-table tbody tr.win").count() == 1
    # A page opened now draws the same series (it is retained with the board).
    await page.reload()
    await expect(caption).to_have_text("This series: 5 rolls", timeout=WAIT)
    assert await page.evaluate(SERIES_ROWS) == rows
    # A series longer than the table: the newest ten, the count in the heading; the
    # history fits every shape of kiosk.
    doubles = [1 + i % 3 for i in range(8)]  # 2, 4 and 6: no seven
    script = "".join(f"ROLL,{311 + i},{d},{d}\n" for i, d in enumerate(doubles))
    await table.start_sim(script)
    await expect(caption).to_have_text("This series: 13 rolls, the last 10 shown", timeout=WAIT)
    rows = await page.evaluate(SERIES_ROWS)
    assert [r[0] for r in rows] == [str(n) for n in range(318, 308, -1)]
    for size, (width, height) in SIZES.items():
        await page.set_viewport_size({"width": width, "height": height})
        await expect(page.locator("body")).to_have_attribute("data-fitted", f"{width}x{height}")
        await page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r(null)))")
        check_regions(await measure(page, PLAYER_REGIONS), width, height)
        # The newest rows that fit at the history's floor (issue 29), the rest hidden and
        # the heading saying how many: the last shown is whole, in the history.
        shown = await page.locator("#history-table tbody tr:not([hidden])").count()
        assert shown >= 3, size
        if size == "1920x1080":
            assert shown == 10
        await expect(caption).to_have_text(f"This series: 13 rolls, the last {shown} shown")
        last = f"#history-table tbody tr:nth-child({shown})"
        last_row = await measure(page, [last, "#history"])
        assert inside(last_row[last], last_row["#history"]), size
        await shoot(page, f"table-craps-series-{size}")
