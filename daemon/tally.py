"""The counts a table's metrics need that nothing else keeps, gathered by the shell as it
works (``TableDaemon._pump`` and the MQTT link's acknowledgements): frames, NAKs, noise and
disconnections per device, results published, and each frame's time to its publication.
Standard library only: a table without ``[metrics]`` keeps them too, at no import cost
(``daemon.metrics`` serves them).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from contract.topics import Topic
from daemon.outbox import OutboxMessage
from rules.events import Device

RESULT_TOPICS: Final = frozenset(
    {Topic.COVER_ALL_RESULT, Topic.BUST_BONUS_RESULT, Topic.CRAPS_ROLL}
)
"""The topics a game's results are published on: a card game's round (Cover All, Bust
Bonus) and a craps roll recorded."""

MAX_WAITING: Final = 1000
"""Frames whose publication is awaited at most: in a long broker outage the oldest are
forgotten (not measured) rather than kept for ever."""


@dataclass
class DeviceCounts:
    """One device's link, as the shell saw it since the start."""

    frames: int = 0
    naks: int = 0
    noise: int = 0
    disconnects: int = 0


@dataclass
class Tally:
    """The counts the shell gathers (``TableDaemon._pump`` and the MQTT link)."""

    devices: dict[Device, DeviceCounts] = field(default_factory=dict)
    results: int = 0
    latency: Callable[[float], object] | None = None
    """Told each frame's seconds to publication (the histogram's ``observe``)."""
    _waiting: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=MAX_WAITING))

    def device(self, device: Device) -> DeviceCounts:
        """``device``'s counts (made at the first use)."""
        counts = self.devices.get(device)
        if counts is None:
            counts = self.devices[device] = DeviceCounts()
        return counts

    def frame_queued(self, last_seq: int, arrived: float) -> None:
        """A frame that arrived at ``arrived`` (monotonic) made messages up to ``last_seq``."""
        self._waiting.append((last_seq, arrived))

    def published(self, messages: Sequence[OutboxMessage], now: float | None = None) -> None:
        """The broker acknowledged ``messages`` (in seq order): results are counted, and
        every frame whose last message is among them or before is measured."""
        if not messages:
            return
        self.results += sum(1 for m in messages if m.topic in RESULT_TOPICS)
        now = time.monotonic() if now is None else now
        top = max(m.seq for m in messages)
        while self._waiting and self._waiting[0][0] <= top:
            _, arrived = self._waiting.popleft()
            if self.latency is not None:
                self.latency(max(0.0, now - arrived))
