"""The pit for a floor (issue 22): 200 simulated tables (``bench/pit_load.py``: retained
states published as daemons would, no daemon running) in the list view on one 1920x1080
screen, sortable; an offline table shows no stale device state; ``/pit/<id>`` with the
table's results. A broker and a ``lammer web`` of this test's own, so the count is exact.
"""

from __future__ import annotations

import itertools
import re
import time
from datetime import datetime
from pathlib import Path

import aiomqtt
import pytest
from playwright.async_api import Browser, Page, expect

from bench.pit_load import floor, publish_floor
from daemon.clock import format_ts
from daemon.journal import JournalRecord
from daemon.replay import Replay, Settings
from rules import table as rules_table
from tests.display.conftest import (
    STICKPERSON,
    AuthBroker,
    MakeTable,
    WebServer,
    shoot,
    start_web,
    stop_web,
)
from tests.helpers.screens import PIT_USER, WAIT, add_pit_user

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
        made = time.monotonic()  # the floor's alarms are raised 7 min (less 0 to 28 s) before
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
        # About 7 min by the time the row is drawn, or more on a loaded machine (a minute may
        # pass between the floor's making and the draw).
        age = re.match(r"MODE_MISMATCH (\d+) min", by_id[alarmed.table][5])
        assert age is not None, by_id[alarmed.table][5]
        assert 7 <= int(age[1]) <= 7 + (time.monotonic() - made) / 60 + 1
        dice = next(s for s in sims if s.game == "CRAPS" and not s.offline)
        # The pending CHECK, its wait first (issue 29: a narrow cell never hides it).
        assert re.fullmatch(r"\d+ (s|min) · roll 1", by_id[dice.table][6])
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


POST = """async ([url, body]) => {
    const info = await (await fetch("/api/session", {credentials: "same-origin"})).json();
    const r = await fetch(url, {method: "POST", credentials: "same-origin", body,
        headers: {"Content-Type": "application/json", "X-CSRF-Token": info.csrf || ""}});
    return [r.status, await r.json()];
}"""


async def pit_login(page: Page, url: str, user: tuple[str, str]) -> None:
    """Open the pit's cards and log in through its dialog."""
    await page.goto(f"{url}/pit?view=cards")
    await page.click("#login-open")
    await page.fill("#user", user[0])
    await page.fill("#password", user[1])
    await page.click("#login-button")
    await expect(page.locator("#who")).to_contain_text(user[0], timeout=2 * WAIT)


async def test_an_alarm_acknowledged_on_the_pit_shows_the_name_everywhere_and_is_journaled(
    tmp_path: Path,
    auth_broker: AuthBroker,
    web: WebServer,
    make_table: MakeTable,
    browser: Browser,
) -> None:
    # Each user in a browser context of their own (their own cookies), as on two screens.
    contexts = [await browser.new_context(viewport={"width": 1920, "height": 1080}) for _ in "abc"]
    own = start_web(tmp_path, auth_broker)  # its users file: alice, a stickperson
    try:
        add_pit_user(own.users)
        table = make_table("UTH")
        await table.start("DECK,OK\n", mode="TCP")  # MODE_MISMATCH: payouts paused
        await table.wait_topic(
            "alarms", lambda b: any(a["code"] == "MODE_MISMATCH" for a in b["alarms"])
        )
        # A stickperson may not acknowledge: no button, and the server refuses the action.
        stick = await contexts[0].new_page()
        await pit_login(stick, own.url, STICKPERSON)
        alarm = stick.locator(
            f'.tablecard[data-table="{table.table_id}"] [data-code="MODE_MISMATCH"]'
        )
        await expect(alarm).to_be_visible(timeout=WAIT)
        await expect(alarm.locator(".ack-button")).to_have_count(0)
        url = f"/api/table/{table.table_id}/alarm_ack"
        status, answer = await stick.evaluate(POST, [url, '{"alarm": "MODE_MISMATCH"}'])
        assert status == 403
        assert "alice is not a pit user" in answer["error"]

        pit = await contexts[1].new_page()
        await pit_login(pit, own.url, PIT_USER)
        # The pit user may not decide a roll (no stick role).
        status, answer = await pit.evaluate(
            POST, [f"/api/table/{table.table_id}/overturn", '{"roll_id": 1}']
        )
        assert status == 403
        assert "pat is not a stickperson" in answer["error"]
        other = await contexts[2].new_page()  # another pit, on the session's own server
        await other.goto(f"{web.url}/pit?view=cards")
        await pit.locator(
            f'.tablecard[data-table="{table.table_id}"] .ack-button[data-code="MODE_MISMATCH"]'
        ).click()
        await expect(pit.locator("#answer")).to_contain_text("acknowledged by pat", timeout=WAIT)
        for page in (pit, other, stick):
            seen = page.locator(
                f'.tablecard[data-table="{table.table_id}"] [data-code="MODE_MISMATCH"]'
            )
            await expect(seen).to_have_attribute("data-acknowledged", "pat", timeout=WAIT)
            await expect(seen.locator(".ack")).to_contain_text("acknowledged by pat at ")
        await shoot(pit, "pit-acknowledged")
        # The alarm stays (it clears only with the right mode), as published.
        body = table.recorder.latest("alarms")
        assert body is not None
        [mismatch] = [a for a in body["alarms"] if a["code"] == "MODE_MISMATCH"]
        assert mismatch["acknowledged_by"] == "pat"
        assert mismatch["acknowledged_at"] is not None
        # In the journal, as a decision by pat; a replay of the journal rebuilds it.
        acks = [
            r["event"]
            for r in table.journal("--kind", "decision")
            if isinstance(r.get("event"), dict) and r["event"].get("type") == "AlarmAcknowledged"
        ]
        assert [(a["code"], a["operator"]) for a in acks] == [("MODE_MISMATCH", "pat")]
        # A replay of the exported journal (what a restart does) rebuilds the acknowledgement.
        exported = table.journal()
        start = next(r for r in exported if r["kind"] == "daemon" and "start" in r)
        rebuilt = Replay(Settings.from_json(start["start"]["settings"]))
        for r in exported:
            body = {k: v for k, v in r.items() if k not in ("seq", "ts", "kind")}
            ts = datetime.fromisoformat(str(r["ts"]).replace("Z", "+00:00"))
            rebuilt.apply(JournalRecord(seq=r["seq"], ts=ts, kind=r["kind"], record=body))
        assert rebuilt.state is not None
        assert not rebuilt.errors
        [again] = [a for a in rules_table.alarms(rebuilt.state) if a.code == "MODE_MISMATCH"]
        assert again.acknowledged_by == "pat"
        assert again.acknowledged_at is not None
        assert format_ts(again.acknowledged_at) == mismatch["acknowledged_at"]
    finally:
        stop_web(own)
        for ctx in contexts:
            await ctx.close()


async def test_the_pit_shows_how_long_a_check_has_waited_from_the_board(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    # issue 22: the age of a pending CHECK is the daemon's (craps/board pending_roll.since,
    # the time journaled when it arrived). Sixty rolls behind it push its own craps/roll
    # message out of what the server keeps of a table (store.RECENT, 12), so the pit can
    # only know it from the board.
    table = make_table("CRAPS")
    script = "ROLL,400,1,1\nCHECK,401,2,2,BOWL\n" + "".join(
        f"ROLL,{402 + i},{1 + i % 3},{1 + i % 3}\n" for i in range(60)
    )
    await table.start(script)
    board = await table.wait_topic("craps/board", lambda b: b["waiting_count"] == 60)
    since = board["pending_roll"]["since"]
    arrived = [
        r["ts"]
        for r in table.journal("--kind", "device")
        if r.get("event", {}).get("type") == "RollCheck"
    ]
    assert arrived == [since]
    await page.goto(f"{web.url}/pit")
    row = page.locator(f'#pit-list .row[data-table="{table.table_id}"]')
    await expect(row.locator(".c-check")).to_have_text(
        re.compile(r"^\d+ (s|min) · roll 401 \+60$"), timeout=WAIT
    )
    # The table's own page: the CHECK, its reason, since when and how long it waits.
    await page.goto(f"{web.url}/pit/{table.table_id}")
    check = page.locator("#pending-check")
    await expect(check).to_contain_text("CHECK roll 401: BOWL", timeout=WAIT)
    at = datetime.fromisoformat(since).astimezone().strftime("%H:%M")
    await expect(check).to_contain_text(re.compile(rf"waiting \d+ (s|min), since {at}; 60 behind"))
