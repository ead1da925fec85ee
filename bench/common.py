"""Shared helpers for the benchmarks: medians of several runs, and the machine they ran on.

Benchmarks print figures; they never assert a time. Run them with ``make bench`` or
``.venv/bin/python bench/<name>.py``.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable


def machine() -> str:
    """One line naming the machine, for docs/developers/benchmarks.md."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()} "
        f"({platform.python_implementation()}), {platform.system()} {platform.release()}"
    )


def median_rate(run: Callable[[], int], *, repeats: int = 5) -> float:
    """Median over ``repeats`` runs of items per second; ``run`` returns how many it did."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = run()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def median_seconds(run: Callable[[], object], *, repeats: int = 5) -> float:
    """Median wall time of ``run`` over ``repeats`` runs, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def percentile(samples: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (0..1) of ``samples`` by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]
