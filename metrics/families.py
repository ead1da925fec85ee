"""Each metric family declared once: its name, type, labels and help, which the collectors
build their samples with and the reference page (``cli.reference``) lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

Kind = Literal["counter", "gauge", "histogram", "info"]


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family as declared (``name`` without ``_total`` or ``_info``)."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()

    def _is(self, kind: str) -> None:
        """A family used as another kind than declared is a programming error, said at
        once (under ``python -O`` too)."""
        if self.kind != kind:
            raise TypeError(f"{self.name} is declared a {self.kind}, not a {kind}")

    @property
    def exposed(self) -> str:
        """The name a scrape shows (``_total`` on a counter, ``_info`` on an info)."""
        suffix = {"counter": "_total", "info": "_info"}.get(self.kind, "")
        return self.name + suffix

    def counter(self, value: float | None = None) -> CounterMetricFamily:
        """An empty counter family (or one sample ``value`` when it has no labels)."""
        self._is("counter")
        labels = list(self.labels) if value is None else None
        return CounterMetricFamily(self.name, self.help, value=value, labels=labels)

    def gauge(self, value: float | None = None) -> GaugeMetricFamily:
        """An empty gauge family (or one sample ``value`` when it has no labels)."""
        self._is("gauge")
        labels = list(self.labels) if value is None else None
        return GaugeMetricFamily(self.name, self.help, value=value, labels=labels)

    def info(self, values: dict[str, str]) -> InfoMetricFamily:
        """The info family with its one sample."""
        self._is("info")
        family = InfoMetricFamily(self.name, self.help)
        family.add_metric([], values)
        return family


def by_name(families: tuple[Family, ...]) -> dict[str, Family]:
    """``families`` by name (a name declared twice is a bug)."""
    out = {f.name: f for f in families}
    if len(out) != len(families):
        raise ValueError("a metric family is declared twice")
    return out
