"""The metrics listener (``metrics.endpoint``): where it may listen, whom it serves, and
what it answers, on a real socket."""

from __future__ import annotations

from unittest import mock

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from deploy.broker import free_port
from metrics.endpoint import CONTENT_TYPE, MetricsServer, build_app
from metrics.settings import MetricsConfigError, metrics_settings


def test_a_bare_port_listens_on_loopback() -> None:
    settings = metrics_settings("9464")
    assert (settings.host, settings.port, settings.allow_from) == ("127.0.0.1", 9464, ())
    assert str(metrics_settings("[::1]:9464")) == "[::1]:9464"


@pytest.mark.parametrize("listen", ["0.0.0.0:9464", "10.0.0.2:9464", "[::]:9464", "ctl1:9464"])
def test_a_listener_beyond_loopback_must_name_its_scrapers(listen: str) -> None:
    with pytest.raises(MetricsConfigError, match="allow_from"):
        metrics_settings(listen)
    allowed = metrics_settings(listen, ["10.0.0.5", "192.168.7.0/24"])
    assert [str(n) for n in allowed.allow_from] == ["10.0.0.5/32", "192.168.7.0/24"]


@pytest.mark.parametrize(
    ("listen", "allow", "sentence"),
    [
        ("127.0.0.1", [], "HOST:PORT or PORT"),
        ("127.0.0.1:0", [], "between 1 and 65535"),
        ("127.0.0.1:70000", [], "between 1 and 65535"),
        ("::1:9464", [], "brackets"),
        ("[nope]:9464", [], "not an IPv6 address"),
        ("127.0.0.1:9464", ["prometheus.example"], "not an IP address or network"),
        ("127.0.0.1:9464", ["10.0.0.0/33"], "not an IP address or network"),
        ("127.0.0.1:9464", ["10.0.0.1"] * 65, "at most 64"),
    ],
)
def test_bad_listeners_are_refused_with_a_sentence(
    listen: str, allow: list[str], sentence: str
) -> None:
    with pytest.raises(MetricsConfigError, match=sentence):
        metrics_settings(listen, allow)


def test_who_may_scrape() -> None:
    settings = metrics_settings("0.0.0.0:9464", ["10.0.0.0/24", "fd00::/8"])
    assert settings.allowed("127.0.0.1")
    assert settings.allowed("::1")
    assert settings.allowed("10.0.0.77")
    assert settings.allowed("::ffff:10.0.0.77")  # an IPv4 peer on a dual-stack socket
    assert settings.allowed("fd00::5")
    assert not settings.allowed("10.0.1.1")
    assert not settings.allowed("192.168.0.1")
    assert not settings.allowed(None)
    assert not settings.allowed("not an address")


def _registry() -> tuple[CollectorRegistry, Counter]:
    registry = CollectorRegistry(auto_describe=True)
    counter = Counter("lammer_test_things", "Things.", registry=registry)
    return registry, counter


async def test_a_peer_not_allowed_gets_403() -> None:
    registry, _ = _registry()
    app = build_app(registry, metrics_settings("0.0.0.0:9464", ["10.0.0.0/24"]))
    for peer, status in (("10.0.0.9", 200), ("10.0.9.9", 403)):
        transport = mock.Mock()
        transport.get_extra_info.side_effect = lambda name, default=None, p=peer: (
            (p, 40000) if name == "peername" else default
        )
        request = make_mocked_request("GET", "/metrics", app=app, transport=transport)
        match = await app.router.resolve(request)
        request._match_info = match
        response = await match.handler(request)
        assert isinstance(response, web.Response)
        assert response.status == status


async def test_the_server_answers_metrics_and_nothing_else() -> None:
    registry, counter = _registry()
    counter.inc(3)
    port = free_port()
    async with MetricsServer(registry, metrics_settings(str(port))), aiohttp.ClientSession() as s:
        base = f"http://127.0.0.1:{port}"
        async with s.get(f"{base}/metrics") as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == CONTENT_TYPE
            text = await response.text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families["lammer_test_things"].samples[0].value == 3
        async with s.get(f"{base}/") as response:
            assert response.status == 404
        async with s.post(f"{base}/metrics", data=b"x") as response:
            assert response.status == 405
    # Stopped: nothing listens any more.
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.ClientConnectionError):
            await s.get(f"http://127.0.0.1:{port}/metrics")


async def test_an_address_in_use_is_an_error_and_leaves_nothing_open() -> None:
    registry, _ = _registry()
    port = free_port()
    async with MetricsServer(registry, metrics_settings(str(port))):
        second = MetricsServer(registry, metrics_settings(str(port)))
        with pytest.raises(OSError, match="in use"):
            await second.start()
        await second.stop()
