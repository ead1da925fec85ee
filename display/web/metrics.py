"""What ``lammer web`` shows Prometheus (``metrics_listen``, docs/floor/monitoring.md): read
from the server's own state when scraped. Pages are counted by page (``table``, ``pit``,
``pit_table``, ``stick``, ``login``, ``reports``), never by table or user."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from display.web.server import WebState


class WebCollector(Collector):
    """The web server's families, read at each scrape (in the event loop)."""

    def __init__(self, state: WebState) -> None:
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily]:
        """Pages served, WebSockets, the broker links, tables known, messages dropped."""
        state = self.state
        info = InfoMetricFamily("lammer", "The lammer version this web server runs.")
        info.add_metric([], {"version": state.version})
        yield info
        pages = CounterMetricFamily(
            "lammer_web_pages_served", "Pages served, by page.", labels=["page"]
        )
        for page, count in sorted(state.pages_served.items()):
            pages.add_metric([page], count)
        yield pages
        yield GaugeMetricFamily(
            "lammer_web_websockets_open",
            "WebSockets open (pages connected).",
            value=len(state.hub.clients),
        )
        yield CounterMetricFamily(
            "lammer_web_websockets_opened", "WebSockets opened.", value=state.websockets_opened
        )
        yield GaugeMetricFamily(
            "lammer_web_mqtt_connected",
            "1 while the display user's link to the broker (or a floor node) is up.",
            value=1.0 if state.follower.connected else 0.0,
        )
        yield GaugeMetricFamily(
            "lammer_web_tables", "Tables the server knows of.", value=len(state.store.tables)
        )
        yield CounterMetricFamily(
            "lammer_web_messages_dropped",
            "Messages dropped by the server's store (not the contract's, or out of bounds).",
            value=sum(state.store.dropped.values()),
        )
        yield CounterMetricFamily(
            "lammer_web_actions_refused",
            "Stickperson and pit actions refused (rate, role, origin).",
            value=state.actions.refused,
        )


def web_registry(state: WebState) -> CollectorRegistry:
    """A private registry with the web server's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WebCollector(state))
    return registry
