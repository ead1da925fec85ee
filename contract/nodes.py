"""The brokers a lammer client tries, in order: a floor's nodes, or one controller's broker.

Every consumer of the floor (``lammer web``, ``lammer display``, ``lammer records``) is
given its brokers the same way, ``HOST[:PORT],HOST[:PORT],...`` (``parse_nodes``), and moves
between them the same way (``Nodes``): after a failure the next node at once; once every
node has failed in a row, a jittered backoff before the next round, so a floor that is down
is not hammered. A persistent session (the records service's) lives in the cluster's
JetStream, so it goes on at whichever node answers.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable
from typing import Final

MAX_NODES: Final = 16
"""Brokers one client may be given: a floor cluster has 3 to 5 nodes."""

NEXT_NODE_S: Final = 0.05
"""Seconds before trying the next node of a round (a dead node fails fast; this only keeps
a round from spinning)."""


def parse_port(value: int) -> int:
    """A TCP port, 1 to 65535; ``ValueError`` otherwise."""
    if not 1 <= value <= 65535:
        raise ValueError(f"must be between 1 and 65535, got {value}")
    return value


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) as ``(host, port)``; ``ValueError`` if bad."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"must be HOST:PORT (e.g. 127.0.0.1:8080), got {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"write an IPv6 address in brackets ([::1]:8080), got {value!r}")
    return host, parse_port(int(port_text))


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
        if item.startswith("[") and "]:" in item:
            host, port = parse_listen(item)
        elif item.startswith("["):
            if not item.endswith("]"):
                raise ValueError(f"write an IPv6 address in brackets ([::1]:1883), got {item!r}")
            host, port = item[1:-1], default_port
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ValueError(f"{host!r} is not an IPv6 address") from None
        elif item.count(":") == 1:
            host, port = parse_listen(item)
        else:
            host, port = item, default_port
        if not host or any(c.isspace() or not c.isprintable() for c in host):
            raise ValueError(f"not a host: {host!r}")
        if (host, port) in nodes:
            raise ValueError(f"{host}:{port} is given twice")
        nodes.append((host, port))
    return nodes


Delay = Callable[[int, random.Random], float]
"""The backoff before round ``n`` of every node failing (``foundation.backoff.Backoff.delay``
for those that may import it)."""


class Nodes:
    """The brokers to try, in order: after a failure the next one at once, and once every
    one has failed in a row, ``delay`` (jittered) before the next round."""

    def __init__(self, nodes: list[tuple[str, int]], rng: random.Random, delay: Delay) -> None:
        if not nodes:
            raise ValueError("no broker to connect to")
        self.nodes = nodes
        self.rng = rng
        self.delay = delay
        self.index = 0
        self.failures = 0
        self.rounds = 0  # rounds of every node failing in a row: the backoff's attempt

    @property
    def current(self) -> tuple[str, int]:
        """The broker to connect to now."""
        return self.nodes[self.index]

    def __str__(self) -> str:
        host, port = self.current
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def failed(self) -> float:
        """The current broker failed: move to the next; seconds to wait before trying."""
        self.failures += 1
        self.index = (self.index + 1) % len(self.nodes)
        if self.failures % len(self.nodes):
            return NEXT_NODE_S
        wait = self.delay(self.rounds, self.rng)
        self.rounds += 1
        return wait

    def connected(self) -> None:
        """The current broker answered: the next failure starts a new round."""
        self.failures = 0
        self.rounds = 0
