"""What ``lammer records run`` shows Prometheus (``--metrics-listen``, docs/floor/
monitoring.md): read from the service's own counts and queues when scraped.

The feed's lag of a table is how far behind the table the store is, in seconds: for the
newest message stored, the time it was stored less the time the table published it (its
``ts``); while a message of the table waits for the writer, its age now, if that is more.
A records service that falls behind (a slow store, a backlog at the broker after an
outage) shows it there; one that stores nothing at all shows it in
``lammer_records_messages_stored_total`` standing still.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Final, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from contract.vocabulary import lammer_version
from metrics.families import Family, by_name
from records.messages import Message


class Held(Protocol):
    """The feed, as far as the metrics read it."""

    def held(self, table: str) -> int:
        """Messages of ``table`` held back, waiting for a gap to fill."""
        ...

    def positions(self) -> dict[str, int]:
        """``{table: last seq released}``."""
        ...


class Service(Protocol):
    """``records.service.Records``, as far as the metrics read it."""

    @property
    def stored(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def stored_ts(self) -> Mapping[str, tuple[str, float]]: ...
    @property
    def pending(self) -> Iterable[object]: ...
    @property
    def feed(self) -> Held: ...


def _epoch(ts: str) -> float | None:
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None


FAMILIES: Final = (
    Family("lammer", "info", "The lammer version this records service runs.", ("version",)),
    Family(
        "lammer_records_messages_stored",
        "counter",
        "Messages stored (each once, by table and seq).",
    ),
    Family(
        "lammer_records_messages_refused",
        "counter",
        "Messages refused: not the contract's, dropped and never stored.",
    ),
    Family("lammer_records_batches", "counter", "Transactions written to the store."),
    Family(
        "lammer_records_waiting_messages",
        "gauge",
        "Messages received and not yet stored (waiting for the writer).",
    ),
    Family(
        "lammer_records_feed_lag_seconds",
        "gauge",
        "How far behind each table the store is: the newest message's store time less its "
        "ts, or the age of one still waiting.",
        ("table",),
    ),
    Family(
        "lammer_records_gaps_filling",
        "gauge",
        "Tables with a gap being filled (messages held while the table is asked to resend).",
    ),
    Family(
        "lammer_records_held_messages",
        "gauge",
        "Messages held back behind a gap being filled, all tables.",
    ),
)
"""Every family the records service serves (docs/reference/metrics.md is made from it)."""

_F: Final = by_name(FAMILIES)


class RecordsCollector(Collector):
    """The records service's families, read at each scrape (in the event loop)."""

    def __init__(self, service: Service, *, clock: Callable[[], float] = time.time) -> None:
        self.service = service
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        """Every family of ``FAMILIES``."""
        service = self.service
        yield _F["lammer"].info({"version": lammer_version()})
        yield _F["lammer_records_messages_stored"].counter(service.stored)
        yield _F["lammer_records_messages_refused"].counter(service.dropped)
        yield _F["lammer_records_batches"].counter(service.batches)
        waiting = [item for item in service.pending if isinstance(item, Message)]
        yield _F["lammer_records_waiting_messages"].gauge(len(waiting))
        yield self._lag(waiting)
        feed = service.feed
        held = {table: feed.held(table) for table in feed.positions()}
        yield _F["lammer_records_gaps_filling"].gauge(sum(1 for n in held.values() if n))
        yield _F["lammer_records_held_messages"].gauge(sum(held.values()))

    def _lag(self, waiting: list[Message]) -> Metric:
        now = self.clock()
        lag: dict[str, float] = {}
        # The writer's thread replaces the dict whole, never changes it in place.
        for table, (ts, stored_at) in list(self.service.stored_ts.items()):
            published = _epoch(ts)
            if published is not None:
                lag[table] = max(0.0, stored_at - published)
        for message in waiting:
            published = _epoch(message.ts)
            if published is not None:
                lag[message.table] = max(lag.get(message.table, 0.0), now - published)
        family = _F["lammer_records_feed_lag_seconds"].gauge()
        for table in sorted(lag):
            family.add_metric([table], lag[table])
        return family


def records_registry(service: Service) -> CollectorRegistry:
    """A private registry with the records service's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecordsCollector(service))
    return registry
