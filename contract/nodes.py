"""The brokers a lammer client tries, in order: a floor's nodes, or one controller's broker.

Every consumer of the floor (``lammer web``, ``lammer display``, ``lammer records``) is
given its brokers the same way, ``HOST[:PORT],HOST[:PORT],...``
(``foundation.endpoints.parse_nodes``), and moves between them the same way (``Nodes``):
after a failure the next node at once; once every node has failed in a row, a jittered
backoff before the next round, so a floor that is down is not hammered. A persistent
session (the records service's) lives in the cluster's JetStream, so it goes on at
whichever node answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

NEXT_NODE_S: Final = 0.05
"""Seconds before trying the next node of a round (a dead node fails fast; this only keeps
a round from spinning)."""


Delay = Callable[[int, random.Random], float]
"""The backoff before round ``n`` of every node failing (``foundation.backoff.Backoff.delay``)."""


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
