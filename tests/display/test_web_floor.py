"""``lammer web`` for the whole floor, in Debian's Chromium: the pit's areas, alarm filter
and count of tables (against the screens' broker), and a pit that stays up when the floor
node it reads from dies (against a real 3-node nats-server cluster, a controller bridged to
it by broker-config, its daemon and simulator)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Page, expect

from deploy.broker import free_port, wait_serving
from deploy.floor_cluster import FloorCluster
from tests.display.conftest import KEEPALIVE, AuthBroker, MakeTable, screenshot_dir
from tests.integration.floor import Controller, until

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.browser]

WAIT = 15_000  # ms: a bound for failures only


class Web:
    """``lammer web`` as a subprocess with a web.toml of the test's own."""

    def __init__(self, workdir: Path, settings: dict[str, Any]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "web.log"
        toml = workdir / "web.toml"
        lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items() if k != "areas"]
        lines.append(f'listen = "127.0.0.1:{self.port}"')
        lines.append(f"keepalive = {KEEPALIVE}")
        lines.append("[areas]")
        lines += [
            f"{json.dumps(k)} = {json.dumps(v)}" for k, v in settings.get("areas", {}).items()
        ]
        toml.write_text("\n".join(lines) + "\n")
        lammer = str(Path(sys.executable).parent / "lammer")
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [lammer, "web", "--config", str(toml)], stdout=out, stderr=subprocess.STDOUT
            )

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/api/health", timeout=5) as response:  # noqa: S310  http to the test's own server
            body: dict[str, Any] = json.loads(response.read())
            return body

    def up(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text(errors="replace")
        if not wait_serving(self.proc.pid, "127.0.0.1", self.port, timeout=0.2):
            return False
        health = self.health()
        return bool(health["broker"] and health["terminal"])

    def said(self) -> str:
        """What the server logged (one line per link up, down or refused): a failure's
        reasons."""
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest_asyncio.fixture(loop_scope="session")
async def webs() -> AsyncIterator[list[Web]]:
    started: list[Web] = []
    yield started
    for w in started:
        w.stop()


async def test_the_pit_filters_by_area_and_alarm_and_counts_the_tables(
    tmp_path: Path, auth_broker: AuthBroker, make_table: MakeTable, page: Page, webs: list[Web]
) -> None:
    a, b, c = make_table("UTH"), make_table("UTH"), make_table("UTH")
    await a.start("DECK,OK\n")
    await b.start("DECK,OK\n")
    await c.start("DECK,OK\n", mode="TCP")  # MODE_MISMATCH
    await c.wait_topic("alarms", lambda m: any(x["code"] == "MODE_MISMATCH" for x in m["alarms"]))
    web = Web(
        tmp_path,
        {
            "mqtt_host": auth_broker.host,
            "mqtt_port": auth_broker.port,
            "mqtt_user": "display",
            "mqtt_password_file": str(auth_broker.credentials / "display"),
            "terminal_user": "terminal",
            "terminal_password_file": str(auth_broker.credentials / "terminal"),
            "areas": {"Pit 1": [a.table_id, c.table_id], "Pit 2": ["not-here-yet"]},
        },
    )
    webs.append(web)
    await until(web.up, "lammer web up")
    mine = {a.table_id, b.table_id, c.table_id}
    await page.goto(f"{web.url}/pit?view=cards")
    for t in mine:
        await expect(page.locator(f'[data-table="{t}"]')).to_be_visible(timeout=WAIT)
    seen = page.locator("#seen")
    # Other tests' tables share the broker: the count is of every table seen, read once
    # their retained burst is in (the count unchanged for a second; it came in any order).
    total, since = -1, time.monotonic()
    deadline = since + WAIT / 1000
    while time.monotonic() - since < 1.0:
        count = int(await seen.get_attribute("data-tables") or 0)
        if count != total:
            total, since = count, time.monotonic()
        assert time.monotonic() < deadline, "the count of tables seen never settled"
        await asyncio.sleep(0.1)
    assert total >= 3
    await expect(seen).to_contain_text(f"{total} tables seen")
    assert int(await seen.get_attribute("data-alarmed") or 0) >= 1

    # Grouped: Pit 1 holds a and c; b is in no area.
    pit1 = page.locator('section.area[data-area="Pit 1"]')
    await expect(pit1.locator(".tablecard")).to_have_count(2)
    await expect(
        page.locator(f'section.area[data-area=""] [data-table="{b.table_id}"]')
    ).to_be_visible()

    await page.select_option("#area", "Pit 1")
    await expect(page.locator(".tablecard")).to_have_count(2)
    await expect(page.locator("#shown")).to_have_text(f"showing 2 of {total}")
    assert "area=Pit+1" in page.url
    await page.select_option("#alarm", "MODE_MISMATCH")
    await expect(page.locator(".tablecard")).to_have_count(1)
    await expect(page.locator(f'[data-table="{c.table_id}"]')).to_be_visible()
    await page.screenshot(path=str(screenshot_dir() / "pit-filtered.png"))

    # The filters are in the address: the same view after a reload.
    await page.reload()
    await expect(page.locator(".tablecard")).to_have_count(1, timeout=WAIT)
    await page.select_option("#area", "")
    await page.select_option("#alarm", "")
    await expect(page.locator(".tablecard")).to_have_count(total)


@pytest.mark.slow
@pytest.mark.timeout(480)
async def test_the_pit_of_the_floor_moves_to_another_node_when_its_node_dies(
    tmp_path: Path, page: Page, webs: list[Web]
) -> None:
    cluster = FloorCluster(tmp_path / "cluster")
    ctl = Controller(tmp_path / "ctl", "webfloor", "CRAPS", cluster)
    try:
        ctl.configure()
        cluster.configure([ctl.declaration])
        cluster.start()
        await ctl.start(interval=1.0, seed=7)
        creds = cluster.plan.credentials_dir
        web = Web(
            tmp_path,
            {
                "mqtt_host": ",".join(f"{h}:{p}" for h, p in cluster.mqtt_endpoints),
                "mqtt_user": "display",
                "mqtt_password_file": str(creds / "display"),
                "terminal_user": "terminal",
                "terminal_password_file": str(creds / "terminal"),
                "mqtt_ca_file": str(cluster.ca_path),
                "floor_controllers": [str(ctl.declaration)],
                "areas": {"Pit 9": [ctl.table.table_id]},
            },
        )
        webs.append(web)
        await until(web.up, "lammer web up on the floor")
        await page.goto(f"{web.url}/pit?view=cards")  # the card view draws the unreachable line
        card = page.locator(f'[data-table="{ctl.table.table_id}"]')
        await expect(card.locator(".last")).to_contain_text("roll", timeout=WAIT)
        await expect(page.locator("#seen")).to_contain_text("1 table seen")
        await expect(page.locator("#bridges")).to_contain_text("1 of 1 controllers connected")

        node = web.health()["node"]
        index = next(i for i, (h, p) in enumerate(cluster.mqtt_endpoints, 1) if node == f"{h}:{p}")
        cluster.kill_node(index)
        killed = time.monotonic()
        # Both links on another node: JetStream must first elect new leaders for what the
        # dead node led before a node takes a CONNECT and backs a QoS 1 subscription with
        # a consumer (15 to 31 s quiet here, each refusal a try of the next node); the
        # bound is for a failure only, and a loaded machine takes longer.
        try:
            await until(
                lambda: (h := web.health())["broker"] and h["node"] != node and h["terminal"],
                "lammer web on another node",
                180,
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the server said:\n{web.said()}") from None
        took = time.monotonic() - killed
        # The page is live again and the table plays on through the new node.
        await expect(page.locator("#link")).to_have_text("broker connected", timeout=WAIT)
        # JetStream elects new leaders for what the dead node led (its MQTT sessions,
        # streams, consumers): on this shared 2-core machine that took up to half a minute
        # (docs/developers/benchmarks.md, "The floor"), longer under load; the bound is for
        # a failure only.
        before = await card.locator(".last").text_content()
        await expect(card.locator(".last")).not_to_have_text(before or "", timeout=120_000)
        await expect(page.locator("#seen")).to_contain_text("1 table seen")
        print(f"lammer web moved from {node} to {web.health()['node']} in {took:.2f} s")
        cluster.start_node(index)
        # The controller dies (no goodbye): its bridge's will marks its tables on the pit.
        assert ctl.broker.process is not None
        ctl.broker.kill()
        await expect(card.locator(".unreachable")).to_contain_text(
            "controller webfloor unreachable since ", timeout=WAIT
        )
        await expect(page.locator("#bridges")).to_contain_text("webfloor lost since")
        assert web.health()["gaps"] == 0  # every message of the table came, in order
    finally:
        await ctl.close()
        cluster.stop()
