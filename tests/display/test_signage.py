"""The player display as signage read from three metres (issue 29), measured in Debian's
Chromium against ``lammer web``, the real daemons, their simulators on ptys and Mosquitto.

Every game a table plays (the six Cover All games, Bust Bonus, Bonus Craps), each on a
table with the longest texts the contract allows: a table id of 64 characters, round ids
of six digits, seven and eight hands, "Straight Flush", "Dealer's hand", pays of three
digits, a history of ten rounds. At 1920x1080, 1080x1920, 1280x800 and 1024x768, in play
and in the attract view, each pay cell, hand name, pays figure, history row, chance,
number chip and badge is measured from the DOM: its computed font size against the
issue's figures (a pay or a hand name 48 px on a 1080-pixel side and 36 px on the small
screens; a history row, a chance or a badge 32 px and 24 px), its box inside its region and
the viewport, no ancestor clipping it, its content not overflowing it, nothing covering
its middle (``document.elementFromPoint``); the page scrolls neither way. A screenshot of
each game at each size goes to ``docs/screens/`` (``shoot``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect

from tests.display.conftest import AuthBroker, MakeTable, WebServer, shoot, start_web, stop_web
from tests.display.deals import ROYAL, STRAIGHT_FLUSH, deal
from tests.helpers.screens import (
    BJ_888_SUITED,
    PLAYER_REGIONS,
    SIZES,
    STAFF_WORDS,
    WAIT,
    audit,
    check_regions,
    measure,
)
from tests.integration.harness import Table

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

FLOORS = {
    "1920x1080": {"pays": 48, "small": 32},
    "1080x1920": {"pays": 48, "small": 32},
    "1280x800": {"pays": 36, "small": 24},
    "1024x768": {"pays": 36, "small": 24},
}
"""The issue's figures: a pay or a hand name a player can win, and a history row, a chance
or a badge, in CSS px."""

PAYS = [
    "#paytable tbody td .figure",
    "#paytable tbody th.hand",
    "#pays",
    "#hand",
    "#outcome",
    "#round .roll-win",
    "#round .roll-total",
    ".bet .odds",
    ".bet h3",
    "#attract .bet-name",
]
"""What a player can win, and the names of what wins: held to the pays figure."""

SMALL = [
    "#history-table tbody tr td",
    ".bet .chance",
    ".bet .needs span",
    "#numbers .number",
    ".badge",
    "#paytable thead .to-one",
    "#paytable thead .n",
    "#round h2",
    "#round .line",
    "#attract .pitch",
]
"""The history's rows, the chances, the number chips, the badge, and every word of the
round: held to the small figure."""

SIGNAGE = """(kinds) => {
    const found = [];
    for (const [kind, selector] of kinds) {
        for (const el of document.querySelectorAll(selector)) {
            if (el.closest("[hidden]") || !el.getClientRects().length) continue;
            // The element's box, grown to its content where that overflows it by more than
            // the scroll sizes' rounding (a line height under the font's: the glyphs pass
            // the line box, harmless unless an ancestor clips them or they leave the region).
            const b0 = el.getBoundingClientRect();
            const over = (scroll, client, size) => (scroll > client + 1 ? scroll : size);
            const r = {left: b0.left, top: b0.top,
                       right: b0.left + over(el.scrollWidth, el.clientWidth, b0.width),
                       bottom: b0.top + over(el.scrollHeight, el.clientHeight, b0.height)};
            const region = el.closest(".region, .topbar, #banner");
            const rb = region ? region.getBoundingClientRect() : null;
            let clippedBy = null;
            for (let a = el.parentElement; a && a !== document.documentElement;
                    a = a.parentElement) {
                const style = getComputedStyle(a);
                if (style.overflowX === "visible" && style.overflowY === "visible") continue;
                const b = a.getBoundingClientRect();
                if (r.left < b.left - 0.5 || r.right > b.right + 0.5
                        || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5) {
                    clippedBy = a.id || a.className || a.tagName;
                    break;
                }
            }
            const x = (r.left + r.right) / 2;
            const y = (r.top + r.bottom) / 2;
            const hit = document.elementFromPoint(x, y);
            found.push({
                kind, selector, text: el.textContent.trim(),
                size: parseFloat(getComputedStyle(el).fontSize),
                box: [r.left, r.top, r.right, r.bottom],
                region: rb ? [rb.left, rb.top, rb.right, rb.bottom] : null,
                clippedBy,
                overflows: el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1,
                covered: !(hit && (el.contains(hit) || hit.contains(el))),
                coveredBy: hit ? (hit.id || hit.className || hit.tagName) : null,
            });
        }
    }
    return {
        found,
        page: [document.documentElement.scrollWidth, document.documentElement.scrollHeight],
        view: [window.innerWidth, window.innerHeight],
        history: (() => {
            const t = document.querySelector("#history-table");
            return t ? {rows: t.tBodies[0].querySelectorAll("tr:not(.empty)").length,
                        shown: t.tBodies[0].querySelectorAll("tr:not(.empty):not([hidden])").length,
                        caption: t.caption ? t.caption.textContent : ""} : null;
        })(),
    };
}"""


def inside(box: list[float], outer: list[float]) -> bool:
    """Whether ``box`` (left, top, right, bottom) lies within ``outer`` (half a pixel)."""
    eps = 0.5
    return (
        box[0] >= outer[0] - eps
        and box[1] >= outer[1] - eps
        and box[2] <= outer[2] + eps
        and box[3] <= outer[3] + eps
    )


async def fitted(page: Page, width: int, height: int) -> None:
    """Set the viewport and wait until the page has fitted itself to it (fit.js marks the
    body), then a frame."""
    await page.set_viewport_size({"width": width, "height": height})
    await expect(page.locator("body")).to_have_attribute(
        "data-fitted", f"{width}x{height}", timeout=WAIT
    )
    await page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r(null)))")


async def check_signage(page: Page, size: str, where: str) -> dict[str, Any]:
    """Every measured element at ``size``: its floor, inside its region and the viewport,
    not clipped, not overflowing, not covered; the page not scrolling. Returns what was
    measured (the history's rows, for the caller)."""
    floors = FLOORS[size]
    width, height = SIZES[size]
    kinds = [["pays", s] for s in PAYS] + [["small", s] for s in SMALL]
    seen: dict[str, Any] = await page.evaluate(SIGNAGE, kinds)
    problems: list[str] = []
    if seen["page"][0] > width or seen["page"][1] > height:
        problems.append(f"the page scrolls: {seen['page']} in {width}x{height}")
    view = [0.0, 0.0, float(width), float(height)]
    for item in seen["found"]:
        name = f"{item['selector']} {item['text']!r}"
        if item["size"] + 0.05 < floors[item["kind"]]:
            problems.append(f"{name}: {item['size']:.1f} px, under {floors[item['kind']]} px")
        if not inside(item["box"], view):
            problems.append(f"{name}: out of the viewport {item['box']}")
        if item["region"] is not None and not inside(item["box"], item["region"]):
            problems.append(f"{name}: outside its region {item['box']} {item['region']}")
        if item["clippedBy"]:
            problems.append(f"{name}: clipped by {item['clippedBy']}")
        if item["overflows"]:
            problems.append(f"{name}: its text is wider than its box")
        if item["covered"]:
            problems.append(f"{name}: covered by {item['coveredBy']}")
    assert not problems, f"{where} {size}:\n" + "\n".join(problems)
    return seen


@dataclass
class Game:
    """One scripted table: its game, script, and what its current result says."""

    game: str
    script: str
    name: str  # of the screenshot: docs/screens/table-<name>-<size>.png
    expect: dict[str, str]  # selector -> text the page shows for the current result


def poker(
    game: str,
    rounds: list[tuple[int, int, tuple[str, tuple[str, ...]] | None]],
    board: tuple[str, ...] = (),
) -> str:
    """A poker table's script: ``rounds`` of (round id, hands, winner or None)."""
    return "DECK,OK\n" + "".join(
        deal(game, rid, hands, winner, board if winner else ()) for rid, hands, winner in rounds
    )


def games() -> list[Game]:
    """The tables with the longest texts (module docstring)."""
    rf, sf = ROYAL, STRAIGHT_FLUSH
    csp = poker(
        "CSP",
        [
            (999988, 8, None),
            (999989, 2, ("DL", rf)),
            (999990, 7, ("P6", sf)),
            (999991, 8, None),
            (999992, 3, ("P2", sf)),
            (999993, 2, ("DL", rf)),
            (999994, 8, None),
            (999995, 5, ("DL", sf)),
            (999996, 6, None),
            (999997, 2, ("DL", rf)),
            (999998, 8, None),
            (999999, 2, ("DL", sf)),
        ],
    )
    uth_board = ("Qs", "Js", "Ts", "2d", "3c")
    uth = poker(
        "UTH",
        [
            *(
                (
                    101 + i,
                    (7, 3, 6)[i % 3],
                    (("DL", ("As", "Ks")), None, ("P2", ("As", "Ks")))[i % 3],
                )
                for i in range(11)
            ),
            (112, 5, ("P1", ("As", "Ks"))),
        ],
        uth_board,
    )
    lir = poker(
        "LIR",
        [
            *(
                (
                    999989 + i,
                    1 if i % 2 == 0 else 7,
                    ("P1", ("As", "Ks", "Qs")) if i % 2 == 0 else None,
                )
                for i in range(10)
            ),
            (999999, 1, ("P1", ("As", "Ks", "Qs"))),
        ],
        ("Js", "Ts"),
    )
    msp = poker(
        "MSP",
        [
            *(
                (999989 + i, 1 if i % 2 == 0 else 6, ("P1", ("As", "Ks")) if i % 2 == 0 else None)
                for i in range(10)
            ),
            (999999, 1, ("P1", ("As", "Ks"))),
        ],
        ("Qs", "Js", "Ts"),
    )
    quads = ("9c", "9d", "9h", "9s")
    fcp = poker(
        "FCP",
        [
            *(
                (
                    999989 + i,
                    2 if i % 2 == 0 else 7,
                    ("DL", (*quads, "2c", "3d")) if i % 2 == 0 else None,
                )
                for i in range(10)
            ),
            (999999, 2, ("P1", (*quads, "2c"))),
        ],
    )
    tcp = poker(
        "TCP",
        [
            *(
                (
                    999989 + i,
                    2 if i % 2 == 0 else 8,
                    ("DL", ("Ah", "Kh", "Qh")) if i % 2 == 0 else None,
                )
                for i in range(10)
            ),
            (999999, 2, ("P1", ("Ah", "Kh", "Qh"))),
        ],
    )
    bj_rounds = [
        ["Kh", "6s", "9d"],
        ["9c", "Tc"],
        ["Ah", "5h", "9h", "8h"],
        ["8h", "8h", "8h"],
        ["7d", "Td", "5c"],
        ["2s", "Ts", "Qs"],
        ["Tc", "7c"],
        ["6d", "Td", "9d"],
        ["8c", "8d", "8s"],
        ["5s", "Ts", "Js"],
    ]
    bj = "".join(
        f"CARD,{999989 + i},P1,Ts\nCARD,{999989 + i},DL,{d[0]}\nCARD,{999989 + i},P1,9s\n"
        + "".join(f"CARD,{999989 + i},DL,{c}\n" for c in d[1:])
        + f"END,{999989 + i}\n"
        for i, d in enumerate(bj_rounds)
    ) + BJ_888_SUITED.replace(",51", ",999999")
    # A series: 2, 3, 4, 6, then 5 (All Small completes), 8, 10, 11, 12; All Tall and
    # Make 'Em All need the 9 (2 in 5); a CHECK waits.
    dice = [(1, 1), (1, 2), (2, 2), (3, 3), (2, 3), (4, 4), (4, 6), (5, 6), (6, 6)]
    craps = (
        "".join(f"ROLL,{999990 + i},{a},{b}\n" for i, (a, b) in enumerate(dice))
        + "CHECK,999999,3,4,ON_CHIPS\n"
    )
    return [
        Game(
            "CSP",
            csp,
            "csp",
            {
                "#hand": "Straight Flush",
                "#pays": "200 to 1",
                "#seat": "Dealer's hand \u00b7 2 hands",
            },
        ),
        Game("FCP", fcp, "fcp", {"#hand": "Four of A Kind (Other)", "#pays": "90 to 1"}),
        Game("LIR", lir, "lir", {"#hand": "Royal Flush", "#pays": "500 to 1"}),
        Game("MSP", msp, "msp", {"#hand": "Royal Flush", "#pays": "500 to 1"}),
        Game("TCP", tcp, "tcp", {"#hand": "Royal Flush", "#pays": "100 to 1"}),
        Game("UTH", uth, "uth", {"#hand": "Royal Flush", "#pays": "100 to 1"}),
        Game(
            "BJ",
            bj,
            "bust-bonus",
            {"#outcome": "Dealer busts, suited, three 8s", "#pays": "75 to 1"},
        ),
        Game("CRAPS", craps, "craps", {"#lastroll .roll-total": "Being checked"}),
    ]


def long_id(name: str) -> str:
    """A table id of 64 characters, the longest the contract allows, as a casino might
    name a table (the widest letters, "W" * 64, are the paused banner's test's)."""
    head = f"{name}-{uuid.uuid4().hex[:8]}-high-limit-salon-main-floor-by-the-cashiers-cage"
    cut = (head + "-table-twelve")[:64]
    return cut if not cut.endswith("-") else cut[:-1] + "a"


@dataclass
class Floor:
    """The scripted tables, and a ``lammer web`` whose attract view comes after 10 s."""

    tables: dict[str, tuple[Game, Table]]
    attract: WebServer


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def floor(
    tmp_path_factory: pytest.TempPathFactory, auth_broker: AuthBroker, web: WebServer
) -> AsyncIterator[Floor]:
    """Every game's table, played to its current result (the session's ``lammer web``
    watches them from the start, so each has its history), and a second ``lammer web``
    with ``--attract-seconds 10``."""
    workdir = tmp_path_factory.mktemp("signage")
    attract = start_web(workdir, auth_broker, "--attract-seconds", "10")
    tables: dict[str, tuple[Game, Table]] = {}
    try:
        for game in games():
            here = workdir / game.name
            here.mkdir()
            table_id = long_id(game.name)
            table = Table(
                here,
                auth_broker,
                game.game,
                table_id=table_id,
                mqtt_login=("daemon", auth_broker.credentials / "daemon"),
            )
            tables[game.name] = (game, table)
            await table.start(game.script)
        yield Floor(tables, attract)
    finally:
        for _, table in tables.values():
            await table.close()
        stop_web(attract)


async def open_table(page: Page, url: str, game: Game, table: Table) -> None:
    """The table's player page, showing its current result."""
    await page.goto(f"{url}/table/{table.table_id}")
    for selector, text in game.expect.items():
        await expect(page.locator(selector)).to_have_text(text, timeout=WAIT)


@pytest_asyncio.fixture(loop_scope="session")
async def kiosk(browser: Browser) -> AsyncIterator[Page]:
    """A page of a context of its own that fails on a JavaScript error."""
    context = await browser.new_context(viewport={"width": 1920, "height": 1080})
    errors: list[str] = []
    page = await context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    await context.close()
    assert not errors, f"JavaScript errors: {errors}"


@pytest.mark.parametrize("name", [g.name for g in games()])
async def test_every_pay_is_large_whole_and_in_view_at_every_size(
    floor: Floor, web: WebServer, kiosk: Page, name: str
) -> None:
    game, table = floor.tables[name]
    await open_table(kiosk, web.url, game, table)
    for size, (width, height) in SIZES.items():
        await fitted(kiosk, width, height)
        check_regions(await measure(kiosk, PLAYER_REGIONS), width, height)
        seen = await check_signage(kiosk, size, name)
        # In play, the winning cell (or the numbers hit) is lit.
        assert await kiosk.locator("#paytable td.hit, #numbers .lit").count() > 0
        history = seen["history"]
        assert history is not None, "no history"
        # As many of the history's rows as fit at their floor, three at least; fewer than
        # it has are said in its caption.
        assert history["shown"] >= min(3, history["rows"]), f"{size}: {history}"
        if history["shown"] < history["rows"]:
            assert re.search(rf"the last {history['shown']}\b", history["caption"]), history
        await shoot(kiosk, f"table-{name}-{size}")
    # axe-core at every size: no serious or critical violation, no contrast failure.
    found = await audit(kiosk, f"/table ({name})")
    assert not found, "\n".join(found)


async def test_the_attract_view_lights_nothing_and_keeps_every_pay_large(
    floor: Floor, kiosk: Page
) -> None:
    for name, (_, table) in floor.tables.items():
        await kiosk.goto(f"{floor.attract.url}/table/{table.table_id}")
        await expect(kiosk.locator("body")).to_have_class("player attract", timeout=30_000)
        await expect(kiosk.locator("#attract .bet-name")).not_to_be_empty()
        for size, (width, height) in SIZES.items():
            await fitted(kiosk, width, height)
            check_regions(await measure(kiosk, ["#top", "#attract", "#region-pays"]), width, height)
            await check_signage(kiosk, size, f"{name} (attract)")
            # No cell, row, column, number or chip lit: the attract view is every pay alike.
            lit = await kiosk.locator(
                "#paytable .lit, #paytable .hit, #numbers .lit, .bet .needs .got, .bet.complete"
            ).count()
            assert lit == 0, f"{name} {size}: {lit} lit in the attract view"
            assert await kiosk.locator("#paytable td, .bet .odds").count() > 0
        await shoot(kiosk, f"table-{name}-attract")
        found = await audit(kiosk, f"/table ({name}, attract)")
        assert not found, "\n".join(found)


VERSIONS = re.compile(r"\blammer \d|\bcontract \d|\bweb \d|\bpay ?table \d", re.IGNORECASE)


async def test_a_player_page_says_no_version_contract_or_pay_table_number(
    floor: Floor, web: WebServer, kiosk: Page
) -> None:
    for name, (game, table) in floor.tables.items():
        await open_table(kiosk, web.url, game, table)
        await expect(kiosk.locator("#version")).to_have_count(0)
        said = await kiosk.evaluate("() => document.body.innerText")
        assert not VERSIONS.search(said), f"{name}: {VERSIONS.search(said)} on a player page"
        for text in await kiosk.evaluate(
            "() => ['#top', '#main', '#banner', '#overlay']"
            ".map((s) => document.querySelector(s).innerText)"
        ):
            assert not STAFF_WORDS.search(text.replace(table.table_id, "")), f"{name}: {text!r}"


async def test_a_chance_reads_as_a_player_reads_it(
    floor: Floor, web: WebServer, kiosk: Page
) -> None:
    game, table = floor.tables["craps"]
    await open_table(kiosk, web.url, game, table)
    # 2 and 9 wait (the series rolled 2, 3, 4, 6, 5, 8, 10, 11, 12): All Tall and Make 'Em
    # All need the 9, which comes before a seven 4 times in 10 (the daemon's "2/5").
    board = table.recorder.latest("craps/board")
    assert board is not None
    assert board["all_tall"]["chance"] == board["make_em_all"]["chance"] == "2/5"
    await expect(kiosk.locator('[data-bet="all_tall"] .chance')).to_have_text("2 in 5")
    await expect(kiosk.locator('[data-bet="make_em_all"] .chance')).to_have_text("2 in 5")
    await expect(kiosk.locator('[data-bet="all_small"] .chance')).to_have_text("Complete")
    # The terms of a chance past reading at a glance: "1 in X", X to one decimal.
    texts = await kiosk.evaluate(
        """async () => {
            const m = await import("/static/js/player_text.js");
            return ["1/7", "5/11", "3/20", "4/10", "155/1716", "20049/760760",
                    "126538525259/24067258815600", "4/401"].map(m.chanceText);
        }"""
    )
    assert texts == [
        "1 in 7",
        "5 in 11",
        "3 in 20",
        "2 in 5",
        "1 in 11.1",
        "1 in 37.9",
        "1 in 190.2",
        "1 in 100.3",  # 401/4 = 100.25: half up
    ]


PAUSED_MODE = "DECK,OK\n"


async def test_payouts_paused_is_as_large_as_a_pay_at_every_size(
    auth_broker: AuthBroker, web: WebServer, kiosk: Page, tmp_path: Path
) -> None:
    table = Table(
        tmp_path,
        auth_broker,
        "UTH",
        table_id="W" * 56 + uuid.uuid4().hex[:8],
        mqtt_login=("daemon", auth_broker.credentials / "daemon"),
    )
    try:
        await table.start(PAUSED_MODE, mode="TCP")  # the shuffler in another game: paused
        await kiosk.goto(f"{web.url}/table/{table.table_id}")
        banner = kiosk.locator("#banner")
        await expect(banner).to_have_text(
            "Payouts paused: please wait for the dealer", timeout=WAIT
        )
        for size, (width, height) in SIZES.items():
            await fitted(kiosk, width, height)
            seen = await kiosk.evaluate(SIGNAGE, [["pays", "#banner"]])
            [item] = seen["found"]
            assert item["size"] >= FLOORS[size]["pays"], f"{size}: {item}"
            assert inside(item["box"], [0, 0, width, height]), f"{size}: {item}"
            assert not item["overflows"], f"{size}: {item}"
            check_regions(await measure(kiosk, ["#top", "#banner", "#main"]), width, height)
    finally:
        await table.close()


async def test_the_craps_result_shows_what_this_roll_did_and_no_other_s_win(
    web: WebServer, make_table: MakeTable, kiosk: Page
) -> None:
    table = make_table("CRAPS")
    await kiosk.goto(f"{web.url}/table/{table.table_id}")
    last = kiosk.locator("#lastroll")
    wins = kiosk.locator("#round .line.win")
    # Roll 405 completes All Small: its win, under it.
    await table.start("ROLL,401,1,1\nROLL,402,1,2\nROLL,403,2,2\nROLL,404,2,3\nROLL,405,3,3\n")
    await expect(last).to_have_attribute("data-roll", "405", timeout=WAIT)
    await expect(wins).to_have_text(["All Small wins 34 to 1"])
    # Roll 406 wins nothing: nothing under it; the win is 405's, on its row of the series.
    await table.start_sim("ROLL,406,5,5\n")
    await expect(last).to_have_attribute("data-roll", "406", timeout=WAIT)
    await expect(wins).to_have_count(0)
    await expect(kiosk.locator("#round")).not_to_contain_text("wins")
    await expect(kiosk.locator('#history-table tr[data-roll="405"]')).to_contain_text(
        "All Small wins"
    )
    # A seven: it ended the series and won nothing.
    await table.start_sim("ROLL,407,3,4\n")
    await expect(last).to_have_attribute("data-roll", "407", timeout=WAIT)
    await expect(kiosk.locator("#lastroll .roll-total")).to_have_text("7")
    await expect(wins).to_have_count(0)
    await expect(kiosk.locator("#round")).not_to_contain_text("wins")
    await expect(kiosk.locator("#history-table tbody tr")).to_have_text(
        ["No roll yet in this series"]
    )
    # A roll being checked has done nothing yet.
    await table.start_sim("CHECK,408,2,2,ON_CHIPS\n")
    await expect(last).to_have_attribute("data-status", "pending", timeout=WAIT)
    await expect(kiosk.locator("#lastroll .roll-total")).to_have_text("Being checked")
    await expect(wins).to_have_count(0)
    await expect(kiosk.locator("#round")).not_to_contain_text("wins")
