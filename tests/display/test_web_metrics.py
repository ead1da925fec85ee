"""``lammer web``'s Prometheus listener (``metrics_listen``): the real server (``serve``) on
real sockets with a real Mosquitto; pages and WebSockets counted as they are served."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from deploy.broker import free_port
from display.errors import WebConfigError
from display.web.cmd import serve
from display.web.config import WebConfig, load_web_config
from tests.conftest import Broker

DEADLINE = 60.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _scrape(session: aiohttp.ClientSession, port: int) -> Samples:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_beyond_loopback_need_their_scrapers_named() -> None:
    with pytest.raises(WebConfigError, match=r"metrics_listen: .*metrics_allow_from"):
        load_web_config(None, {"metrics_listen": "0.0.0.0:9464"})
    with pytest.raises(WebConfigError, match="metrics_allow_from: needs metrics_listen"):
        load_web_config(None, {"metrics_allow_from": ["10.0.0.5"]})
    config = load_web_config(
        None, {"metrics_listen": "0.0.0.0:9464", "metrics_allow_from": ["10.0.0.5"]}
    )
    settings = config.metrics()
    assert settings is not None
    assert settings.allowed("10.0.0.5")
    assert not settings.allowed("10.0.0.6")
    assert load_web_config(None, {}).metrics() is None


async def test_pages_and_websockets_are_counted(mosquitto: Broker) -> None:
    web_port, metrics_port = free_port(), free_port()
    config = WebConfig(
        mqtt_host=mosquitto.host,
        mqtt_port=mosquitto.port,
        listen=f"127.0.0.1:{web_port}",
        metrics_listen=str(metrics_port),
    )
    ready = asyncio.Event()
    server = asyncio.create_task(serve(config, ready=ready))
    try:
        async with asyncio.timeout(DEADLINE):
            await ready.wait()
        base = f"http://127.0.0.1:{web_port}"
        async with aiohttp.ClientSession() as session:
            before = await _scrape(session, metrics_port)
            assert before[("lammer_web_websockets_open", ())] == 0
            assert ("lammer_info", (("version", "0.1.0"),)) in before
            for path in ("/pit", "/pit", "/table/craps-1", "/stick/craps-1"):
                async with session.get(base + path) as response:
                    assert response.status == 200
            # Not metrics: the pages' port serves no /metrics of its own.
            async with session.get(base + "/metrics") as response:
                assert response.status == 404
            async with session.ws_connect(base + "/ws?table=craps-1") as ws:
                await ws.receive_json()  # hello: the server has counted it
                during = await _scrape(session, metrics_port)
            pages = {
                dict(labels)["page"]: value
                for (name, labels), value in during.items()
                if name == "lammer_web_pages_served_total"
            }
            assert pages == {"pit": 2, "table": 1, "stick": 1}
            assert during[("lammer_web_websockets_open", ())] == 1
            assert during[("lammer_web_websockets_opened_total", ())] == 1

            async def closed() -> Samples:
                while True:
                    after = await _scrape(session, metrics_port)
                    if after[("lammer_web_websockets_open", ())] == 0:
                        return after
                    await asyncio.sleep(0.05)  # the server sees the close a moment later

            async with asyncio.timeout(DEADLINE):
                after = await closed()
            assert after[("lammer_web_websockets_opened_total", ())] == 1
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
    # Stopped: the metrics listener went with the server.
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(f"http://127.0.0.1:{metrics_port}/metrics")
