"""Network endpoints as the generators read them: ``HOST:PORT`` (a host name, an IPv4
address or a bracketed IPv6 one), and whether a host is this machine's loopback.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener address: a host (name or IP literal) and a TCP port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def wildcard(self) -> bool:
        """Whether it binds every address (``0.0.0.0`` or ``::``)."""
        return self.host in ("0.0.0.0", "::")  # noqa: S104  a comparison: says whether a listener binds all

    @property
    def loopback(self) -> bool:
        """Whether it is reachable only from this machine."""
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


_ENDPOINT = re.compile(
    r"\[(?P<v6>[^\]]+)\]:(?P<p6>[0-9]{1,5})|(?P<host>[^:\[\]]+):(?P<port>[0-9]{1,5})"
)


def parse_endpoint(text: str) -> Endpoint:
    """``HOST:PORT`` (``[IPv6]:PORT`` for an IPv6 literal) as an ``Endpoint``.

    Raises ``ValueError`` with a sentence for anything else (a port out of range, a host
    that is neither an IP literal nor a DNS name).
    """
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        raise ValueError(f"expected HOST:PORT (or [IPv6]:PORT), got {text!r}")
    host = match["v6"] or match["host"]
    port = int(match["p6"] or match["port"])
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    if match["v6"] is not None:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"not an IPv6 address: {host!r}") from None
    elif not _is_ipv4(host) and not _HOSTNAME.fullmatch(host):
        raise ValueError(f"not an IP address or host name: {host!r}")
    return Endpoint(host, port)


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True
