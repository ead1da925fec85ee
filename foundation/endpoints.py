"""Network endpoints: ``HOST:PORT`` read by one set of rules, and whether a host is this
machine's loopback.

The rules, for every place lammer reads an address (the generators' ``--listen`` and
``--bridge``, ``lammer web``'s ``listen``, a client's brokers): a host is an IPv4 address,
a DNS name or an IPv6 address in brackets (``[::1]:1883``); a port is 1 to 65535. Each
reader words a malformed address its own way (the option it names, an example), and the
rest of its sentences are these.

A client's brokers (``parse_nodes``) are ``HOST[:PORT],HOST[:PORT],...``: a node without a
port takes the default, and an IPv6 address without a port may go without brackets.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final

MAX_NODES: Final = 16
"""Brokers one client may be given: a floor cluster has 3 to 5 nodes."""


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

_ENDPOINT = re.compile(r"\[(?P<v6>[^\]]+)\]:(?P<p6>[0-9]+)|(?P<host>[^:\[\]]+):(?P<port>[0-9]+)")


def parse_port(value: int) -> int:
    """A TCP port, 1 to 65535; ``ValueError`` otherwise."""
    if not 1 <= value <= 65535:
        raise ValueError(f"must be between 1 and 65535, got {value}")
    return value


def _check_host(host: str, *, bracketed: bool) -> str:
    if bracketed:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"not an IPv6 address: {host!r}") from None
    elif not _is_ip(host) and not _HOSTNAME.fullmatch(host):
        raise ValueError(f"not an IP address or host name: {host!r}")
    return host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _split(text: str) -> tuple[str, int, bool] | None:
    """``(host, port, bracketed)`` when ``text`` has the form ``HOST:PORT`` or
    ``[IPv6]:PORT`` (nothing checked yet), else None."""
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        return None
    bracketed = match["v6"] is not None
    host = match["v6"] if bracketed else match["host"]
    return host, int(match["p6"] if bracketed else match["port"]), bracketed


def parse_endpoint(text: str) -> Endpoint:
    """``HOST:PORT`` (``[IPv6]:PORT`` for an IPv6 literal) as an ``Endpoint``.

    Raises ``ValueError`` with a sentence for anything else (a port out of range, a host
    that is neither an IP literal nor a DNS name).
    """
    split = _split(text)
    if split is None:
        raise ValueError(f"expected HOST:PORT (or [IPv6]:PORT), got {text!r}")
    host, port, bracketed = split
    try:
        parse_port(port)
    except ValueError as exc:
        raise ValueError(f"port {exc}") from None
    return Endpoint(_check_host(host, bracketed=bracketed), port)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) as ``(host, port)``; ``ValueError`` if bad."""
    split = _split(value)
    if split is None:
        if value.count(":") > 1 and not value.startswith("["):
            raise ValueError(f"write an IPv6 address in brackets ([::1]:8080), got {value!r}")
        raise ValueError(f"must be HOST:PORT (e.g. 127.0.0.1:8080), got {value!r}")
    host, port, bracketed = split
    return _check_host(host, bracketed=bracketed), parse_port(port)


def parse_nodes(value: str, default_port: int) -> list[tuple[str, int]]:
    """``HOST[:PORT],HOST[:PORT],...`` (``[IPv6]:PORT`` for an IPv6 literal with a port) as
    ``(host, port)`` pairs, in order; ``ValueError`` saying what is wrong."""
    nodes: list[tuple[str, int]] = []
    items = [item.strip() for item in value.split(",")]
    if len(items) > MAX_NODES:
        raise ValueError(f"at most {MAX_NODES} brokers, got {len(items)}")
    for item in items:
        if not item:
            raise ValueError(f"an empty broker in {value!r}")
        if (item.startswith("[") and "]:" in item) or item.count(":") == 1:
            host, port = parse_listen(item)
        elif item.startswith("["):
            if not item.endswith("]"):
                raise ValueError(f"write an IPv6 address in brackets ([::1]:1883), got {item!r}")
            host, port = _check_host(item[1:-1], bracketed=True), default_port
        else:
            # A bare host: a name, an IPv4 address, or an IPv6 one (no port to confuse).
            host, port = item, default_port
            if not _is_ip(host):
                _check_host(host, bracketed=False)
        if (host, port) in nodes:
            raise ValueError(f"{host}:{port} is given twice")
        nodes.append((host, port))
    return nodes
