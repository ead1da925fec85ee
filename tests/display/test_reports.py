"""The ``/reports`` page of ``lammer web`` (issue 23): a real private PostgreSQL
(``tests/records/conftest.py``'s cluster) provisioned as docs/floor/records.md says, the web server
connected as the store's read-only role, a real Mosquitto and Debian's Chromium.

The figures the page shows are checked against the test's own tally of the messages it
stored and against the par sheets read from their sources (docs/cover-all-par-sheet.json's
exact fractions, ``rules.bust_odds``), rounded here with ``round(Fraction, 2)`` (exact,
half-even); the chart's bands against exact binomial sums done here in fractions.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from deploy.broker import free_port
from records.messages import parse
from records.store import Store
from rules.alarms import ALARMS, DEVICE_FAULT_PREFIX
from rules.bust_odds import odds_table
from tests.display.conftest import (
    STICKPERSON,
    AuthBroker,
    WebServer,
    shoot,
    start_web,
    stop_web,
)
from tests.helpers.reports import Records, bust_row, info_bj, iso, par_of, poker_row, records
from tests.helpers.screens import PIT_USER, SIZES, WAIT, add_pit_user, audit, check_regions, measure
from tests.records.conftest import postgres
from tests.records.messages import alarms, body

__all__ = ["postgres", "records"]  # the fixtures, used by name

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

DAY = "2026-12-01"


def records_web(
    tmp_path: Path, broker: AuthBroker, records: Records | None, *options: str
) -> WebServer:
    """``lammer web`` with ``/reports`` on ``records`` (None: no store configured), a
    stickperson (alice) and a pit user (pat)."""
    extra = ["--records-timezone", "UTC", *options]
    env = {}
    if records is not None:
        extra += ["--records-db", records.reader_dsn]
    if records is not None and records.pgpass is not None:
        env["PGPASSFILE"] = str(records.pgpass)
    web = start_web(tmp_path, broker, *extra, env=env)
    add_pit_user(web.users)
    return web


async def login(page: Page, web: WebServer, user: tuple[str, str], path: str) -> None:
    """Open ``path``, be sent to the login page, log in, and come back."""
    await page.goto(f"{web.url}{path}")
    await page.wait_for_url(f"{web.url}/login?**")
    sent = urlsplit(page.url)
    assert parse_qs(sent.query) == {"next": [path]}
    await page.fill("#user", user[0])
    await page.fill("#password", user[1])
    await page.click("#login-button")
    await page.wait_for_url(f"{web.url}{path}", timeout=2 * WAIT)


# ---------------------------------------------------------------------------------------
# What the test stores, and its own tally


@dataclass
class Floor:
    """The messages stored for gaming day DAY (and one round of the next)."""

    poker: list[dict[str, Any]]
    bust: list[dict[str, Any]]


def store_floor(records: Records) -> Floor:
    """Two tables' day, an alarm, a stickperson's decision, written as the service does."""
    plan = [(1, "Royal Flush", "500"), (2, None, None), (1, "Flush", "70"), (2, "Flush", "30"),
            (2, None, None), (1, None, None), (2, "Straight Flush", "100"), (2, "Flush", "30"),
            (1, "Three of a Kind", "3")]  # fmt: skip
    poker = [poker_row("lir-1", i + 1, iso(1, 8 + i, 0), h, hand, pays)
             for i, (h, hand, pays) in enumerate(plan)]  # fmt: skip
    poker.append(poker_row("lir-1", 20, iso(2, 6, 0), 1, None, None))  # the next gaming day
    poker.append({**poker_row("lir-1", 21, iso(1, 9, 30), 2, None, None, "void"), "hands": 2})
    bust = [
        bust_row("bj-1", 2, iso(1, 8, 0), "6h", "suited", "3"),
        bust_row("bj-1", 3, iso(1, 8, 1), "Kd", None, None),
        bust_row("bj-1", 4, iso(1, 8, 2), "6c", "off_suit", "1"),
        bust_row("bj-1", 5, iso(1, 8, 3), "6d", None, None),
    ]
    jam = {**alarms("lir-1", 100, "JAM"), "ts": iso(1, 10, 0)}
    jam["alarms"] = [{**jam["alarms"][0], "since": iso(1, 10, 0)}]
    messages: list[tuple[str, str, dict[str, Any] | str]] = [
        *(("lir-1", "cover_all/result", p) for p in poker),
        ("bj-1", "info", info_bj("bj-1", 1)),
        *(("bj-1", "bust_bonus/result", b) for b in bust),
        ("lir-1", "alarms", jam),
        ("lir-1", "request/void_roll",
         {"operator": "Dana", "request_id": "r-7", "roll_id": 4, "clause": "3"}),
        ("lir-1", "response/void_roll",
         {"table": "lir-1", "seq": 102, "ts": iso(1, 11, 0), "request_id": "r-7",
          "status": "ok", "error": None}),
        ("lir-1", "alarms", {**alarms("lir-1", 101), "ts": iso(1, 10, 5)}),
    ]  # fmt: skip
    with psycopg.connect(records.owner_dsn) as conn:
        store = Store(conn)
        for table, topic, payload in messages:
            data = payload.encode() if isinstance(payload, str) else body(payload)
            store.write(parse(table, topic, data))
    return Floor(poker, bust)


def two_places(value: Fraction) -> str:
    """An exact value as the report writes it: two places, rounded half-even, exactly."""
    return f"{float(round(value, 2)):.2f}"


def band(n: int, p: Fraction, q: Fraction) -> int:
    """The smallest k with P(Bin(n, p) <= k) >= q, summed in fractions."""
    total = Fraction(0)
    for k in range(n + 1):
        total += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        if total >= q:
            return k
    return n


POINTS = "(gs) => gs.map((g) => ({...g.dataset, off: g.classList.contains('off')}))"
CELLS = """(sel) => [...document.querySelectorAll(sel)].map((r) =>
    [...r.children].map((c) => c.textContent))"""


# ---------------------------------------------------------------------------------------


async def test_reports_need_a_pit_login(
    tmp_path: Path, auth_broker: AuthBroker, records: Records, browser: Browser
) -> None:
    web = records_web(tmp_path, auth_broker, records)
    contexts = [await browser.new_context(viewport={"width": 1280, "height": 800}) for _ in "ab"]
    try:
        anyone = await contexts[0].new_page()
        # No session: the API refuses, and the page sends to the login page.
        answer = await anyone.request.get(f"{web.url}/api/reports?day={DAY}")
        assert answer.status == 401
        # A stickperson logs in there and comes back, to be refused (403).
        await login(anyone, web, STICKPERSON, f"/reports?day={DAY}")
        await expect(anyone.locator("#denied")).to_have_text("The reports are for pit users")
        again = await anyone.goto(f"{web.url}/reports?day={DAY}")
        assert again is not None
        assert again.status == 403
        answer = await anyone.request.get(f"{web.url}/api/reports?day={DAY}")
        assert answer.status == 403
        assert "alice is not a pit user" in (await answer.json())["error"]
        # The pit user gets the page and its data.
        pit = await contexts[1].new_page()
        await login(pit, web, PIT_USER, f"/reports?day={DAY}")
        await expect(pit.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)
        answer = await pit.request.get(f"{web.url}/api/reports?day={DAY}")
        assert answer.status == 200
        # A question the page cannot answer is a sentence, not a 500.
        answer = await pit.request.get(f"{web.url}/api/reports?day=2026-13-01")
        assert answer.status == 400
        assert (await answer.json())["error"] == "day: '2026-13-01' is not a date YYYY-MM-DD"
        answer = await pit.request.get(f"{web.url}/api/reports?day={DAY}&area=Nowhere")
        assert answer.status == 400
    finally:
        stop_web(web)
        for ctx in contexts:
            await ctx.close()
    assert "Traceback" not in web.log_text()


async def test_the_report_page_shows_the_tally_and_the_par_sheet(
    tmp_path: Path, auth_broker: AuthBroker, records: Records, page: Page
) -> None:
    floor = store_floor(records)
    (tmp_path / "web.toml").write_text('[areas]\n"Pit 1" = ["bj-1"]\n"High limit" = ["lir-1"]\n')
    web = records_web(tmp_path, auth_broker, records, "--config", str(tmp_path / "web.toml"))
    try:
        await page.set_viewport_size({"width": 1920, "height": 1080})
        await login(page, web, PIT_USER, f"/reports?day={DAY}")
        await expect(page.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)

        # lir-1: the test's own tally of the gaming day (06:00 UTC to 06:00 UTC).
        day = [p for p in floor.poker if iso(1, 6, 0) <= p["ts"] < iso(2, 6, 0)]
        settled = [p for p in day if p["outcome"] in ("win", "no_qualifier")]
        per_hands = Counter(p["hands"] for p in settled)
        hits = Counter(p["highest"]["hand"] for p in settled if p["outcome"] == "win")
        paid = sum((Fraction(p["pays"]) for p in settled if p["outcome"] == "win"), Fraction(0))
        wins = sum(1 for p in settled if p["outcome"] == "win")
        mean = Fraction(sum(h * n for h, n in per_hands.items()), len(settled))
        lir = page.locator('.table-report[data-table="lir-1"]')
        mix = ", ".join(f"{h}: {n}" for h, n in sorted(per_hands.items()))
        await expect(lir.locator(f'.day[data-day="{DAY}"] p.summary')).to_have_text(
            f"{len(settled)} rounds; 1 void or flagged; hands per round {two_places(mean)} ({mix})"
        )
        await expect(lir.locator(".bet-report caption")).to_have_text(
            f"cover_all: {len(settled)} rounds"
        )
        p1, p2 = par_of("LIR", 1), par_of("LIR", 2)
        shown = {r[0]: r[1:] for r in await lir.locator(".bet-report tbody tr").evaluate_all(
            "(rows) => rows.map((r) => [...r.children].map((c) => c.textContent))")}  # fmt: skip
        assert set(shown) == set(p1)
        expected: dict[str, Fraction] = {}
        for row in p1:
            expected[row] = per_hands[1] * p1[row] + per_hands[2] * p2[row]
            pays = sum(
                (Fraction(p["pays"]) for p in settled
                 if p["outcome"] == "win" and p["highest"]["hand"] == row), Fraction(0)
            )  # fmt: skip
            assert shown[row][0] == str(hits[row]), row
            assert shown[row][1] == two_places(expected[row]), row
            assert Fraction(shown[row][2]) == pays, row
        observed_hold = 1 - (paid + wins) / Fraction(len(settled))
        await expect(lir.locator("p.hold")).to_contain_text(
            f"observed {two_places(observed_hold * 100)} %"
        )

        # bj-1: the Bust Bonus cells against rules.bust_odds.
        bj = page.locator('.table-report[data-table="bj-1"]')
        odds = odds_table(6, False)
        six = next(u for u in odds.up_cards if u.up_card == "6")
        rounds = len(floor.bust)
        suited = bj.locator('tr[data-row="6 suited"]')
        await expect(suited.locator(".hits")).to_have_text("1")
        await expect(suited.locator(".expected")).to_have_text(
            two_places(rounds * six.probability * six.suited_bust)
        )
        await expect(bj.locator("p.hold")).to_have_text(
            f"hold: theoretical {two_places(odds.house_edge * 100)} %, "
            f"observed {two_places((1 - Fraction((3 + 1) + (1 + 1), rounds)) * 100)} %"
        )

        # Big hits, the decision with its operator, the alarm from its start to its end.
        big = await page.evaluate(CELLS, "#big-hits tbody tr")
        assert [(r[1], r[4], r[5], r[6]) for r in big] == [
            ("lir-1", "Royal Flush", "500 to 1", "P3"),
            ("lir-1", "Straight Flush", "100 to 1", "P3"),
        ]
        assert big[0][0] == "2026-12-01 08:00:00"
        decisions = await page.evaluate(CELLS, "#decisions tbody tr")
        assert [r[1:] for r in decisions] == [
            ["lir-1", "void_roll", "clause=3 roll_id=4", "Dana", "ok"]
        ]
        alarm_rows = await page.evaluate(CELLS, "#alarms tbody tr")
        assert [r[:2] + r[3:5] for r in alarm_rows] == [
            ["lir-1", "JAM", "2026-12-01 10:00:00", "2026-12-01 10:05:00"]
        ]

        # The chart of lir-1, drawn in the page: each row's hits, and the 95 % band
        # computed here exactly; the Royal Flush (1 hit, 0.0003 expected) is outside it.
        drawn = page.locator('svg.chart[data-table="lir-1"] g.point')
        points = {p["label"]: p for p in await drawn.evaluate_all(POINTS)}
        assert set(points) == {f"cover_all: {row}" for row in p1}
        n = len(settled)
        for row in p1:
            point = points[f"cover_all: {row}"]
            chance = expected[row] / n
            low, high = band(n, chance, Fraction(1, 40)), band(n, chance, Fraction(39, 40))
            assert (int(point["observed"]), int(point["low"]), int(point["high"])) == (
                hits[row],
                low,
                high,
            ), row
            assert point["off"] == (not low <= hits[row] <= high), row
        assert points["cover_all: Royal Flush"]["off"]
        await expect(page.locator("svg.chart")).to_have_count(2)

        # An area of the configuration: its tables only.
        await page.select_option("#area", "Pit 1")
        await page.click("#show")
        await page.wait_for_url("**/reports?day=2026-12-01&table=&area=Pit+1")
        await expect(page.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)
        await expect(page.locator(".table-report")).to_have_count(1)
        await expect(page.locator(".table-report")).to_have_attribute("data-table", "bj-1")
        # The next gaming day holds the one round after 06:00.
        await page.goto(f"{web.url}/reports?day=2026-12-02&table=lir-1")
        await expect(page.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)
        await expect(page.locator(".table-report p.summary")).to_have_text(
            "1 rounds; hands per round 1.00 (1: 1)"
        )
    finally:
        stop_web(web)
    assert "Traceback" not in web.log_text()


HORIZONTAL = """() => {
    const wide = [...document.querySelectorAll("svg.chart, table.report, .table-report")]
        .map((e) => e.getBoundingClientRect().right);
    return {page: document.documentElement.scrollWidth, widest: Math.max(0, ...wide)};
}"""


async def test_the_report_page_fits_every_layout_and_reads_well(
    tmp_path: Path, auth_broker: AuthBroker, records: Records, page: Page
) -> None:
    store_floor(records)
    web = records_web(tmp_path, auth_broker, records)
    try:
        found = await audit_login(page, web)
        await login(page, web, PIT_USER, f"/reports?day={DAY}")
        await expect(page.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)
        for size, (width, height) in SIZES.items():
            await page.set_viewport_size({"width": width, "height": height})
            # The charts are drawn again for the new width.
            await page.wait_for_function(
                "(w) => [...document.querySelectorAll('svg.chart')].every("
                "(s) => s.getBoundingClientRect().right <= w)",
                arg=width,
                timeout=WAIT,
            )
            boxes = await measure(page, ["#top", "#choose", ".table-report h2", "svg.chart"])
            check_regions({k: boxes[k] for k in ("#top", "#choose")}, width, height)
            fits = await page.evaluate(HORIZONTAL)
            assert fits["page"] <= width, f"{size}: the page scrolls sideways: {fits}"
            assert fits["widest"] <= width + 0.5, f"{size}: {fits}"
            assert boxes["svg.chart"]["right"] - boxes["svg.chart"]["x"] >= 0.5 * (width - 100)
            await shoot(page, f"reports-{size}")
        found += await audit(page, "/reports")
        await page.goto(f"{web.url}/reports?day=2026-12-01")
        await expect(page.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)
        assert not found, "\n".join(found)
    finally:
        stop_web(web)


async def audit_login(page: Page, web: WebServer) -> list[str]:
    """The login page and the refusal page, audited as every page is."""
    await page.goto(f"{web.url}/login?next=%2Freports")
    await expect(page.locator("#login")).to_be_visible(timeout=WAIT)
    found = await audit(page, "/login")
    await page.goto(f"{web.url}/static/denied.html")
    found += await audit(page, "/reports (refused)")
    return found


async def test_no_store_configured_and_a_store_down_are_said_plainly(
    tmp_path: Path, auth_broker: AuthBroker, context: BrowserContext
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    none = records_web(tmp_path / "a", auth_broker, None)
    # A store nobody listens on: the connection is refused.
    down = Records("", f"host=127.0.0.1 port={free_port()} dbname=nothing user=nobody", None)
    gone = records_web(tmp_path / "b", auth_broker, down)
    try:
        for web, said in (
            (none, "no records store is configured on this server"),
            (gone, "the records store cannot be reached: "),
        ):
            page = await context.new_page()
            await login(page, web, PIT_USER, "/reports")
            await expect(page.locator("#unavailable")).to_contain_text(said, timeout=WAIT)
            if web is none:  # the page that says so reads as well as the others
                found = await audit(page, "/reports (no store)")
                assert not found, "\n".join(found)
            answer = await page.request.get(f"{web.url}/api/reports")
            assert answer.status == 503
            assert (await answer.json())["error"].startswith(said)
            await page.close()
            await context.clear_cookies()
    finally:
        for web in (none, gone):
            stop_web(web)
    for web in (none, gone):
        assert "Traceback" not in web.log_text()


WORDS_BROKEN = """() => {
    const broken = [];
    for (const td of document.querySelectorAll("table.report.wide td")) {
        const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const m of node.nodeValue.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, m.index);
                range.setEnd(node, m.index + m[0].length);
                const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
                if (lines.size > 1) broken.push(m[0]);
            }
        }
    }
    return broken;
}"""

ALARM_CODES = sorted(
    a.code.replace("<code>", "JAM") if a.code.startswith(DEVICE_FAULT_PREFIX) else a.code
    for a in ALARMS
)
"""Every alarm a table raises (``rules.alarms``: ``DEVICE_FAULT_<code>`` stands for a
device's own codes, asked here as ``DEVICE_FAULT_JAM``)."""


async def test_the_report_says_alarms_in_words_and_nothing_stray(
    tmp_path: Path, auth_broker: AuthBroker, records: Records, page: Page
) -> None:
    # issue 29: the page ended with a literal "null" (no gaps: replaceChildren(null)), showed
    # the alarms' codes and broke them mid-word ("MODE_MISMATC" / "H").
    store_floor(records)
    paused = {
        **alarms("bj-1", 200, "MODE_MISMATCH", "DEVICE_FAULT_DOOR_OPEN"),
        "ts": iso(1, 12, 0),
    }
    paused["alarms"] = [{**a, "since": iso(1, 12, 0)} for a in paused["alarms"]]
    with psycopg.connect(records.owner_dsn) as conn:
        store = Store(conn)
        store.write(parse("bj-1", "alarms", body(paused)))
        store.write(parse("bj-1", "alarms", body({**alarms("bj-1", 201), "ts": iso(1, 12, 5)})))
    web = records_web(tmp_path, auth_broker, records)
    try:
        await login(page, web, PIT_USER, f"/reports?day={DAY}")
        await expect(page.locator("body")).to_have_attribute("data-loaded", "1", timeout=WAIT)
        words = await page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll("#alarms tbody tr")]
                .map((r) => [r.dataset.code, [r.children[1].textContent,
                                              r.children[1].getAttribute("title")]]))"""
        )
        assert words == {
            "MODE_MISMATCH": ["Shuffler set to another game", "MODE_MISMATCH"],
            "DEVICE_FAULT_DOOR_OPEN": ["Device fault: door open", "DEVICE_FAULT_DOOR_OPEN"],
            "JAM": ["JAM", "JAM"],  # a code without words, as it came
        }
        for size, (width, height) in SIZES.items():
            await page.set_viewport_size({"width": width, "height": height})
            await page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r(null)))")
            said = await page.evaluate("() => document.getElementById('main').innerText")
            assert not re.search(r"\bnull\b", said), f"{size}: stray text: {said[-80:]!r}"
            assert await page.evaluate(WORDS_BROKEN) == [], size
        # Every code has words of its own (a device's fault code: the device's word).
        texts = await page.evaluate(
            """async (codes) => {
                const m = await import("/static/js/staff_text.js");
                return Object.fromEntries(codes.map((c) => [c, m.alarmWords(c)]));
            }""",
            ALARM_CODES,
        )
        for code, text in texts.items():
            assert text, code
            assert text != code, code
            assert "_" not in text, f"{code}: {text!r}"
    finally:
        stop_web(web)
