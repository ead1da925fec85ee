"""What a table shows Prometheus (``[metrics]``, docs/floor/monitoring.md).

A private registry holds one collector that reads the table as it is when scraped (the
journal's size and outbox, the disk, the MQTT link, the alarms, the devices' links) and the
few counts nothing else keeps, gathered by the shell as it works (``daemon.tally``): frames, NAKs
and link errors per device, results published, and the time from a device's frame to the
broker's acknowledgement of the last message it made (a histogram).

Nothing here names a card, a roll's dice or any value a player could use: labels are the
device (``shuffler``, ``dice_reader``), the game, an alarm code and the version.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from daemon.core import TableCore
from daemon.disk import GrowthMeter, free_bytes, journal_bytes
from daemon.errors import JournalError
from daemon.mqtt import MqttLink
from daemon.tally import Tally
from metrics.families import Family, by_name
from rules.alarms import ALARMS, DEVICE_FAULT_PREFIX
from rules.events import Device

LATENCY_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Seconds: a table on a quiet controller publishes in 1 to 3 ms (docs/developers/
benchmarks.md); the upper buckets are a broker outage's."""

DECLARED_ALARMS: Final = tuple(
    kind.code for kind in ALARMS if not kind.code.startswith(DEVICE_FAULT_PREFIX)
)


FAMILIES: Final = (
    Family("lammer", "info", "The lammer version this table runs.", ("version", "table", "game")),
    Family("lammer_device_frames", "counter", "Good frames received from a device.", ("device",)),
    Family(
        "lammer_device_naks", "counter", "Bad frames NAKed (unreadable or corrupt).", ("device",)
    ),
    Family(
        "lammer_device_link_errors",
        "counter",
        "Link errors: bad frames and bytes outside any frame (noise).",
        ("device",),
    ),
    Family("lammer_device_disconnects", "counter", "Times a device's port was lost.", ("device",)),
    Family("lammer_device_connected", "gauge", "1 while a device's port is open.", ("device",)),
    Family(
        "lammer_results",
        "counter",
        "Results published (acknowledged by the broker): card rounds settled and rolls.",
        ("game",),
    ),
    Family(
        "lammer_frame_to_publish_seconds",
        "histogram",
        "From a device's frame arriving to the broker acknowledging the last message it made.",
    ),
    Family(
        "lammer_journal_size_bytes",
        "gauge",
        "Bytes the journal takes on disk (live segment, WAL, archive).",
    ),
    Family("lammer_disk_free_bytes", "gauge", "Free bytes on the journal's disk."),
    Family(
        "lammer_disk_hours_left",
        "gauge",
        "Hours until the journal's disk is full at the journal's recent growth.",
    ),
    Family("lammer_outbox_depth", "gauge", "Messages journaled and not yet published."),
    Family("lammer_mqtt_connected", "gauge", "1 while the link to the broker is up."),
    Family(
        "lammer_table_available",
        "gauge",
        "1 while the table says online (0: its journal refuses to write).",
    ),
    Family("lammer_mqtt_published", "counter", "Messages of the outbox the broker acknowledged."),
    Family("lammer_alarms_active", "gauge", "Active alarms of the table, by code.", ("code",)),
)
"""Every family a table serves (docs/reference/metrics.md is made from it)."""

_F: Final = by_name(FAMILIES)


class TableCollector(Collector):
    """The table's families, read at each scrape."""

    def __init__(
        self,
        *,
        core: TableCore,
        link: MqttLink,
        tally: Tally,
        growth: GrowthMeter,
        journal_path: Path,
        version: str,
        devices: Iterable[Device],
    ) -> None:
        self.core = core
        self.link = link
        self.tally = tally
        self.growth = growth
        self.journal_path = journal_path
        self.version = version
        self.devices = tuple(devices)

    def collect(self) -> Iterator[Metric]:
        """Every family but the latency histogram (a registered ``Histogram``)."""
        core = self.core
        game = core.config.table.game
        yield _F["lammer"].info({"version": self.version, "table": core.table_id, "game": game})
        yield from self._devices()
        results = _F["lammer_results"].counter()
        results.add_metric([game], self.tally.results)
        yield results
        yield from self._journal()
        yield _F["lammer_mqtt_connected"].gauge(float(self.link.connected))
        yield _F["lammer_table_available"].gauge(float(self.link.available))
        yield _F["lammer_mqtt_published"].counter(self.link.published)
        yield self._alarms()

    def _devices(self) -> Iterator[Metric]:
        frames = _F["lammer_device_frames"].counter()
        naks = _F["lammer_device_naks"].counter()
        errors = _F["lammer_device_link_errors"].counter()
        drops = _F["lammer_device_disconnects"].counter()
        connected = _F["lammer_device_connected"].gauge()
        state = self.core.state
        for device in self.devices:
            counts = self.tally.device(device)
            frames.add_metric([device], counts.frames)
            naks.add_metric([device], counts.naks)
            errors.add_metric([device], counts.naks + counts.noise)
            drops.add_metric([device], counts.disconnects)
            try:
                up = state.device(device).connected
            except KeyError:
                up = False
            connected.add_metric([device], 1.0 if up else 0.0)
        yield from (frames, naks, errors, drops, connected)

    def _journal(self) -> Iterator[Metric]:
        yield _F["lammer_journal_size_bytes"].gauge(journal_bytes(self.journal_path))
        try:
            free = free_bytes(self.journal_path.parent)
        except OSError:
            free = None
        if free is not None:
            yield _F["lammer_disk_free_bytes"].gauge(free)
            per_hour = self.growth.per_hour()
            yield _F["lammer_disk_hours_left"].gauge(free / per_hour if per_hour > 0 else math.inf)
        try:
            depth = self.core.journal.pending_count()
        except JournalError:
            depth = None
        if depth is not None:
            yield _F["lammer_outbox_depth"].gauge(depth)

    def _alarms(self) -> Metric:
        active = Counter(alarm.code for alarm in self.core.state.alarms)
        family = _F["lammer_alarms_active"].gauge()
        for code in sorted({*DECLARED_ALARMS, *active}):
            family.add_metric([code], active.get(code, 0))
        return family


def table_registry(collector: TableCollector, tally: Tally) -> CollectorRegistry:
    """A private registry with the table's collector and its latency histogram."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    # No ``_created`` series beside the histogram's (the start time says as much): the
    # families served are the declared ones. Process-wide, and the daemon is its own process.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client
    latency = _F["lammer_frame_to_publish_seconds"]
    tally.latency = Histogram(
        latency.name,
        latency.help,
        buckets=LATENCY_BUCKETS,
        registry=registry,
    ).observe
    return registry
