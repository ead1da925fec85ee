"""Start-up time against the journal's age (docs/developers/benchmarks.md, "A journal that lasts for
years"): from ``lammer run`` starting to ``availability`` ``online`` at a subscriber, with a
journal of 0, 1 M and 10 M records, side by side in one run.

The journals are made first (outside the timing) and kept in ``--cache`` for the next
run: all but the last ``TAIL`` records are ``daemon`` records of a device record's size
that change nothing (a start never reads what comes before its latest snapshot, so what
they say does not matter to it; ``lammer journal verify`` still passes on them), then the
table's own core (``daemon.core.TableCore``) plays a craps table for ``TAIL`` records: one
``ROLL`` after another, each a device record and its publications, snapshots every 1000
records, as the daemon writes them. The commit's fsync is off while building (10 M records
with an fsync each would take hours; the records are the same).

Each measured start copies its journal to the machine's disk (a fresh copy
every time: a start writes to it), starts a private Mosquitto, then ``lammer run`` as a
subprocess, and times the first ``online``; ``--runs`` starts per size, medians printed.

What a start does with the journal: open it, find the latest snapshot (an index on the
record kind), replay only the records after it, read what the broker retains. Nothing of
it grows with the number of records before the snapshot.

Run: ``.venv/bin/python bench/bench_startup.py [--sizes 0,1000000,10000000] [--runs 5]``.
Making the 10 M journal takes a quarter of an hour the first time. Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.logs import configure_logging
from daemon.segments import open_live
from deploy.broker import Broker
from rules.events import MAX_ID, DiceRolled

TABLE: Final = "s1"
TAIL: Final = 5000
FILLER: Final[dict[str, object]] = {"filler": "x" * 220}  # about a device record's size
GOAL: Final = 1.2  # start with any journal within 20% of the empty journal's


def config_for(journal: Path, port: int = 1883) -> TableConfig:
    return validate_config(
        {
            "table": {"id": TABLE, "game": "CRAPS"},
            "dice_reader": {"port": str(journal.parent / "no-reader")},
            "mqtt": {"port": port},
            "journal": {"path": str(journal), "time_zone": "UTC"},
            "logging": {"level": "warning"},
        }
    )


def make_journal(path: Path, records: int) -> float:
    """A journal of at least ``records`` records, as the daemon writes them; seconds taken."""
    started = time.perf_counter()
    configure_logging(fmt="json", level="warning", stream=open(os.devnull, "w"))  # noqa: SIM115
    config = config_for(path)
    journal = open_live(path)
    journal._store.conn.execute("PRAGMA synchronous = OFF")  # building only: see the docstring
    core = TableCore(config, journal, version="bench")
    core.start()
    at = core.clock()
    while core.journal.last_seq < records - TAIL:
        with core.journal.batch():
            for _ in range(min(10_000, records - TAIL - core.journal.last_seq)):
                core.journal.append("daemon", FILLER, ts=at)
        if core.journal.last_seq % 1_000_000 < 10_000:
            print(f"  {core.journal.last_seq:,} records", file=sys.stderr, flush=True)
    roll = 0
    while core.journal.last_seq < records:
        roll += 1
        dice = (roll % 6 + 1, roll // 6 % 6 + 1)
        core.ingest("dice_reader", DiceRolled(roll_id=roll % MAX_ID + 1, dice=dice))
        if roll % 5000 == 0:
            core.journal._store.conn.execute("PRAGMA synchronous = OFF")  # mark_published resets it
            core.journal.mark_published(*[m.seq for m in core.journal.pending(100_000)])
            print(f"  {core.journal.last_seq:,} records", file=sys.stderr, flush=True)
    core.journal.mark_published(*[m.seq for m in core.journal.pending(100_000)])
    core.close()
    core.journal.close()
    return time.perf_counter() - started


async def time_start(journal: Path, workdir: Path) -> float:
    """Seconds from ``lammer run`` starting to ``online`` at a subscriber."""
    broker = Broker(workdir / "broker")
    (workdir / "broker").mkdir(exist_ok=True)
    broker.start()
    config = workdir / f"{TABLE}.toml"
    config.write_text(
        f'[table]\nid = "{TABLE}"\ngame = "CRAPS"\n\n'
        f'[dice_reader]\nport = "{workdir / "no-reader"}"\n\n'
        f"[mqtt]\nport = {broker.port}\n\n"
        f'[journal]\npath = "{journal}"\ntime_zone = "UTC"\n\n'
        '[logging]\nformat = "json"\nlevel = "info"\n'
    )
    lammer = Path(sys.executable).parent / "lammer"
    proc: asyncio.subprocess.Process | None = None
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            await client.subscribe(f"lammer/{TABLE}/availability", qos=1)
            with (workdir / "daemon.log").open("ab") as log:
                started = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    str(lammer), "run", "--config", str(config), stdout=log, stderr=log
                )
            async with asyncio.timeout(600):
                async for message in client.messages:
                    if message.payload == b"online":
                        return time.perf_counter() - started
        raise RuntimeError("no online")  # pragma: no cover
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,1000000,10000000", help="records, comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="starts per size (medians printed)")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "lammer-bench-startup"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    args.cache.mkdir(parents=True, exist_ok=True)
    made: dict[int, Path] = {}
    for size in sizes:
        path = args.cache / f"j{size}" / f"{TABLE}.db"
        if not path.exists() or not (path.parent / "complete").exists():
            shutil.rmtree(path.parent, ignore_errors=True)
            path.parent.mkdir(parents=True)
            print(f"making a journal of {size:,} records in {path.parent}", file=sys.stderr)
            seconds = make_journal(path, size)
            (path.parent / "complete").write_text(f"{seconds:.1f}\n")
        made[size] = path
    results: dict[int, list[float]] = {size: [] for size in sizes}
    byte_sizes: dict[int, int] = {}
    with tempfile.TemporaryDirectory(dir=Path.home()) as scratch:
        for run in range(args.runs):
            for size in sizes:  # interleaved, so load changes hit every size alike
                workdir = Path(scratch) / f"{size}-{run}"
                shutil.copytree(made[size].parent, workdir)
                journal = workdir / f"{TABLE}.db"
                byte_sizes[size] = journal.stat().st_size
                results[size].append(asyncio.run(time_start(journal, workdir)))
                shutil.rmtree(workdir)
            print(f"  run {run + 1} of {args.runs} done", file=sys.stderr, flush=True)
    print(f"machine: {machine()}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    print(f"start to online, {args.runs} starts per journal (journal on the machine's disk):")
    empty = statistics.median(results[sizes[0]])
    print(f"{'records':>12} {'file':>10} {'median':>9} {'min':>9} {'max':>9} {'vs first':>9}")
    for size in sizes:
        times = results[size]
        median = statistics.median(times)
        print(
            f"{size:>12,} {byte_sizes[size] / 1e6:>8.0f}MB {median:>8.3f}s {min(times):>8.3f}s"
            f" {max(times):>8.3f}s {median / empty:>8.2f}x"
        )
    worst = max(statistics.median(results[s]) for s in sizes) / empty
    verdict = "met" if worst <= GOAL else "missed"
    print(f"the slowest start is {worst:.2f}x the first size's (goal: within {GOAL:g}x): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
