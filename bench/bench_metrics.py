"""What a table's Prometheus endpoint costs: a real craps daemon (``lammer run``) with
``[metrics]`` on a simulated dice reader (``lammer-sim`` on a pty) and a private Mosquitto,
the same parts as the integration tests (``tests.integration.harness``).

After ``--rolls`` rolls have been played (so the histogram, the counters and the journal
hold something), the endpoint is scraped ``--scrapes`` times one after the other: the round
trip of each scrape as a client sees it (p50, p99), the body's size, and the daemon's CPU
(utime + stime from ``/proc/<pid>/stat``) over the scrapes, per scrape. Then the same
number of rolls is played again and timed both ways, with and without ``[metrics]``, to see
whether the counts the shell keeps cost anything a frame: the daemon's CPU per roll.

    .venv/bin/python bench/bench_metrics.py [--rolls 300] [--scrapes 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.broker import Broker, free_port
from tests.integration.harness import Table

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The process's utime + stime so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rolls(first: int, count: int) -> str:
    return "".join(f"ROLL,{first + i},{1 + i % 6},{1 + (i * 5 + 2) % 6}\n" for i in range(count))


async def play(table: Table, first: int, count: int) -> float:
    """Play ``count`` rolls on a new simulator; the daemon's CPU seconds per roll."""
    assert table.daemon is not None
    pid = table.daemon.proc.pid
    before = cpu_seconds(pid)
    await table.start_sim(rolls(first, count))
    await table.wait_published()
    return (cpu_seconds(pid) - before) / count


async def run_table(
    workdir: Path, broker: Broker, n_rolls: int, scrapes: int, metrics: bool
) -> None:
    port = free_port()
    extra = f'[metrics]\nlisten = "127.0.0.1:{port}"\n' if metrics else ""
    table = Table(workdir, broker, "CRAPS", extra_config=extra)
    try:
        await table.start(rolls(1, n_rolls))
        label = "with [metrics]" if metrics else "without [metrics]"
        per_roll = await play(table, 1 + n_rolls, n_rolls)
        print(f"{label}: daemon CPU per roll {per_roll * 1000:.3f} ms ({n_rolls} rolls)")
        if not metrics:
            return
        assert table.daemon is not None
        pid = table.daemon.proc.pid
        times: list[float] = []
        size = 0
        async with aiohttp.ClientSession() as session:
            before = cpu_seconds(pid)
            for _ in range(scrapes):
                started = time.perf_counter()
                async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                    body = await response.read()
                times.append(time.perf_counter() - started)
                size = len(body)
            cpu = (cpu_seconds(pid) - before) / scrapes
        times.sort()
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(
            f"scrape: p50 {statistics.median(times) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, "
            f"{size} bytes, daemon CPU {cpu * 1000:.2f} ms a scrape ({scrapes} scrapes)"
        )
    finally:
        await table.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rolls", type=int, default=300)
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument(
        "--without-first", action="store_true", help="the table without [metrics] first"
    )
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "broker")
        broker.workdir.mkdir()
        broker.start()
        try:
            for metrics in (False, True) if args.without_first else (True, False):
                workdir = Path(tmp) / ("with" if metrics else "without")
                workdir.mkdir()
                await run_table(workdir, broker, args.rolls, args.scrapes, metrics)
        finally:
            broker.stop()


if __name__ == "__main__":
    asyncio.run(main())
