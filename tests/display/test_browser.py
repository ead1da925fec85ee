"""The screens in a real browser: Debian's Chromium driven by Playwright, ``lammer web`` as
a subprocess, the real daemon, simulators on ptys and a Mosquitto with password users.

Every frame a page receives over its WebSocket is checked against the contract's JSON Schema
files (``docs/schemas/<topic>.json``, as a display team would use them): what the browser
is given is the contract, nothing else.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from jsonschema import Draft202012Validator
from playwright.async_api import BrowserContext, Page, WebSocket, expect

from contract.payloads import CONTRACT_VERSION
from tests.display.conftest import (
    KEEPALIVE,
    STICKPERSON,
    AuthBroker,
    MakeTable,
    WebServer,
    shoot,
)
from tests.helpers.screens import BJ_888_SUITED, CRAPS_CHECK, UTH_ROYAL_AT_5, WAIT, login

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

SCHEMAS = Path(__file__).parents[2] / "docs" / "schemas"


@functools.cache
def validator(topic: str) -> Draft202012Validator:
    """The validator of ``docs/schemas/<topic>.json``."""
    schema = json.loads((SCHEMAS / f"{topic}.json").read_text())
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@dataclass
class Frames:
    """What a page received over its WebSocket, checked against the contract as it comes."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def take(self, payload: str | bytes) -> None:
        """One frame from the server."""
        frame = json.loads(payload)
        if frame.get("t") != "msg":
            return
        self.messages.append(frame)
        topic, body = frame["topic"], frame["payload"]
        if body is None:
            return
        for error in validator(topic).iter_errors(body):
            self.violations.append(f"{topic}: {error.message} at {list(error.absolute_path)}")
        if isinstance(body, dict) and body.get("table") != frame["table"]:
            self.violations.append(f"{topic}: table {frame['table']!r} is not the payload's")

    def check(self) -> None:
        """Fail if anything the browser got was not what the contract says."""
        assert not self.violations, "\n".join(self.violations)


def watch(page: Page) -> Frames:
    """Check every WebSocket frame the page receives (attach before ``goto``)."""
    frames = Frames()

    def on_socket(ws: WebSocket) -> None:
        ws.on("framereceived", frames.take)

    page.on("websocket", on_socket)
    return frames


async def test_uth_royal_flush_at_five_hands_lights_column_row_and_pays(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("UTH")
    frames = watch(page)
    await page.goto(f"{web.url}/table/{table.table_id}")
    # Before the table exists: the page says it is closed, and shows no card.
    await expect(page.locator("#overlay")).to_be_visible()
    await table.start(UTH_ROYAL_AT_5)

    await expect(page.locator("#overlay")).to_be_hidden(timeout=WAIT)
    column = page.locator("#paytable thead th.lit")
    await expect(column).to_have_text("5 hands", timeout=WAIT)
    row = page.locator("#paytable tbody tr.lit")
    await expect(row).to_have_count(1)
    await expect(row).to_have_attribute("data-hand", "Royal Flush")
    await expect(page.locator("#paytable td.hit")).to_have_text("100 to 1")
    await expect(page.locator("#pays")).to_have_text("100 to 1")
    await expect(page.locator("#hand")).to_have_text("Royal Flush")
    shown = await page.locator("#round .card").evaluate_all("els => els.map(e => e.dataset.card)")
    assert shown == ["As", "Ks", "Qs", "Js", "Ts", "2d", "3c"]
    # As a player reads it: P1's own two apart from the board, the five that make it marked.
    codes = "els => els.map(e => e.dataset.card)"
    assert await page.locator("#own-cards .card").evaluate_all(codes) == ["As", "Ks"]
    board = await page.locator("#board-cards .card").evaluate_all(codes)
    assert board == ["Qs", "Js", "Ts", "2d", "3c"]
    best = await page.locator("#round .card.best").evaluate_all(codes)
    assert best == ["As", "Ks", "Qs", "Js", "Ts"]
    await expect(page.locator("#own-cards .label")).to_have_text("Seat 1")
    # The lit column is the regulation's 5-hand column (every other column is not lit).
    lit_cells = await page.locator("#paytable tbody td.lit, #paytable tbody td.hit").evaluate_all(
        "els => els.map(e => e.dataset.hands)"
    )
    assert set(lit_cells) == {"5"}
    # The versions are the staff's (issue 29): on the table's pit page, not the player's.
    await expect(page.locator("#version")).to_have_count(0)
    await shoot(page, "table-uth")
    frames.check()
    staff = await page.context.new_page()
    await staff.goto(f"{web.url}/pit/{table.table_id}")
    version = f"contract {CONTRACT_VERSION}"
    await expect(staff.locator("#version")).to_contain_text(version, timeout=WAIT)
    topics = {m["topic"] for m in frames.messages}
    assert {"info", "state", "cover_all/payouts", "cover_all/result"} <= topics


async def test_bust_bonus_eights_suited_pays_75(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("BJ")
    frames = watch(page)
    await table.start(BJ_888_SUITED)
    await page.goto(f"{web.url}/table/{table.table_id}")
    await expect(page.locator("#pays")).to_have_text("75 to 1", timeout=WAIT)
    await expect(page.locator("#outcome")).to_have_text("Dealer busts, suited, three 8s")
    await expect(page.locator("#paytable tr.lit")).to_have_attribute(
        "data-row", "Bust with three 8s"
    )
    hit = page.locator("#paytable td.hit")
    await expect(hit).to_have_text("75 to 1")
    await expect(hit).to_have_attribute("data-column", "suited")
    await shoot(page, "table-bust-bonus")
    frames.check()


async def _requests_seen(broker: AuthBroker, base: str, seen: list[dict[str, Any]]) -> None:
    """Record every request published under ``base`` (a reader of the broker)."""
    async with aiomqtt.Client(broker.host, broker.port, timeout=30) as client:
        await client.subscribe(f"{base}/request/#", qos=1)
        async for message in client.messages:
            payload = message.payload
            assert isinstance(payload, bytes)
            seen.append({"topic": message.topic.value, **json.loads(payload)})


async def test_check_roll_decided_valid_in_the_browser_updates_the_player_page(
    web: WebServer, make_table: MakeTable, context: BrowserContext, auth_broker: AuthBroker
) -> None:
    table = make_table("CRAPS")
    requests: list[dict[str, Any]] = []
    spy = asyncio.create_task(_requests_seen(auth_broker, table.base, requests))
    try:
        await table.start(CRAPS_CHECK)
        await table.wait_topic("craps/board", lambda b: b["pending_roll"] is not None)
        player = await context.new_page()
        frames = watch(player)
        await player.goto(f"{web.url}/table/{table.table_id}")
        await expect(player.locator('[data-number="6"]')).not_to_have_class("number lit")
        await expect(player.locator('#numbers [data-number="5"]')).to_have_class(
            "number lit", timeout=WAIT
        )
        await expect(player.locator("#lastroll")).to_have_attribute("data-status", "pending")

        stick = await context.new_page()
        await login(stick, web, table.table_id)
        await expect(stick.locator("#pending-reason")).to_contain_text("ON_CHIPS")
        await expect(stick.locator("#pending-clause")).to_contain_text("4-4(c)(9)")
        await expect(stick.locator('#clauses li[data-clause="9"]')).to_have_class("current")
        await shoot(stick, "stick-pending")
        await stick.click("#valid")
        await expect(stick.locator("#confirm")).to_be_visible()
        await expect(stick.locator("#confirm-text")).to_contain_text("roll 205 VALID")
        await shoot(stick, "stick-confirm")
        await stick.click("#confirm-yes")
        await expect(stick.locator("#answer")).to_have_text(
            "The table accepted: roll 205 declared valid.", timeout=WAIT
        )
        # The player page shows the roll counted: 6 lit, All Small complete.
        await expect(player.locator('#numbers [data-number="6"]')).to_have_class(
            "number lit", timeout=WAIT
        )
        await expect(player.locator('[data-bet="all_small"] .chance')).to_have_text("Complete")
        await expect(player.locator("#lastroll")).to_have_attribute("data-status", "counted")
        await shoot(player, "table-craps")
        frames.check()
        # The request went out as the logged-in user, through the terminal user.
        decisions = [r for r in requests if r["topic"].endswith("/request/roll_decision")]
        assert len(decisions) == 1
        assert decisions[0]["operator"] == STICKPERSON[0]
        assert decisions[0]["roll_id"] == 205
        assert decisions[0]["decision"] == "valid"
        decided = [
            r
            for r in table.journal("--kind", "decision")
            if isinstance(r.get("event"), dict) and r["event"].get("roll_id") == 205
        ]
        assert decided
        assert decided[-1]["event"]["operator"] == STICKPERSON[0]
    finally:
        spy.cancel()


async def test_an_action_without_a_session_is_refused_and_nothing_reaches_mqtt(
    web: WebServer, make_table: MakeTable, context: BrowserContext, auth_broker: AuthBroker
) -> None:
    table = make_table("CRAPS")
    requests: list[dict[str, Any]] = []
    spy = asyncio.create_task(_requests_seen(auth_broker, table.base, requests))
    try:
        await table.start(CRAPS_CHECK)
        await table.wait_topic("craps/board", lambda b: b["pending_roll"] is not None)
        anonymous = await context.new_page()
        await anonymous.goto(f"{web.url}/stick/{table.table_id}")
        await expect(anonymous.locator("#login")).to_be_visible(timeout=WAIT)
        body = json.dumps({"roll_id": 205, "decision": "valid"})
        post = """async ([url, body, token]) => {
            const headers = {"Content-Type": "application/json"};
            if (token !== null) headers["X-CSRF-Token"] = token;
            const r = await fetch(url, {method: "POST", headers, body, credentials: "same-origin"});
            return [r.status, await r.json()];
        }"""
        url = f"/api/table/{table.table_id}/roll_decision"
        status, answer = await anonymous.evaluate(post, [url, body, None])
        assert status == 401
        assert answer["status"] == "error"
        status, _ = await anonymous.evaluate(post, [url, body, "forged"])
        assert status == 401
        await shoot(anonymous, "stick-login")

        # Logged in, but without the session's CSRF token: 403.
        stick = await context.new_page()
        await login(stick, web, table.table_id)
        status, answer = await stick.evaluate(post, [url, body, "not-the-token"])
        assert status == 403, answer
        status, _ = await stick.evaluate(post, [url, body, None])
        assert status == 403

        # A legitimate decision now: if a refused one had been published, it would have
        # reached the broker before this one (one connection, in order).
        await stick.click("#invalid")
        await stick.click("#confirm-yes")
        await expect(stick.locator("#answer")).to_have_text(
            "The table accepted: roll 205 declared invalid.", timeout=WAIT
        )
        decisions = [r for r in requests if r["topic"].endswith("/request/roll_decision")]
        assert [(d["operator"], d["decision"]) for d in decisions] == [(STICKPERSON[0], "invalid")]
        # Until that decision the roll stayed pending: no board without it came before.
        boards = table.recorder.bodies("craps/board")
        first_cleared = next(i for i, b in enumerate(boards) if i and b["pending_roll"] is None)
        assert all(b["pending_roll"] is not None for b in boards[4:first_cleared])
    finally:
        spy.cancel()


async def test_the_daemon_killed_shows_table_closed_within_the_keepalive(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    table = make_table("UTH")
    await table.start(UTH_ROYAL_AT_5)
    await page.goto(f"{web.url}/table/{table.table_id}")
    await expect(page.locator("#pays")).to_have_text("100 to 1", timeout=WAIT)
    await expect(page.locator("#overlay")).to_be_hidden()
    daemon = table.daemon
    assert daemon is not None
    table.daemon = None  # its death is the test
    killed = time.monotonic()
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    await expect(page.locator("#overlay")).to_be_visible(timeout=30_000)
    elapsed = time.monotonic() - killed
    await expect(page.locator("#overlay")).to_have_attribute("data-reason", "offline")
    # A player reads no code: plain words.
    await expect(page.locator("#overlay .why")).to_have_text("Please wait for the dealer")
    assert elapsed < 30, f"table closed shown after {elapsed:.1f} s (daemon keepalive 30 s)"
    await shoot(page, "table-closed")


async def test_a_silent_server_shows_table_closed_then_the_page_reconnects(
    tmp_path: Any, auth_broker: AuthBroker, make_table: MakeTable, page: Page
) -> None:
    from tests.display.conftest import start_web, stop_web

    own = start_web(tmp_path, auth_broker)
    try:
        table = make_table("BJ")
        await table.start(BJ_888_SUITED)
        await page.goto(f"{own.url}/table/{table.table_id}")
        await expect(page.locator("#pays")).to_have_text("75 to 1", timeout=WAIT)
        own.proc.send_signal(signal.SIGSTOP)  # the server hangs: no tick, no close
        stopped = time.monotonic()
        try:
            await expect(page.locator("#overlay")).to_be_visible(timeout=(KEEPALIVE + 5) * 1000)
            # Shown about KEEPALIVE s after the last tick (the page's check, Playwright's
            # polling and a loaded machine's timers add a few seconds; twice it is a fault).
            assert time.monotonic() - stopped <= KEEPALIVE + 4
        finally:
            own.proc.send_signal(signal.SIGCONT)
        await expect(page.locator("#overlay")).to_be_hidden(timeout=WAIT)
        await expect(page.locator("#pays")).to_have_text("75 to 1")
    finally:
        stop_web(own)


async def test_pit_shows_every_table_with_alarms(
    web: WebServer, make_table: MakeTable, page: Page
) -> None:
    poker = make_table("UTH")
    await poker.start(UTH_ROYAL_AT_5)
    # A shuffler set to another game: MODE_MISMATCH stops payouts.
    wrong = make_table("UTH")
    await wrong.start("DECK,OK\n", mode="TCP")
    await wrong.wait_topic(
        "alarms", lambda b: any(a["code"] == "MODE_MISMATCH" for a in b["alarms"])
    )
    await page.goto(f"{web.url}/pit?view=cards")
    card = page.locator(f'[data-table="{wrong.table_id}"]')
    await expect(card.locator('[data-code="MODE_MISMATCH"]')).to_contain_text(
        "payouts paused", timeout=WAIT
    )
    await expect(page.locator(f'[data-table="{poker.table_id}"] .last')).to_contain_text(
        "Royal Flush 100 to 1"
    )
    await shoot(page, "pit")
    player = await page.context.new_page()
    await player.goto(f"{web.url}/table/{wrong.table_id}")
    # The player reads the plain sentence; the pit has the code and the reason.
    await expect(player.locator("#banner")).to_have_text(
        "Payouts paused: please wait for the dealer", timeout=WAIT
    )
    await expect(player.locator("#banner")).to_have_attribute("data-codes", "MODE_MISMATCH")
    await expect(card.locator('[data-code="MODE_MISMATCH"]')).to_contain_text("TCP")
    await shoot(player, "table-payouts-paused")


async def test_void_then_overturn_from_the_terminal_redraws_the_player_page(
    web: WebServer, make_table: MakeTable, context: BrowserContext
) -> None:
    table = make_table("CRAPS")
    await table.start("ROLL,301,1,1\nROLL,302,1,2\n")
    player = await context.new_page()
    await player.goto(f"{web.url}/table/{table.table_id}")
    three = player.locator('#numbers [data-number="3"]')
    await expect(three).to_have_class("number lit", timeout=WAIT)

    stick = await context.new_page()
    await login(stick, web, table.table_id)
    await expect(stick.locator("#void")).to_have_text("Void roll 302", timeout=WAIT)
    await expect(stick.locator("#overturn")).to_be_disabled()
    await stick.select_option("#clause", "3")
    await stick.click("#void")
    await expect(stick.locator("#confirm-text")).to_contain_text("4-4(c)(3)")
    await stick.click("#confirm-yes")
    await expect(stick.locator("#answer")).to_have_text(
        "The table accepted: roll 302 declared invalid under (c)(3).", timeout=WAIT
    )
    await expect(three).to_have_class("number", timeout=WAIT)  # no longer hit
    await expect(player.locator("#lastroll")).to_have_attribute("data-status", "declared_invalid")

    await expect(stick.locator("#overturn")).to_have_text("Overturn roll 302", timeout=WAIT)
    await stick.click("#overturn")
    await stick.click("#confirm-yes")
    await expect(stick.locator("#answer")).to_have_text(
        "The table accepted: roll 302 reinstated.", timeout=WAIT
    )
    await expect(three).to_have_class("number lit", timeout=WAIT)
    # Both decisions are in the table's record, made by the logged-in stickperson.
    void = [
        r
        for r in table.journal("--kind", "decision")
        if isinstance(r.get("event"), dict) and r["event"].get("roll_id") == 302
    ]
    assert [r["event"]["operator"] for r in void] == [STICKPERSON[0], STICKPERSON[0]]
