"""A table's Prometheus endpoint (``[metrics]``) scraped while it plays: the real daemon, a
simulated device on a pty, a real Mosquitto; each scrape parsed with prometheus_client's own
text parser (and ``promtool check metrics`` where Prometheus's tools are installed)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.metrics import FAMILIES as DECLARED
from deploy.broker import free_port
from tests.integration.conftest import MakeTable
from tests.integration.harness import DEADLINE, Table, card_pattern

pytestmark = pytest.mark.integration

FAMILIES = {
    "lammer_info": "gauge",
    "lammer_device_frames": "counter",
    "lammer_device_naks": "counter",
    "lammer_device_link_errors": "counter",
    "lammer_device_disconnects": "counter",
    "lammer_device_connected": "gauge",
    "lammer_results": "counter",
    "lammer_frame_to_publish_seconds": "histogram",
    "lammer_journal_size_bytes": "gauge",
    "lammer_disk_free_bytes": "gauge",
    "lammer_disk_hours_left": "gauge",
    "lammer_outbox_depth": "gauge",
    "lammer_mqtt_connected": "gauge",
    "lammer_table_available": "gauge",
    "lammer_mqtt_published": "counter",
    "lammer_alarms_active": "gauge",
}
"""Every family a table serves, with its type (docs/floor/monitoring.md)."""

LABELS = {"device", "game", "code", "version", "table", "le"}
"""The only label names a table's metrics carry: none could hold a card or a roll."""

Scrape = dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]


def _metrics_config(port: int) -> str:
    return f'[metrics]\nlisten = "127.0.0.1:{port}"\n'


async def _scrape(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return await response.text()


def _parse(text: str) -> tuple[Scrape, dict[str, str]]:
    """``{family: {(sample name, labels): value}}`` and each family's type."""
    samples: Scrape = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            assert set(sample.labels) <= LABELS, sample
            key = (sample.name, tuple(sorted(sample.labels.items())))
            samples.setdefault(family.name, {})[key] = sample.value
    return samples, types


def _value(scrape: Scrape, family: str, sample: str, **labels: str) -> float:
    return scrape[family][(sample, tuple(sorted(labels.items())))]


def _promtool(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        return  # Debian's prometheus package is not installed here: the parser above only
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text.encode(), capture_output=True, check=False
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def _rolls(first: int, count: int) -> str:
    return "".join(f"ROLL,{first + i},{1 + i % 6},{1 + (i + 2) % 6}\n" for i in range(count))


async def _scraped_after(table: Table, port: int, rolls: int) -> tuple[Scrape, str]:
    """A scrape once the table published ``rolls`` rolls and the broker has them all."""
    await table.wait_for(
        lambda: len(table.recorder.on("craps/roll")) >= rolls, what=f"{rolls} rolls"
    )
    await table.wait_published()

    # The results are counted at the broker's PUBACK, which the subscriber may see first:
    # scraped again (a condition polled, with a deadline that bounds a failure only).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while True:
        text = await _scrape(port)
        scrape, _ = _parse(text)
        if _value(scrape, "lammer_results", "lammer_results_total", game="CRAPS") >= rolls:
            return scrape, text
        assert loop.time() < deadline, f"results not counted after {DEADLINE} s:\n{text}"
        await asyncio.sleep(0.05)


@pytest.mark.heavy
async def test_a_craps_tables_metrics_move_as_it_plays(make_table: MakeTable) -> None:
    port = free_port()
    table = make_table("CRAPS", extra_config=_metrics_config(port))
    await table.start(_rolls(101, 4))
    first, text = await _scraped_after(table, port, 4)
    _promtool(text)
    _, types = _parse(text)
    assert {name: types.get(name) for name in FAMILIES} == FAMILIES
    # ... and every family the reference lists (daemon.metrics.FAMILIES), nothing else.
    assert set(types) == {f.name + ("_info" if f.kind == "info" else "") for f in DECLARED}

    dice = {"device": "dice_reader"}
    info = {"version": "0.1.0", "table": table.table_id, "game": "CRAPS"}
    assert _value(first, "lammer_info", "lammer_info", **info) == 1
    assert _value(first, "lammer_device_frames", "lammer_device_frames_total", **dice) >= 5
    assert _value(first, "lammer_device_connected", "lammer_device_connected", **dice) == 1
    assert _value(first, "lammer_mqtt_connected", "lammer_mqtt_connected") == 1
    assert _value(first, "lammer_table_available", "lammer_table_available") == 1
    assert _value(first, "lammer_outbox_depth", "lammer_outbox_depth") == 0
    assert _value(first, "lammer_journal_size_bytes", "lammer_journal_size_bytes") > 0
    assert _value(first, "lammer_disk_hours_left", "lammer_disk_hours_left") > 0
    latency = "lammer_frame_to_publish_seconds"
    assert _value(first, latency, f"{latency}_count") >= 4
    assert _value(first, "lammer_alarms_active", "lammer_alarms_active", code="LINK_ERRORS") == 0

    # Another reader plugged in (an unplug, then a reconnection) whose frames are damaged
    # at times: every frame with a bad CRC is NAKed and sent again.
    await table.start_sim(_rolls(105, 8), fault="crc=0.5", seed=7)
    second, text = await _scraped_after(table, port, 12)
    _promtool(text)

    def moved(family: str, sample: str, **labels: str) -> float:
        return _value(second, family, sample, **labels) - _value(first, family, sample, **labels)

    assert moved("lammer_device_frames", "lammer_device_frames_total", **dice) >= 8
    assert moved("lammer_device_naks", "lammer_device_naks_total", **dice) >= 1
    assert moved("lammer_device_link_errors", "lammer_device_link_errors_total", **dice) >= 1
    assert moved("lammer_device_disconnects", "lammer_device_disconnects_total", **dice) >= 1
    assert moved("lammer_results", "lammer_results_total", game="CRAPS") == 8
    assert moved(latency, f"{latency}_count") >= 8
    assert moved("lammer_mqtt_published", "lammer_mqtt_published_total") > 0
    assert moved("lammer_journal_size_bytes", "lammer_journal_size_bytes") >= 0


@pytest.mark.heavy
async def test_no_metric_carries_a_card(make_table: MakeTable) -> None:
    port = free_port()
    table = make_table("UTH", extra_config=_metrics_config(port))
    cards = ["Ah", "Ad", "Kc", "Qc", "As", "Ac", "7d", "2s", "9c"]
    await table.start(
        "DECK,OK\nHAND,305,P1,AhAd\nHAND,305,DL,KcQc\nHAND,305,CM,AsAc7d2s9c\n"
        "ROUND,305,2\nSETTLE,305\n"
    )
    await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 305)
    await table.wait_published()
    text = await _scrape(port)
    scrape, _ = _parse(text)
    frames = _value(scrape, "lammer_device_frames", "lammer_device_frames_total", device="shuffler")
    assert frames >= 5
    assert not card_pattern(cards).search(text), text
    values: set[Any] = {
        value for family in scrape.values() for _, labels in family for _, value in labels
    }
    assert values <= {"shuffler", "UTH", "0.1.0", table.table_id, *_codes(text), *_les(text)}


def _codes(text: str) -> set[str]:
    return {
        sample.labels["code"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "code" in sample.labels
    }


def _les(text: str) -> set[str]:
    return {
        sample.labels["le"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "le" in sample.labels
    }


@pytest.mark.heavy
async def test_a_metrics_port_in_use_stops_the_daemon_with_a_sentence(
    make_table: MakeTable,
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        table = make_table("CRAPS", extra_config=_metrics_config(port))
        daemon = table.start_daemon()
        table.daemon = None  # its exit is what is awaited
        await table.wait_for(lambda: daemon.proc.poll() is not None, what="the daemon to exit")
    assert daemon.proc.returncode == 1
    log = daemon.log.read_text()
    assert f"lammer: cannot serve metrics on 127.0.0.1:{port} ([metrics] listen):" in log
    assert "Traceback" not in log
