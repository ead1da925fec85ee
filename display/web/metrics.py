"""What ``lammer web`` shows Prometheus (``metrics_listen``, docs/floor/monitoring.md): read
from the server's own state when scraped. Pages are counted by page (``table``, ``pit``,
``pit_table``, ``stick``, ``login``, ``reports``), never by table or user."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from display.web.server import WebState
from metrics.families import Family, by_name

FAMILIES: Final = (
    Family("lammer", "info", "The lammer version this web server runs.", ("version",)),
    Family("lammer_web_pages_served", "counter", "Pages served, by page.", ("page",)),
    Family("lammer_web_websockets_open", "gauge", "WebSockets open (pages connected)."),
    Family("lammer_web_websockets_opened", "counter", "WebSockets opened."),
    Family(
        "lammer_web_mqtt_connected",
        "gauge",
        "1 while the display user's link to the broker (or a floor node) is up.",
    ),
    Family("lammer_web_tables", "gauge", "Tables the server knows of."),
    Family(
        "lammer_web_messages_dropped",
        "counter",
        "Messages dropped by the server's store (not the contract's, or out of bounds).",
    ),
    Family(
        "lammer_web_actions_refused",
        "counter",
        "Stickperson and pit actions refused for a user's rate.",
    ),
)
"""Every family the web server serves (docs/reference/metrics.md is made from it)."""

_F: Final = by_name(FAMILIES)


class WebCollector(Collector):
    """The web server's families, read at each scrape (in the event loop)."""

    def __init__(self, state: WebState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        """Every family of ``FAMILIES``."""
        state = self.state
        yield _F["lammer"].info({"version": state.version})
        pages = _F["lammer_web_pages_served"].counter()
        for page, count in sorted(state.pages_served.items()):
            pages.add_metric([page], count)
        yield pages
        yield _F["lammer_web_websockets_open"].gauge(len(state.hub.clients))
        yield _F["lammer_web_websockets_opened"].counter(state.websockets_opened)
        yield _F["lammer_web_mqtt_connected"].gauge(1.0 if state.follower.connected else 0.0)
        yield _F["lammer_web_tables"].gauge(len(state.store.tables))
        yield _F["lammer_web_messages_dropped"].counter(sum(state.store.dropped.values()))
        yield _F["lammer_web_actions_refused"].counter(state.actions.refused)


def web_registry(state: WebState) -> CollectorRegistry:
    """A private registry with the web server's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WebCollector(state))
    return registry
