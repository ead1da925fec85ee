"""The metrics listener's settings: where it listens and who may scrape it (the
standard library and foundation only, so a configuration is read without loading the server).

``listen`` is ``HOST:PORT`` (``[IPv6]:PORT``), or a bare ``PORT`` for ``127.0.0.1:PORT``.
A listener reachable from another machine (any host but a loopback one) must name the
scrapers it serves (``allow_from``: addresses or networks); one on loopback serves this
machine only, and ``allow_from`` adds others (``metrics.endpoint`` refuses the rest).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from foundation.endpoints import is_loopback
from foundation.endpoints import parse_listen as parse_host_port

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_ALLOWED: Final = 64
"""Addresses or networks ``allow_from`` may name."""


class MetricsConfigError(ValueError):
    """A listener or an allowed scraper that cannot be used: its sentence says why."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """A metrics listener: its address and the scrapers it serves besides loopback."""

    host: str
    port: int
    allow_from: tuple[Network, ...] = ()

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def allowed(self, peer: str | None) -> bool:
        """Whether a scrape from ``peer`` (an IP address) is served."""
        if peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address.is_loopback:
            return True
        return any(address in network for network in self.allow_from)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` (``foundation.endpoints``' rules, as every listener of
    lammer) or ``PORT`` (loopback) as ``(host, port)``."""
    try:
        return parse_host_port(f"127.0.0.1:{text}" if text.isdigit() else text)
    except ValueError as exc:
        if str(exc).startswith("must be HOST:PORT"):
            raise MetricsConfigError(
                f"listen must be HOST:PORT or PORT (e.g. 127.0.0.1:9464), got {text!r}"
            ) from None
        raise MetricsConfigError(f"listen: {exc}") from None


def metrics_settings(listen: str, allow_from: Sequence[str] = ()) -> MetricsSettings:
    """The listener ``listen`` serving loopback and ``allow_from``; ``MetricsConfigError``
    with a sentence for a bad address, or a listener beyond loopback that names no one."""
    host, port = parse_listen(listen)
    if len(allow_from) > MAX_ALLOWED:
        raise MetricsConfigError(
            f"allow_from: at most {MAX_ALLOWED} entries, got {len(allow_from)}"
        )
    networks: list[Network] = []
    for entry in allow_from:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise MetricsConfigError(
                f"allow_from: {entry!r} is not an IP address or network (10.0.0.5, 10.0.0.0/24)"
            ) from None
    if not is_loopback(host) and not networks:
        raise MetricsConfigError(
            f"listen {listen!r} is reachable from other machines: name the Prometheus servers "
            "allowed to scrape it in allow_from (their addresses or networks), or listen on "
            "loopback (127.0.0.1)"
        )
    return MetricsSettings(host, port, tuple(networks))
