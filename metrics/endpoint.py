"""The metrics listener itself: ``GET /metrics`` (and ``HEAD``) for the peers its settings
allow (``metrics.settings``), 403 for others, 404 for any other path; the body is the
registry's text format (version 0.0.4), built when asked.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from metrics.settings import MetricsSettings

PATH: Final = "/metrics"

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""The text format every Prometheus reads (2.x and 3.x; prometheus_client's "latest" says
1.0.0, which differs only for names outside the legacy characters, and lammer has none)."""


def build_app(registry: CollectorRegistry, settings: MetricsSettings) -> web.Application:
    """The listener's application: ``GET /metrics`` for allowed peers, nothing else."""

    async def metrics(request: web.Request) -> web.StreamResponse:
        if not settings.allowed(request.remote):
            return web.Response(status=403, text="not an allowed scraper\n")
        return web.Response(
            body=generate_latest(registry),
            headers={"Content-Type": CONTENT_TYPE, "Cache-Control": "no-store"},
        )

    app = web.Application(client_max_size=4096)
    app.router.add_get(PATH, metrics)
    return app


class MetricsServer:
    """``registry`` served on ``settings`` while started (``async with``)."""

    def __init__(self, registry: CollectorRegistry, settings: MetricsSettings) -> None:
        self.registry = registry
        self.settings = settings
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen; ``OSError`` (an address in use, one not on this machine) as it comes."""
        runner = web.AppRunner(
            build_app(self.registry, self.settings),
            max_line_size=4096,
            max_field_size=4096,
            max_headers=32,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.settings.host, self.settings.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        """Stop listening (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> MetricsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
