"""``lammer records run --metrics-listen``: the service's metrics scraped while a table
publishes to a real Mosquitto and the service stores into the private PostgreSQL."""

from __future__ import annotations

import asyncio
import inspect
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import aiomqtt
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from deploy.broker import Broker, free_port
from metrics.settings import metrics_settings
from records.intake import Settings
from records.service import run
from tests.helpers.records_service import DEADLINE, settings_for
from tests.records.conftest import StoreDb
from tests.records.messages import craps_roll

FAMILIES = {
    "lammer_info",
    "lammer_records_messages_stored",
    "lammer_records_messages_refused",
    "lammer_records_batches",
    "lammer_records_waiting_messages",
    "lammer_records_feed_lag_seconds",
    "lammer_records_gaps_filling",
    "lammer_records_held_messages",
}

LAG = ("lammer_records_feed_lag_seconds", (("table", "t1"),))

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _scrape(port: int) -> tuple[set[str], Samples]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        text = await response.text()
    names: set[str] = set()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return names, samples


def _roll(seq: int, prev: int | None, age: float) -> bytes:
    published = datetime.now(UTC) - timedelta(seconds=age)
    body: dict[str, Any] = {
        **craps_roll("t1", seq, seq, 2, 3),
        "ts": published.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "prev_seq": prev,
    }
    return json.dumps(body).encode()


def _served(store_db: StoreDb, broker: Broker) -> tuple[int, Settings]:
    """A free loopback port and the service's settings that serve its metrics there."""
    port = free_port()
    return port, settings_for(store_db, broker.port, metrics=metrics_settings(f"127.0.0.1:{port}"))


async def test_stored_refused_lag_and_gaps_are_served(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    port, settings = _served(store_db, mosquitto_private)
    stop = asyncio.Event()
    service = asyncio.create_task(run(settings, stop))
    loop = asyncio.get_running_loop()

    async def until(check: Any, what: str) -> Samples:
        deadline = loop.time() + DEADLINE
        while True:
            try:
                _, samples = await _scrape(port)
            except aiohttp.ClientConnectionError:
                samples = {}  # not listening yet: the service starts
            ok = check(samples) if samples else False
            if inspect.isawaitable(ok):
                ok = await ok
            if ok:
                return samples
            assert loop.time() < deadline, f"{what}: {samples}"
            await asyncio.sleep(0.05)

    stored = ("lammer_records_messages_stored_total", ())
    try:
        async with aiomqtt.Client("127.0.0.1", mosquitto_private.port) as table:
            # Published until the service, subscribed at some point after its start, has it.
            async def first_stored(samples: Samples) -> bool:
                await table.publish("lammer/t1/craps/roll", _roll(1, None, age=90.0), qos=1)
                # (counted, then its lag, by the writer's thread: both awaited)
                return samples.get(stored, 0) >= 1 and LAG in samples

            first = await until(first_stored, "the first roll stored")
            names, _ = await _scrape(port)
            assert names == FAMILIES
            assert first[("lammer_records_messages_refused_total", ())] == 0
            lag = first[LAG]
            assert 90 <= lag < 90 + DEADLINE  # stored about 90 s after the table published it

            await table.publish("lammer/t1/craps/roll", b"{not json", qos=1)
            await table.publish("lammer/t1/craps/roll", _roll(2, 1, age=1.0), qos=1)
            await table.publish("lammer/t1/craps/roll", _roll(4, 3, age=1.0), qos=1)  # 3 lost
            second = await until(
                lambda s: (
                    s[("lammer_records_messages_refused_total", ())] >= 1
                    and s[stored] >= 2
                    and s[("lammer_records_gaps_filling", ())] == 1
                ),
                "a refused message, the next roll stored and a gap being filled",
            )
            assert second[("lammer_records_held_messages", ())] == 1
            assert second[LAG] < 90
            assert (
                second[("lammer_records_batches_total", ())]
                > first[("lammer_records_batches_total", ())]
            )
    finally:
        stop.set()
        await asyncio.wait_for(service, DEADLINE)
    # Stopped: the listener is closed with the service.
    async with aiohttp.ClientSession() as session:
        try:
            await session.get(f"http://127.0.0.1:{port}/metrics")
        except aiohttp.ClientConnectionError:
            pass
        else:
            raise AssertionError("the metrics listener outlived the service")


async def test_where_the_metrics_are_served_is_said_once(
    mosquitto_private: Broker, store_db: StoreDb
) -> None:
    port, settings = _served(store_db, mosquitto_private)
    stop = asyncio.Event()
    with structlog.testing.capture_logs() as logs:
        service = asyncio.create_task(run(settings, stop))
        try:
            async with asyncio.timeout(DEADLINE):
                while True:
                    try:
                        names, _ = await _scrape(port)
                        break
                    except aiohttp.ClientConnectionError:
                        await asyncio.sleep(0.05)  # not listening yet: the service starts
            assert names == FAMILIES
        finally:
            stop.set()
            await asyncio.wait_for(service, DEADLINE)
    said = [e for e in logs if e["event"] == "metrics served"]
    assert said == [{"event": "metrics served", "listen": f"127.0.0.1:{port}", "log_level": "info"}]


def test_the_options_refuse_a_listener_beyond_loopback_without_its_scrapers() -> None:
    from cli.records import _metrics

    with pytest.raises(ValueError, match=r"--metrics-listen: .*--metrics-allow-from"):
        _metrics("0.0.0.0:9471", [])
    with pytest.raises(ValueError, match="--metrics-allow-from needs --metrics-listen"):
        _metrics(None, ["10.0.0.5"])
    assert _metrics(None, []) is None
    wide = _metrics("0.0.0.0:9471", ["10.0.0.5"])
    assert wide is not None
    assert wide.allowed("10.0.0.5")
    assert not wide.allowed("10.0.0.6")
